//! Claims produced straight onto Kafka by a payer's own client (Python's
//! `confluent-kafka`, not this project's code): checked exactly as REST intake checks a
//! claim, processed like a REST claim, refusals on `claims.rejects` with the error body.
//! A payer may write the value as JSON or in Avro with `schemas/avro/submission.avsc`.

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

/// A record for [`produce_with_python`]: JSON text as it is, or a document that the
/// payer's client writes in Avro with `schemas/avro/<schema>.avsc` alone (fastavro,
/// single-object encoding).
enum Payload {
    Text(String),
    Avro(&'static str, Value),
}

/// Produces `(key, value)` records to `topic` with Python's confluent-kafka.
fn produce_with_python(topic: &str, records: &[(&str, Payload)]) {
    let script = "import io, json, sys\n\
                  from confluent_kafka import Producer\n\
                  from fastavro import parse_schema, schemaless_writer\n\
                  from fastavro.schema import fingerprint, to_parsing_canonical_form\n\
                  brokers, topic, avro_dir = sys.argv[1:4]\n\
                  def avro(name, doc):\n\
                  \x20   schema = parse_schema(json.load(open(f'{avro_dir}/{name}.avsc')))\n\
                  \x20   crc = fingerprint(to_parsing_canonical_form(schema), 'CRC-64-AVRO')\n\
                  \x20   out = io.BytesIO(b'\\xc3\\x01' + bytes.fromhex(crc))\n\
                  \x20   out.seek(0, 2)\n\
                  \x20   schemaless_writer(out, schema, doc)\n\
                  \x20   return out.getvalue()\n\
                  p = Producer({'bootstrap.servers': brokers, 'enable.idempotence': True})\n\
                  for key, text, schema, doc in json.load(sys.stdin):\n\
                  \x20   value = avro(schema, doc) if schema else text.encode()\n\
                  \x20   p.produce(topic, key=key.encode(), value=value)\n\
                  left = p.flush(30)\n\
                  assert left == 0, f'{left} records not delivered'\n\
                  print('produced')";
    let records: Vec<Value> = records
        .iter()
        .map(|(key, v)| match v {
            Payload::Text(t) => json!([key, t, null, null]),
            Payload::Avro(schema, doc) => json!([key, null, schema, doc]),
        })
        .collect();
    let avro_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/schemas/avro");
    let mut child = std::process::Command::new(crate::support::python())
        .args([
            "-c",
            script,
            &crate::support::backend::kafka_brokers(),
            topic,
            avro_dir,
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python with confluent-kafka and fastavro (scripts/test installs them)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&records).unwrap().as_bytes())
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
    let envelope = |c: Value| Payload::Text(json!({"tenant_id": "acme", "claim": c}).to_string());
    // In Avro, the claim's free-form metadata is a string of JSON text.
    let avro = |schema, mut c: Value, more: Value| {
        c["metadata"] = json!(c["metadata"].to_string());
        let mut doc = json!({"tenant_id": "acme", "claim": c});
        doc.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        Payload::Avro(schema, doc)
    };
    let mut other_member = claim("CLM-K4");
    other_member["member_id"] = json!("MBR-4");
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
            ("acme/junk", Payload::Text("{not json".into())),
            ("acme/CLM-K4", avro("submission", other_member, json!({}))),
            // Avro, but written with the intake topic's schema: not one of this topic's.
            (
                "acme/CLM-K5",
                avro(
                    "claim-submitted",
                    claim("CLM-K5"),
                    json!({"rulebook_id": "rb", "rulebook_version": 1, "received_at_ms": 0}),
                ),
            ),
        ],
    );

    // The good ones, JSON and Avro, are processed like a REST claim, once the stage has
    // taken them in.
    for id in ["CLM-K1", "CLM-K4"] {
        let deadline = Instant::now() + Duration::from_secs(20);
        while app.get(&format!("/claims/{id}"), &s.access).await.status != StatusCode::OK {
            assert!(Instant::now() < deadline, "{id} was never accepted");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let c = decided(&app, &s, id).await;
        assert_eq!(c["status"], "completed");
        assert_eq!(c["outcome"], "ADJUDICATED");
        assert_eq!(c["approved_amount"], 11500);
        assert_eq!(c["rulebook_version"], 1);
        assert_eq!(c["metadata"], json!({"channel": "api"}), "{id}");
    }

    // The others are refused with REST intake's errors, and nothing of them is stored.
    let rejects: Vec<Value> = app
        .records_of(&app.state.topics.rejects, 5)
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
    assert!(
        rejects.iter().any(|r| r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("schemas/avro/submission.avsc")),
        "the record of another schema is not told which to use: {rejects:?}"
    );
    for r in &rejects {
        assert_eq!(
            r["source"]["topic"],
            app.state.topics.submissions.name.as_str()
        );
    }
    for id in ["CLM-K2", "CLM-K3", "CLM-K5"] {
        let r = app.get(&format!("/claims/{id}"), &s.access).await;
        r.assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");
    }
    // The REST claim keeps its own submission.
    let rest = app.get("/claims/CLM-REST", &s.access).await;
    assert_eq!(rest.body["metadata"]["channel"], "api");
}
