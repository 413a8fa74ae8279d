//! Decision receipts (contract part 2, "Decisions you can explain, test and redo"):
//! `GET /claims/{claim_id}/decision` tells every rule of the rulebook in order, the
//! fraud score, the eligibility and the lines, agrees with the claim, follows an
//! officer's decision, and reads the same after a restart.

use std::collections::BTreeMap;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::benefits::plan_and_member;
use crate::claims::{ready_tenant, submit, submit_batch};
use crate::pipeline::decided;
use crate::support::{Backend, Session, TestApp};
use crate::workflow::{claim_task, completed, transition, OFFICER};

crate::all_backends!(
    a_receipt_tells_every_rule_in_order_and_follows_an_officers_decision,
    receipts_of_a_hundred_claims_agree_with_them_and_read_the_same_after_a_restart,
);

/// Four rules: one that matches and flags, one that does not, one whose expression
/// fails at run time, and an adjust rule.
async fn four_rules(app: &TestApp, s: &Session) {
    app.publish_rulebook(
        &s.access,
        json!([
            {"rule_id": "big", "when": "claim.claim_amount > 10000", "action": "flag", "reason_code": "BIG"},
            {"rule_id": "tiny", "when": "claim.claim_amount < 100", "action": "decline", "reason_code": "TINY"},
            {"rule_id": "broken", "when": "claim.metadata['nope'] == 'x'", "action": "flag", "reason_code": "ODD"},
            {"rule_id": "cap", "when": "claim.claim_amount > 0", "action": "adjust",
             "approved_amount": "claim.claim_amount - 100", "reason_code": "CAP"},
        ]),
    )
    .await;
}

async fn receipt(app: &TestApp, s: &Session, id: &str) -> Value {
    let r = app.get(&format!("/claims/{id}/decision"), &s.access).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body
}

/// What a receipt must say alike with the claim it explains.
fn assert_agrees(receipt: &Value, claim: &Value) {
    for field in [
        "claim_id",
        "outcome",
        "approved_amount",
        "audit_id",
        "lines",
    ] {
        assert_eq!(receipt[field], claim[field], "{field}: {receipt} / {claim}");
    }
    assert_eq!(receipt["rulebook_version"], claim["rulebook_version"]);
    assert_eq!(receipt["reasons"], claim["reasons"]);
}

async fn a_receipt_tells_every_rule_in_order_and_follows_an_officers_decision(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    plan_and_member(&app, &s, "M-1", json!([{"from": "2026-01-01"}])).await;
    four_rules(&app, &s).await;
    let r = submit(
        &app,
        &s,
        json!({"claim_id": "C-1", "member_id": "M-1", "provider_id": "PRV-1", "claim_amount": 12500,
               "service_date": "2026-01-15", "metadata": {"channel": "api"},
               "lines": [{"procedure_code": "99213", "units": 1, "amount": 12500}]}),
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let claim = decided(&app, &s, "C-1").await;
    assert_eq!(claim["status"], "pending_review", "{claim}");

    let first = receipt(&app, &s, "C-1").await;
    assert_agrees(&first, &claim);
    let rules = first["rules"].as_array().unwrap();
    let said: Vec<(&str, &str, bool)> = rules
        .iter()
        .map(|r| {
            (
                r["rule_id"].as_str().unwrap(),
                r["action"].as_str().unwrap(),
                r["matched"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        said,
        [
            ("big", "flag", true),
            ("tiny", "decline", false),
            ("broken", "flag", false),
            ("cap", "adjust", true),
        ],
        "every rule, in rulebook order: {first}"
    );
    assert_eq!(rules[0]["value"], "when evaluated to true");
    assert_eq!(rules[1]["value"], "when evaluated to false");
    assert!(
        rules[2]["error"].as_str().unwrap().contains("nope"),
        "{first}"
    );
    assert!(rules[2].get("value").is_none(), "{first}");
    assert!(
        rules[3]["value"]
            .as_str()
            .unwrap()
            .ends_with("approved_amount = 12400"),
        "{first}"
    );
    assert_eq!(
        first["rulebook_id"].as_str().map(|s| s.is_empty()),
        Some(false)
    );
    assert_eq!(first["eligibility"], "covered");
    let fraud = app.get("/claims/C-1/fraud", &s.access).await.body;
    assert_eq!(first["fraud"]["score"], fraud["fraud_score"]);
    assert_eq!(first["fraud"]["model_version"], fraud["model_version"]);
    assert_eq!(first["fraud"]["reasons"], fraud["reasons"]);
    assert!(first.get("officer").is_none(), "{first}");
    assert!(first["decided_at"].as_str().unwrap().ends_with('Z'));

    // An officer's approval: the receipt tells their outcome and amount, and still the
    // rules and the fraud score the claim was reviewed for.
    let officer = app.session("acme", OFFICER).await;
    let task = claim["task_id"].as_str().unwrap();
    assert_eq!(
        claim_task(&app, &officer, task).await.status,
        StatusCode::OK
    );
    let a = transition(
        &app,
        &officer,
        task,
        json!({"action": "approve", "approved_amount": 9000}),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let claim = completed(&app, &s, "C-1").await;
    let after = receipt(&app, &s, "C-1").await;
    assert_agrees(&after, &claim);
    assert_eq!(
        (after["outcome"].as_str(), after["approved_amount"].as_i64()),
        (Some("APPROVED"), Some(9000))
    );
    assert_ne!(after["audit_id"], first["audit_id"]);
    let sub = crate::support::jwt::parts(&officer.access).1["sub"].clone();
    assert_eq!(after["officer"], sub);
    for field in ["rules", "fraud", "eligibility", "rulebook_id"] {
        assert_eq!(after[field], first[field], "{field}");
    }

    // Unknown, another tenant's, undecided, and without the scope.
    app.get("/claims/NOPE/decision", &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");
    let other = ready_tenant(&app, "globex").await;
    app.get("/claims/C-1/decision", &other.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");
    let writer = app.session("acme", "claims:write").await;
    app.get("/claims/C-1/decision", &writer.access)
        .await
        .assert_error(StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
}

async fn receipts_of_a_hundred_claims_agree_with_them_and_read_the_same_after_a_restart(
    b: Backend,
) {
    let mut first = TestApp::spawn(b).await;
    let s = ready_tenant(&first, "acme").await;
    plan_and_member(&first, &s, "M-1", json!([{"from": "2026-01-01"}])).await;
    four_rules(&first, &s).await;
    // Flagged, declined, adjusted; members on a plan and off the roster; one line or two.
    let items: Vec<Value> = (0..100)
        .map(|i| {
            let amount = [50, 4_000, 9_999, 20_000][i % 4] + i as i64;
            let member = if i % 3 == 0 { "M-1" } else { "M-X" };
            let lines = if i % 2 == 0 {
                json!([{"procedure_code": "99213", "units": 1, "amount": amount}])
            } else {
                json!([{"procedure_code": "99213", "units": 1, "amount": amount - 10},
                       {"procedure_code": "80053", "units": 1, "amount": 10}])
            };
            json!({"claim_id": format!("C-{i:03}"), "member_id": member, "provider_id": "PRV-1",
                   "claim_amount": amount, "service_date": format!("2026-02-{:02}", 1 + i % 28),
                   "metadata": {"nope": "y"}, "lines": lines})
        })
        .collect();
    let r = submit_batch(&first, &s, items).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let mut before = BTreeMap::new();
    let mut outcomes = BTreeMap::<String, usize>::new();
    for i in 0..100 {
        let id = format!("C-{i:03}");
        let claim = decided(&first, &s, &id).await;
        let got = receipt(&first, &s, &id).await;
        assert_agrees(&got, &claim);
        assert_eq!(got["rules"].as_array().unwrap().len(), 4, "{got}");
        *outcomes
            .entry(claim["outcome"].as_str().unwrap().to_owned())
            .or_default() += 1;
        before.insert(id, got);
    }
    assert!(outcomes.len() >= 3, "a mix of outcomes: {outcomes:?}");
    first.stop().await;

    let second = first.spawn_sibling(|_| {}).await;
    for (id, was) in &before {
        assert_eq!(&receipt(&second, &s, id).await, was, "{id}");
    }
}
