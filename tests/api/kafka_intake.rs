//! Claims produced straight onto Kafka by a payer's own client (Python's
//! `confluent-kafka`, not this project's code): checked exactly as REST intake checks a
//! claim, processed like a REST claim, refusals on `claims.rejects` with the error body.

use std::io::Write;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::claims::{claim, ready_tenant, submit};
use crate::pipeline::decided;
use crate::support::{Backend, TestApp};

mod kafka {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claims_produced_straight_onto_kafka_are_checked_and_processed_like_rest_claims() {
        super::claims_produced_straight_onto_kafka_are_checked_and_processed_like_rest_claims()
            .await
    }
}

/// Produces `(key, value)` records to `topic` with Python's confluent-kafka.
fn produce_with_python(topic: &str, records: &[(&str, String)]) {
    let script = "import sys, json\n\
                  from confluent_kafka import Producer\n\
                  brokers, topic = sys.argv[1:3]\n\
                  p = Producer({'bootstrap.servers': brokers, 'enable.idempotence': True})\n\
                  for key, value in json.load(sys.stdin):\n\
                  \x20   p.produce(topic, key=key.encode(), value=value.encode())\n\
                  left = p.flush(30)\n\
                  assert left == 0, f'{left} records not delivered'\n\
                  print('produced')";
    let mut child = std::process::Command::new(crate::support::python())
        .args([
            "-c",
            script,
            &crate::support::backend::kafka_brokers(),
            topic,
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python with confluent-kafka (scripts/test installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(records).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("produced"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn claims_produced_straight_onto_kafka_are_checked_and_processed_like_rest_claims() {
    let app = TestApp::spawn(Backend::Kafka).await;
    let s = ready_tenant(&app, "acme").await;
    // Taken over REST first, so that the same id over Kafka is a duplicate.
    assert_eq!(
        submit(&app, &s, claim("CLM-REST")).await.status,
        StatusCode::ACCEPTED
    );
    let envelope = |c: Value| json!({"tenant_id": "acme", "claim": c}).to_string();
    let mut uncontracted = claim("CLM-K2");
    uncontracted["provider_id"] = json!("PRV-9");
    let mut negative = claim("CLM-K3");
    negative["claim_amount"] = json!(-1);
    produce_with_python(
        &app.state.topics.submissions.name,
        &[
            ("acme/CLM-K1", envelope(claim("CLM-K1"))),
            ("acme/CLM-K2", envelope(uncontracted)),
            ("acme/CLM-K3", envelope(negative)),
            ("acme/CLM-REST", envelope(claim("CLM-REST"))),
            ("acme/junk", "{not json".into()),
        ],
    );

    // The good one is processed like a REST claim, once the stage has taken it in.
    let deadline = Instant::now() + Duration::from_secs(20);
    while app.get("/claims/CLM-K1", &s.access).await.status != StatusCode::OK {
        assert!(Instant::now() < deadline, "CLM-K1 was never accepted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let c = decided(&app, &s, "CLM-K1").await;
    assert_eq!(c["status"], "completed");
    assert_eq!(c["outcome"], "ADJUDICATED");
    assert_eq!(c["approved_amount"], 11500);
    assert_eq!(c["rulebook_version"], 1);

    // The others are refused with REST intake's errors, and nothing of them is stored.
    let rejects: Vec<Value> = app
        .records_of(&app.state.topics.rejects, 4)
        .await
        .iter()
        .map(|r| serde_json::from_slice(&r.value).unwrap())
        .collect();
    let mut got: Vec<(Option<&str>, &str, Option<&str>)> = rejects
        .iter()
        .map(|r| {
            (
                r["claim_id"].as_str(),
                r["error"]["code"].as_str().unwrap(),
                r["error"]["field"].as_str(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            (None, "BAD_REQUEST", None),
            (
                Some("CLM-K2"),
                "PROVIDER_NOT_CONTRACTED",
                Some("provider_id")
            ),
            (Some("CLM-K3"), "VALIDATION_ERROR", Some("claim_amount")),
            (Some("CLM-REST"), "CLAIM_DUPLICATE", Some("claim_id")),
        ]
    );
    for r in &rejects {
        assert_eq!(
            r["source"]["topic"],
            app.state.topics.submissions.name.as_str()
        );
    }
    for id in ["CLM-K2", "CLM-K3"] {
        let r = app.get(&format!("/claims/{id}"), &s.access).await;
        r.assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");
    }
    // The REST claim keeps its own submission.
    let rest = app.get("/claims/CLM-REST", &s.access).await;
    assert_eq!(rest.body["metadata"]["channel"], "api");
}
