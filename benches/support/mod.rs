//! What the benchmarks share: ports, readiness and memory of a service process.
#![allow(dead_code, clippy::unwrap_used)] // each benchmark uses part of it

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Peak resident memory of process `pid` so far (VmHWM), MiB.
pub fn peak_rss_mib(pid: u32) -> f64 {
    status_kib(pid, "VmHWM:") / 1024.0
}

/// Current resident memory of process `pid` (VmRSS), MiB.
pub fn rss_mib(pid: u32) -> f64 {
    status_kib(pid, "VmRSS:") / 1024.0
}

fn status_kib(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .unwrap_or(f64::NAN)
}

/// A free local port for a service process.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until the service at `base` answers ready.
pub async fn wait_ready(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while client
        .get(format!("{base}/health/ready"))
        .send()
        .await
        .map(|r| !r.status().is_success())
        .unwrap_or(true)
    {
        assert!(Instant::now() < deadline, "the service did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates the tenant `bench` and its user `bench@bench.example` with these scopes,
/// through `claims admin` on the service's store.
pub fn create_bench_user(bin: &str, envs: &[(String, String)], scopes: &str) {
    let admin = |args: &[&str]| {
        let out = Command::new(bin)
            .args(args)
            .envs(envs.iter().cloned())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    admin(&[
        "admin",
        "create-tenant",
        "--tenant-id",
        "bench",
        "--name",
        "Bench",
    ]);
    admin(&[
        "admin",
        "create-user",
        "--tenant-id",
        "bench",
        "--email",
        "bench@bench.example",
        "--password",
        "bench-password",
        "--scopes",
        scopes,
    ]);
}

/// Logs the bench user in; answers its access token.
pub async fn login(client: &reqwest::Client, base: &str) -> String {
    let body: Value = client
        .post(format!("{base}/auth/login"))
        .json(&json!({"email": "bench@bench.example", "password": "bench-password"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["access_token"].as_str().unwrap().to_owned()
}
