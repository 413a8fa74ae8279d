//! Backtesting (contract part 2, "Decisions you can explain, test and redo"):
//! `POST /rulebooks/{rulebook_id}/backtest` runs the tenant's decided claims through a
//! draft on the facts they were decided with, tells the transitions and the dollars
//! against the decisions they got, and changes nothing but one audit record.

use std::collections::BTreeMap;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::benefits::plan_and_member;
use crate::claims::{ready_tenant, submit_batch};
use crate::pipeline::decided;
use crate::support::{Backend, Session, TestApp};

crate::all_backends!(a_backtest_compares_a_draft_with_the_decisions_and_changes_nothing);

/// A draft that declines what the baseline flags above 20,000, and reads the member's
/// history and the member as the baseline never did.
async fn draft(app: &TestApp, s: &Session) -> String {
    let r = app
        .call(
            Method::POST,
            "/rulebooks",
            Some(&s.access),
            Some(json!({"name": "Stricter", "rules": [
                {"rule_id": "huge", "when": "claim.claim_amount > 20000", "action": "decline", "reason_code": "TOO_BIG"},
                {"rule_id": "big", "when": "claim.claim_amount > 10000", "action": "flag", "reason_code": "BIG"},
                {"rule_id": "busy", "when": "member_history.claims_last_24h > 1000", "action": "block", "reason_code": "BUSY"},
                {"rule_id": "old", "when": "member != null && member.age > 150", "action": "block", "reason_code": "OLD"},
            ]})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["status"], "draft");
    r.body["rulebook_id"].as_str().unwrap().to_owned()
}

async fn backtest(app: &TestApp, s: &Session, id: &str, body: Value) -> crate::support::Reply {
    app.call(
        Method::POST,
        &format!("/rulebooks/{id}/backtest"),
        Some(&s.access),
        Some(body),
    )
    .await
}

async fn a_backtest_compares_a_draft_with_the_decisions_and_changes_nothing(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    plan_and_member(&app, &s, "M-1", json!([{"from": "2026-01-01"}])).await;
    let baseline = app
        .publish_rulebook(
            &s.access,
            json!([{"rule_id": "big", "when": "claim.claim_amount > 10000", "action": "flag", "reason_code": "BIG"}]),
        )
        .await;
    // Members on a plan (priced against their year) and off the roster.
    let items: Vec<Value> = (0..60)
        .map(|i| {
            let amount = [500, 5_000, 12_000, 30_000][i % 4] + i as i64;
            // The member's adjudicated claims pass the plan's deductible part way.
            let member = if i % 4 < 2 { "M-1" } else { "M-X" };
            json!({"claim_id": format!("C-{i:03}"), "member_id": member, "provider_id": "PRV-1",
                   "claim_amount": amount, "service_date": format!("2026-03-{:02}", 1 + i % 28),
                   "lines": [{"procedure_code": "99213", "units": 1, "amount": amount}]})
        })
        .collect();
    let r = submit_batch(&app, &s, items.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let mut decisions = BTreeMap::new();
    for item in &items {
        let id = item["claim_id"].as_str().unwrap();
        let c = decided(&app, &s, id).await;
        decisions.insert(id.to_owned(), c);
    }
    // What the draft must make of each: a decline above 20,000, else what it got.
    let mut expected_transitions = BTreeMap::<String, u64>::new();
    let (mut base_total, mut cand_total, mut changed) = (0, 0, 0);
    let mut changed_ids = Vec::new();
    for item in &items {
        let id = item["claim_id"].as_str().unwrap();
        let c = &decisions[id];
        let (outcome, amount) = (
            c["outcome"].as_str().unwrap().to_owned(),
            c["approved_amount"].as_i64().unwrap(),
        );
        let candidate = if item["claim_amount"].as_i64().unwrap() > 20_000 {
            ("DECLINED".to_owned(), 0)
        } else {
            (outcome.clone(), amount)
        };
        *expected_transitions
            .entry(format!("{outcome}->{}", candidate.0))
            .or_default() += 1;
        base_total += amount;
        cand_total += candidate.1;
        if (outcome, amount) != candidate {
            changed += 1;
            changed_ids.push(id.to_owned());
        }
    }
    assert!(changed >= 15, "the draft changes every claim above 20,000");
    let paid_on_plan = items
        .iter()
        .filter(|i| i["member_id"] == "M-1")
        .filter(|i| decisions[i["claim_id"].as_str().unwrap()]["approved_amount"] != 0)
        .count();
    assert!(paid_on_plan > 0, "some claims pay past the deductible");

    let id = draft(&app, &s).await;
    let r = backtest(&app, &s, &id, json!({})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let report = &r.body;
    assert_eq!(report["rulebook_id"], id.as_str());
    assert_eq!(report["baseline_rulebook_id"], baseline.as_str());
    assert_eq!(report["claims"], 60, "{report}");
    assert_eq!(report["changed"], changed, "{report}");
    let transitions: BTreeMap<String, u64> =
        serde_json::from_value(report["transitions"].clone()).unwrap();
    assert_eq!(transitions, expected_transitions, "{report}");
    assert_eq!(
        report["approved_amount"],
        json!({"baseline": base_total, "candidate": cand_total}),
        "{report}"
    );
    let samples = report["samples"].as_array().unwrap();
    assert_eq!(samples.len(), changed.min(20) as usize, "{report}");
    for (sample, id) in samples.iter().zip(&changed_ids) {
        assert_eq!(sample["claim_id"], id.as_str(), "oldest first: {report}");
        let c = &decisions[id];
        assert_eq!(sample["baseline"]["outcome"], c["outcome"]);
        assert_eq!(sample["baseline"]["approved_amount"], c["approved_amount"]);
        assert_eq!(
            sample["candidate"],
            json!({"outcome": "DECLINED", "approved_amount": 0})
        );
        assert_eq!(sample["rules_matched"], json!(["huge", "big"]), "{sample}");
    }

    // A window and a limit.
    let r = backtest(&app, &s, &id, json!({"limit": 7})).await;
    assert_eq!(r.body["claims"], 7, "{}", r.body);
    let r = backtest(&app, &s, &id, json!({"since": "2999-01-01T00:00:00Z"})).await;
    assert_eq!(
        (
            r.status,
            r.body["claims"].clone(),
            r.body["baseline_rulebook_id"].clone()
        ),
        (StatusCode::OK, json!(0), Value::Null),
        "{}",
        r.body
    );
    let r = backtest(&app, &s, &id, json!({"until": "2000-01-01T00:00:00Z"})).await;
    assert_eq!(r.body["claims"], 0, "{}", r.body);

    // Nothing published, decided or announced: the claims read as before, the baseline
    // is still active, and the one trace is an audit record per backtest.
    for (id, before) in &decisions {
        let now = app.get(&format!("/claims/{id}"), &s.access).await.body;
        for f in ["status", "outcome", "approved_amount", "audit_id"] {
            assert_eq!(now[f], before[f], "{id} {f}");
        }
    }
    let active = app.get("/rulebooks/active", &s.access).await.body;
    assert_eq!(active["rulebook_id"], baseline.as_str());
    assert_eq!(
        app.get(&format!("/rulebooks/{id}"), &s.access).await.body["status"],
        "draft"
    );
    let audit = app.get("/audit?limit=500", &s.access).await.body;
    let noted = audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "rulebook.backtested" && r["entity_id"] == id.as_str())
        .count();
    assert_eq!(noted, 4, "{audit}");

    // Refusals, before anything runs.
    for (body, field) in [
        (json!({"limit": 0}), "limit"),
        (json!({"limit": 1_000_001}), "limit"),
        (json!({"since": "yesterday"}), "since"),
        (
            json!({"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}),
            "until",
        ),
    ] {
        let r = backtest(&app, &s, &id, body.clone()).await;
        let f = r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
        assert_eq!(f.as_deref(), Some(field), "{body}");
    }
    backtest(&app, &s, "rb_nope", json!({}))
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    let other = ready_tenant(&app, "globex").await;
    backtest(&app, &other, &id, json!({}))
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    let reader = app.session("acme", "rulebooks:read").await;
    backtest(&app, &reader, &id, json!({}))
        .await
        .assert_error(StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
}
