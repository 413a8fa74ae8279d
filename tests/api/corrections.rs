//! Corrected and voided claims (contract part 2): a replacement reverses the claim it
//! replaces and is adjudicated anew, a void is only the reversal; the member's
//! accumulators move back; the replaced claim gains `superseded_by` and its event.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::benefits::plan_and_member;
use crate::claims::{ready_tenant, submit};
use crate::pipeline::{decided, events};
use crate::support::{Backend, Session, TestApp};

crate::all_backends!(
    a_replacement_reverses_the_claim_it_replaces_and_is_adjudicated_anew,
    a_void_reverses_the_claim_and_pays_nothing,
    a_replacement_must_name_a_completed_claim_of_the_member_not_replaced_yet,
);

/// Members M-1 and M-2 on the plan of `benefits` (a 500.00 deductible, 20%
/// coinsurance).
async fn members(app: &TestApp, s: &Session) {
    for m in ["M-1", "M-2"] {
        plan_and_member(app, s, m, json!([{"from": "2026-01-01"}])).await;
    }
}

fn claim(id: &str, member: &str, amount: i64, day: &str) -> Value {
    json!({
        "claim_id": id, "member_id": member, "provider_id": "PRV-1", "claim_amount": amount,
        "service_date": day, "lines": [{"procedure_code": "99213", "units": 1, "amount": amount}]
    })
}

fn correction(id: &str, frequency: &str, replaces: &str, amount: i64, day: &str) -> Value {
    let mut c = claim(id, "M-1", amount, day);
    c["frequency"] = json!(frequency);
    c["replaces_claim_id"] = json!(replaces);
    c
}

async fn accumulators(app: &TestApp, s: &Session) -> Value {
    app.get("/members/M-1/accumulators?year=2026", &s.access)
        .await
        .body
}

async fn a_replacement_reverses_the_claim_it_replaces_and_is_adjudicated_anew(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    members(&app, &s).await;
    submit(&app, &s, claim("C-1", "M-1", 30000, "2026-01-10")).await;
    submit(&app, &s, claim("C-2", "M-1", 40000, "2026-02-10")).await;
    let original = decided(&app, &s, "C-1").await;
    assert_eq!(decided(&app, &s, "C-2").await["approved_amount"], 16000);

    // C-1 corrected to 100.00: C-1's 300.00 of deductible comes back, then the
    // replacement takes what is left after C-2 (100.00 of it).
    let r = submit(
        &app,
        &s,
        correction("R-1", "replacement", "C-1", 10000, "2026-01-10"),
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let replacement = decided(&app, &s, "R-1").await;
    assert_eq!(replacement["outcome"], "ADJUDICATED", "{replacement}");
    assert_eq!(replacement["frequency"], "replacement");
    assert_eq!(replacement["replaces_claim_id"], "C-1");
    assert_eq!(
        replacement["lines"][0]["adjudication"]["member_responsibility"],
        json!({"deductible": 10000, "coinsurance": 0, "copay": 0})
    );
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let want = json!({"member_id": "M-1", "year": 2026, "deductible_met": 30000,
                      "out_of_pocket_met": 34000, "paid": 16000, "visits": {"99213": 2}});
    while accumulators(&app, &s).await != want && std::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(accumulators(&app, &s).await, want);

    // The replaced claim keeps its outcome and names what replaced it.
    let now = app.get("/claims/C-1", &s.access).await.body;
    assert_eq!(now["superseded_by"], "R-1");
    assert_eq!(now["outcome"], original["outcome"]);
    assert_eq!(now["approved_amount"], original["approved_amount"]);
    let told = events(&app, "acme", "C-1").await;
    let replaced = told
        .iter()
        .find(|e| e["event"] == "claim.replaced")
        .expect("claim.replaced on the replaced claim's key");
    assert_eq!(
        replaced["data"],
        json!({"claim_id": "C-1", "replaced_by": "R-1", "audit_id": replacement["audit_id"]})
    );
}

async fn a_void_reverses_the_claim_and_pays_nothing(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    members(&app, &s).await;
    submit(&app, &s, claim("C-1", "M-1", 30000, "2026-01-10")).await;
    decided(&app, &s, "C-1").await;
    let r = submit(
        &app,
        &s,
        correction("V-1", "void", "C-1", 30000, "2026-01-10"),
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let void = decided(&app, &s, "V-1").await;
    assert_eq!(
        (void["outcome"].as_str(), void["approved_amount"].as_i64()),
        (Some("DECLINED"), Some(0))
    );
    assert_eq!(void["reasons"][0]["code"], "VOID", "{void}");
    assert_eq!(void["lines"][0]["adjudication"]["status"], "denied");
    let zero = json!({"member_id": "M-1", "year": 2026, "deductible_met": 0,
                      "out_of_pocket_met": 0, "paid": 0, "visits": {}});
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while accumulators(&app, &s).await != zero && std::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(accumulators(&app, &s).await, zero);
    assert_eq!(
        app.get("/claims/C-1", &s.access).await.body["superseded_by"],
        "V-1"
    );
    let told = events(&app, "acme", "C-1").await;
    assert!(
        told.iter()
            .any(|e| e["event"] == "claim.voided" && e["data"]["replaced_by"] == "V-1"),
        "{told:?}"
    );
    // A voided claim cannot be voided again.
    submit(
        &app,
        &s,
        correction("V-2", "void", "C-1", 30000, "2026-01-10"),
    )
    .await
    .assert_error(StatusCode::CONFLICT, "CONFLICT");
}

async fn a_replacement_must_name_a_completed_claim_of_the_member_not_replaced_yet(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    members(&app, &s).await;
    app.publish_rulebook(&s.access, json!([{"rule_id": "big", "when": "claim.claim_amount > 50000", "action": "flag", "reason_code": "BIG"}])).await;
    submit(&app, &s, claim("C-1", "M-1", 30000, "2026-01-10")).await;
    submit(&app, &s, claim("C-BIG", "M-1", 60000, "2026-01-11")).await;
    submit(&app, &s, claim("C-OTHER", "M-2", 30000, "2026-01-12")).await;
    decided(&app, &s, "C-1").await;
    decided(&app, &s, "C-OTHER").await;
    assert_eq!(decided(&app, &s, "C-BIG").await["status"], "pending_review");

    let field = |r: crate::support::Reply, status, code| r.assert_error(status, code);
    let replace = |id: &str, of: &str| correction(id, "replacement", of, 20000, "2026-01-10");
    assert_eq!(
        field(
            submit(&app, &s, replace("R-0", "NOPE")).await,
            StatusCode::NOT_FOUND,
            "CLAIM_NOT_FOUND"
        )
        .as_deref(),
        Some("replaces_claim_id")
    );
    assert_eq!(
        field(
            submit(&app, &s, replace("R-0", "C-BIG")).await,
            StatusCode::CONFLICT,
            "CONFLICT"
        )
        .as_deref(),
        Some("replaces_claim_id"),
        "a claim under review is not completed"
    );
    assert_eq!(
        field(
            submit(&app, &s, replace("R-0", "C-OTHER")).await,
            StatusCode::CONFLICT,
            "CONFLICT"
        )
        .as_deref(),
        Some("replaces_claim_id"),
        "another member's claim"
    );
    let mut no_target = claim("R-0", "M-1", 20000, "2026-01-10");
    no_target["frequency"] = json!("replacement");
    assert_eq!(
        field(
            submit(&app, &s, no_target).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "VALIDATION_ERROR"
        )
        .as_deref(),
        Some("replaces_claim_id")
    );
    let mut original_naming = claim("R-0", "M-1", 20000, "2026-01-10");
    original_naming["replaces_claim_id"] = json!("C-1");
    assert_eq!(
        field(
            submit(&app, &s, original_naming).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "VALIDATION_ERROR"
        )
        .as_deref(),
        Some("replaces_claim_id")
    );
    // Two replacements of one claim in one batch: the first is accepted, the second
    // refused; nothing of the refused one is stored.
    let r = app
        .call(
            Method::POST,
            "/claims/batch",
            Some(&s.access),
            Some(json!([replace("R-1", "C-1"), replace("R-2", "C-1")])),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["results"][0]["status"], "received", "{}", r.body);
    assert_eq!(
        r.body["results"][1]["error"]["code"], "CONFLICT",
        "{}",
        r.body
    );
    assert_eq!(r.body["results"][1]["error"]["field"], "replaces_claim_id");
    app.get("/claims/R-2", &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");
    // Subscriptions may name the new kinds.
    let hook = app
        .call(
            Method::POST,
            "/webhooks",
            Some(&s.access),
            Some(json!({"url": "https://example.com/hook", "events": ["claim.replaced", "claim.voided"], "secret": "s3cret-s3cret"})),
        )
        .await;
    assert_eq!(hook.status, StatusCode::CREATED, "{}", hook.body);
}
