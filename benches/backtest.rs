//! Backtest throughput (issue 34): decides N claims (default 100,000) through the
//! pipeline of a release build on the embedded default, then backtests the 50-rule
//! draft of the rule-engine benchmark over all of them and prints claims per second of
//! the backtest, with the service's CPU for it. `scripts/bench-backtest` runs
//! `scripts/bench-rules` in the same run and prints the ratio of the two rates.
#![allow(clippy::print_stdout, clippy::unwrap_used)] // a benchmark prints its figures

use std::time::Instant;

use serde_json::{json, Value};

#[path = "../pipeline/benches/support/book.rs"]
mod book;
mod support;

use support::{decide_all, start_service, CpuMark, DECIDING};

fn main() {
    tokio::runtime::Runtime::new().unwrap().block_on(run());
}

async fn run() {
    let n = support::claims_to_send();
    let mut service = start_service("backtest", DECIDING, &[]).await;
    decide_all(&service, n).await;
    let (client, base, token) = (&service.client, &service.base, &service.token);
    let child = service.child.id();

    let draft: Value = client
        .post(format!("{base}/rulebooks"))
        .bearer_auth(token)
        .json(&json!({"name": "Draft", "rules": book::rulebook()}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = draft["rulebook_id"].as_str().unwrap();
    // Several rounds over the same claims (BENCH_ROUNDS, default 3): the median is
    // printed, as a shared machine's speed swings from one second to the next.
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3)
        .max(1);
    let mut results = Vec::with_capacity(rounds);
    for round in 1..=rounds {
        let cpu = CpuMark::now(child);
        let started = Instant::now();
        let r = client
            .post(format!("{base}/rulebooks/{id}/backtest"))
            .bearer_auth(token)
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
            "round {round}: {:.0} claims/s in {secs:.2} s; service CPU {:.1} µs per claim",
            n as f64 / secs,
            used * 1e6 / n as f64
        );
        results.push((secs, used, report["changed"].clone()));
    }
    results.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (secs, used, changed) = &results[results.len() / 2];
    println!(
        "backtest: {:.0} claims/s ({n} claims, 50-rule draft, median of {rounds} rounds, {secs:.2} s; {changed} changed; service CPU {used:.2} s, {:.1} µs per claim)",
        n as f64 / secs,
        used * 1e6 / n as f64,
    );
    service.child.kill().unwrap();
    service.child.wait().unwrap();
}
