//! The officers' review of flagged claims and the tenant's hash-chained audit log
//! (contract: Workflow, Audit).

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::claims::{claim, ready_tenant, submit_batch};
use crate::pipeline::{decided, events};
use crate::support::{jwt, Backend, Session, TestApp};

crate::all_backends!(
    an_officer_approves_a_flagged_claim_and_its_events_follow_in_order,
    an_officer_declines_a_flagged_claim_naming_the_provider,
    only_the_holder_decides_and_a_done_task_stays_done,
    two_officers_racing_for_one_task_exactly_one_wins,
    the_queue_sorts_by_priority_filters_by_status_and_pages,
    every_change_is_audited_and_the_chain_names_a_tampered_record,
    the_chain_verifies_after_a_thousand_claims_with_reviews,
);

pub(crate) const OFFICER: &str = "workflow:manage claims:read";

/// Flags every claim over 100.00 for review.
async fn flagging_tenant(app: &TestApp) -> Session {
    let s = ready_tenant(app, "acme").await;
    app.publish_rulebook(&s.access, json!([{"rule_id": "big", "description": "Over 100.00", "when": "claim.claim_amount > 10000", "action": "flag", "reason_code": "BIG_CLAIM"}])).await;
    s
}

async fn flagged(app: &TestApp, s: &Session, id: &str) -> String {
    let r = app
        .call(
            Method::POST,
            "/claims/intake",
            Some(&s.access),
            Some(claim(id)),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let c = decided(app, s, id).await;
    assert_eq!(c["status"], "pending_review", "{c}");
    c["task_id"].as_str().unwrap().to_owned()
}

fn user_id(s: &Session) -> String {
    jwt::parts(&s.access).1["sub"].as_str().unwrap().to_owned()
}

pub(crate) async fn claim_task(app: &TestApp, s: &Session, task: &str) -> crate::support::Reply {
    app.call(
        Method::POST,
        &format!("/workflow/tasks/{task}/claim"),
        Some(&s.access),
        None,
    )
    .await
}

pub(crate) async fn transition(
    app: &TestApp,
    s: &Session,
    task: &str,
    body: Value,
) -> crate::support::Reply {
    app.call(
        Method::POST,
        &format!("/workflow/tasks/{task}/transition"),
        Some(&s.access),
        Some(body),
    )
    .await
}

/// Polls the claim until it is `completed`.
pub(crate) async fn completed(app: &TestApp, s: &Session, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let c = app.get(&format!("/claims/{id}"), &s.access).await.body;
        if c["status"] == "completed" {
            return c;
        }
        assert!(
            Instant::now() < deadline,
            "claim {id} did not complete: {c}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn an_officer_approves_a_flagged_claim_and_its_events_follow_in_order(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = flagging_tenant(&app).await;
    let task = flagged(&app, &s, "CLM-1").await;
    let officer = app.session("acme", OFFICER).await;

    let t = app
        .get(&format!("/workflow/tasks/{task}"), &officer.access)
        .await;
    assert_eq!(t.status, StatusCode::OK, "{}", t.body);
    assert_eq!(t.body["status"], "open");
    assert_eq!(t.body["claim_id"], "CLM-1");
    assert_eq!(t.body["reasons"][0]["code"], "BIG_CLAIM");
    assert!(t.body["priority"].as_i64().unwrap() > 0);

    let c = claim_task(&app, &officer, &task).await;
    assert_eq!(c.status, StatusCode::OK, "{}", c.body);
    assert_eq!(c.body["status"], "claimed");
    assert_eq!(c.body["assignee"], user_id(&officer).as_str());

    let too_much = transition(
        &app,
        &officer,
        &task,
        json!({"action": "approve", "approved_amount": 12501}),
    )
    .await;
    too_much.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
    assert_eq!(too_much.body["error"]["field"], "approved_amount");

    let a = transition(
        &app,
        &officer,
        &task,
        json!({"action": "approve", "approved_amount": 9000, "note": "checked"}),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["status"], "done");
    assert_eq!(a.body["decision"], "approve");
    assert!(a.body["decided_at"].as_str().unwrap().ends_with('Z'));

    let c = completed(&app, &s, "CLM-1").await;
    assert_eq!(c["outcome"], "APPROVED");
    assert_eq!(c["approved_amount"], 9000);
    let ev = events(&app, "acme", "CLM-1").await;
    let kinds: Vec<&str> = ev.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "claim.flagged",
            "workflow.task.created",
            "claim.completed",
            "claim.approved",
            "claim.completed"
        ]
    );
    assert_eq!(
        ev[3]["data"],
        json!({"claim_id": "CLM-1", "status": "completed", "outcome": "APPROVED", "approved_amount": 9000,
               "officer": user_id(&officer), "audit_id": c["audit_id"]})
    );
    assert_eq!(ev[4]["data"]["outcome"], "APPROVED");
    assert_eq!(ev[4]["data"]["approved_amount"], 9000);
    // The officer's amount is cut from the last line; every line still balances.
    let approved: Vec<i64> = c["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let a = &l["adjudication"];
            let adjusted: i64 = a["adjustments"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["amount"].as_i64().unwrap())
                .sum();
            assert_eq!(
                a["approved_amount"].as_i64().unwrap() + adjusted,
                l["amount"].as_i64().unwrap()
            );
            a["approved_amount"].as_i64().unwrap()
        })
        .collect();
    assert_eq!(approved, [7500, 1500]);
    assert_eq!(ev[4]["data"]["lines"], c["lines"]);
    assert_ne!(
        ev[4]["id"], ev[2]["id"],
        "a second completion has its own event id"
    );

    // The officer's decision is the claim's audit record.
    let auditor = app.session("acme", "audit:read").await;
    let rec = app
        .get(
            &format!("/audit/{}", c["audit_id"].as_str().unwrap()),
            &auditor.access,
        )
        .await;
    assert_eq!(rec.status, StatusCode::OK, "{}", rec.body);
    assert_eq!(rec.body["action"], "claim.approved");
    assert_eq!(rec.body["actor"], user_id(&officer).as_str());
    assert_eq!(rec.body["entity_id"], "CLM-1");
}

async fn an_officer_declines_a_flagged_claim_naming_the_provider(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = flagging_tenant(&app).await;
    let task = flagged(&app, &s, "CLM-D").await;
    let officer = app.session("acme", OFFICER).await;
    assert_eq!(
        claim_task(&app, &officer, &task).await.status,
        StatusCode::OK
    );
    let d = transition(
        &app,
        &officer,
        &task,
        json!({"action": "decline", "note": "not covered"}),
    )
    .await;
    assert_eq!(d.status, StatusCode::OK, "{}", d.body);
    let c = completed(&app, &s, "CLM-D").await;
    assert_eq!(
        (c["outcome"].as_str(), c["approved_amount"].as_i64()),
        (Some("DECLINED"), Some(0))
    );
    let ev = events(&app, "acme", "CLM-D").await;
    let kinds: Vec<&str> = ev.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(&kinds[3..], ["claim.declined", "claim.completed"]);
    assert_eq!(ev[3]["data"]["provider_id"], "PRV-1");
    assert_eq!(ev[3]["data"]["reason"], "not covered");
    assert_eq!(ev[3]["data"]["officer"], user_id(&officer).as_str());
    assert_eq!(ev[4]["data"]["outcome"], "DECLINED");
}

async fn only_the_holder_decides_and_a_done_task_stays_done(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = flagging_tenant(&app).await;
    let task = flagged(&app, &s, "CLM-C").await;
    let (alice, bob) = (
        app.session("acme", OFFICER).await,
        app.session("acme", OFFICER).await,
    );

    // Deciding an unclaimed task, or one held by another officer: 409.
    transition(&app, &alice, &task, json!({"action": "approve"}))
        .await
        .assert_error(StatusCode::CONFLICT, "CONFLICT");
    assert_eq!(claim_task(&app, &alice, &task).await.status, StatusCode::OK);
    assert_eq!(
        claim_task(&app, &alice, &task).await.status,
        StatusCode::OK,
        "claiming one's own task again"
    );
    claim_task(&app, &bob, &task)
        .await
        .assert_error(StatusCode::CONFLICT, "CONFLICT");
    transition(&app, &bob, &task, json!({"action": "decline"}))
        .await
        .assert_error(StatusCode::CONFLICT, "CONFLICT");
    transition(&app, &bob, &task, json!({"action": "release"}))
        .await
        .assert_error(StatusCode::CONFLICT, "CONFLICT");

    // Released, it is open for anyone.
    let r = transition(&app, &alice, &task, json!({"action": "release"})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["status"], "open");
    assert_eq!(r.body["assignee"], Value::Null);
    assert_eq!(claim_task(&app, &bob, &task).await.status, StatusCode::OK);
    assert_eq!(
        transition(&app, &bob, &task, json!({"action": "approve"}))
            .await
            .status,
        StatusCode::OK
    );

    // Done is final, for everyone.
    for who in [&alice, &bob] {
        claim_task(&app, who, &task)
            .await
            .assert_error(StatusCode::CONFLICT, "CONFLICT");
        transition(&app, who, &task, json!({"action": "decline"}))
            .await
            .assert_error(StatusCode::CONFLICT, "CONFLICT");
    }
    let c = completed(&app, &s, "CLM-C").await;
    assert_eq!(c["outcome"], "APPROVED");
    // 7500 + 5000 capped at 4000 by the fee schedule.
    assert_eq!(
        c["approved_amount"], 11500,
        "by default what processing approved"
    );

    // Bad input changes nothing; other tenants see nothing.
    let bad = transition(&app, &bob, &task, json!({"action": "escalate"})).await;
    bad.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
    assert_eq!(bad.body["error"]["field"], "action");
    let amount_on_decline = transition(
        &app,
        &bob,
        &task,
        json!({"action": "decline", "approved_amount": 5}),
    )
    .await;
    amount_on_decline.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
    transition(&app, &bob, "tsk_missing", json!({"action": "approve"}))
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    let stranger = app.session("globex", OFFICER).await;
    app.get(&format!("/workflow/tasks/{task}"), &stranger.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    claim_task(&app, &stranger, &task)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    let list = app.get("/workflow/tasks", &stranger.access).await;
    assert_eq!(list.body["data"], json!([]));
}

async fn two_officers_racing_for_one_task_exactly_one_wins(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = flagging_tenant(&app).await;
    let task = flagged(&app, &s, "CLM-R").await;
    let mut officers = Vec::new();
    for _ in 0..8 {
        officers.push(app.session("acme", OFFICER).await);
    }
    let answers =
        futures::future::join_all(officers.iter().map(|o| claim_task(&app, o, &task))).await;
    let won: Vec<usize> = answers
        .iter()
        .enumerate()
        .filter(|(_, r)| r.status == StatusCode::OK)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        won.len(),
        1,
        "{:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    for (i, r) in answers.iter().enumerate() {
        if i != won[0] {
            r.assert_error(StatusCode::CONFLICT, "CONFLICT");
        }
    }
    let t = app.get(&format!("/workflow/tasks/{task}"), &s.access).await;
    assert_eq!(t.body["assignee"], user_id(&officers[won[0]]).as_str());
}

async fn the_queue_sorts_by_priority_filters_by_status_and_pages(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = flagging_tenant(&app).await;
    // Larger amounts weigh more in the priority.
    for (id, amount) in [("CLM-A", 20_000), ("CLM-B", 9_000_000), ("CLM-C", 200_000)] {
        let mut c = claim(id);
        c["claim_amount"] = json!(amount);
        c["lines"] = json!([]);
        app.call(Method::POST, "/claims/intake", Some(&s.access), Some(c))
            .await;
        decided(&app, &s, id).await;
    }
    let officer = app.session("acme", OFFICER).await;
    let page1 = app
        .get("/workflow/tasks?status=open&limit=2", &officer.access)
        .await;
    assert_eq!(page1.status, StatusCode::OK, "{}", page1.body);
    let ids = |p: &Value| -> Vec<String> {
        p["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["claim_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&page1.body), ["CLM-B", "CLM-C"]);
    let cursor = page1.body["next_cursor"].as_str().unwrap();
    let page2 = app
        .get(
            &format!("/workflow/tasks?status=open&limit=2&cursor={cursor}"),
            &officer.access,
        )
        .await;
    assert_eq!(ids(&page2.body), ["CLM-A"]);
    assert_eq!(page2.body["next_cursor"], Value::Null);

    let first = page1.body["data"][0]["task_id"].as_str().unwrap();
    claim_task(&app, &officer, first).await;
    let claimed = app
        .get("/workflow/tasks?status=claimed", &officer.access)
        .await;
    assert_eq!(ids(&claimed.body), ["CLM-B"]);
    let open = app
        .get("/workflow/tasks?status=open", &officer.access)
        .await;
    assert_eq!(ids(&open.body), ["CLM-C", "CLM-A"]);
    let bad = app
        .get("/workflow/tasks?status=lost", &officer.access)
        .await;
    bad.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
    assert_eq!(bad.body["error"]["field"], "status");
}

/// Runs `claims admin verify-audit` against the app's store.
fn verify_audit(app: &TestApp, tenant: &str) -> (bool, Value) {
    let (ok, out, _) =
        crate::admin_cli::claims(app, &["admin", "verify-audit", "--tenant-id", tenant]);
    (ok, out)
}

/// Runs one statement on the app's database, behind the service's back.
async fn tamper(app: &TestApp, sql: &str) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(app.config.store.url())
        .await
        .unwrap();
    let n = sqlx::query(sql)
        .execute(&pool)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(n, 1, "{sql}");
    pool.close().await;
}

/// Every record of the tenant's log through the API, oldest first.
async fn audit_log(app: &TestApp, s: &Session) -> Vec<Value> {
    let mut all = Vec::new();
    let mut path = "/audit?limit=500".to_owned();
    loop {
        let r = app.get(&path, &s.access).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        all.extend(r.body["data"].as_array().unwrap().iter().cloned());
        match r.body["next_cursor"].as_str() {
            Some(c) => path = format!("/audit?limit=500&cursor={c}"),
            None => return all,
        }
    }
}

async fn every_change_is_audited_and_the_chain_names_a_tampered_record(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = flagging_tenant(&app).await;
    let task = flagged(&app, &s, "CLM-1").await;
    let officer = app.session("acme", OFFICER).await;
    claim_task(&app, &officer, &task).await;
    transition(&app, &officer, &task, json!({"action": "approve"})).await;
    completed(&app, &s, "CLM-1").await;
    let hook = app
        .call(Method::POST, "/webhooks", Some(&s.access), Some(json!({"url": "https://hooks.example.com/x", "events": ["claim.completed"], "secret": "s3cret-value"})))
        .await;
    assert_eq!(hook.status, StatusCode::CREATED, "{}", hook.body);
    let patched = app
        .call(
            Method::PATCH,
            "/tenant/settings",
            Some(&s.access),
            Some(json!({"fraud_flag_threshold": 0.7})),
        )
        .await;
    assert!(patched.status.is_success(), "{}", patched.body);

    let auditor = app.session("acme", "audit:read").await;
    let log = audit_log(&app, &auditor).await;
    let actions: Vec<&str> = log.iter().map(|r| r["action"].as_str().unwrap()).collect();
    for expected in [
        "claim.received",
        "provider.created",
        "contract.created",
        "rulebook.created",
        "rulebook.published",
        "claim.decided",
        "task.claimed",
        "task.approved",
        "claim.approved",
        "webhook.created",
        "settings.changed",
    ] {
        assert!(
            actions.contains(&expected),
            "{expected} missing from {actions:?}"
        );
    }
    // One chain, oldest first, each record linked to the one before it.
    assert_eq!(log[0]["prev_hash"], "0".repeat(64));
    for (i, pair) in log.windows(2).enumerate() {
        assert_eq!(pair[1]["prev_hash"], pair[0]["hash"]);
        assert_eq!(pair[1]["seq"], i as i64 + 2);
    }
    assert!(
        !log.iter().any(|r| r.to_string().contains("s3cret-value")),
        "no secret in the audit log"
    );
    let only_claim = app.get("/audit?entity_id=CLM-1", &auditor.access).await;
    let claim_actions: Vec<&str> = only_claim.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        claim_actions,
        ["claim.received", "claim.decided", "claim.approved"]
    );
    app.get("/audit", &officer.access)
        .await
        .assert_error(StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
    let stranger = app.session("globex", "audit:read").await;
    // Globex's own chain holds only the creation of its user.
    let theirs = audit_log(&app, &stranger).await;
    let acme_ids: Vec<&Value> = log.iter().map(|r| &r["audit_id"]).collect();
    assert_eq!(theirs.len(), 1, "{theirs:?}");
    assert_eq!(theirs[0]["action"], "user.created");
    assert_eq!(theirs[0]["seq"], 1);
    assert!(!acme_ids.contains(&&theirs[0]["audit_id"]));
    app.get(
        &format!("/audit/{}", log[0]["audit_id"].as_str().unwrap()),
        &stranger.access,
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");

    let (ok, report) = verify_audit(&app, "acme");
    assert!(ok, "{report}");
    assert_eq!(report["verified"], true);
    assert_eq!(report["records"], log.len());

    // Alter one record's details directly in the database: the walk names it.
    let victim = &log[4];
    let id = victim["audit_id"].as_str().unwrap();
    tamper(&app, &format!("UPDATE audit_records SET details = '{{\"outcome\":\"APPROVED\"}}' WHERE audit_id = '{id}'")).await;
    let (ok, report) = verify_audit(&app, "acme");
    assert!(!ok, "a tampered chain must not verify: {report}");
    assert_eq!(report["verified"], false);
    assert_eq!(report["first_break"]["audit_id"], id);
    assert_eq!(report["first_break"]["seq"], victim["seq"]);
}

async fn the_chain_verifies_after_a_thousand_claims_with_reviews(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = flagging_tenant(&app).await;
    // Every tenth claim is over the flag limit.
    let items: Vec<Value> = (0..1000)
        .map(|i| {
            let mut c = claim(&format!("CLM-{i:04}"));
            c["member_id"] = json!(format!("MBR-{i}"));
            c["claim_amount"] = json!(if i % 10 == 0 { 20_000 } else { 9_000 });
            c["lines"] = json!([]);
            c
        })
        .collect();
    let r = submit_batch(&app, &s, items).await;
    assert_eq!(r.body["accepted"], 1000, "{}", r.body);

    // Officers work through the queue as it fills, alternating approvals and declines,
    // until every claim is completed.
    let officer = app.session("acme", OFFICER).await;
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut reviewed = 0;
    loop {
        assert!(
            Instant::now() < deadline,
            "claims still in flight after {reviewed} reviews"
        );
        let open = app
            .get("/workflow/tasks?status=open&limit=50", &officer.access)
            .await;
        let tasks: Vec<String> = open.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["task_id"].as_str().unwrap().to_owned())
            .collect();
        for t in &tasks {
            assert_eq!(claim_task(&app, &officer, t).await.status, StatusCode::OK);
            let action = if reviewed % 2 == 0 {
                "approve"
            } else {
                "decline"
            };
            let d = transition(&app, &officer, t, json!({"action": action})).await;
            assert_eq!(d.status, StatusCode::OK, "{}", d.body);
            reviewed += 1;
        }
        if tasks.is_empty() {
            let mut busy = false;
            for st in ["received", "processing", "pending_review"] {
                let r = app
                    .get(&format!("/claims?status={st}&limit=1"), &s.access)
                    .await;
                busy |= r.body["data"] != json!([]);
            }
            if !busy {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert!(
        reviewed >= 100,
        "every tenth claim is flagged: {reviewed} reviews"
    );
    let (ok, report) = verify_audit(&app, "acme");
    assert!(ok, "{report}");
    // 1000 intakes, 1000 decisions, 100 officer decisions, 200 task actions, plus
    // configuration.
    assert!(report["records"].as_u64().unwrap() >= 2300, "{report}");
}
