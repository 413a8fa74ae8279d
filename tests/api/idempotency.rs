//! `Idempotency-Key` (contract: Conventions): replay, body mismatch, a concurrent
//! duplicate, a crashed first attempt, scope, and expiry after 24 hours.

use std::time::Duration;

use pipeline::store::{Begin, IdempotencyScope, KeyTimes};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::claims::{claim, ready_tenant};
use crate::support::{jwt, Backend, Reply, Session, TestApp, ALL_SCOPES};

crate::both_backends!(
    intake_with_a_key_is_replayed_not_duplicated,
    webhook_creation_and_batch_intake_are_replayed,
    a_key_with_another_body_or_out_of_shape_is_refused,
    a_concurrent_duplicate_waits_and_a_crashed_first_attempt_lets_go,
    keys_are_scoped_by_user_and_path,
    a_key_expires_after_24_hours,
    a_request_whose_client_gave_up_finishes_and_is_replayed,
    simultaneous_keyed_requests_each_take_their_own_key_once,
);

async fn post(app: &TestApp, s: &Session, path: &str, key: &str, body: &Value) -> Reply {
    app.call_with(
        Method::POST,
        path,
        Some(&s.access),
        &[("idempotency-key", key)],
        Some(&serde_json::to_vec(body).unwrap()),
    )
    .await
}

fn replayed(r: &Reply) -> bool {
    r.header("idempotent-replayed") == Some("true")
}

async fn claim_count(app: &TestApp, s: &Session) -> usize {
    let r = app.get("/claims?limit=500", &s.access).await;
    assert_eq!(r.status, StatusCode::OK);
    r.body["data"].as_array().unwrap().len()
}

async fn intake_with_a_key_is_replayed_not_duplicated(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let first = post(&app, &s, "/claims/intake", "key-1", &claim("CLM-1")).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.body);
    assert!(!replayed(&first));

    let again = post(&app, &s, "/claims/intake", "key-1", &claim("CLM-1")).await;
    assert_eq!(
        again.status,
        StatusCode::ACCEPTED,
        "no CLAIM_DUPLICATE: {}",
        again.body
    );
    assert!(replayed(&again));
    assert_eq!(again.body, first.body, "the stored body");
    assert_eq!(again.header("location"), first.header("location"));
    assert_ne!(again.header("x-request-id"), first.header("x-request-id"));
    assert!(again.header("x-ratelimit-remaining").is_some());
    assert_eq!(claim_count(&app, &s).await, 1, "no second claim");

    // An error is replayed too, with the replay's own request id.
    let bad = json!({"claim_id": "CLM-2", "member_id": "MBR-1", "provider_id": "PRV-1", "claim_amount": -5, "service_date": "2026-01-15"});
    let refused = post(&app, &s, "/claims/intake", "key-2", &bad).await;
    assert_eq!(
        refused.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR"),
        Some("claim_amount".into())
    );
    let again = post(&app, &s, "/claims/intake", "key-2", &bad).await;
    assert!(replayed(&again));
    again.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
    assert_eq!(
        again.body["error"]["message"],
        refused.body["error"]["message"]
    );
}

async fn webhook_creation_and_batch_intake_are_replayed(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let hook = json!({"url": "https://example.com/hook", "events": ["claim.completed"], "secret": "a-long-enough-secret"});
    let first = post(&app, &s, "/webhooks", "hook-1", &hook).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let again = post(&app, &s, "/webhooks", "hook-1", &hook).await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert!(replayed(&again));
    assert_eq!(again.body["webhook_id"], first.body["webhook_id"]);
    let list = app.get("/webhooks", &s.access).await;
    assert_eq!(
        list.body["data"].as_array().unwrap().len(),
        1,
        "one subscription"
    );

    let batch = json!([claim("CLM-1"), claim("CLM-2"), claim("CLM-3")]);
    let first = post(&app, &s, "/claims/batch", "batch-1", &batch).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    assert_eq!(first.body["accepted"], 3);
    let again = post(&app, &s, "/claims/batch", "batch-1", &batch).await;
    assert!(replayed(&again));
    assert_eq!(
        again.body, first.body,
        "accepted again, not CLAIM_DUPLICATE"
    );
    assert_eq!(claim_count(&app, &s).await, 3);
}

async fn a_key_with_another_body_or_out_of_shape_is_refused(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let first = post(&app, &s, "/claims/intake", "key-1", &claim("CLM-1")).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    let other = post(&app, &s, "/claims/intake", "key-1", &claim("CLM-2")).await;
    assert_eq!(
        other.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR"),
        Some("Idempotency-Key".into())
    );
    let long = "k".repeat(256);
    let r = post(&app, &s, "/claims/intake", &long, &claim("CLM-3")).await;
    assert_eq!(
        r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR"),
        Some("Idempotency-Key".into())
    );
    assert_eq!(claim_count(&app, &s).await, 1, "neither changed anything");
    let max = "k".repeat(255);
    let r = post(&app, &s, "/claims/intake", &max, &claim("CLM-4")).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "255 characters are allowed");
}

async fn a_concurrent_duplicate_waits_and_a_crashed_first_attempt_lets_go(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let user_id = jwt::parts(&s.access).1["sub"].as_str().unwrap().to_owned();
    let body = serde_json::to_vec(&claim("CLM-1")).unwrap();
    let scope = IdempotencyScope {
        tenant_id: "acme",
        user_id: &user_id,
        method: "POST",
        path: "/api/v1/claims/intake",
        key: "key-1",
    };
    // A first attempt takes the key and is still running (or has crashed).
    let fingerprint = hex::encode(Sha256::digest(&body));
    let begun = app
        .store
        .begin_idempotent(
            scope,
            &fingerprint,
            KeyTimes {
                now: app.state.clock.now_ms(),
                lease_ms: 30_000,
                ttl_ms: 24 * 3_600_000,
            },
        )
        .await
        .unwrap();
    assert_eq!(begun, Begin::Started);
    let send = || {
        app.call_with(
            Method::POST,
            "/claims/intake",
            Some(&s.access),
            &[("idempotency-key", "key-1")],
            Some(&body),
        )
    };
    let busy = send().await;
    busy.assert_error(StatusCode::CONFLICT, "CONFLICT");
    assert_eq!(busy.header("retry-after"), Some("1"));
    assert_eq!(claim_count(&app, &s).await, 0);

    // The first attempt never finishes: once its lease lapses, a retry takes over.
    app.state.clock.advance(Duration::from_secs(31));
    let retried = send().await;
    assert_eq!(retried.status, StatusCode::ACCEPTED, "{}", retried.body);
    assert!(!replayed(&retried));
    let again = send().await;
    assert!(replayed(&again));
    assert_eq!(claim_count(&app, &s).await, 1);
}

async fn keys_are_scoped_by_user_and_path(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let other_user = app.session("acme", ALL_SCOPES).await;
    let first = post(&app, &s, "/claims/intake", "shared", &claim("CLM-1")).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    // Another user's key of the same name is theirs: no replay, no mismatch.
    let theirs = post(
        &app,
        &other_user,
        "/claims/intake",
        "shared",
        &claim("CLM-2"),
    )
    .await;
    assert_eq!(theirs.status, StatusCode::ACCEPTED, "{}", theirs.body);
    assert!(!replayed(&theirs));
    // The same key on another path is another key.
    let hook = json!({"url": "https://example.com/hook", "events": ["claim.completed"], "secret": "a-long-enough-secret"});
    let r = post(&app, &s, "/webhooks", "shared", &hook).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert!(!replayed(&r));
    // Another tenant's user with the same key runs afresh.
    let globex = ready_tenant(&app, "globex").await;
    let g = post(&app, &globex, "/claims/intake", "shared", &claim("CLM-1")).await;
    assert_eq!(g.status, StatusCode::ACCEPTED);
    assert!(!replayed(&g));
}

async fn a_key_expires_after_24_hours(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", ALL_SCOPES).await;
    let hook = json!({"url": "https://example.com/hook", "events": ["claim.completed"], "secret": "a-long-enough-secret"});
    let first = post(&app, &s, "/webhooks", "hook-1", &hook).await;
    assert_eq!(first.status, StatusCode::CREATED);
    app.state.clock.advance(Duration::from_secs(23 * 3600));
    let within = post(&app, &s, "/webhooks", "hook-1", &hook).await;
    assert!(replayed(&within), "still valid after 23 hours");
    assert_eq!(
        app.store
            .purge_idempotency_keys(app.state.clock.now_ms())
            .await
            .unwrap(),
        0
    );

    app.state.clock.advance(Duration::from_secs(3600 + 1));
    let after = post(&app, &s, "/webhooks", "hook-1", &hook).await;
    assert_eq!(after.status, StatusCode::CREATED);
    assert!(!replayed(&after), "expired after 24 hours: runs afresh");
    assert_ne!(after.body["webhook_id"], first.body["webhook_id"]);

    // The purge deletes what has expired, and only that.
    app.state.clock.advance(Duration::from_secs(24 * 3600 + 1));
    let purged = app
        .store
        .purge_idempotency_keys(app.state.clock.now_ms())
        .await
        .unwrap();
    assert_eq!(purged, 1);
}

async fn a_request_whose_client_gave_up_finishes_and_is_replayed(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let n = 500;
    let batch = Value::Array((0..n).map(|i| claim(&format!("CLM-{i}"))).collect());
    let body = serde_json::to_vec(&batch).unwrap();
    // The client gives up long before a batch this size is through.
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let gave_up = impatient
        .post(app.url("/claims/batch"))
        .bearer_auth(&s.access)
        .header("idempotency-key", "batch-1")
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await;
    assert!(gave_up.is_err(), "the client timed out");
    // Its retries wait while the first runs, then get its response: every claim
    // accepted, none CLAIM_DUPLICATE, well within the key's 30 s lease. Cancelled with
    // its client, the first would hold the key for the whole lease.
    let deadline = std::time::Instant::now() + Duration::from_secs(25);
    let done = loop {
        let r = app
            .call_with(
                Method::POST,
                "/claims/batch",
                Some(&s.access),
                &[("idempotency-key", "batch-1")],
                Some(&body),
            )
            .await;
        if r.status == StatusCode::OK {
            break r;
        }
        assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
        assert!(
            std::time::Instant::now() < deadline,
            "the key is still held"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(done.body["accepted"], n, "{}", done.body["results"][0]);
    let stored = app
        .store
        .claims("acme", &Default::default(), None, 10_000)
        .await
        .unwrap();
    assert_eq!(stored.len(), n);
}

/// Keyed requests sent all at once share the store's transactions on SQLite (see
/// `pipeline::idempotency`): each distinct key still runs its request once, and the
/// repeats of one key sent beside its first attempt never run it a second time.
async fn simultaneous_keyed_requests_each_take_their_own_key_once(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let distinct = futures::future::join_all((0..40).map(|i| {
        let (app, s) = (&app, &s);
        async move {
            let body = claim(&format!("CLM-D{i}"));
            post(app, s, "/claims/intake", &format!("d-{i}"), &body).await
        }
    }))
    .await;
    for r in &distinct {
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
        assert!(!replayed(r), "each key is new");
    }
    let same = futures::future::join_all((0..20).map(|_| {
        let (app, s) = (&app, &s);
        async move { post(app, s, "/claims/intake", "same", &claim("CLM-S")).await }
    }))
    .await;
    let ran = same
        .iter()
        .filter(|r| r.status == StatusCode::ACCEPTED && !replayed(r))
        .count();
    assert_eq!(ran, 1, "the first attempt alone runs");
    for r in &same {
        let waited = r.status == StatusCode::CONFLICT && r.header("retry-after") == Some("1");
        assert!(
            r.status == StatusCode::ACCEPTED || waited,
            "a repeat runs not, but waits or is replayed: {} {}",
            r.status,
            r.body
        );
    }
    assert_eq!(claim_count(&app, &s).await, 41, "one claim per key");
    let again = post(&app, &s, "/claims/intake", "d-7", &claim("CLM-D7")).await;
    assert!(replayed(&again), "a grouped key's response was stored");
    assert_eq!(again.body["claim_id"], "CLM-D7");
}
