//! A webhook receiver for tests: a small axum server on port 0 that records what
//! arrives and answers as each test scripts it, and the subscription that points the
//! service at it. It stands outside the product (the tenant's endpoint), so a fake is
//! what it should be.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use axum::body::Bytes;
use axum::http::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use super::{Session, TestApp};

/// What the receiver answers to one request.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Answer {
    Status(u16),
    /// Holds the request this long, then answers 200.
    Hang(Duration),
}

#[derive(Debug, Clone)]
pub(crate) struct Hit {
    /// When it arrived, by the wall clock: the clock the service schedules retries by,
    /// so that a step of the system's clock moves both alike.
    pub(crate) at: SystemTime,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Hit {
    pub(crate) fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    /// Seconds from `self` to `later` (negative if `later` came first).
    pub(crate) fn secs_to(&self, later: &Hit) -> f64 {
        match later.at.duration_since(self.at) {
            Ok(d) => d.as_secs_f64(),
            Err(e) => -e.duration().as_secs_f64(),
        }
    }
}

#[derive(Clone)]
pub(crate) struct Receiver {
    addr: SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl Receiver {
    /// A receiver answering `script` in order, then 200.
    pub(crate) async fn start(script: &[Answer]) -> Self {
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let script = Arc::new(Mutex::new(script.iter().copied().collect::<VecDeque<_>>()));
        let (h, s) = (hits.clone(), script.clone());
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let (h, s) = (h.clone(), s.clone());
                async move {
                    h.lock().unwrap().push(Hit {
                        at: SystemTime::now(),
                        headers,
                        body,
                    });
                    let answer = s.lock().unwrap().pop_front().unwrap_or(Answer::Status(200));
                    match answer {
                        Answer::Status(code) => axum::http::StatusCode::from_u16(code).unwrap(),
                        Answer::Hang(d) => {
                            tokio::time::sleep(d).await;
                            axum::http::StatusCode::OK
                        }
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, hits }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    pub(crate) fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// Waits until `n` requests arrived; answers them.
    pub(crate) async fn wait_for(&self, n: usize, within: Duration) -> Vec<Hit> {
        let deadline = Instant::now() + within;
        loop {
            let hits = self.hits();
            if hits.len() >= n {
                return hits;
            }
            assert!(
                Instant::now() < deadline,
                "expected {n} deliveries, got {}",
                hits.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until an event of `claim_id` arrived.
    pub(crate) async fn wait_for_claim(&self, claim_id: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while !self
            .hits()
            .iter()
            .any(|h| h.json()["data"]["claim_id"] == claim_id)
        {
            assert!(
                Instant::now() < deadline,
                "{claim_id} was not delivered within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

pub(crate) async fn subscribe(
    app: &TestApp,
    s: &Session,
    url: &str,
    events: &[&str],
    secret: &str,
) -> String {
    let r = app
        .call(
            Method::POST,
            "/webhooks",
            Some(&s.access),
            Some(json!({"url": url, "events": events, "secret": secret})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    r.body["webhook_id"].as_str().unwrap().to_owned()
}
