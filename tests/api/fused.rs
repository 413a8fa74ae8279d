//! The embedded log's fused chain (validate → rules → fraud → decide as one consumer,
//! `CLAIMS_FUSE_STAGES`): it takes over from separate stages only once nothing waits on
//! the topics between them, so switching either way leaves no claim behind, and the
//! fraud state carries across.

use reqwest::StatusCode;

use crate::claims::{claim, ready_tenant, submit};
use crate::pipeline::decided;
use crate::support::{Backend, Session, TestApp};

crate::both_backends!(switching_between_separate_and_fused_stages_leaves_no_claim_behind);

async fn accepted(app: &TestApp, s: &Session, id: &str) {
    let r = submit(app, s, claim(id)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
}

/// Records ever written to `claims.validated`, which only the separate stages write.
async fn validated(app: &TestApp) -> i64 {
    let topic = app.state.topics.validated.clone();
    app.state.bus.describe(&[topic]).await.unwrap()[0].end_offset_total
}

async fn switching_between_separate_and_fused_stages_leaves_no_claim_behind(b: Backend) {
    // Apart, as configured: the claim crosses every topic between the stages.
    let mut first = TestApp::spawn_with(b, |s| s.fuse_stages = false).await;
    let s = ready_tenant(&first, "acme").await;
    accepted(&first, &s, "CLM-1").await;
    let one = decided(&first, &s, "CLM-1").await;
    assert_eq!(one["status"], "completed", "{one}");
    assert_eq!(validated(&first).await, 1);
    first.stop().await;

    // Only intake and validate: the next claim waits on claims.validated for rules.
    let mut partial = first
        .spawn_sibling_running(Some(&["api", "validate"]), |_| {})
        .await;
    accepted(&partial, &s, "CLM-2").await;
    partial.records_of(&partial.state.topics.validated, 2).await;
    partial.stop().await;

    // Every stage, fusing allowed: a claim is waiting between the stages, so they run
    // apart and finish it.
    let mut second = first.spawn_sibling(|_| {}).await;
    decided(&second, &s, "CLM-2").await;
    accepted(&second, &s, "CLM-3").await;
    decided(&second, &s, "CLM-3").await;
    assert_eq!(validated(&second).await, 3, "the stages ran apart");
    second.stop().await;

    // Restarted with nothing waiting: the chain decides, and the topics between the
    // stages stay as they were.
    let third = first.spawn_sibling(|_| {}).await;
    accepted(&third, &s, "CLM-4").await;
    let four = decided(&third, &s, "CLM-4").await;
    assert_eq!(validated(&third).await, 3, "the chain ran");
    assert_eq!(four["rulebook_version"], one["rulebook_version"], "{four}");
    assert!(four["audit_id"].is_string(), "{four}");
    // The member's history came through every switch: CLM-4 repeats CLM-1.
    let fraud = third.get("/claims/CLM-4/fraud", &s.access).await;
    let duplicate = fraud.body["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["code"] == "NEAR_DUPLICATE")
        .unwrap_or_else(|| panic!("{}", fraud.body));
    assert!(
        duplicate["detail"].as_str().unwrap().contains("CLM-1"),
        "{}",
        fraud.body
    );
    let decisions = third.state.store.audit_counts("acme").await.unwrap();
    assert_eq!(decisions.len(), 4, "{decisions:?}");
    assert!(decisions.values().all(|n| *n == 1), "{decisions:?}");
}
