//! Webhook receivers that misbehave: one hangs, one trickles its answer a byte at a
//! time, one redirects, one answers 500 forever. Each attempt on them ends at the
//! spec's 5 s time-out or at the answer, each event is tried 4 times (1 s, 5 s and 30 s
//! apart after the attempt ends) and no more, a redirect is not followed, and a healthy
//! subscription of the same tenant keeps getting its deliveries within a second or two
//! of each decision all the while.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use reqwest::Method;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::backend::Backend;
use crate::finish;
use crate::service::{self, Env, Submitted};

const CLAIMS: usize = 150;
/// The spec's time-out and retry waits.
const TIME_OUT: f64 = 5.0;
const WAITS: [f64; 3] = [1.0, 5.0, 30.0];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    Healthy,
    /// Reads the request and never answers.
    Hang,
    /// Answers 200, a byte every 400 ms: the whole answer takes 20 s.
    Trickle,
    /// 307 to the healthy receiver.
    Redirect,
    /// 500, always.
    Fail,
}

/// One request as the receiver saw it.
#[derive(Debug, Clone)]
struct Hit {
    /// When it arrived, by the wall clock: the clock the service schedules retries by.
    wall: SystemTime,
    path: String,
    webhook_id: String,
    body: Value,
}

#[derive(Clone)]
struct Receiver {
    url: String,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl Receiver {
    async fn start(behaviour: Behaviour, redirect_to: &str) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let (h, to) = (hits.clone(), redirect_to.to_owned());
        tokio::spawn(async move {
            loop {
                let (conn, _) = listener.accept().await.unwrap();
                tokio::spawn(serve(conn, behaviour, h.clone(), to.clone()));
            }
        });
        Receiver { url, hits }
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// Attempts per event, oldest first.
    fn by_event(&self) -> HashMap<String, Vec<Hit>> {
        let mut by: HashMap<String, Vec<Hit>> = HashMap::new();
        for h in self.hits() {
            by.entry(h.webhook_id.clone()).or_default().push(h);
        }
        by
    }
}

/// Serves the requests of one connection (keep-alive) as `behaviour` says.
async fn serve(mut conn: TcpStream, behaviour: Behaviour, hits: Arc<Mutex<Vec<Hit>>>, to: String) {
    let mut buf = Vec::new();
    loop {
        // The head, then as many body bytes as Content-Length says.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 8192];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let header = |name: &str| {
            head.lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
                })
                .unwrap_or_default()
        };
        let length: usize = header("content-length").parse().unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 8192];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Value =
            serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or(Value::Null);
        let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
        hits.lock().unwrap().push(Hit {
            wall: SystemTime::now(),
            path,
            webhook_id: header("webhook-id"),
            body,
        });
        buf.drain(..head_end + length);
        let answer = match behaviour {
            Behaviour::Healthy | Behaviour::Trickle => {
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_owned()
            }
            Behaviour::Redirect => format!(
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n"
            ),
            Behaviour::Fail => {
                "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n".to_owned()
            }
            Behaviour::Hang => {
                // Holds the connection until the sender gives up and closes it.
                let mut rest = [0u8; 1];
                let _ = conn.read(&mut rest).await;
                return;
            }
        };
        if behaviour == Behaviour::Trickle {
            for b in answer.as_bytes() {
                if conn.write_all(&[*b]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(400)).await;
            }
        } else if conn.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_trickling_redirecting_and_failing_receivers_get_the_spec_schedule_and_slow_no_other(
) {
    let healthy = Receiver::start(Behaviour::Healthy, "").await;
    let redirected = format!("{}/../redirected", healthy.url);
    let bad = [
        (Behaviour::Hang, Receiver::start(Behaviour::Hang, "").await),
        (
            Behaviour::Trickle,
            Receiver::start(Behaviour::Trickle, "").await,
        ),
        (
            Behaviour::Redirect,
            Receiver::start(Behaviour::Redirect, &redirected).await,
        ),
        (Behaviour::Fail, Receiver::start(Behaviour::Fail, "").await),
    ];

    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("claims.db").display());
    let env = Env::new(
        dir.path(),
        &url,
        "faults",
        vec![("CLAIMS_WEBHOOK_ALLOW_PRIVATE".into(), "true".into())],
    );
    service::create_tenant(&env);
    let client = service::client();
    let child = env.start();
    service::wait_ready(&client, &env.base).await;
    let token = service::set_up_tenant(&client, &env.base).await;
    let subscribe = |url: String, events: Value| {
        service::call(
            &client,
            &token,
            Method::POST,
            format!("{}/webhooks", env.base),
            json!({"url": url, "events": events, "secret": "whsec-faults"}),
        )
    };
    subscribe(healthy.url.clone(), json!(["claim.completed"])).await;
    // The misbehaving ones hear only of blocked claims: a handful of events, each tried
    // four times.
    for (_, r) in &bad {
        subscribe(r.url.clone(), json!(["claim.blocked"])).await;
    }

    let submitted = Submitted::default();
    submitted
        .spawn(
            client.clone(),
            token.clone(),
            env.base.clone(),
            0..CLAIMS,
            Duration::from_millis(300),
        )
        .await
        .unwrap();
    assert_eq!(submitted.accepted().len(), CLAIMS);

    // Healthy deliveries: every claim's, each within 2 s of its event while the others
    // hang and fail.
    let deadline = Instant::now() + Duration::from_secs(60);
    while healthy.by_event().len() < CLAIMS {
        assert!(
            Instant::now() < deadline,
            "the healthy receiver got {} of {CLAIMS} events",
            healthy.by_event().len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut late: Vec<f64> = healthy
        .hits()
        .iter()
        .filter(|h| h.path == "/hook")
        .map(|h| {
            let at = time::OffsetDateTime::parse(
                h.body["timestamp"].as_str().unwrap(),
                &time::format_description::well_known::Rfc3339,
            )
            .unwrap();
            let wall = time::OffsetDateTime::from(h.wall);
            (wall - at).as_seconds_f64()
        })
        .collect();
    late.sort_by(f64::total_cmp);
    let worst = late[late.len() - 1];
    assert!(
        worst < 2.0,
        "a healthy delivery came {worst:.2} s after its event (median {:.3} s)",
        late[late.len() / 2]
    );

    // The misbehaving: four attempts per event on the spec's schedule, and no fifth.
    let blocked = bad[0].1.by_event().len().max(1);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = bad.iter().all(|(_, r)| {
            let by = r.by_event();
            by.len() == blocked && by.values().all(|a| a.len() >= 4)
        });
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the retries did not finish: {:?}",
            bad.iter()
                .map(|(b, r)| (b, r.hits().len()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Long enough for a fifth attempt to show if the schedule went on.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (behaviour, r) in &bad {
        let by = r.by_event();
        assert!(
            by.len() >= 3,
            "{behaviour:?}: only {} blocked claims",
            by.len()
        );
        for (event, attempts) in by {
            assert_eq!(
                attempts.len(),
                4,
                "{behaviour:?} {event}: {} attempts",
                attempts.len()
            );
            // An attempt on a receiver that never answers in time ends at the time-out.
            let held = match behaviour {
                Behaviour::Hang | Behaviour::Trickle => TIME_OUT,
                _ => 0.0,
            };
            for (k, wait) in WAITS.iter().enumerate() {
                // By the wall clock, which the service schedules retries by.
                let gap = attempts[k + 1]
                    .wall
                    .duration_since(attempts[k].wall)
                    .map_or(0.0, |d| d.as_secs_f64());
                let expected = held + wait;
                assert!(
                    (expected - 0.1..expected + 3.0).contains(&gap),
                    "{behaviour:?} {event}: attempt {} came {gap:.2} s after the one before, not {expected} s",
                    k + 2
                );
            }
        }
    }
    assert!(
        healthy.hits().iter().all(|h| h.path == "/hook"),
        "a redirect was followed"
    );

    let store = pipeline::store::Store::connect(&url, &Default::default())
        .await
        .unwrap();
    let (bus, topics) = service::bus(Backend::Sqlite, &store, "", "");
    finish(&env, vec![child], &store, &bus, &topics, &submitted).await;
}
