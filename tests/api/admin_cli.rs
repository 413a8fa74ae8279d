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
);

/// Runs `claims …` against the app's store; answers the exit success, stdout JSON and
/// stderr JSON.
pub fn claims(app: &TestApp, args: &[&str]) -> (bool, Value, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_claims"))
        .args(args)
        .env_clear()
        .env("CLAIMS_DATA_DIR", &app.data_dir)
        .env("CLAIMS_DATABASE_URL", app.config.store.url())
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let parse = |b: &[u8]| serde_json::from_slice(b).unwrap_or(Value::Null);
    (out.status.success(), parse(&out.stdout), parse(&out.stderr))
}

async fn create_tenant_and_user_are_idempotent_and_work_while_serve_runs(b: Backend) {
    let app = TestApp::spawn(b).await;
    let (ok, first, _) = claims(
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
    assert!(ok);
    assert_eq!(first["tenant_id"], "globex");
    assert_eq!(first["created"], true);
    let (ok, again, _) = claims(
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
    assert!(ok);
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
    let (ok, created, err) = claims(&app, &user);
    assert!(ok, "{err}");
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
    let (ok, updated, _) = claims(&app, &narrower);
    assert!(ok);
    assert_eq!(updated["created"], false);
    assert_eq!(updated["user_id"], created["user_id"]);
    let s = app.login("officer@globex.example", "s3cret-password").await;
    assert_eq!(jwt::parts(&s.access).1["scope"], "claims:read");
}

async fn create_user_reports_clear_errors(b: Backend) {
    let app = TestApp::spawn(b).await;
    claims(
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
    claims(
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
    let (ok, _, _) = claims(&app, &base("t1", "a@x.example", "claims:read"));
    assert!(ok);
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
    let (ok, out, err) = claims(&app, &["migrate"]);
    assert!(ok, "{err}");
    assert_eq!(out["migrated"], true);
}
