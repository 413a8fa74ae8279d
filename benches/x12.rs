//! X12 intake against JSON batch intake (issue 35), in one run: a release build with
//! only the API role on the embedded default takes the same N claims (default 10,000;
//! one to three lines each) as one 837P interchange and as one JSON batch, in
//! alternating rounds with fresh claim ids, and prints claims/s of each, their ratio,
//! and the service's RSS while it reads the interchange (sampled every 5 ms).
#![allow(clippy::print_stdout, clippy::unwrap_used)] // a benchmark prints its figures

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod support;
#[path = "../tests/support/x12.rs"]
mod x12gen;

use support::{rss_mib, start_service};

const ROUNDS: usize = 3;
const PROVIDERS: u32 = 20;

fn main() {
    tokio::runtime::Runtime::new().unwrap().block_on(run());
}

/// The claims of round `prefix`, as x12gen writes them.
fn claims(prefix: &str, n: usize, providers: &[(String, String)]) -> Vec<x12gen::Claim> {
    let members: Vec<String> = (0..support::MEMBERS).map(|m| format!("MBR-{m}")).collect();
    x12gen::claims(prefix, n, providers, &members, "20260115")
}

/// The same claims as JSON batch items, each with the provider its NPI names.
fn as_json(claims: &[x12gen::Claim]) -> Vec<Value> {
    claims
        .iter()
        .map(|c| {
            json!({
                "claim_id": c.claim_id, "member_id": c.member_id,
                "provider_id": format!("PRV-N{}", c.npi),
                "claim_amount": c.cents(), "service_date": "2026-01-15",
                "diagnosis_codes": c.diagnoses,
                "lines": c.lines.iter().map(|l| json!({"procedure_code": l.code, "units": l.units, "amount": l.cents, "modifiers": l.modifiers})).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// Samples the RSS of `pid` every 5 ms while `work` runs; answers its output and the
/// peak.
async fn sampled<T>(pid: u32, work: impl std::future::Future<Output = T>) -> (T, f64) {
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        tokio::spawn(async move {
            let mut peak: f64 = 0.0;
            while sampling.load(Ordering::Relaxed) {
                peak = peak.max(rss_mib(pid));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            peak
        })
    };
    let out = work.await;
    sampling.store(false, Ordering::Relaxed);
    (out, sampler.await.unwrap())
}

async fn run() {
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000usize);
    let mut service = start_service(
        "x12",
        "api",
        &[("CLAIMS_MAX_BODY_BYTES", (64 << 20).to_string())],
    )
    .await;
    let pid = service.child.id();
    let (client, base, token) = (
        service.client.clone(),
        service.base.clone(),
        service.token.clone(),
    );
    let mut providers = Vec::new();
    for p in 1..=PROVIDERS {
        let npi = x12gen::npi(7000 + p);
        let id = format!("PRV-N{npi}");
        client
            .post(format!("{base}/providers"))
            .bearer_auth(&token)
            .json(&json!({"provider_id": id, "name": "Clinic", "npi": npi}))
            .send()
            .await
            .unwrap();
        client
            .post(format!("{base}/providers/{id}/contracts"))
            .bearer_auth(&token)
            .json(&json!({"effective_from": "2020-01-01", "fee_schedule": {"99213": 60000}}))
            .send()
            .await
            .unwrap();
        providers.push((format!("CLINIC {p}"), npi));
    }

    let (mut x12_secs, mut json_secs) = (Vec::new(), Vec::new());
    let (mut x12_peak, mut json_peak): (f64, f64) = (0.0, 0.0);
    let before = rss_mib(pid);
    let mut bytes = 0;
    for round in 0..ROUNDS {
        let x = claims(&format!("X{round}-"), n, &providers);
        let doc = x12gen::interchange(&x, 1000, false, round as u32 + 1);
        bytes = doc.len();
        let j = as_json(&claims(&format!("J{round}-"), n, &providers));
        let x12_first = round % 2 == 0;
        for turn in 0..2 {
            if (turn == 0) == x12_first {
                let started = Instant::now();
                let (r, peak): (Value, f64) = sampled(pid, async {
                    client
                        .post(format!("{base}/claims/x12"))
                        .bearer_auth(&token)
                        .header("content-type", "application/edi-x12")
                        .body(doc.clone())
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap()
                })
                .await;
                x12_secs.push(started.elapsed().as_secs_f64());
                x12_peak = x12_peak.max(peak);
                assert_eq!(
                    r["accepted"], n,
                    "every claim of the 837 is taken: {}",
                    r["results"][0]
                );
            } else {
                let started = Instant::now();
                let (r, peak): (Value, f64) = sampled(pid, async {
                    client
                        .post(format!("{base}/claims/batch"))
                        .bearer_auth(&token)
                        .json(&j)
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap()
                })
                .await;
                json_secs.push(started.elapsed().as_secs_f64());
                json_peak = json_peak.max(peak);
                assert_eq!(
                    r["accepted"], n,
                    "every JSON claim is taken: {}",
                    r["results"][0]
                );
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (x, j) = (median(&mut x12_secs), median(&mut json_secs));
    let (x_rate, j_rate) = (n as f64 / x, n as f64 / j);
    println!(
        "x12 intake: {x_rate:.0} claims/s (an 837P of {n} claims, {:.1} MiB, median of {ROUNDS})",
        bytes as f64 / (1 << 20) as f64
    );
    println!("json batch intake: {j_rate:.0} claims/s (the same claims as one JSON batch, median of {ROUNDS})");
    println!(
        "x12 / json batch: {:.2} (goal: at least 0.7)",
        x_rate / j_rate
    );
    println!(
        "service RSS: {before:.1} MiB before; peak {x12_peak:.1} MiB while taking an interchange, {json_peak:.1} MiB while taking the JSON batch"
    );
    service.child.kill().ok();
    service.child.wait().ok();
}
