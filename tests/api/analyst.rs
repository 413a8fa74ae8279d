//! An analyst reads a topic with a Kafka client that is not this project's (Python's
//! `confluent-kafka` and `fastavro`): with only the schemas in `schemas/avro/`, or with
//! Confluent's deserializer and a schema registry. The README's recipes, run as they are
//! written, with the test's broker, registry and topic names.

use std::time::Duration;

use serde_json::{json, Value};

use crate::claims::{claim, ready_tenant, submit};
use crate::pipeline::{decided, events};
use crate::support::{Backend, Session, TestApp};

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
            "/pricing",
            "/facts",
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn through_a_schema_registry_confluents_serializers_write_and_read_the_topics() {
        super::through_a_schema_registry_confluents_serializers_write_and_read_the_topics().await
    }
}

/// The Python block after `<!-- {marker} -->` in the README.
fn recipe(marker: &str) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let (_, after) = readme
        .split_once(&format!("<!-- {marker} -->\n```python\n"))
        .unwrap_or_else(|| panic!("the README has the {marker}"));
    after.split_once("```").unwrap().0.to_owned()
}

/// Submits a claim that completes and one that is blocked (three events in all).
async fn two_claims(app: &TestApp, s: &Session) {
    // Over the hard stop: blocked, with two events.
    let mut blocked = claim("CLM-2");
    blocked["claim_amount"] = json!(6_000_000);
    blocked["lines"] = json!([]);
    for c in [claim("CLM-1"), blocked] {
        submit(app, s, c).await;
    }
}

/// Runs a Python `script` with `args` in the project's folder; its standard output.
async fn run_python(script: &str, args: &[&str]) -> String {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(crate::support::python())
            .arg("-c")
            .arg(script)
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output(),
    )
    .await
    .expect("the script ends")
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn the_readme_recipe_reads_the_events_topic_with_fastavro() {
    let app = TestApp::spawn(Backend::Kafka).await;
    let s = ready_tenant(&app, "acme").await;
    two_claims(&app, &s).await;
    let script = recipe("analyst-recipe")
        .replace("kafka1:9092", &crate::support::backend::kafka_brokers())
        .replace(
            "\"claims.events\"",
            &format!("\"{}\"", app.state.topics.events.name),
        );
    assert_read_as_published(&app, &s, &["CLM-1", "CLM-2"], &script).await;
}

/// The events of `claims` read by the analyst's `script` are exactly those the service
/// published.
async fn assert_read_as_published(app: &TestApp, s: &Session, claims: &[&str], script: &str) {
    let mut expected = Vec::new();
    for id in claims {
        decided(app, s, id).await;
        expected.extend(events(app, "acme", id).await);
    }
    assert_eq!(expected.len(), claims.len() + 1, "{expected:?}");
    let out = run_python(script, &[]).await;
    let mut read: Vec<Value> = out
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

/// The stand-in registry (`support/schema_registry.py`), killed when dropped, and its URL.
async fn schema_registry() -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(crate::support::python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/api/support/schema_registry.py"
        ))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut port = String::new();
    tokio::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut port)
        .await
        .unwrap();
    (child, format!("http://127.0.0.1:{}", port.trim()))
}

async fn through_a_schema_registry_confluents_serializers_write_and_read_the_topics() {
    let (_registry, url) = schema_registry().await;
    let registry_url = url.clone();
    let app = TestApp::spawn_with(Backend::Kafka, move |s| {
        s.schema_registry_url = Some(registry_url)
    })
    .await;
    let s = ready_tenant(&app, "acme").await;
    two_claims(&app, &s).await;

    // A payer's own Avro serializer writes a claim onto the submissions topic, with a
    // newer version of the schema (one more field, with a default): registered under a
    // new id, which the service fetches and reads into its own version.
    let mut doc = json!({"tenant_id": "acme", "claim": claim("CLM-3"), "payer_batch": "B-7"});
    doc["claim"]["metadata"] = json!(doc["claim"]["metadata"].to_string());
    let producer = r#"
import json, sys
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
brokers, registry, topic, doc = sys.argv[1:5]
schema = json.load(open("schemas/avro/submission.avsc"))
schema["fields"].append({"name": "payer_batch", "type": "string", "default": ""})
serialize = AvroSerializer(SchemaRegistryClient({"url": registry}), json.dumps(schema))
value = serialize(json.loads(doc), SerializationContext(topic, MessageField.VALUE))
p = Producer({"bootstrap.servers": brokers, "enable.idempotence": True})
p.produce(topic, key=b"acme/CLM-3", value=value)
assert p.flush(30) == 0
print(value[0], int.from_bytes(value[1:5], "big"))
"#;
    let brokers = crate::support::backend::kafka_brokers();
    let written = run_python(
        producer,
        &[
            &brokers,
            &url,
            &app.state.topics.submissions.name,
            &doc.to_string(),
        ],
    )
    .await;
    let service_id = registered_id(&url, &app.state.topics.submissions.name).await;
    let (magic, id) = written.trim().split_once(' ').unwrap();
    assert_eq!(magic, "0", "the Confluent wire format");
    assert_ne!(
        id,
        service_id.to_string(),
        "the payer's schema is another version"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while app.get("/claims/CLM-3", &s.access).await.status != reqwest::StatusCode::OK {
        assert!(
            std::time::Instant::now() < deadline,
            "CLM-3 was never accepted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let c = decided(&app, &s, "CLM-3").await;
    assert_eq!(c["outcome"], "ADJUDICATED");
    assert_eq!(c["metadata"], json!({"channel": "api"}));

    // The service registered each topic's schema under `<topic>-value`.
    let subjects: Vec<String> = reqwest::get(format!("{url}/subjects"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for t in app.state.topics.all().iter().filter(|t| t.schema.is_some()) {
        assert!(
            subjects.contains(&format!("{}-value", t.name)),
            "{}",
            t.name
        );
    }

    // An analyst reads the events with Confluent's deserializer and the registry alone.
    let script = recipe("analyst-recipe-registry")
        .replace("kafka1:9092", &brokers)
        .replace("http://registry:8081", &url)
        .replace(
            "\"claims.events\"",
            &format!("\"{}\"", app.state.topics.events.name),
        );
    assert_read_as_published(&app, &s, &["CLM-1", "CLM-2", "CLM-3"], &script).await;
}

/// The id of the service's submission schema under `topic` in the registry at `url`
/// (registering a schema the subject holds answers its id).
async fn registered_id(url: &str, topic: &str) -> u64 {
    let schema = schemas::avro::SUBMISSION.avsc;
    let res: Value = reqwest::Client::new()
        .post(format!("{url}/subjects/{topic}-value/versions"))
        .body(json!({ "schema": schema }).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    res["id"].as_u64().unwrap()
}
