//! The operator CLI (contract: Tenants and users; Running): idempotent, JSON output,
//! usable while `serve` runs on the same store.

use std::process::Command;

use reqwest::StatusCode;
use serde_json::Value;

use crate::support::{jwt, Backend, TestApp};

crate::both_backends!(
    create_tenant_and_user_are_idempotent_and_work_while_serve_runs,
    create_user_reports_clear_errors,
    migrate_reports_success,
    topics_shows_each_groups_lag_and_tails_a_topic,
);

mod kafka {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn topics_shows_each_groups_lag_and_tails_a_topic() {
        super::topics_shows_each_groups_lag_and_tails_a_topic(crate::support::Backend::Kafka).await
    }
}

/// Runs `claims …` against the app's store; answers the exit success, stdout JSON and
/// stderr JSON.
pub fn claims(app: &TestApp, args: &[&str]) -> (bool, Value, Value) {
    let (ok, stdout, stderr) = claims_text(app, args);
    let parse = |s: &str| serde_json::from_str(s).unwrap_or(Value::Null);
    (ok, parse(&stdout), parse(&stderr))
}

/// Runs `claims …`, which must succeed (its stderr, a panic's too, is the failure's
/// message); answers its stdout JSON.
pub fn claims_ok(app: &TestApp, args: &[&str]) -> Value {
    let (ok, stdout, stderr) = claims_text(app, args);
    assert!(ok, "claims {} failed: {stderr}", args.join(" "));
    serde_json::from_str(&stdout).unwrap_or(Value::Null)
}

/// [`claims`], with stdout and stderr as text.
pub fn claims_text(app: &TestApp, args: &[&str]) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claims"));
    command
        .args(args)
        .env_clear()
        .env("CLAIMS_DATA_DIR", &app.data_dir)
        .env("CLAIMS_DATABASE_URL", app.config.store.url())
        .env("CLAIMS_TOPIC_PREFIX", &app.config.topic_prefix)
        .env("CLAIMS_PARTITIONS", app.config.partitions.to_string())
        .env("RUST_LOG", "error");
    if let Some(k) = &app.config.kafka {
        command.env("CLAIMS_KAFKA_BROKERS", &k.brokers);
    }
    let out = command.output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

async fn create_tenant_and_user_are_idempotent_and_work_while_serve_runs(b: Backend) {
    let app = TestApp::spawn(b).await;
    let first = claims_ok(
        &app,
        &[
            "admin",
            "create-tenant",
            "--tenant-id",
            "globex",
            "--name",
            "Globex Health",
        ],
    );
    assert_eq!(first["tenant_id"], "globex");
    assert_eq!(first["created"], true);
    let again = claims_ok(
        &app,
        &[
            "admin",
            "create-tenant",
            "--tenant-id",
            "globex",
            "--name",
            "Globex Health",
        ],
    );
    assert_eq!(again["created"], false);

    let user = [
        "admin",
        "create-user",
        "--tenant-id",
        "globex",
        "--email",
        "Officer@Globex.example",
        "--password",
        "s3cret-password",
        "--scopes",
        "claims:read tenant:configure",
    ];
    let created = claims_ok(&app, &user);
    assert_eq!(created["created"], true);
    assert_eq!(created["email"], "officer@globex.example");
    assert_eq!(
        created["scopes"],
        serde_json::json!(["claims:read", "tenant:configure"])
    );
    assert!(created.get("password").is_none() && created.get("password_hash").is_none());

    // The running service sees the user at once.
    let s = app.login("officer@globex.example", "s3cret-password").await;
    assert_eq!(
        app.get("/tenant/settings", &s.access).await.status,
        StatusCode::OK
    );

    // Again, with other scopes: the same user, now with those scopes.
    let mut narrower = user;
    narrower[9] = "claims:read";
    let updated = claims_ok(&app, &narrower);
    assert_eq!(updated["created"], false);
    assert_eq!(updated["user_id"], created["user_id"]);
    let s = app.login("officer@globex.example", "s3cret-password").await;
    assert_eq!(jwt::parts(&s.access).1["scope"], "claims:read");
}

async fn create_user_reports_clear_errors(b: Backend) {
    let app = TestApp::spawn(b).await;
    claims_ok(
        &app,
        &[
            "admin",
            "create-tenant",
            "--tenant-id",
            "t1",
            "--name",
            "One",
        ],
    );
    claims_ok(
        &app,
        &[
            "admin",
            "create-tenant",
            "--tenant-id",
            "t2",
            "--name",
            "Two",
        ],
    );
    let base = |tenant: &'static str, email: &'static str, scopes: &'static str| {
        [
            "admin",
            "create-user",
            "--tenant-id",
            tenant,
            "--email",
            email,
            "--password",
            "long-enough-pw",
            "--scopes",
            scopes,
        ]
    };
    let (ok, _, err) = claims(&app, &base("nope", "a@x.example", "claims:read"));
    assert!(!ok);
    assert_eq!(err["error"]["code"], "NOT_FOUND");
    let (ok, _, err) = claims(&app, &base("t1", "a@x.example", "claims:read superuser"));
    assert!(!ok);
    assert_eq!(err["error"]["code"], "VALIDATION_ERROR");
    claims_ok(&app, &base("t1", "a@x.example", "claims:read"));
    let (ok, _, err) = claims(&app, &base("t2", "a@x.example", "claims:read"));
    assert!(!ok, "emails are unique across tenants");
    assert_eq!(err["error"]["code"], "CONFLICT");
    let (ok, _, err) = claims(
        &app,
        &[
            "admin",
            "create-tenant",
            "--tenant-id",
            "bad id",
            "--name",
            "x",
        ],
    );
    assert!(!ok);
    assert_eq!(err["error"]["code"], "VALIDATION_ERROR");
}

async fn migrate_reports_success(b: Backend) {
    let app = TestApp::spawn(b).await;
    let out = claims_ok(&app, &["migrate"]);
    assert_eq!(out["migrated"], true);
}

async fn topics_shows_each_groups_lag_and_tails_a_topic(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = crate::claims::ready_tenant(&app, "acme").await;
    for id in ["CLM-T1", "CLM-T2"] {
        let r = app
            .call(
                reqwest::Method::POST,
                "/claims/intake",
                Some(&s.access),
                Some(crate::claims::claim(id)),
            )
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED);
        crate::pipeline::decided(&app, &s, id).await;
    }
    // Validate commits its offsets with its outputs, so a decided claim was consumed.
    let listed = claims_ok(&app, &["topics"]);
    let kafka = b == Backend::Kafka;
    assert_eq!(listed["bus"], if kafka { "kafka" } else { "embedded" });
    // On Kafka, topics and groups carry the deployment's prefix.
    let prefix = &app.config.topic_prefix;
    let topic = |name: &str| named(&listed["topics"], "topic", &format!("{prefix}{name}"));
    let intake = topic("claims.intake");
    assert_eq!(intake["end_offset_total"], 2, "{intake}");
    assert_eq!(intake["partitions"], app.config.partitions);
    let group = if kafka {
        format!("{prefix}validate")
    } else {
        "validate".into()
    };
    let validate = named(&intake["groups"], "group", &group);
    assert_eq!(validate["lag"], 0, "{validate}");
    assert_eq!(
        validate["committed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o.as_i64().unwrap())
            .sum::<i64>(),
        2
    );
    assert_eq!(topic("state.fraud-members")["compacted"], true);
    assert_eq!(topic("claims.events")["value_schema"], "domain-event");
    assert_eq!(topic("claims.scored")["value_schema"], "claim-in-process");
    assert_eq!(topic("claims.workflow")["value_schema"], "officer-decision");
    assert_eq!(topic("claims.dead-letter")["value_schema"], Value::Null);

    let (ok, out, err) = claims_text(&app, &["topics", "tail", "claims.events", "--limit", "1"]);
    assert!(ok, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert_eq!(lines[0]["topic"], format!("{prefix}claims.events"));
    assert_eq!(lines[0]["value"]["event"], "claim.completed");
    assert!(lines[0]["key"].as_str().unwrap().starts_with("acme/CLM-T"));
    let (ok, out, err) = claims_text(&app, &["topics", "tail", "claims.intake", "--limit", "5"]);
    assert!(ok, "{err}");
    let ids: Vec<String> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["value"]["claim"]["claim_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ids, ["CLM-T1", "CLM-T2"], "oldest first");

    let (ok, _, err) = claims(&app, &["topics", "tail", "claims.nope"]);
    assert!(!ok);
    assert_eq!(err["error"]["code"], "TOPIC_NOT_FOUND");
    assert!(err["error"]["message"]
        .as_str()
        .unwrap()
        .contains("claims.events"));
}

/// The member of a JSON array whose `field` is `name`.
fn named(list: &Value, field: &str, name: &str) -> Value {
    list.as_array()
        .and_then(|l| l.iter().find(|x| x[field] == name))
        .cloned()
        .unwrap_or_else(|| panic!("no {field} {name} in {list}"))
}
