//! Members' benefits end to end (contract part 2: Plans and members, Line-level
//! adjudication): eligibility on the service date, a deductible and coinsurance taken
//! across a member's claims in acceptance order, visit limits, the accumulators, and
//! their restoration from `state.accumulators` after a restart.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::claims::{ready_tenant, submit};
use crate::pipeline::decided;
use crate::support::{Backend, Session, TestApp};

crate::all_backends!(
    a_deductible_is_met_across_claims_in_order_then_coinsurance_applies,
    eligibility_declines_members_not_covered_and_unknown_ones_when_required,
    a_visit_limit_reached_denies_the_line_with_co_119,
    an_officers_approval_counts_in_the_year_and_a_review_alone_does_not,
    the_accumulators_are_restored_after_a_restart,
    a_deny_line_rule_denies_the_lines_it_matches_with_its_carc,
);

/// 500.00 deductible, 20% coinsurance, 3,000.00 out-of-pocket maximum; two visits of
/// 97110 a year.
pub(crate) async fn plan_and_member(app: &TestApp, s: &Session, member: &str, coverage: Value) {
    let r = app
        .call(
            Method::POST,
            "/plans",
            Some(&s.access),
            Some(json!({"plan_id": "PPO", "name": "PPO", "benefits": {
                "deductible": 50000, "coinsurance_pct": 20, "out_of_pocket_max": 300000,
                "visit_limits": {"97110": 2}}})),
        )
        .await;
    assert!(
        r.status == StatusCode::CREATED || r.status == StatusCode::CONFLICT,
        "{}",
        r.body
    );
    let r = app
        .call(
            Method::POST,
            "/members",
            Some(&s.access),
            Some(
                json!({"member_id": member, "date_of_birth": "1980-02-03", "sex": "F",
                        "plan_id": "PPO", "coverage": coverage}),
            ),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
}

/// A one-line claim of the member, on a day of its own so that no two read as
/// near-duplicates.
fn claim(id: &str, member: &str, amount: i64, code: &str, day: &str) -> Value {
    json!({
        "claim_id": id, "member_id": member, "provider_id": "PRV-1", "claim_amount": amount,
        "service_date": day, "lines": [{"procedure_code": code, "units": 1, "amount": amount}]
    })
}

/// Every line: billed = approved + adjustments, and the member's share is its PR
/// adjustments; the claim's amount is the sum of its lines'.
fn assert_balanced(c: &Value) {
    let mut total = 0;
    for l in c["lines"].as_array().unwrap() {
        let a = &l["adjudication"];
        let adjustments: Vec<&Value> = a["adjustments"].as_array().unwrap().iter().collect();
        let adjusted: i64 = adjustments
            .iter()
            .map(|x| x["amount"].as_i64().unwrap())
            .sum();
        let approved = a["approved_amount"].as_i64().unwrap();
        assert_eq!(l["amount"].as_i64().unwrap(), approved + adjusted, "{l}");
        let pr: i64 = adjustments
            .iter()
            .filter(|x| x["group"] == "PR")
            .map(|x| x["amount"].as_i64().unwrap())
            .sum();
        let share = &a["member_responsibility"];
        let owed: i64 = ["deductible", "coinsurance", "copay"]
            .iter()
            .map(|k| share[k].as_i64().unwrap())
            .sum();
        assert_eq!(pr, owed, "{l}");
        total += approved;
    }
    assert_eq!(c["approved_amount"].as_i64().unwrap(), total, "{c}");
}

/// Polls the member's accumulators until `check` holds (they are written with the
/// decisions, so this only waits for the claims to be decided).
async fn accumulators(app: &TestApp, s: &Session, member: &str, want: Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = app
            .get(
                &format!("/members/{member}/accumulators?year=2026"),
                &s.access,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        if r.body == want || Instant::now() > deadline {
            assert_eq!(r.body, want);
            return r.body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn codes(c: &Value, line: usize) -> Vec<String> {
    c["lines"][line]["adjudication"]["adjustments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            format!(
                "{}-{}:{}",
                a["group"].as_str().unwrap(),
                a["carc"].as_str().unwrap(),
                a["amount"]
            )
        })
        .collect()
}

async fn a_deductible_is_met_across_claims_in_order_then_coinsurance_applies(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    plan_and_member(&app, &s, "M-1", json!([{"from": "2026-01-01"}])).await;
    // Submitted one after another without waiting: they are decided in this order.
    let claims = [
        ("C-1", 30000, "2026-01-10"),
        ("C-2", 40000, "2026-02-10"),
        ("C-3", 10000, "2026-03-10"),
    ];
    for (id, amount, day) in claims {
        let r = submit(&app, &s, claim(id, "M-1", amount, "99213", day)).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    }
    let mut approved = Vec::new();
    for (id, ..) in claims {
        let c = decided(&app, &s, id).await;
        assert_eq!(c["outcome"], "ADJUDICATED", "{c}");
        assert_balanced(&c);
        approved.push(c["approved_amount"].as_i64().unwrap());
    }
    assert_eq!(approved, [0, 16000, 8000]);
    let second = decided(&app, &s, "C-2").await;
    assert_eq!(codes(&second, 0), ["PR-1:20000", "PR-2:4000"]);
    assert_eq!(
        second["lines"][0]["adjudication"]["member_responsibility"],
        json!({"deductible": 20000, "coinsurance": 4000, "copay": 0})
    );
    accumulators(
        &app,
        &s,
        "M-1",
        json!({"member_id": "M-1", "year": 2026, "deductible_met": 50000,
               "out_of_pocket_met": 56000, "paid": 24000, "visits": {"99213": 3}}),
    )
    .await;
    // The announced decision tells the amounts the plan made.
    let ev = crate::pipeline::events(&app, "acme", "C-2").await;
    let completed = ev.iter().find(|e| e["event"] == "claim.completed").unwrap();
    assert_eq!(completed["data"]["approved_amount"], 16000);
    assert_eq!(completed["data"]["lines"], second["lines"]);
    // Another year is untouched; an unknown member has no accumulators.
    let other = app
        .get("/members/M-1/accumulators?year=2025", &s.access)
        .await;
    assert_eq!(other.body["deductible_met"], 0);
    app.get("/members/NOPE/accumulators", &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    app.get("/members/M-1/accumulators?year=20x6", &s.access)
        .await
        .assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
}

async fn eligibility_declines_members_not_covered_and_unknown_ones_when_required(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    plan_and_member(
        &app,
        &s,
        "M-1",
        json!([{"from": "2026-01-01", "to": "2026-01-31"}]),
    )
    .await;
    submit(&app, &s, claim("C-IN", "M-1", 20000, "99213", "2026-01-20")).await;
    submit(
        &app,
        &s,
        claim("C-OUT", "M-1", 20000, "99213", "2026-02-20"),
    )
    .await;
    submit(
        &app,
        &s,
        claim("C-UNLISTED", "M-X", 20000, "99213", "2026-02-20"),
    )
    .await;
    let covered = decided(&app, &s, "C-IN").await;
    assert_eq!(covered["outcome"], "ADJUDICATED");
    let out = decided(&app, &s, "C-OUT").await;
    assert_eq!(
        (out["outcome"].as_str(), out["approved_amount"].as_i64()),
        (Some("DECLINED"), Some(0))
    );
    assert_eq!(
        out["reasons"][0],
        json!({"source": "eligibility", "code": "MEMBER_NOT_COVERED", "carc": "27",
               "message": "the member is not covered on the service date"})
    );
    assert_eq!(codes(&out, 0), ["CO-27:20000"]);
    assert_balanced(&out);
    // Not on the roster: paid under part 1 of the contract while eligibility is not
    // required; declined once it is.
    let unlisted = decided(&app, &s, "C-UNLISTED").await;
    assert_eq!(unlisted["outcome"], "ADJUDICATED", "{unlisted}");
    let r = app
        .call(
            Method::PATCH,
            "/tenant/settings",
            Some(&s.access),
            Some(json!({"eligibility_required": true})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["eligibility_required"], true);
    // Another process's cache may hold the setting for up to its TTL.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    submit(
        &app,
        &s,
        claim("C-UNKNOWN", "M-X", 20000, "99213", "2026-03-20"),
    )
    .await;
    let unknown = decided(&app, &s, "C-UNKNOWN").await;
    assert_eq!(unknown["outcome"], "DECLINED");
    assert_eq!(unknown["reasons"][0]["code"], "MEMBER_UNKNOWN");
    assert_eq!(unknown["reasons"][0]["carc"], "31");
    assert_eq!(codes(&unknown, 0), ["CO-31:20000"]);
    // Only the covered claim counts.
    accumulators(
        &app,
        &s,
        "M-1",
        json!({"member_id": "M-1", "year": 2026, "deductible_met": 20000,
               "out_of_pocket_met": 20000, "paid": 0, "visits": {"99213": 1}}),
    )
    .await;
    // A change to the roster holds for the next claim, without waiting: the coverage
    // extended, and the unknown member added.
    let r = app
        .call(
            Method::PATCH,
            "/members/M-1",
            Some(&s.access),
            Some(json!({"coverage": [{"from": "2026-01-01", "to": "2026-12-31"}]})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    plan_and_member(&app, &s, "M-X", json!([{"from": "2026-01-01"}])).await;
    submit(
        &app,
        &s,
        claim("C-EXT", "M-1", 20000, "99213", "2026-02-21"),
    )
    .await;
    submit(
        &app,
        &s,
        claim("C-ADDED", "M-X", 20000, "99213", "2026-03-21"),
    )
    .await;
    for id in ["C-EXT", "C-ADDED"] {
        let d = decided(&app, &s, id).await;
        assert_eq!(d["outcome"], "ADJUDICATED", "{id}: {d}");
    }
}

async fn a_visit_limit_reached_denies_the_line_with_co_119(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    plan_and_member(&app, &s, "M-1", json!([{"from": "2026-01-01"}])).await;
    for (i, day) in ["2026-04-01", "2026-04-02", "2026-04-03"]
        .iter()
        .enumerate()
    {
        submit(
            &app,
            &s,
            claim(&format!("V-{i}"), "M-1", 10000, "97110", day),
        )
        .await;
    }
    let third = decided(&app, &s, "V-2").await;
    assert_eq!(
        third["lines"][0]["adjudication"]["status"], "denied",
        "{third}"
    );
    assert_eq!(codes(&third, 0), ["CO-119:10000"]);
    assert_balanced(&third);
    let r = accumulators(
        &app,
        &s,
        "M-1",
        json!({"member_id": "M-1", "year": 2026, "deductible_met": 20000,
               "out_of_pocket_met": 20000, "paid": 0, "visits": {"97110": 2}}),
    )
    .await;
    assert_eq!(r["visits"]["97110"], 2);
}

async fn an_officers_approval_counts_in_the_year_and_a_review_alone_does_not(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    plan_and_member(&app, &s, "M-1", json!([{"from": "2026-01-01"}])).await;
    app.publish_rulebook(&s.access, json!([{"rule_id": "big", "when": "claim.claim_amount > 50000", "action": "flag", "reason_code": "BIG"}])).await;
    submit(
        &app,
        &s,
        claim("C-BIG", "M-1", 60000, "99213", "2026-05-01"),
    )
    .await;
    let flagged = decided(&app, &s, "C-BIG").await;
    assert_eq!(flagged["status"], "pending_review");
    // The estimate an officer sees: the plan against the year as it stands.
    assert_eq!(flagged["approved_amount"], 8000, "{flagged}");
    let zero = json!({"member_id": "M-1", "year": 2026, "deductible_met": 0,
                      "out_of_pocket_met": 0, "paid": 0, "visits": {}});
    accumulators(&app, &s, "M-1", zero).await;
    let task = flagged["task_id"].as_str().unwrap();
    let claim_it = app
        .call(
            Method::POST,
            &format!("/workflow/tasks/{task}/claim"),
            Some(&s.access),
            None,
        )
        .await;
    assert_eq!(claim_it.status, StatusCode::OK, "{}", claim_it.body);
    let r = app
        .call(
            Method::POST,
            &format!("/workflow/tasks/{task}/transition"),
            Some(&s.access),
            Some(json!({"action": "approve"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    accumulators(
        &app,
        &s,
        "M-1",
        json!({"member_id": "M-1", "year": 2026, "deductible_met": 50000,
               "out_of_pocket_met": 52000, "paid": 8000, "visits": {"99213": 1}}),
    )
    .await;
    let c = app.get("/claims/C-BIG", &s.access).await.body;
    assert_eq!(
        (c["outcome"].as_str(), c["approved_amount"].as_i64()),
        (Some("APPROVED"), Some(8000))
    );
    assert_balanced(&c);
}

async fn the_accumulators_are_restored_after_a_restart(b: Backend) {
    let mut first = TestApp::spawn(b).await;
    let s = ready_tenant(&first, "acme").await;
    plan_and_member(&first, &s, "M-1", json!([{"from": "2026-01-01"}])).await;
    submit(
        &first,
        &s,
        claim("C-1", "M-1", 30000, "99213", "2026-01-10"),
    )
    .await;
    decided(&first, &s, "C-1").await;
    first.stop().await;

    let second = first.spawn_sibling(|_| {}).await;
    submit(
        &second,
        &s,
        claim("C-2", "M-1", 40000, "99213", "2026-02-10"),
    )
    .await;
    let c = decided(&second, &s, "C-2").await;
    assert_eq!(
        c["approved_amount"], 16000,
        "the deductible left was 200.00: {c}"
    );
}

async fn a_deny_line_rule_denies_the_lines_it_matches_with_its_carc(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    plan_and_member(&app, &s, "M-1", json!([{"from": "2026-01-01"}])).await;
    app.publish_rulebook(
        &s.access,
        json!([{"rule_id": "rehab-over-40", "when": "line.procedure_code == '97110' && member.age >= 40",
                "action": "deny_line", "reason_code": "NOT_MEDICALLY_NECESSARY", "carc": "50", "rarc": "N130"}]),
    )
    .await;
    let claim = json!({
        "claim_id": "C-1", "member_id": "M-1", "provider_id": "PRV-1", "claim_amount": 65000,
        "service_date": "2026-06-01",
        "lines": [{"procedure_code": "99213", "units": 1, "amount": 60000},
                  {"procedure_code": "97110", "units": 1, "amount": 5000}]
    });
    submit(&app, &s, claim).await;
    let c = decided(&app, &s, "C-1").await;
    assert_eq!(c["outcome"], "ADJUDICATED", "{c}");
    assert_balanced(&c);
    assert_eq!(codes(&c, 1), ["CO-50:5000"]);
    assert_eq!(
        c["lines"][1]["adjudication"]["adjustments"][0]["rarc"],
        "N130"
    );
    assert_eq!(c["lines"][1]["adjudication"]["status"], "denied");
    assert_eq!(c["reasons"][0]["code"], "NOT_MEDICALLY_NECESSARY", "{c}");
    assert_eq!(c["reasons"][0]["rule_id"], "rehab-over-40");
    // The other line pays after the deductible and coinsurance: 600.00 - 500.00, 80%.
    assert_eq!(codes(&c, 0), ["PR-1:50000", "PR-2:2000"]);
    assert_eq!(c["approved_amount"], 8000);
    // A denied line is no visit.
    accumulators(
        &app,
        &s,
        "M-1",
        json!({"member_id": "M-1", "year": 2026, "deductible_met": 50000,
               "out_of_pocket_met": 52000, "paid": 8000, "visits": {"99213": 1}}),
    )
    .await;
}
