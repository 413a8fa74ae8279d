//! Backtest throughput (issue 34): decides N claims (default 100,000) through the
//! pipeline of a release build on the embedded default, then backtests the 50-rule
//! draft of the rule-engine benchmark over all of them and prints claims per second of
//! the backtest, with the service's CPU for it. Given the rule-engine benchmark's
//! executable (`BENCH_RULES_BIN`, which `scripts/bench-backtest` builds), it measures the
//! rule engine's rate on one core just before and just after each round and prints each
//! round's ratio of the backtest's rate to their mean, and the median of those ratios.
#![allow(clippy::print_stdout, clippy::unwrap_used)] // a benchmark prints its figures

use std::process::Command;
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
    // Several rounds over the same claims (BENCH_ROUNDS, default 5): the median is
    // printed, as a shared machine's speed swings from one second to the next.
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5)
        .max(1);
    let mut results = Vec::with_capacity(rounds);
    let mut ratios = Vec::with_capacity(rounds);
    for round in 1..=rounds {
        let before = rule_engine_rate();
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
        if let (Some(before), Some(after)) = (before, rule_engine_rate()) {
            let engine = (before + after) / 2.0;
            let ratio = n as f64 / secs / engine;
            println!("round {round}: rule engine {before:.0} evaluations/s just before, {after:.0} just after; backtest / their mean {ratio:.3}");
            ratios.push(ratio);
        }
        results.push((secs, used, report["changed"].clone()));
    }
    results.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (secs, used, changed) = &results[results.len() / 2];
    println!(
        "backtest: {:.0} claims/s ({n} claims, 50-rule draft, median of {rounds} rounds, {secs:.2} s; {changed} changed; service CPU {used:.2} s, {:.1} µs per claim)",
        n as f64 / secs,
        used * 1e6 / n as f64,
    );
    if !ratios.is_empty() {
        ratios.sort_by(f64::total_cmp);
        println!(
            "backtest / rule engine: {:.2} (median of {} rounds, each against the rule engine measured just before and just after it; goal: at least 0.25)",
            ratios[ratios.len() / 2],
            ratios.len()
        );
    }
    service.child.kill().unwrap();
    service.child.wait().unwrap();
}

/// The rule engine's planned rate on one core, from the rule-engine benchmark's
/// executable (`BENCH_RULES_BIN`) run for a second: measured just before and just after
/// each round, as the shared machine's speed moves by half between minutes, so a ratio
/// of two figures taken a minute apart says more about the machine than about the
/// backtest. (Against the second before alone, one round's ratio swung from 0.17 to
/// 0.32 with the same build: that second's speed was often not the round's.)
fn rule_engine_rate() -> Option<f64> {
    let bin = std::env::var("BENCH_RULES_BIN").ok()?;
    let out = Command::new("taskset")
        .args(["-c", "0", &bin])
        .env("BENCH_SECS", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{bin}: {}", out.status);
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        l.strip_prefix("rules, planned: ")?
            .split(' ')
            .next()?
            .parse()
            .ok()
    })
}
