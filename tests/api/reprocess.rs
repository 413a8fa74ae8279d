//! Bulk reprocess (contract part 2, "Decisions you can explain, test and redo"): the
//! tenant's claims pending review decided again with the active rulebook, as a job.
//! Every one is decided exactly once more: one new decision, one new audit record and
//! one new set of events each; the review task of a claim that no longer flags closes.
//! (The job under SIGKILL is in the crash suite.)

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::claims::{ready_tenant, submit_batch};
use crate::pipeline::decided;
use crate::support::{Backend, Session, TestApp};

crate::all_backends!(a_thousand_pended_claims_are_each_decided_exactly_once_more);

const CLAIMS: usize = 1000;

/// The job once it is no longer running.
pub async fn finished_job(app: &TestApp, s: &Session, job_id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let r = app.get(&format!("/jobs/{job_id}"), &s.access).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        if r.body["state"] != "running" {
            return r.body;
        }
        assert!(
            Instant::now() < deadline,
            "the job did not finish: {}",
            r.body
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn reprocess(app: &TestApp, s: &Session, body: Value) -> crate::support::Reply {
    app.call(
        Method::POST,
        "/claims/reprocess",
        Some(&s.access),
        Some(body),
    )
    .await
}

async fn a_thousand_pended_claims_are_each_decided_exactly_once_more(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    // A rule too strict: every claim above 10.00 goes to review.
    app.publish_rulebook(
        &s.access,
        json!([{"rule_id": "review", "when": "claim.claim_amount > 1000", "action": "flag", "reason_code": "REVIEW"}]),
    )
    .await;
    let items: Vec<Value> = (0..CLAIMS)
        .map(|i| {
            json!({"claim_id": format!("C-{i:04}"), "member_id": format!("M-{}", i % 97), "provider_id": "PRV-1",
                   "claim_amount": 2_000 + i as i64, "service_date": format!("2026-0{}-{:02}", 1 + i % 9, 1 + i % 28),
                   "lines": [{"procedure_code": "99213", "units": 1, "amount": 2_000 + i as i64}]})
        })
        .collect();
    let r = submit_batch(&app, &s, items).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let mut first = BTreeMap::new();
    for i in 0..CLAIMS {
        let id = format!("C-{i:04}");
        let c = decided(&app, &s, &id).await;
        assert_eq!(c["status"], "pending_review", "{c}");
        first.insert(id, c);
    }

    // The rule fixed and published; the pended claims reprocessed.
    let fixed = app
        .publish_rulebook(
            &s.access,
            json!([{"rule_id": "review", "when": "claim.claim_amount > 1000000", "action": "flag", "reason_code": "REVIEW"}]),
        )
        .await;
    let r = reprocess(
        &app,
        &s,
        json!({"status": "pending_review", "rulebook": "active"}),
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(r.body["claims"], CLAIMS);
    let job_id = r.body["job_id"].as_str().unwrap().to_owned();
    assert_eq!(
        r.header("location"),
        Some(format!("/api/v1/jobs/{job_id}").as_str())
    );
    let job = finished_job(&app, &s, &job_id).await;
    assert_eq!(
        job,
        json!({"job_id": job_id, "state": "done", "total": CLAIMS, "done": CLAIMS, "failed": 0})
    );

    // Each claim: a second decision with the fixed rulebook; its task closed.
    let settings = app.get("/tenant/settings", &s.access).await.body;
    let threshold = settings["fraud_flag_threshold"].as_f64().unwrap();
    for (id, before) in &first {
        let deadline = Instant::now() + Duration::from_secs(60);
        let after = loop {
            let c = app.get(&format!("/claims/{id}"), &s.access).await.body;
            if c["audit_id"] != before["audit_id"] {
                break c;
            }
            assert!(Instant::now() < deadline, "{id} was not decided again: {c}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let receipt = app
            .get(&format!("/claims/{id}/decision"), &s.access)
            .await
            .body;
        assert_eq!(receipt["rulebook_id"], fixed.as_str(), "{receipt}");
        // The new decision traces every rule, matched or not, as a first decision does.
        assert_eq!(receipt["rules"][0]["rule_id"], "review", "{receipt}");
        assert_eq!(receipt["rules"][0]["matched"], false, "{receipt}");
        assert_eq!(receipt["audit_id"], after["audit_id"]);
        if after["fraud_score"].as_f64().unwrap() < threshold {
            assert_eq!(
                (after["status"].as_str(), after["outcome"].as_str()),
                (Some("completed"), Some("ADJUDICATED")),
                "{after}"
            );
            assert!(after["approved_amount"].as_i64().unwrap() > 0, "{after}");
            let task = before["task_id"].as_str().unwrap();
            let t = app
                .get(&format!("/workflow/tasks/{task}"), &s.access)
                .await
                .body;
            assert_eq!(t["status"], "done", "{t}");
            assert_eq!(t["decision"], Value::Null, "no officer decided: {t}");
        } else {
            assert_eq!(after["status"], "pending_review", "{after}");
            assert_eq!(
                after["task_id"], before["task_id"],
                "the same task stays open"
            );
        }
    }

    // Exactly once more: two decision records per claim, and each of the
    // reprocess's events once on the topic.
    let audits = app.store.audit_counts("acme").await.unwrap();
    assert_eq!(audits.len(), CLAIMS);
    assert!(audits.values().all(|n| *n == 2), "{audits:?}");
    let events = app.records_of(&app.state.topics.events, CLAIMS * 4).await;
    let mut completed: HashMap<String, Vec<String>> = HashMap::new();
    let mut ids = HashSet::new();
    for r in &events {
        let e: Value = serde_json::from_slice(&r.value).unwrap();
        let id = e["id"].as_str().unwrap().to_owned();
        assert!(ids.insert(id.clone()), "event {id} is on the topic twice");
        if e["event"] == "claim.completed" {
            let claim = e["data"]["claim_id"].as_str().unwrap().to_owned();
            completed.entry(claim).or_default().push(id);
        }
    }
    assert_eq!(completed.len(), CLAIMS);
    assert!(
        completed.values().all(|ids| ids.len() == 2),
        "each claim completed twice: pended, then decided again"
    );
    let tasks_created = events
        .iter()
        .filter(|r| {
            serde_json::from_slice::<Value>(&r.value).unwrap()["event"] == "workflow.task.created"
        })
        .count();
    assert_eq!(
        tasks_created, CLAIMS,
        "no second task for a claim still in review"
    );

    // Nothing left to reprocess; bad requests; another tenant's job.
    let r = reprocess(
        &app,
        &s,
        json!({"status": "pending_review", "rulebook": "active"}),
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let again = finished_job(&app, &s, r.body["job_id"].as_str().unwrap()).await;
    assert_eq!(again["state"], "done");
    for (body, field) in [
        (
            json!({"status": "completed", "rulebook": "active"}),
            "status",
        ),
        (
            json!({"status": "pending_review", "rulebook": "draft"}),
            "rulebook",
        ),
    ] {
        let f = reprocess(&app, &s, body)
            .await
            .assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
        assert_eq!(f.as_deref(), Some(field));
    }
    let other = ready_tenant(&app, "globex").await;
    app.get(&format!("/jobs/{job_id}"), &other.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    app.get("/jobs/job_nope", &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    let reader = app.session("acme", "claims:read").await;
    reprocess(
        &app,
        &reader,
        json!({"status": "pending_review", "rulebook": "active"}),
    )
    .await
    .assert_error(StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
}
