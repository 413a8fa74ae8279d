//! Backtest throughput (issue 34): decides N claims (default 100,000) through the
//! pipeline of a release build on the embedded default, then backtests the 50-rule
//! draft of the rule-engine benchmark over all of them and prints claims per second of
//! the backtest, with the service's CPU for it. `scripts/bench-backtest` runs
//! `scripts/bench-rules` in the same run and prints the ratio of the two rates.
#![allow(clippy::print_stdout, clippy::unwrap_used)] // a benchmark prints its figures

use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "../pipeline/benches/support/book.rs"]
mod book;
mod support;

use support::{
    create_bench_user, free_port, login, seed, send_batches, serve, service_envs, service_store,
    undecided, wait_ready, CpuMark, DECIDING,
};

fn main() {
    tokio::runtime::Runtime::new().unwrap().block_on(run());
}

async fn run() {
    let n = support::claims_to_send();
    let temp = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}/api/v1");
    let bin = env!("CARGO_BIN_EXE_claims");
    let envs = service_envs(temp.path(), port, "backtest");
    create_bench_user(
        bin,
        &envs,
        "claims:write claims:read providers:write rulebooks:write tenant:configure",
    );
    let mut child = serve(bin, &envs, DECIDING);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3600))
        .build()
        .unwrap();
    wait_ready(&client, &base).await;
    let token = login(&client, &base).await;
    seed(&client, &base, &token).await;

    let started = Instant::now();
    assert_eq!(send_batches(&client, &base, &token, n, 1000, 4).await, n);
    let store = service_store(temp.path()).await;
    while undecided(&store).await {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "decided: {n} claims through the pipeline in {:.2} s",
        started.elapsed().as_secs_f64()
    );

    let draft: Value = client
        .post(format!("{base}/rulebooks"))
        .bearer_auth(&token)
        .json(&json!({"name": "Draft", "rules": book::rulebook()}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = draft["rulebook_id"].as_str().unwrap();
    let cpu = CpuMark::now(child.id());
    let started = Instant::now();
    let r = client
        .post(format!("{base}/rulebooks/{id}/backtest"))
        .bearer_auth(&token)
        .json(&json!({"limit": n}))
        .send()
        .await
        .unwrap();
    let secs = started.elapsed().as_secs_f64();
    let used = cpu.used();
    assert!(r.status().is_success(), "{}", r.status());
    let report: Value = r.json().await.unwrap();
    assert_eq!(report["claims"], n, "every decided claim backtested");
    println!(
        "backtest: {:.0} claims/s ({n} claims, 50-rule draft, in {secs:.2} s; {} changed; service CPU {used:.2} s, {:.1} µs per claim)",
        n as f64 / secs,
        report["changed"],
        used * 1e6 / n as f64,
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
