//! Webhooks (spec: Events, Signature, Delivery rules; contract: Webhooks), against a
//! real receiver (`support::receiver`): a small axum server on port 0 that records what
//! arrives and answers as each test scripts it. Signatures are checked with the `hmac`
//! crate directly and with Python's `standardwebhooks` package, never with the
//! service's signing code.

use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::claims::{claim, ready_tenant};
use crate::support::receiver::{subscribe, Answer, Hit, Receiver};
use crate::support::{Backend, Session, TestApp};

crate::all_backends!(
    a_completed_claim_is_delivered_signed_as_the_contract_says,
    each_subscription_gets_only_its_event_kinds,
    three_failures_give_four_attempts_1_5_and_30_seconds_apart,
    exhausted_retries_mark_the_delivery_failed_and_redelivery_sends_it_again,
    no_answer_within_5_seconds_is_a_failure,
    a_restart_in_the_middle_of_a_schedule_neither_loses_nor_hastens_an_attempt,
    deleting_a_subscription_stops_its_deliveries,
    a_delivery_is_queued_once_and_only_for_an_enabled_subscription,
    a_dead_endpoint_does_not_slow_another_tenants_deliveries,
    subscriptions_are_validated_and_private_targets_refused,
    subscriptions_can_be_read_changed_and_deleted_by_their_tenant_only,
    a_thin_subscription_gets_ids_status_and_outcome_signed_like_any_delivery,
    delivery_bodies_past_the_tenants_retention_are_dropped_and_their_log_stays,
    an_endpoint_failing_for_a_day_is_disabled_announced_and_resumes_when_enabled,
    a_replay_since_an_outage_delivers_each_event_once_in_order_and_slows_no_one,
);

/// Enables or disables a subscription.
async fn set_enabled(app: &TestApp, s: &Session, webhook_id: &str, enabled: bool) -> Value {
    let r = app
        .call(
            Method::PATCH,
            &format!("/webhooks/{webhook_id}"),
            Some(&s.access),
            Some(json!({ "enabled": enabled })),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body
}

/// A service whose webhooks may reach the receiver on loopback.
async fn app(b: Backend) -> TestApp {
    TestApp::spawn_with(b, |s| s.webhook_allow_private = true).await
}

/// The retry waits of [`fast_app`]: a whole schedule in a second. The spec's own 1 s,
/// 5 s and 30 s are kept by `three_failures_give_four_attempts_1_5_and_30_seconds_apart`.
const FAST_WAITS: [f64; 3] = [0.2, 0.3, 0.4];

async fn fast_app(b: Backend) -> TestApp {
    TestApp::spawn_with(b, |s| {
        s.webhook_allow_private = true;
        s.webhook_retry_waits_ms = "200,300,400".into();
    })
    .await
}

async fn submit(app: &TestApp, s: &Session, body: Value) {
    let r = app
        .call(Method::POST, "/claims/intake", Some(&s.access), Some(body))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// Verifies a delivery with Python's `standardwebhooks` (installed by `scripts/test`).
fn verify_with_standardwebhooks(secret: &str, hit: &Hit) {
    let python = crate::support::python();
    let script = "import sys, json\n\
                  from standardwebhooks.webhooks import Webhook\n\
                  secret, wid, ts, sig = sys.argv[1:5]\n\
                  body = sys.stdin.buffer.read()\n\
                  Webhook(secret.encode()).verify(body, {'webhook-id': wid, 'webhook-timestamp': ts, 'webhook-signature': sig})\n\
                  print('verified')";
    let mut child = std::process::Command::new(&python)
        .args([
            "-c",
            script,
            secret,
            hit.header("webhook-id"),
            hit.header("webhook-timestamp"),
            hit.header("webhook-signature"),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run {python} (run scripts/test, which installs standardwebhooks): {e}")
        });
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&hit.body).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "verified",
        "standardwebhooks refused the delivery: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The delivery log of a subscription.
async fn attempts(app: &TestApp, s: &Session, webhook_id: &str) -> Vec<Value> {
    let r = app
        .get(&format!("/webhooks/{webhook_id}/deliveries"), &s.access)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body["data"].as_array().unwrap().clone()
}

/// Waits until the delivery log has `n` attempts; answers them, oldest first.
async fn wait_for_attempts(app: &TestApp, s: &Session, webhook_id: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut a = attempts(app, s, webhook_id).await;
        if a.len() >= n {
            a.reverse();
            return a;
        }
        assert!(
            Instant::now() < deadline,
            "expected {n} logged attempts: {a:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_completed_claim_is_delivered_signed_as_the_contract_says(b: Backend) {
    let app = app(b).await;
    let s = ready_tenant(&app, "acme").await;
    let rx = Receiver::start(&[]).await;
    let secret = "whsec-test-secret-ü";
    let webhook_id = subscribe(&app, &s, &rx.url(), &["claim.completed"], secret).await;
    submit(&app, &s, claim("CLM-1")).await;
    let hit = rx.wait_for(1, Duration::from_secs(20)).await.remove(0);

    // X-Service-Signature: plain HMAC-SHA256 of the raw body, keyed with the secret.
    let expected = format!(
        "sha256={}",
        hex::encode(hmac_sha256(secret.as_bytes(), &hit.body))
    );
    assert_eq!(hit.header("x-service-signature"), expected);
    assert_eq!(hit.header("content-type"), "application/json");
    assert_eq!(hit.header("x-service-event"), "claim.completed");

    // Members in the contract's order; `signature` signs the body without itself.
    let text = std::str::from_utf8(&hit.body).unwrap();
    let positions: Vec<usize> = [
        "{\"id\"",
        ",\"event\"",
        ",\"timestamp\"",
        ",\"data\"",
        ",\"signature\"",
    ]
    .iter()
    .map(|m| {
        text.find(m)
            .unwrap_or_else(|| panic!("{m} missing in {text}"))
    })
    .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
    let unsigned = format!("{}}}", &text[..positions[4]]);
    let body = hit.json();
    assert_eq!(
        body["signature"],
        format!(
            "sha256={}",
            hex::encode(hmac_sha256(secret.as_bytes(), unsigned.as_bytes()))
        )
    );

    // One id everywhere.
    let event_id = body["id"].as_str().unwrap();
    assert!(event_id.starts_with("evt_"));
    assert_eq!(hit.header("x-service-event-id"), event_id);
    assert_eq!(hit.header("webhook-id"), event_id);
    assert!(hit.header("x-service-delivery").starts_with("dlv_"));

    // The data of claim.completed, as the spec lists it, with the claim's adjudicated
    // lines as the extra member `lines` (contract part 2).
    let c = app.get("/claims/CLM-1", &s.access).await.body;
    assert_eq!(
        body["data"],
        json!({"claim_id": "CLM-1", "status": "completed", "outcome": "ADJUDICATED",
               "approved_amount": c["approved_amount"], "fraud_score": c["fraud_score"], "audit_id": c["audit_id"],
               "lines": c["lines"]})
    );
    assert_eq!(body["event"], "claim.completed");

    // Standard Webhooks, with an off-the-shelf verifier; a changed body is refused.
    verify_with_standardwebhooks(secret, &hit);
    let ts: i64 = hit.header("webhook-timestamp").parse().unwrap();
    assert!((ts - time::OffsetDateTime::now_utc().unix_timestamp()).abs() < 60);

    // The log shows the attempt.
    let log = wait_for_attempts(&app, &s, &webhook_id, 1).await;
    assert_eq!(log[0]["attempt"], 1);
    assert_eq!(log[0]["status_code"], 200);
    assert_eq!(log[0]["event_id"], event_id);
    assert_eq!(log[0]["event"], "claim.completed");
    assert_eq!(log[0]["error"], Value::Null);
    assert_eq!(log[0]["next_attempt_at"], Value::Null);
    assert_eq!(log[0]["delivery_id"], hit.header("x-service-delivery"));
}

async fn each_subscription_gets_only_its_event_kinds(b: Backend) {
    let app = app(b).await;
    let s = ready_tenant(&app, "acme").await;
    app.publish_rulebook(
        &s.access,
        json!([{"rule_id": "cardio", "when": "provider.specialty == 'cardiology'", "action": "flag", "reason_code": "REVIEW"}]),
    )
    .await;
    let review = Receiver::start(&[]).await;
    let done = Receiver::start(&[]).await;
    let blocked = Receiver::start(&[]).await;
    subscribe(
        &app,
        &s,
        &review.url(),
        &["claim.flagged", "workflow.task.created"],
        "a-secret",
    )
    .await;
    subscribe(&app, &s, &done.url(), &["claim.completed"], "b-secret").await;
    subscribe(&app, &s, &blocked.url(), &["claim.blocked"], "c-secret").await;
    submit(&app, &s, claim("CLM-F")).await;

    let mut kinds: Vec<String> = review
        .wait_for(2, Duration::from_secs(20))
        .await
        .iter()
        .map(|h| h.json()["event"].as_str().unwrap().to_owned())
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["claim.flagged", "workflow.task.created"]);
    let flagged = review
        .hits()
        .into_iter()
        .find(|h| h.json()["event"] == "claim.flagged")
        .unwrap()
        .json();
    assert_eq!(flagged["data"]["claim_id"], "CLM-F");
    assert_eq!(flagged["data"]["status"], "pending_review");
    assert!(flagged["data"]["task_id"].is_string());
    let completed = done.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(completed[0].json()["data"]["outcome"], "FLAGGED");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(review.hits().len(), 2);
    assert_eq!(done.hits().len(), 1);
    assert!(blocked.hits().is_empty(), "no claim was blocked");
}

fn gaps(hits: &[Hit]) -> Vec<f64> {
    hits.windows(2).map(|w| w[0].secs_to(&w[1])).collect()
}

fn assert_schedule(gaps: &[f64], waits: [f64; 3]) {
    for (gap, want) in gaps.iter().zip(waits) {
        assert!(
            *gap >= want - 0.05 && *gap <= want + 1.5,
            "retry gaps {gaps:?} are not {waits:?} s"
        );
    }
}

async fn three_failures_give_four_attempts_1_5_and_30_seconds_apart(b: Backend) {
    let app = app(b).await;
    let s = ready_tenant(&app, "acme").await;
    let rx = Receiver::start(&[
        Answer::Status(500),
        Answer::Status(503),
        Answer::Status(404),
    ])
    .await;
    let webhook_id = subscribe(&app, &s, &rx.url(), &["claim.completed"], "secret").await;
    submit(&app, &s, claim("CLM-R")).await;
    let hits = rx.wait_for(4, Duration::from_secs(60)).await;
    assert_schedule(&gaps(&hits), [1.0, 5.0, 30.0]);
    let ids: Vec<&str> = hits
        .iter()
        .map(|h| h.header("x-service-event-id"))
        .collect();
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "one event id on every attempt: {ids:?}"
    );
    assert!(hits.iter().all(|h| h.header("webhook-id") == ids[0]));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(rx.hits().len(), 4, "a delivered event is not sent again");

    let log = wait_for_attempts(&app, &s, &webhook_id, 4).await;
    let statuses: Vec<Value> = log.iter().map(|a| a["status_code"].clone()).collect();
    assert_eq!(statuses, [json!(500), json!(503), json!(404), json!(200)]);
    assert_eq!(
        log.iter()
            .map(|a| a["attempt"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert!(log[0]["next_attempt_at"].is_string());
    assert!(log[0]["error"].as_str().unwrap().contains("500"));
}

async fn exhausted_retries_mark_the_delivery_failed_and_redelivery_sends_it_again(b: Backend) {
    let app = fast_app(b).await;
    let s = ready_tenant(&app, "acme").await;
    let rx = Receiver::start(&[Answer::Status(500); 4]).await;
    let webhook_id = subscribe(&app, &s, &rx.url(), &["claim.completed"], "secret").await;
    submit(&app, &s, claim("CLM-X")).await;
    let hits = rx.wait_for(4, Duration::from_secs(60)).await;
    assert_schedule(&gaps(&hits), FAST_WAITS);
    let log = wait_for_attempts(&app, &s, &webhook_id, 4).await;
    assert_eq!(
        log[3]["next_attempt_at"],
        Value::Null,
        "failed for good: {:?}",
        log[3]
    );
    assert!(log[3]["error"].is_string());
    // Longer than the whole fast schedule: a fifth attempt would have come.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(rx.hits().len(), 4, "no fifth attempt without a redelivery");

    let delivery_id = log[3]["delivery_id"].as_str().unwrap();
    let r = app
        .call(
            Method::POST,
            &format!("/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver"),
            Some(&s.access),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let hits = rx.wait_for(5, Duration::from_secs(10)).await;
    assert_eq!(
        hits[4].header("x-service-event-id"),
        hits[0].header("x-service-event-id")
    );
    let log = wait_for_attempts(&app, &s, &webhook_id, 5).await;
    assert_eq!(log[4]["attempt"], 5);
    assert_eq!(log[4]["status_code"], 200);

    let missing = app
        .call(
            Method::POST,
            &format!("/webhooks/{webhook_id}/deliveries/dlv_nope/redeliver"),
            Some(&s.access),
            None,
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

async fn no_answer_within_5_seconds_is_a_failure(b: Backend) {
    let app = app(b).await;
    let s = ready_tenant(&app, "acme").await;
    let rx = Receiver::start(&[Answer::Hang(Duration::from_secs(7))]).await;
    let webhook_id = subscribe(&app, &s, &rx.url(), &["claim.completed"], "secret").await;
    submit(&app, &s, claim("CLM-T")).await;
    let hits = rx.wait_for(2, Duration::from_secs(30)).await;
    // 5 s of waiting for an answer, then the 1 s retry wait.
    let gap = hits[0].secs_to(&hits[1]);
    assert!(
        (5.9..7.5).contains(&gap),
        "the retry came {gap} s after the first attempt"
    );
    let log = wait_for_attempts(&app, &s, &webhook_id, 2).await;
    assert_eq!(log[0]["status_code"], Value::Null);
    assert!(
        log[0]["error"].as_str().unwrap().contains("5 s"),
        "{:?}",
        log[0]
    );
    let took = log[0]["duration_ms"].as_i64().unwrap();
    assert!((4900..6000).contains(&took), "{took}");
    assert_eq!(log[1]["status_code"], 200);
}

async fn a_restart_in_the_middle_of_a_schedule_neither_loses_nor_hastens_an_attempt(b: Backend) {
    let mut first = app(b).await;
    let s = ready_tenant(&first, "acme").await;
    let rx = Receiver::start(&[Answer::Status(500), Answer::Status(500)]).await;
    let webhook_id = subscribe(&first, &s, &rx.url(), &["claim.completed"], "secret").await;
    submit(&first, &s, claim("CLM-S")).await;
    // The second attempt fails; the third is due 5 s later. Stop the service now.
    rx.wait_for(2, Duration::from_secs(20)).await;
    wait_for_attempts(&first, &s, &webhook_id, 2).await;
    first.stop().await;
    let second = first
        .spawn_sibling(|c| c.webhook_allow_private = true)
        .await;
    let hits = rx.wait_for(3, Duration::from_secs(20)).await;
    let gap = hits[1].secs_to(&hits[2]);
    // Never early; late by at most the new process's start and first poll on a loaded
    // machine (CI runs many tests at once).
    assert!(
        (4.95..7.5).contains(&gap),
        "the third attempt came {gap} s after the second"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(rx.hits().len(), 3, "the attempt is made once");
    let log = wait_for_attempts(&second, &s, &webhook_id, 3).await;
    assert_eq!(log[2]["attempt"], 3);
    assert_eq!(log[2]["status_code"], 200);
}

async fn deleting_a_subscription_stops_its_deliveries(b: Backend) {
    let app = app(b).await;
    let s = ready_tenant(&app, "acme").await;
    let rx = Receiver::start(&[Answer::Status(500)]).await;
    let webhook_id = subscribe(&app, &s, &rx.url(), &["claim.completed"], "secret").await;
    submit(&app, &s, claim("CLM-D")).await;
    rx.wait_for(1, Duration::from_secs(20)).await;
    let r = app
        .call(
            Method::DELETE,
            &format!("/webhooks/{webhook_id}"),
            Some(&s.access),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    submit(&app, &s, claim("CLM-D2")).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        rx.hits().len(),
        1,
        "neither the retry nor a new event is delivered"
    );
    let gone = app
        .get(&format!("/webhooks/{webhook_id}/deliveries"), &s.access)
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
}

/// Queues `deliveries` in a transaction of their own, as the webhook stage does.
async fn queue(
    store: &pipeline::store::Store,
    deliveries: &[pipeline::store::NewDelivery],
) -> std::collections::HashSet<String> {
    let mut tx = store.begin_write().await.unwrap();
    let queued = store
        .enqueue_deliveries_in(&mut tx, deliveries)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    queued
}

/// What the webhook stage and the fused chain start is what the store says it queued
/// now: a redelivered event's delivery, queued before, starts no second attempt, and a
/// subscription deleted or paused since it was read gets nothing.
async fn a_delivery_is_queued_once_and_only_for_an_enabled_subscription(b: Backend) {
    let app = app(b).await;
    let s = ready_tenant(&app, "acme").await;
    let rx = Receiver::start(&[]).await;
    let webhook_id = subscribe(&app, &s, &rx.url(), &["claim.completed"], "secret").await;
    // Leased far ahead, so that no sender takes the rows: only the queueing is tested.
    let delivery = |id: &str, webhook_id: &str| pipeline::store::NewDelivery {
        delivery_id: id.into(),
        tenant_id: "acme".into(),
        webhook_id: webhook_id.into(),
        event_id: format!("evt_{id}"),
        event: "claim.completed".into(),
        payload: "{}".into(),
        leased_until: Some(i64::MAX / 2),
    };
    let queued = queue(
        &app.store,
        &[delivery("dlv_a", &webhook_id), delivery("dlv_b", "wh_gone")],
    )
    .await;
    assert_eq!(queued.into_iter().collect::<Vec<_>>(), ["dlv_a"]);
    let again = queue(&app.store, &[delivery("dlv_a", &webhook_id)]).await;
    assert!(again.is_empty(), "queued before: nothing new to start");
    // A redelivered event's record is fanned out again by the stage's own core: the
    // same deliveries, each kept once, for this subscription and a second one alike.
    let second = subscribe(&app, &s, &rx.url(), &["claim.completed"], "secret").await;
    let event = pipeline::model::DomainEvent::new(
        pipeline::model::EventKind::ClaimCompleted,
        &schemas::TenantId::parse("acme").unwrap(),
        "CLM-R",
        "2026-01-02T03:04:05.678Z".into(),
        json!({ "claim_id": "CLM-R" }),
    );
    let subscriptions: Vec<_> = app
        .store
        .subscriptions("acme")
        .await
        .unwrap()
        .into_iter()
        .map(|(subscription, _)| subscription)
        .collect();
    // Leased far ahead too, as the stage's own deliveries are not: a sender would
    // otherwise take them and call the receiver.
    let fanned = || {
        let mut deliveries = pipeline::stages::webhooks::process(&event, &subscriptions);
        for d in &mut deliveries {
            d.leased_until = Some(i64::MAX / 2);
        }
        deliveries
    };
    let mut first = fanned()
        .iter()
        .map(|d| d.webhook_id.clone())
        .collect::<Vec<_>>();
    first.sort();
    let mut both = vec![webhook_id.clone(), second];
    both.sort();
    assert_eq!(first, both, "one delivery per subscription");
    let once = queue(&app.store, &fanned()).await;
    assert_eq!(once.len(), 2, "{once:?}");
    let again = queue(&app.store, &fanned()).await;
    assert!(
        again.is_empty(),
        "the event redelivered queues nothing: {again:?}"
    );
    set_enabled(&app, &s, &webhook_id, false).await;
    let paused = queue(&app.store, &[delivery("dlv_c", &webhook_id)]).await;
    assert!(paused.is_empty(), "nothing for a paused subscription");
    assert!(rx.hits().is_empty());
}

async fn a_dead_endpoint_does_not_slow_another_tenants_deliveries(b: Backend) {
    let app = app(b).await;
    let slow_tenant = ready_tenant(&app, "slow").await;
    let fast_tenant = ready_tenant(&app, "fast").await;
    let dead = Receiver::start(&[Answer::Hang(Duration::from_secs(20)); 64]).await;
    let alive = Receiver::start(&[]).await;
    subscribe(
        &app,
        &slow_tenant,
        &dead.url(),
        &["claim.completed"],
        "secret",
    )
    .await;
    subscribe(
        &app,
        &fast_tenant,
        &alive.url(),
        &["claim.completed"],
        "secret",
    )
    .await;
    // Enough events to fill the dead endpoint's slots several times over.
    let batch: Vec<Value> = (0..60).map(|i| claim(&format!("CLM-{i}"))).collect();
    let r = app
        .call(
            Method::POST,
            "/claims/batch",
            Some(&slow_tenant.access),
            Some(Value::Array(batch)),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    dead.wait_for(1, Duration::from_secs(20)).await;
    let started = Instant::now();
    submit(&app, &fast_tenant, claim("CLM-FAST")).await;
    alive.wait_for(1, Duration::from_secs(20)).await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "the live endpoint waited {took:?}"
    );
    // The dead endpoint never holds more than its share of attempts at once.
    assert!(
        dead.hits().len() <= 16,
        "{} attempts in flight to one endpoint",
        dead.hits().len()
    );
}

async fn subscriptions_are_validated_and_private_targets_refused(b: Backend) {
    // The default: private targets refused.
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure").await;
    let cases = [
        (
            json!({"url": "http://127.0.0.1:9/hook", "events": ["claim.completed"], "secret": "s"}),
            "url",
        ),
        (
            json!({"url": "http://localhost:9/hook", "events": ["claim.completed"], "secret": "s"}),
            "url",
        ),
        (
            json!({"url": "http://[::ffff:10.0.0.1]/hook", "events": ["claim.completed"], "secret": "s"}),
            "url",
        ),
        (
            json!({"url": "http://169.254.169.254/latest", "events": ["claim.completed"], "secret": "s"}),
            "url",
        ),
        (
            json!({"url": "ftp://hooks.example.com/x", "events": ["claim.completed"], "secret": "s"}),
            "url",
        ),
        (
            json!({"url": "not a url", "events": ["claim.completed"], "secret": "s"}),
            "url",
        ),
        (
            json!({"url": "https://hooks.example.com/x", "events": ["claim.completed", "claim.exploded"], "secret": "s"}),
            "events[1]",
        ),
        (
            json!({"url": "https://hooks.example.com/x", "events": [], "secret": "s"}),
            "events",
        ),
        (
            json!({"url": "https://hooks.example.com/x", "events": ["claim.completed"], "secret": ""}),
            "secret",
        ),
    ];
    for (body, field) in cases {
        let r = app
            .call(
                Method::POST,
                "/webhooks",
                Some(&s.access),
                Some(body.clone()),
            )
            .await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {}",
            r.body
        );
        assert_eq!(r.body["error"]["code"], "VALIDATION_ERROR");
        assert_eq!(r.body["error"]["field"], field, "{body}");
    }
    let missing = app
        .call(
            Method::POST,
            "/webhooks",
            Some(&s.access),
            Some(json!({"url": "https://hooks.example.com/x", "events": ["claim.completed"]})),
        )
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.body["error"]["field"], "secret");
    let listed = app.get("/webhooks", &s.access).await;
    assert_eq!(listed.body["data"], json!([]), "nothing was created");

    // A public target is fine.
    let ok = app
        .call(Method::POST, "/webhooks", Some(&s.access), Some(json!({"url": "https://hooks.example.com/x", "events": ["claim.completed"], "secret": "s"})))
        .await;
    assert_eq!(ok.status, StatusCode::CREATED, "{}", ok.body);
}

async fn subscriptions_can_be_read_changed_and_deleted_by_their_tenant_only(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure").await;
    let other = app.session("globex", "tenant:configure").await;
    let r = app
        .call(
            Method::POST,
            "/webhooks",
            Some(&s.access),
            Some(json!({"url": "https://hooks.example.com/a", "events": ["claim.completed", "claim.completed", "claim.flagged"], "secret": "top-secret-value"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.body["webhook_id"].as_str().unwrap().to_owned();
    assert_eq!(
        r.headers["location"],
        format!("/api/v1/webhooks/{id}").as_str()
    );
    assert_eq!(
        r.body["events"],
        json!(["claim.completed", "claim.flagged"])
    );
    assert_eq!(r.body["enabled"], true);
    assert!(
        !r.body.to_string().contains("top-secret-value"),
        "the secret is never returned"
    );

    let got = app.get(&format!("/webhooks/{id}"), &s.access).await;
    assert_eq!(got.status, StatusCode::OK);
    assert!(got.body.get("secret").is_none());
    let p = app
        .call(
            Method::PATCH,
            &format!("/webhooks/{id}"),
            Some(&s.access),
            Some(json!({"enabled": false, "events": ["claim.blocked"]})),
        )
        .await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.body);
    assert_eq!(
        (p.body["enabled"].clone(), p.body["events"].clone()),
        (json!(false), json!(["claim.blocked"]))
    );
    assert_eq!(p.body["url"], "https://hooks.example.com/a");
    let bad = app
        .call(
            Method::PATCH,
            &format!("/webhooks/{id}"),
            Some(&s.access),
            Some(json!({"url": "gopher://x"})),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);

    // Another tenant sees nothing of it.
    for (m, path) in [
        (Method::GET, format!("/webhooks/{id}")),
        (Method::PATCH, format!("/webhooks/{id}")),
        (Method::DELETE, format!("/webhooks/{id}")),
        (Method::GET, format!("/webhooks/{id}/deliveries")),
    ] {
        let body = (m == Method::PATCH).then(|| json!({"enabled": true}));
        let r = app.call(m.clone(), &path, Some(&other.access), body).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{m} {path}");
    }
    assert_eq!(
        app.get("/webhooks", &other.access).await.body["data"],
        json!([])
    );
    assert_eq!(
        app.get("/webhooks", &s.access).await.body["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let d = app
        .call(
            Method::DELETE,
            &format!("/webhooks/{id}"),
            Some(&s.access),
            None,
        )
        .await;
    assert_eq!(d.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.get(&format!("/webhooks/{id}"), &s.access).await.status,
        StatusCode::NOT_FOUND
    );
}

async fn a_thin_subscription_gets_ids_status_and_outcome_signed_like_any_delivery(b: Backend) {
    let app = app(b).await;
    let s = ready_tenant(&app, "acme").await;
    let (full_rx, thin_rx) = (Receiver::start(&[]).await, Receiver::start(&[]).await);
    subscribe(&app, &s, &full_rx.url(), &["claim.completed"], "whsec-full").await;
    let r = app
        .call(
            Method::POST,
            "/webhooks",
            Some(&s.access),
            Some(json!({"url": thin_rx.url(), "events": ["claim.completed"], "secret": "whsec-thin", "payload": "thin"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["payload"], "thin");
    let thin_id = r.body["webhook_id"].as_str().unwrap().to_owned();
    submit(&app, &s, claim("CLM-1")).await;
    let full = full_rx.wait_for(1, Duration::from_secs(20)).await.remove(0);
    let thin = thin_rx.wait_for(1, Duration::from_secs(20)).await.remove(0);
    verify_with_standardwebhooks("whsec-thin", &thin);
    let (full, thin_body) = (full.json(), thin.json());
    assert_eq!(thin_body["id"], full["id"], "the same event");
    assert_eq!(thin_body["event"], "claim.completed");
    let c = app.get("/claims/CLM-1", &s.access).await.body;
    assert_eq!(
        thin_body["data"],
        json!({"claim_id": "CLM-1", "status": "completed", "outcome": "ADJUDICATED", "audit_id": c["audit_id"]}),
        "no amounts, scores or lines"
    );
    assert!(
        full["data"]["lines"].is_array(),
        "the full one is whole: {full}"
    );

    // Read back, switched to full by PATCH, and refused when neither.
    let got = app
        .get(&format!("/webhooks/{thin_id}"), &s.access)
        .await
        .body;
    assert_eq!(got["payload"], "thin");
    let r = app
        .call(
            Method::PATCH,
            &format!("/webhooks/{thin_id}"),
            Some(&s.access),
            Some(json!({"payload": "full"})),
        )
        .await;
    assert_eq!(
        (r.status, r.body["payload"].clone()),
        (StatusCode::OK, json!("full")),
        "{}",
        r.body
    );
    submit(&app, &s, claim("CLM-2")).await;
    let next = thin_rx.wait_for(2, Duration::from_secs(20)).await.remove(1);
    assert!(
        next.json()["data"]["lines"].is_array(),
        "full again: {}",
        next.json()
    );
    let r = app
        .call(
            Method::POST,
            "/webhooks",
            Some(&s.access),
            Some(json!({"url": thin_rx.url(), "events": ["claim.completed"], "secret": "x", "payload": "slim"})),
        )
        .await;
    assert!(r.status.is_client_error(), "{}", r.body);
}

async fn delivery_bodies_past_the_tenants_retention_are_dropped_and_their_log_stays(b: Backend) {
    let app = app(b).await;
    let (acme, globex) = (
        ready_tenant(&app, "acme").await,
        ready_tenant(&app, "globex").await,
    );
    let rx = Receiver::start(&[]).await;
    let mut subs = Vec::new();
    for s in [&acme, &globex] {
        let webhook_id = subscribe(&app, s, &rx.url(), &["claim.completed"], "whsec-r").await;
        submit(&app, s, claim("CLM-1")).await;
        let delivery = wait_for_attempts(&app, s, &webhook_id, 1).await[0]["delivery_id"]
            .as_str()
            .unwrap()
            .to_owned();
        subs.push((webhook_id, delivery));
    }
    // acme keeps bodies a day; globex the default 30.
    let patch = |body: Value| {
        app.call(
            Method::PATCH,
            "/tenant/settings",
            Some(&acme.access),
            Some(body),
        )
    };
    let r = patch(json!({"delivery_log_retention_days": 1})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["delivery_log_retention_days"], 1);
    for bad in [0, 3651] {
        let f = patch(json!({"delivery_log_retention_days": bad}))
            .await
            .assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
        assert_eq!(f.as_deref(), Some("delivery_log_retention_days"));
    }
    let globex_settings = app.get("/tenant/settings", &globex.access).await.body;
    assert_eq!(globex_settings["delivery_log_retention_days"], 30);

    // Two days on (the purge's clock is the caller's): acme's body goes, globex's stays.
    let later = pipeline::clock::now_ms() + 2 * 24 * 3600 * 1000;
    let purged = pipeline::webhooks::retention::purge(&app.store, later)
        .await
        .unwrap();
    assert_eq!(purged, 1);
    assert_eq!(
        pipeline::webhooks::retention::purge(&app.store, later)
            .await
            .unwrap(),
        0,
        "a second pass finds nothing"
    );
    let path = |(w, d): &(String, String)| format!("/webhooks/{w}/deliveries/{d}/redeliver");
    // The log stays; the body is gone, so it cannot be sent again.
    assert_eq!(attempts(&app, &acme, &subs[0].0).await.len(), 1);
    app.call(Method::POST, &path(&subs[0]), Some(&acme.access), None)
        .await
        .assert_error(StatusCode::CONFLICT, "CONFLICT");
    let r = app
        .call(Method::POST, &path(&subs[1]), Some(&globex.access), None)
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    wait_for_attempts(&app, &globex, &subs[1].0, 2).await;
}

async fn stats(app: &TestApp, s: &Session, webhook_id: &str) -> Value {
    let r = app
        .get(&format!("/webhooks/{webhook_id}/stats"), &s.access)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body
}

async fn an_endpoint_failing_for_a_day_is_disabled_announced_and_resumes_when_enabled(b: Backend) {
    let app = fast_app(b).await;
    let s = ready_tenant(&app, "acme").await;
    // 28 failures on the first day, 4 more a day later; then it answers.
    let dead = Receiver::start(&[Answer::Status(500); 32]).await;
    let watcher = Receiver::start(&[]).await;
    let dead_id = subscribe(&app, &s, &dead.url(), &["claim.completed"], "secret").await;
    subscribe(&app, &s, &watcher.url(), &["webhook.disabled"], "other").await;
    // Told of every completion: once it has a claim's event, that event's deliveries
    // were queued for every subscription (one transaction), so the dead one's fate
    // for it is settled.
    let live = Receiver::start(&[]).await;
    subscribe(&app, &s, &live.url(), &["claim.completed"], "live").await;
    for i in 0..6 {
        submit(&app, &s, claim(&format!("CLM-D{i}"))).await;
    }
    dead.wait_for(24, Duration::from_secs(60)).await;
    // Past the sender's once-a-second look at a failing subscription, so that the
    // next failures are looked at.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    submit(&app, &s, claim("CLM-D5B")).await;
    dead.wait_for(28, Duration::from_secs(60)).await;
    wait_for_attempts(&app, &s, &dead_id, 28).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let st = stats(&app, &s, &dead_id).await;
    let counts = (
        &st["window_s"],
        &st["attempts"],
        &st["failed"],
        &st["succeeded"],
    );
    assert_eq!(
        counts,
        (&json!(3600), &json!(28), &json!(28), &json!(0)),
        "{st}"
    );
    assert_eq!(st["consecutive_failures"], 28);
    // On /metrics: the subscription's attempts by result, and their durations.
    let metrics = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let labels = format!("tenant_id=\"acme\",webhook_id=\"{dead_id}\"");
    for line in [
        format!("claims_webhook_attempts_total{{{labels},result=\"failed\"}} 28"),
        format!("claims_webhook_attempts_total{{{labels},result=\"succeeded\"}} 0"),
        format!("claims_webhook_attempt_duration_seconds_count{{{labels}}} 28"),
        format!("claims_webhook_attempt_duration_seconds_bucket{{{labels},le=\"+Inf\"}} 28"),
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
    assert!(st["p99_ms"].as_i64().unwrap() >= st["p50_ms"].as_i64().unwrap());
    let w = app.get(&format!("/webhooks/{dead_id}"), &s.access).await;
    let enabled = &w.body["enabled"];
    assert_eq!(enabled, true, "28 failures within seconds are not a day");

    // A day later it still fails: disabled, and the other subscription is told.
    app.state.clock.advance(Duration::from_secs(24 * 3600 + 60));
    submit(&app, &s, claim("CLM-D6")).await;
    let told = watcher.wait_for(1, Duration::from_secs(30)).await;
    let event = told[0].json();
    assert_eq!(event["event"], "webhook.disabled", "{event}");
    assert_eq!(event["data"]["webhook_id"], dead_id.as_str());
    let w = app.get(&format!("/webhooks/{dead_id}"), &s.access).await;
    assert_eq!(w.body["enabled"], false, "{}", w.body);
    assert!(w.body["disabled_reason"]
        .as_str()
        .unwrap()
        .contains("24 hours"));
    let st = stats(&app, &s, &dead_id).await;
    assert!(st["disabled_at"].is_string(), "{st}");
    assert!(st["consecutive_failures"].as_i64().unwrap() >= 29);
    assert!(
        st["attempts"].as_i64().unwrap() < 28,
        "the first day's attempts are out of the hour: {st}"
    );
    // Disabled, it gets nothing, however many claims complete.
    let before = dead.hits().len();
    submit(&app, &s, claim("CLM-D7")).await;
    live.wait_for_claim("CLM-D7", Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        dead.hits().len(),
        before,
        "a disabled subscription is not called"
    );

    // Enabled again.
    let w = set_enabled(&app, &s, &dead_id, true).await;
    assert!(w.get("disabled_reason").is_none(), "{w}");
    // Its retry that was waiting goes out, and so do new events; the events of its
    // disabled time were not queued for it.
    submit(&app, &s, claim("CLM-D8")).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let resumed: Vec<String> = dead.hits()[before..]
            .iter()
            .map(|h| {
                h.json()["data"]["claim_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        if resumed.contains(&"CLM-D8".to_owned()) {
            assert!(resumed.contains(&"CLM-D6".to_owned()), "{resumed:?}");
            assert!(!resumed.contains(&"CLM-D7".to_owned()), "{resumed:?}");
            break;
        }
        assert!(Instant::now() < deadline, "not resumed: {resumed:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(watcher.hits().len(), 1, "one webhook.disabled");
}

async fn a_replay_since_an_outage_delivers_each_event_once_in_order_and_slows_no_one(b: Backend) {
    let app = fast_app(b).await;
    let s = ready_tenant(&app, "acme").await;
    let clock = &app.state.clock;
    let since = pipeline::clock::ms_to_rfc3339(clock.now_ms() - 1000);
    // Down for an hour of events, on the service's clock: a claim decided every six
    // minutes, and every attempt of its event fails, 4 each; then it answers.
    let down = Receiver::start(&[Answer::Status(500); 40]).await;
    let live = Receiver::start(&[]).await;
    let down_id = subscribe(&app, &s, &down.url(), &["claim.completed"], "secret").await;
    subscribe(&app, &s, &live.url(), &["claim.completed"], "secret").await;
    for i in 0..10 {
        let id = format!("CLM-O{i}");
        submit(&app, &s, claim(&id)).await;
        crate::pipeline::decided(&app, &s, &id).await;
        // Its four attempts fail and are logged before the clock moves on: a jump
        // while one is in flight would read as its lease running out.
        down.wait_for(4 * (i + 1), Duration::from_secs(30)).await;
        wait_for_attempts(&app, &s, &down_id, 4 * (i + 1)).await;
        clock.advance(Duration::from_secs(6 * 60));
    }
    let failed = down.wait_for(40, Duration::from_secs(60)).await;
    live.wait_for(10, Duration::from_secs(30)).await;
    let mut missed: Vec<(String, String)> = failed
        .iter()
        .map(|h| {
            let b = h.json();
            (
                b["timestamp"].as_str().unwrap().to_owned(),
                b["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    missed.sort();
    missed.dedup();
    assert_eq!(missed.len(), 10);
    let span = |v: &[(String, String)]| {
        let at = |i: usize| pipeline::clock::parse_rfc3339_ms(&v[i].0).unwrap();
        at(v.len() - 1) - at(0)
    };
    assert!(
        span(&missed) >= 54 * 60 * 1000,
        "an hour of events: {missed:?}"
    );

    let r = app
        .call(
            Method::POST,
            &format!("/webhooks/{down_id}/replay"),
            Some(&s.access),
            Some(json!({"since": since})),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(r.body["events"], 10, "{}", r.body);
    let job_id = r.body["job_id"].as_str().unwrap().to_owned();
    // Live deliveries meanwhile, to the other subscription: as quick as ever.
    for i in 0..10 {
        let sent = Instant::now();
        let id = format!("CLM-L{i}");
        submit(&app, &s, claim(&id)).await;
        // Within 5 s of being sent.
        let left = Duration::from_secs(5).saturating_sub(sent.elapsed());
        live.wait_for_claim(&id, left).await;
    }
    let replayed = |hits: Vec<Hit>| -> Vec<Hit> {
        hits.into_iter()
            .filter(|h| h.header("x-service-replay") == "true")
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while replayed(down.hits()).len() < 10 {
        assert!(
            Instant::now() < deadline,
            "replayed: {}",
            replayed(down.hits()).len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again = replayed(down.hits());
    // Each missed event once, in the order they happened, with its own id, signed.
    let got: Vec<(String, String)> = again
        .iter()
        .map(|h| {
            let b = h.json();
            (
                b["timestamp"].as_str().unwrap().to_owned(),
                b["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let ids = |v: &[(String, String)]| {
        let mut ids: Vec<String> = v.iter().map(|(_, id)| id.clone()).collect();
        ids.sort();
        ids
    };
    assert_eq!(got.len(), 10, "each once: {got:?}");
    assert_eq!(ids(&got), ids(&missed), "the missed events, each once");
    assert!(
        got.windows(2).all(|w| w[0].0 <= w[1].0),
        "in the order they happened: {got:?}"
    );
    for h in &again {
        assert_eq!(h.header("webhook-id"), h.json()["id"].as_str().unwrap());
        verify_with_standardwebhooks("secret", h);
    }
    // Nothing of the live stream is marked a replay; the job is done.
    assert!(live
        .hits()
        .iter()
        .all(|h| h.header("x-service-replay").is_empty()));
    let job = app.get(&format!("/jobs/{job_id}"), &s.access).await;
    assert_eq!(
        (&job.body["state"], &job.body["total"], &job.body["done"]),
        (&json!("done"), &json!(10), &json!(10)),
        "{}",
        job.body
    );

    // Bad windows and kinds change nothing.
    for (body, field) in [
        (json!({"since": "yesterday"}), "since"),
        (json!({"since": since, "until": since}), "until"),
        (
            json!({"since": since, "events": ["claim.nope"]}),
            "events[0]",
        ),
    ] {
        let r = app
            .call(
                Method::POST,
                &format!("/webhooks/{down_id}/replay"),
                Some(&s.access),
                Some(body),
            )
            .await;
        assert_eq!(
            r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
                .as_deref(),
            Some(field)
        );
    }
    let r = app
        .call(
            Method::POST,
            "/webhooks/wh_nope/replay",
            Some(&s.access),
            Some(json!({"since": since})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}
