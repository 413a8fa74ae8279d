//! Latency at a steady rate: a service with every role on the embedded default (or on
//! `CLAIMS_DATABASE_URL`, or Kafka), its end-to-end maximum measured first with the
//! same requests and webhooks sent closed loop, then claims sent open loop (on a
//! schedule, not when the last answer came back) at half that rate for
//! `BENCH_LATENCY_SECS` seconds (60), in requests of `BENCH_LATENCY_BATCH` claims (50):
//! a payer's steady stream. (Single
//! requests at that rate would measure single intake's ceiling instead, which is far
//! below the batch maximum on one SQLite file.)
//! Prints p50, p99 and p99.9 from each claim's 202 to its decision, and from its 202 to
//! its `claim.completed` webhook arriving at a local receiver, with where the time
//! after the decision goes (from the delivery's row and its first attempt). Run with
//! `scripts/bench-latency`.
#![allow(clippy::print_stdout, clippy::unwrap_used)] // a benchmark prints its figures

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use support::{
    claim, create_bench_user, free_port, login, seed, send_batches, service_envs, service_store,
    undecided, wait_ready,
};

mod support;

/// Claims of the closed-loop load that measures the maximum.
const MAX_CLAIMS: usize = 20_000;

fn main() {
    tokio::runtime::Runtime::new().unwrap().block_on(run());
}

fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

fn percentiles(mut v: Vec<f64>) -> String {
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    format!(
        "p50 {:.0} ms, p99 {:.0} ms, p99.9 {:.0} ms ({} claims)",
        at(0.5),
        at(0.99),
        at(0.999),
        v.len()
    )
}

async fn run() {
    support::print_background_load();
    let setting = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let secs = setting("BENCH_LATENCY_SECS", 60);
    let per_request = setting("BENCH_LATENCY_BATCH", 50) as usize;
    let temp = support::scratch_dir();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}/api/v1");
    let bin = support::claims_bin();
    let bin = bin.as_str();
    let envs = service_envs(temp.path(), port, "latency");
    create_bench_user(
        bin,
        &envs,
        "claims:write claims:read providers:write rulebooks:write tenant:configure",
    );
    // Every role in the one process, webhooks included: the latency a payer sees.
    let _service = KillOnDrop(
        Command::new(bin)
            .arg("serve")
            .envs(envs.iter().cloned())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    wait_ready(&client, &base).await;
    let token = login(&client, &base).await;
    seed(&client, &base, &token).await;
    let store = service_store(temp.path()).await;

    // Webhooks: when each claim's `claim.completed` arrives, and as which delivery.
    let arrived: Arc<Mutex<HashMap<String, f64>>> = Arc::default();
    let delivery_of: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let (seen, seen_delivery) = (arrived.clone(), delivery_of.clone());
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let (seen, seen_delivery) = (seen.clone(), seen_delivery.clone());
                async move {
                    let at = wall_ms();
                    let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                    if let Some(id) = v["data"]["claim_id"].as_str() {
                        seen.lock().unwrap().entry(id.to_owned()).or_insert(at);
                        if let Some(d) = headers.get("x-service-delivery") {
                            let d = d.to_str().unwrap_or_default().to_owned();
                            seen_delivery
                                .lock()
                                .unwrap()
                                .entry(id.to_owned())
                                .or_insert(d);
                        }
                    }
                    axum::http::StatusCode::OK
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook_url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let hook = client
        .post(format!("{base}/webhooks"))
        .bearer_auth(&token)
        .json(&json!({"url": hook_url, "events": ["claim.completed"], "secret": "bench-secret"}))
        .send()
        .await
        .unwrap();
    assert_eq!(hook.status().as_u16(), 201, "the webhook is created");

    // The maximum: the open loop's own requests (`per_request` claims each) sent closed
    // loop, 16 in flight, from the first 202 until every claim is decided and its
    // webhook has arrived. (Larger requests, or no webhooks, would measure a maximum
    // the open loop's stream cannot reach, and half of it would be no light load.)
    let started = Instant::now();
    let accepted = send_batches(&client, &base, &token, MAX_CLAIMS, per_request, 16).await;
    assert_eq!(
        accepted, MAX_CLAIMS,
        "every claim of the maximum's load accepted"
    );
    while undecided(&store).await || arrived.lock().unwrap().len() < MAX_CLAIMS {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let max = MAX_CLAIMS as f64 / started.elapsed().as_secs_f64();
    let rate = max / 2.0;
    println!(
        "maximum end to end: {max:.0} claims/s ({MAX_CLAIMS} claims, {per_request} per request, closed loop, webhooks included)"
    );

    // Open loop: request r is sent at `r * per_request / rate` seconds, whatever
    // became of the others.
    let requests = ((rate * secs as f64) as usize / per_request).max(1);
    let total = requests * per_request;
    println!(
        "open loop: {total} claims at {rate:.0} claims/s (half the maximum), {per_request} per request, for {secs} s"
    );
    let accepted: Arc<Mutex<Vec<(String, f64)>>> = Arc::default();
    let start = tokio::time::Instant::now();
    let mut sends = Vec::with_capacity(requests);
    for r in 0..requests {
        let at = Duration::from_secs_f64((r * per_request) as f64 / rate);
        tokio::time::sleep_until(start + at).await;
        let ids: Vec<usize> = (0..per_request)
            .map(|j| MAX_CLAIMS + r * per_request + j)
            .collect();
        let items: Vec<Value> = ids.iter().map(|i| claim(*i)).collect();
        let (req, accepted) = (
            client
                .post(format!("{base}/claims/batch"))
                .bearer_auth(&token)
                .json(&items),
            accepted.clone(),
        );
        sends.push(tokio::spawn(async move {
            let res = req.send().await.unwrap();
            let at = wall_ms();
            let body: Value = res.json().await.unwrap();
            assert_eq!(body["accepted"], ids.len(), "every claim accepted: {body}");
            accepted
                .lock()
                .unwrap()
                .extend(ids.iter().map(|i| (format!("CLM-{i:07}"), at)));
        }));
    }
    let behind = start.elapsed().as_secs_f64() - total as f64 / rate;
    for s in sends {
        s.await.unwrap();
    }
    println!("the last claim was sent {behind:.2} s behind its schedule");
    let deadline = Instant::now() + Duration::from_secs(300);
    // Only the open-loop claims count.
    let all_told = || {
        let arrived = arrived.lock().unwrap();
        accepted
            .lock()
            .unwrap()
            .iter()
            .all(|(id, _)| arrived.contains_key(id))
    };
    while undecided(&store).await || !all_told() {
        assert!(
            Instant::now() < deadline,
            "the open-loop claims were not all decided and told"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let decided: HashMap<String, f64> = store
        .all_claims("bench")
        .await
        .unwrap()
        .into_iter()
        .map(|(_, c)| {
            let at = time::OffsetDateTime::parse(
                &c.updated_at,
                &time::format_description::well_known::Rfc3339,
            )
            .unwrap();
            (
                c.submission.claim_id.to_string(),
                pipeline::clock::to_ms(at) as f64,
            )
        })
        .collect();
    // Every answer and webhook is in: the service is left alone from here.
    let accepted = std::mem::take(&mut *accepted.lock().unwrap());
    let arrived = std::mem::take(&mut *arrived.lock().unwrap());
    let delivery_of = std::mem::take(&mut *delivery_of.lock().unwrap());
    let to_decision: Vec<f64> = accepted
        .iter()
        .map(|(id, at)| (decided[id] - at).max(0.0))
        .collect();
    let to_webhook: Vec<f64> = accepted.iter().map(|(id, at)| arrived[id] - at).collect();
    println!("202 to decision:         {}", percentiles(to_decision));
    println!("202 to webhook received: {}", percentiles(to_webhook));
    print_webhook_phases(temp.path(), &accepted, &decided, &arrived, &delivery_of).await;
}

/// Where the time from decision to webhook goes, from the service's own rows: decided
/// to delivery queued (the webhook stage), queued to first attempt started (the
/// sender's claim and slots), attempt started to received (HTTP).
async fn print_webhook_phases(
    dir: &std::path::Path,
    accepted: &[(String, f64)],
    decided: &HashMap<String, f64>,
    arrived: &HashMap<String, f64>,
    delivery_of: &HashMap<String, String>,
) {
    let url = std::env::var("CLAIMS_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}?mode=ro", dir.join("claims.db").display()));
    sqlx::any::install_default_drivers();
    let Ok(db) = sqlx::AnyPool::connect(&url).await else {
        return;
    };
    let rows: Vec<(String, i64, i64, i64)> = sqlx::query_as(
        "SELECT d.delivery_id, d.created_at, a.at, a.duration_ms FROM webhook_deliveries d \
         JOIN webhook_attempts a ON a.delivery_id = d.delivery_id AND a.attempt = 1",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    let times: HashMap<&str, (f64, f64)> = rows
        .iter()
        .map(|(id, queued, at, took)| (id.as_str(), (*queued as f64, (*at - *took) as f64)))
        .collect();
    let (mut stage, mut sender, mut http) = (Vec::new(), Vec::new(), Vec::new());
    for (id, _) in accepted {
        let Some((queued, started)) = delivery_of.get(id).and_then(|d| times.get(d.as_str()))
        else {
            continue;
        };
        stage.push((queued - decided[id]).max(0.0));
        sender.push((started - queued).max(0.0));
        http.push((arrived[id] - started).max(0.0));
    }
    if stage.is_empty() {
        return;
    }
    println!("  decided to delivery queued:   {}", percentiles(stage));
    println!("  queued to attempt started:    {}", percentiles(sender));
    println!("  attempt started to received:  {}", percentiles(http));
}

/// The service process, killed however the benchmark ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
