//! An analyst reads a topic with a Kafka client that is not this project's (Python's
//! `confluent-kafka` and `fastavro`) and only the schemas in `schemas/avro/`: the
//! README's recipe, run as it is written, with the test's broker and topic names.

use std::time::Duration;

use serde_json::Value;

use crate::claims::{claim, ready_tenant, submit};
use crate::pipeline::{decided, events};
use crate::support::{Backend, TestApp};

#[test]
fn fastavro_reads_every_golden_value_with_the_schemas_alone() {
    // The golden bytes of `schemas/tests/avro.rs`, read by an Avro implementation that
    // is not this project's: the same fingerprints, the same values.
    let script = r#"
import io, json, pathlib, sys
from fastavro import parse_schema, schemaless_reader
from fastavro.schema import fingerprint, to_parsing_canonical_form
schemas = {}
for path in pathlib.Path("schemas/avro").rglob("*.avsc"):
    schema = parse_schema(json.loads(path.read_text()))
    schemas[bytes.fromhex(fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))] = schema
for hexfile in sorted(pathlib.Path("schemas/avro/examples").glob("*.hex")):
    b = bytes.fromhex(hexfile.read_text().strip())
    assert b[:2] == b"\xc3\x01"
    print(json.dumps({"file": hexfile.stem, "value": schemaless_reader(io.BytesIO(b[10:]), schemas[b[2:10]])}))
"#;
    let out = std::process::Command::new(crate::support::python())
        .args(["-c", script])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), schemas::avro::ALL.len());
    for l in lines {
        let file = l["file"].as_str().unwrap();
        let example = format!(
            "{}/schemas/avro/examples/{file}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut expected: Value =
            serde_json::from_str(&std::fs::read_to_string(example).unwrap()).unwrap();
        // Fields of JSON documents are JSON text to a plain Avro reader.
        for doc in [
            "/data",
            "/claim/metadata",
            "/submitted/claim/metadata",
            "/events/0/data",
            "/events/1/data",
        ] {
            if let Some(v) = expected.pointer_mut(doc) {
                *v = Value::String(v.to_string());
            }
        }
        // And an absent optional field is a null.
        assert_eq!(without_nulls(l["value"].clone()), expected, "{file}");
    }
}

fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.into_iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k, without_nulls(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_nulls).collect()),
        v => v,
    }
}

mod kafka {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_readme_recipe_reads_the_events_topic_with_fastavro() {
        super::the_readme_recipe_reads_the_events_topic_with_fastavro().await
    }
}

/// The Python block after `<!-- analyst-recipe -->` in the README.
fn recipe() -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let (_, after) = readme
        .split_once("<!-- analyst-recipe -->\n```python\n")
        .expect("the README has the analyst recipe");
    after.split_once("```").unwrap().0.to_owned()
}

async fn the_readme_recipe_reads_the_events_topic_with_fastavro() {
    let app = TestApp::spawn(Backend::Kafka).await;
    let s = ready_tenant(&app, "acme").await;
    // Over the hard stop: blocked, with two events.
    let mut blocked = claim("CLM-2");
    blocked["claim_amount"] = serde_json::json!(6_000_000);
    blocked["lines"] = serde_json::json!([]);
    for c in [claim("CLM-1"), blocked] {
        submit(&app, &s, c).await;
    }
    for id in ["CLM-1", "CLM-2"] {
        decided(&app, &s, id).await;
    }
    let mut expected = events(&app, "acme", "CLM-1").await;
    expected.extend(events(&app, "acme", "CLM-2").await);
    assert_eq!(expected.len(), 3, "{expected:?}");

    let script = recipe()
        .replace("kafka1:9092", &crate::support::backend::kafka_brokers())
        .replace(
            "\"claims.events\"",
            &format!("\"{}\"", app.state.topics.events.name),
        );
    let python = crate::support::python();
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(python)
            .args(["-c", &script])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output(),
    )
    .await
    .expect("the recipe ends once the topic is read")
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut read: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for e in &mut read {
        let key = e.as_object_mut().unwrap().remove("key").unwrap();
        let claim = e["data"]["claim_id"].as_str().unwrap();
        assert_eq!(key, format!("acme/{claim}").as_str());
    }
    let order = |v: &mut Vec<Value>| v.sort_by_key(|e| e["id"].as_str().unwrap().to_owned());
    order(&mut read);
    order(&mut expected);
    assert_eq!(
        read, expected,
        "the analyst reads what the service published"
    );
}
