//! Rebuild throughput (issue 36): decides N claims (default 100,000) through the
//! pipeline of a release build on the embedded default, stops the service, then times
//! `claims replay --into` a fresh database and prints rebuilt claims per second with
//! the store's ceiling measured in the same run (the same bytes per claim appended as
//! bare rows, a transaction per page), their ratio (goal: at least 0.5) and the replay
//! process's peak RSS. `BENCH_REPLAY_INTO` names another database to rebuild into
//! (a fresh PostgreSQL one, say); the ceiling is then measured there.
#![allow(clippy::print_stdout, clippy::unwrap_used)] // a benchmark prints its figures

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod support;

use support::{
    decide_all, peak_rss_mib, start_service, store_bytes, store_ceiling, BenchService, DECIDING,
};

/// Records `claims replay` writes per transaction (`pipeline::rebuild`).
const PAGE: usize = 4000;

fn main() {
    tokio::runtime::Runtime::new().unwrap().block_on(run());
}

async fn run() {
    support::print_background_load();
    let n = support::claims_to_send();
    let service = start_service("replay", DECIDING, &[]).await;
    decide_all(&service, n).await;
    let BenchService {
        temp,
        envs,
        mut child,
        ..
    } = service;
    child.kill().unwrap();
    child.wait().unwrap();
    // The service's last writes reach the disk before the clock starts: the rebuild is
    // timed on a quiet disk, as the store's ceiling is after it, not while the kernel
    // still writes back the gigabyte the pipeline left in its page cache.
    assert!(Command::new("sync").status().unwrap().success());
    let bin = support::claims_bin();
    let bin = bin.as_str();

    let into = std::env::var("BENCH_REPLAY_INTO")
        .unwrap_or_else(|_| format!("sqlite://{}", temp.path().join("rebuilt.db").display()));
    let started = Instant::now();
    let replay = Command::new(bin)
        .args(["replay", "--into", &into])
        .envs(envs.iter().cloned())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = replay.id();
    // Peak RSS is read while it runs: it is gone from /proc once it exits.
    let watch = std::thread::spawn(move || {
        let mut peak = 0.0f64;
        while std::path::Path::new(&format!("/proc/{pid}/status")).exists() {
            peak = peak.max(peak_rss_mib(pid));
            std::thread::sleep(Duration::from_millis(200));
        }
        peak
    });
    let replay = replay.wait_with_output().unwrap();
    let rss = watch.join().unwrap();
    let secs = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&replay.stdout);
    assert!(replay.status.success(), "{stdout}");
    let result: Value = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .last()
        .unwrap()
        .unwrap();
    let rebuilt = result["rebuilt"]["claims"].as_u64().unwrap();
    assert_eq!(rebuilt, n as u64, "{result}");
    let rate = rebuilt as f64 / secs;
    if std::env::var_os("BENCH_KEEP").is_some() {
        // For profiling a rebuild of the same topics again.
        println!("kept: {}", support::keep(temp).display());
        return;
    }
    let target = pipeline::store::Store::connect(&into, &Default::default())
        .await
        .unwrap();
    let bytes_per_claim = (store_bytes(&target).await as f64 / n as f64).max(1.0);
    println!(
        "replay: {rate:>9.0} claims/s ({rebuilt} claims, {} decisions rebuilt in {secs:.2} s, process start included); peak RSS {rss:.0} MiB",
        result["rebuilt"]["decisions"]
    );
    let ceiling = store_ceiling(&target, n, PAGE, PAGE, bytes_per_claim as usize).await;
    println!(
        "ceiling, store: {ceiling:>9.0} claims/s ({bytes_per_claim:.0} bytes per claim in two commits per {PAGE} claims, as the rebuild wrote them); replay / store ceiling = {:.2} (goal: at least 0.5)",
        rate / ceiling
    );
}
