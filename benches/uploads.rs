//! Memory of an upload: the service's resident memory while a 20 MiB document is
//! received, scanned and read (issue 8 target: under 32 MiB of growth). The service
//! runs every role; `clamd` is used when `CLAIMS_CLAMD_ADDRESS` is set. Run with
//! `scripts/bench-uploads [MiB]`.
#![allow(clippy::print_stdout, clippy::unwrap_used)] // a benchmark prints its figures

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{create_bench_user, free_port, login, rss_mib, wait_ready};

mod support;

#[tokio::main]
async fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let temp = support::scratch_dir();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}/api/v1");
    let bin = support::claims_bin();
    let bin = bin.as_str();
    let envs: Vec<(String, String)> = [
        ("CLAIMS_DATA_DIR", temp.path().display().to_string()),
        ("CLAIMS_HTTP_ADDR", format!("127.0.0.1:{port}")),
        ("CLAIMS_COOKIE_SECURE", "false".into()),
        ("RUST_LOG", "warn".into()),
    ]
    .map(|(k, v)| (k.to_owned(), v))
    .into();
    create_bench_user(
        bin,
        &envs,
        "claims:write claims:read providers:write rulebooks:write tenant:configure uploads:write",
    );
    let mut child = Command::new(bin)
        .args(["serve"])
        .envs(envs.iter().cloned())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .unwrap();
    wait_ready(&client, &base).await;
    let token = login(&client, &base).await;
    let post = |path: &str, body: Value| {
        client
            .post(format!("{base}{path}"))
            .bearer_auth(&token)
            .json(&body)
            .send()
    };
    post(
        "/providers",
        json!({"provider_id": "PRV-1", "name": "Clinic"}),
    )
    .await
    .unwrap();
    post(
        "/providers/PRV-1/contracts",
        json!({"effective_from": "2020-01-01"}),
    )
    .await
    .unwrap();
    let rb: Value = post("/rulebooks", json!({"name": "B", "rules": []}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    post(
        &format!("/rulebooks/{}/publish", rb["rulebook_id"].as_str().unwrap()),
        json!({}),
    )
    .await
    .unwrap();
    let r = post("/claims/intake", json!({
        "claim_id": "CLM-1", "member_id": "MBR-1", "provider_id": "PRV-1", "claim_amount": 12500,
        "service_date": "2026-01-15", "lines": [{"procedure_code": "99213", "units": 1, "amount": 12500}]
    }))
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 202, "the claim is accepted");

    // A document of pseudo-random bytes (no text to read), in a multipart body.
    let mut data = vec![0u8; mib << 20];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for b in data.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let boundary = "bench-boundary-5f1c";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"scan.bin\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&data);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    drop(data);

    // Settle, then sample the service's RSS every 5 ms from before the upload until the
    // document is completed.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let baseline = rss_mib(pid);
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        std::thread::spawn(move || {
            let mut peak = 0f64;
            while sampling.load(Ordering::Relaxed) {
                peak = peak.max(rss_mib(pid));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };
    let started = Instant::now();
    let res = client
        .post(format!("{base}/claims/CLM-1/uploads"))
        .bearer_auth(&token)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    let accepted_after = started.elapsed();
    let status = res.status().as_u16();
    let accepted: Value = res.json().await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["upload_id"].as_str().unwrap().to_owned();
    let finished = loop {
        let u: Value = client
            .get(format!("{base}/uploads/{id}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if u["status"] == "completed" || u["status"] == "failed" {
            break u;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let done_after = started.elapsed();
    sampling.store(false, Ordering::Relaxed);
    let peak = sampler.join().unwrap();
    println!(
        "uploads: {mib} MiB document: 202 after {:.2} s, {} after {:.2} s (scan: {})",
        accepted_after.as_secs_f64(),
        finished["status"],
        done_after.as_secs_f64(),
        if std::env::var_os("CLAIMS_CLAMD_ADDRESS").is_some() {
            "clamd"
        } else {
            "built-in screen only"
        },
    );
    println!(
        "uploads: service RSS {baseline:.1} MiB before, {peak:.1} MiB at peak: growth {:.1} MiB (target < 32)",
        peak - baseline
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
