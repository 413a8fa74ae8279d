//! Claim intake and reads (contract: Claims).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{Backend, Reply, Session, TestApp, ALL_SCOPES};

crate::all_backends!(
    an_accepted_claim_is_durable_readable_and_on_the_intake_topic,
    intake_refuses_bad_claims_with_the_contract_errors_and_stores_nothing,
    fifty_simultaneous_submissions_of_one_claim_id_accept_exactly_one,
    simultaneous_submissions_of_two_tenants_are_new_once_per_tenant_and_id,
    simultaneous_batches_accept_a_shared_claim_id_once_and_answer_each_in_order,
    a_batch_checks_each_item_and_answers_in_input_order,
    a_batch_may_be_ndjson,
    a_batch_item_is_read_exactly_as_single_intake_reads_a_claim,
    a_batch_checked_while_the_store_is_away_is_answered_503_whole,
    claims_of_another_tenant_are_not_found,
    claims_are_listed_with_filters_and_a_cursor,
);

/// A tenant with a contracted provider `PRV-1` and a published rulebook.
pub async fn ready_tenant(app: &TestApp, tenant: &str) -> Session {
    let s = app.session(tenant, ALL_SCOPES).await;
    let r = app
        .call(
            Method::POST,
            "/providers",
            Some(&s.access),
            Some(json!({"provider_id": "PRV-1", "name": "Clinic", "specialty": "cardiology"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = app
        .call(
            Method::POST,
            "/providers/PRV-1/contracts",
            Some(&s.access),
            Some(json!({"effective_from": "2020-01-01", "fee_schedule": {"80053": 4000}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    app.publish_rulebook(&s.access, json!([
            {"rule_id": "huge", "when": "claim.claim_amount > 5000000", "action": "block", "reason_code": "AMOUNT_LIMIT"}
        ])).await;
    s
}

pub fn claim(id: &str) -> Value {
    json!({
        "claim_id": id, "member_id": "MBR-1", "provider_id": "PRV-1", "claim_amount": 12500,
        "service_date": "2026-01-15",
        "lines": [{"procedure_code": "99213", "units": 1, "amount": 7500}, {"procedure_code": "80053", "units": 1, "amount": 5000}],
        "diagnosis_codes": ["E11.9"], "metadata": {"channel": "api"}
    })
}

pub async fn submit(app: &TestApp, s: &Session, body: Value) -> Reply {
    app.call(Method::POST, "/claims/intake", Some(&s.access), Some(body))
        .await
}

pub async fn submit_batch(app: &TestApp, s: &Session, items: Vec<Value>) -> Reply {
    app.call(
        Method::POST,
        "/claims/batch",
        Some(&s.access),
        Some(Value::Array(items)),
    )
    .await
}

async fn an_accepted_claim_is_durable_readable_and_on_the_intake_topic(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let r = submit(&app, &s, claim("CLM-1")).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(r.body["claim_id"], "CLM-1");
    assert_eq!(r.body["status"], "received");
    assert!(r.body["received_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(r.header("location"), Some("/api/v1/claims/CLM-1"));

    let got = app.get("/claims/CLM-1", &s.access).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.body);
    assert_eq!(got.body["claim_amount"], 12500);
    assert_eq!(got.body["lines"][1]["procedure_code"], "80053");
    assert_eq!(got.body["lines"][1]["line_no"], 2);
    assert_eq!(got.body["lines"][1]["adjudication"], Value::Null);
    assert_eq!(got.body["lines"][0]["modifiers"], json!([]));
    assert_eq!(got.body["metadata"]["channel"], "api");
    assert_eq!(got.body["rulebook_version"], 1);
    assert_eq!(got.body["received_at"], r.body["received_at"]);

    let records = intake_records(&app, 1).await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].key, "acme/MBR-1", "keyed by member");
    let command: Value = serde_json::from_slice(&records[0].value).unwrap();
    assert_eq!(command["tenant_id"], "acme");
    assert_eq!(command["claim"]["claim_id"], "CLM-1");
    assert_eq!(command["rulebook_version"], 1);
}

async fn intake_refuses_bad_claims_with_the_contract_errors_and_stores_nothing(b: Backend) {
    let app = TestApp::spawn(b).await;
    // No rulebook yet.
    let bare = app.session("bare", ALL_SCOPES).await;
    submit(&app, &bare, claim("CLM-0"))
        .await
        .assert_error(StatusCode::CONFLICT, "RULEBOOK_NOT_ACTIVE");

    let s = ready_tenant(&app, "acme").await;
    let with = |k: &str, v: Value| {
        let mut c = claim("CLM-X");
        c[k] = v;
        c
    };
    for (body, field) in [
        (with("claim_amount", json!(0)), "claim_amount"),
        (with("claim_amount", json!("12500")), "claim_amount"),
        (with("claim_amount", json!(12501)), "lines"),
        (with("service_date", json!("2999-01-01")), "service_date"),
        (with("service_date", json!("2026-02-30")), "service_date"),
        (with("claim_id", json!("has space")), "claim_id"),
        (
            with(
                "lines",
                json!([{"procedure_code": "99213", "units": 0, "amount": 12500}]),
            ),
            "lines[0].units",
        ),
        (
            with(
                "lines",
                json!([{"procedure_code": "99213", "units": 1, "amount": 12500, "modifiers": ["25", "XYZ"]}]),
            ),
            "lines[0].modifiers[1]",
        ),
        (with("extra", json!(1)), ""),
    ] {
        let r = submit(&app, &s, body.clone()).await;
        let got = r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
        if !field.is_empty() {
            assert_eq!(got.as_deref(), Some(field), "{body}");
        }
    }
    // Above the documented bound, and a number no amount can hold: both name the field.
    let r = submit(&app, &s, with("claim_amount", json!(1_000_000_000_001_i64))).await;
    assert_eq!(
        r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
            .as_deref(),
        Some("claim_amount")
    );
    assert_eq!(
        r.body["error"]["message"],
        "must be at most 1000000000000 (minor units)"
    );
    let huge = claim("CLM-X")
        .to_string()
        .replace("\"claim_amount\":12500", "\"claim_amount\":1e400");
    assert!(huge.contains("1e400"));
    let r = Reply::from(
        app.client
            .post(app.url("/claims/intake"))
            .bearer_auth(&s.access)
            .header("content-type", "application/json")
            .body(huge)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
            .as_deref(),
        Some("claim_amount")
    );

    let mut missing = claim("CLM-X");
    missing.as_object_mut().unwrap().remove("member_id");
    assert_eq!(
        submit(&app, &s, missing)
            .await
            .assert_error(StatusCode::BAD_REQUEST, "BAD_REQUEST")
            .as_deref(),
        Some("member_id")
    );

    let r = submit(&app, &s, with("provider_id", json!("PRV-UNKNOWN"))).await;
    assert_eq!(
        r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "PROVIDER_NOT_CONTRACTED")
            .as_deref(),
        Some("provider_id")
    );

    assert_eq!(
        submit(&app, &s, claim("CLM-1")).await.status,
        StatusCode::ACCEPTED
    );
    submit(&app, &s, claim("CLM-1"))
        .await
        .assert_error(StatusCode::CONFLICT, "CLAIM_DUPLICATE");

    let list = app.get("/claims", &s.access).await;
    let ids: Vec<&str> = list.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["claim_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["CLM-1"], "refused claims left nothing behind");
    app.get("/claims/CLM-X", &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");
}

async fn fifty_simultaneous_submissions_of_one_claim_id_accept_exactly_one(b: Backend) {
    let app = TestApp::spawn_with(b, |s| s.database_max_connections = Some(8)).await;
    let s = ready_tenant(&app, "acme").await;
    let body = claim("CLM-RACE");
    let replies = futures::future::join_all((0..50).map(|_| submit(&app, &s, body.clone()))).await;
    let accepted = replies
        .iter()
        .filter(|r| r.status == StatusCode::ACCEPTED)
        .count();
    assert_eq!(accepted, 1);
    for r in replies.iter().filter(|r| r.status != StatusCode::ACCEPTED) {
        r.assert_error(StatusCode::CONFLICT, "CLAIM_DUPLICATE");
    }
    assert_eq!(intake_records(&app, 1).await.len(), 1, "one command");
}

/// Single intakes of a busy moment share a transaction (group commit): a claim id that
/// two tenants submit at once is new once for each of them, and the copies are refused.
async fn simultaneous_submissions_of_two_tenants_are_new_once_per_tenant_and_id(b: Backend) {
    let app = TestApp::spawn(b).await;
    let tenants = [
        ready_tenant(&app, "tenant-a").await,
        ready_tenant(&app, "tenant-b").await,
    ];
    let mut sends = Vec::new();
    for s in &tenants {
        for i in 0..10 {
            sends.push(submit(&app, s, claim("CLM-SAME")));
            sends.push(submit(&app, s, claim(&format!("CLM-{i}"))));
        }
    }
    let replies = futures::future::join_all(sends).await;
    let accepted = replies
        .iter()
        .filter(|r| r.status == StatusCode::ACCEPTED)
        .count();
    assert_eq!(
        accepted,
        2 * 11,
        "each tenant's CLM-SAME once and its ten others"
    );
    for r in replies.iter().filter(|r| r.status != StatusCode::ACCEPTED) {
        r.assert_error(StatusCode::CONFLICT, "CLAIM_DUPLICATE");
    }
    assert_eq!(intake_records(&app, 22).await.len(), 22, "one command each");
    for s in &tenants {
        let got = app.get("/claims/CLM-SAME", &s.access).await;
        assert_eq!(got.status, StatusCode::OK, "{}", got.body);
        assert_eq!(
            intake_audit_records(&app, s, "CLM-SAME").await,
            1,
            "one intake audit record per tenant"
        );
    }
}

/// Batches of a busy moment may share a transaction (on SQLite they join the intake
/// committer's groups): a claim id in four simultaneous batches and a single intake of
/// each of two tenants is accepted once per tenant, and every request is answered for
/// its own items, in its own order.
async fn simultaneous_batches_accept_a_shared_claim_id_once_and_answer_each_in_order(b: Backend) {
    let app = TestApp::spawn(b).await;
    let tenants = [
        ready_tenant(&app, "tenant-a").await,
        ready_tenant(&app, "tenant-b").await,
    ];
    for (s, tenant) in tenants.iter().zip(["tenant-a", "tenant-b"]) {
        let batches: Vec<Vec<String>> = (0..4)
            .map(|r| {
                let mut ids: Vec<String> = (0..5).map(|i| format!("CLM-{r}-{i}")).collect();
                ids.insert(r, "CLM-SAME".into());
                ids
            })
            .collect();
        let sends = batches.iter().map(|ids| {
            let items: Vec<Value> = ids.iter().map(|id| claim(id)).collect();
            app.call(
                Method::POST,
                "/claims/batch",
                Some(&s.access),
                Some(Value::Array(items)),
            )
        });
        let (replies, single) = futures::join!(
            futures::future::join_all(sends),
            submit(&app, s, claim("CLM-SAME"))
        );
        let mut same = usize::from(single.status == StatusCode::ACCEPTED);
        for (ids, r) in batches.iter().zip(&replies) {
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            let results = r.body["results"].as_array().unwrap();
            assert_eq!(results.len(), ids.len());
            for (id, item) in ids.iter().zip(results) {
                assert_eq!(item["claim_id"], json!(id), "answered in input order");
                if id == "CLM-SAME" {
                    if item["status"] == "received" {
                        same += 1;
                    } else {
                        assert_eq!(item["error"]["code"], "CLAIM_DUPLICATE", "{item}");
                    }
                } else {
                    assert_eq!(item["status"], "received", "{item}");
                }
            }
            assert_eq!(
                r.body["accepted"],
                json!(results.iter().filter(|i| i["status"] == "received").count())
            );
        }
        assert_eq!(same, 1, "CLM-SAME accepted once for {tenant}");
        assert_eq!(
            intake_audit_records(&app, s, "CLM-SAME").await,
            1,
            "one intake audit record per tenant"
        );
    }
    assert_eq!(
        intake_records(&app, 42).await.len(),
        42,
        "one command per accepted claim"
    );
}

/// The tenant's `claim.received` audit records of a claim.
async fn intake_audit_records(app: &TestApp, s: &Session, claim_id: &str) -> usize {
    let audit = app
        .get(&format!("/audit?entity_id={claim_id}"), &s.access)
        .await;
    audit.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "claim.received")
        .count()
}

async fn intake_records(app: &TestApp, n: usize) -> Vec<pipeline::bus::Record> {
    app.records_of(&app.state.topics.intake, n).await
}

async fn a_batch_checks_each_item_and_answers_in_input_order(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    assert_eq!(
        submit(&app, &s, claim("CLM-OLD")).await.status,
        StatusCode::ACCEPTED
    );
    let mut bad_amount = claim("CLM-B");
    bad_amount["claim_amount"] = json!(-1);
    let mut uncontracted = claim("CLM-C");
    uncontracted["provider_id"] = json!("PRV-9");
    let items = json!([claim("CLM-A"), bad_amount, uncontracted, claim("CLM-OLD"), claim("CLM-D"), claim("CLM-A"), {"claim_id": 5}]);
    let r = app
        .call(Method::POST, "/claims/batch", Some(&s.access), Some(items))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["accepted"], 2);
    assert_eq!(r.body["rejected"], 5);
    let results = r.body["results"].as_array().unwrap();
    assert_eq!(
        results[0],
        json!({"claim_id": "CLM-A", "status": "received"})
    );
    assert_eq!(results[1]["error"]["code"], "VALIDATION_ERROR");
    assert_eq!(results[1]["error"]["field"], "claim_amount");
    assert_eq!(results[1]["claim_id"], "CLM-B");
    assert_eq!(results[2]["error"]["code"], "PROVIDER_NOT_CONTRACTED");
    assert_eq!(results[3]["error"]["code"], "CLAIM_DUPLICATE");
    assert_eq!(
        results[4],
        json!({"claim_id": "CLM-D", "status": "received"})
    );
    assert_eq!(
        results[5]["error"]["code"], "CLAIM_DUPLICATE",
        "a repeat within the batch"
    );
    assert_eq!(results[6]["error"]["code"], "VALIDATION_ERROR");
    assert_eq!(results[6]["claim_id"], Value::Null);
    assert_eq!(
        app.get("/claims/CLM-D", &s.access).await.status,
        StatusCode::OK
    );
    app.get("/claims/CLM-B", &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");

    let not_array = app
        .call(
            Method::POST,
            "/claims/batch",
            Some(&s.access),
            Some(json!({"claim_id": "x"})),
        )
        .await;
    not_array.assert_error(StatusCode::BAD_REQUEST, "BAD_REQUEST");
}

/// An item whose check needs the store while it is away is no fault of the item: the
/// whole batch is answered 503, as that claim alone would be, never 200 with the item
/// rejected as `INTERNAL_ERROR` beside accepted neighbours.
async fn a_batch_checked_while_the_store_is_away_is_answered_503_whole(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    // The rulebook and the session are read, and cached, before the store goes away.
    let r = submit(&app, &s, claim("CLM-0")).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    // A provider never looked up before: its contract is read from the store.
    let mut unseen = claim("CLM-1");
    unseen["provider_id"] = json!("PRV-7");
    app.store.close().await;
    submit(&app, &s, unseen.clone())
        .await
        .assert_error(StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE");
    submit_batch(&app, &s, vec![unseen])
        .await
        .assert_error(StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE");
}

async fn a_batch_may_be_ndjson(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let body: String = (0..3)
        .map(|i| format!("{}\n", claim(&format!("CLM-N{i}"))))
        .collect();
    let res = app
        .client
        .post(app.url("/claims/batch"))
        .bearer_auth(&s.access)
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .unwrap();
    let r = Reply::from(res).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["accepted"], 3);
}

/// Each item's own text is parsed, as single intake parses a body: an item a claim alone
/// would be refused for (here a member given twice, which a tree of values would have
/// quietly resolved to its last value) is refused in a batch too, with the same error.
async fn a_batch_item_is_read_exactly_as_single_intake_reads_a_claim(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let text = claim("CLM-R").to_string();
    let twice = format!("{{\"claim_amount\":-1,{}", &text[1..]);
    let post = |path: &'static str, body: String| {
        let app = &app;
        let token = s.access.clone();
        async move {
            let res = app
                .client
                .post(app.url(path))
                .bearer_auth(token)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            Reply::from(res).await
        }
    };
    let alone = post("/claims/intake", twice.clone()).await;
    assert_eq!(
        alone.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        alone.body
    );
    let batch = post("/claims/batch", format!("[{twice},{}]", claim("CLM-S"))).await;
    assert_eq!(batch.status, StatusCode::OK, "{}", batch.body);
    assert_eq!(batch.body["accepted"], 1, "{}", batch.body);
    let item = &batch.body["results"][0];
    assert_eq!(item["claim_id"], "CLM-R");
    assert_eq!(item["error"]["code"], alone.body["error"]["code"]);
    assert_eq!(item["error"]["message"], alone.body["error"]["message"]);
    assert_eq!(item["error"].get("field"), alone.body["error"].get("field"));
    app.get("/claims/CLM-R", &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");
}

async fn claims_of_another_tenant_are_not_found(b: Backend) {
    let app = TestApp::spawn(b).await;
    let a = ready_tenant(&app, "tenant-a").await;
    let other = ready_tenant(&app, "tenant-b").await;
    assert_eq!(
        submit(&app, &a, claim("CLM-1")).await.status,
        StatusCode::ACCEPTED
    );
    app.get("/claims/CLM-1", &other.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");
    assert_eq!(
        app.get("/claims", &other.access).await.body["data"],
        json!([])
    );
    // Ids are unique per tenant only.
    assert_eq!(
        submit(&app, &other, claim("CLM-1")).await.status,
        StatusCode::ACCEPTED
    );
    let reader = app.session("tenant-a", "providers:read").await;
    app.get("/claims/CLM-1", &reader.access)
        .await
        .assert_error(StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
}

async fn claims_are_listed_with_filters_and_a_cursor(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    for i in 0..5 {
        assert_eq!(
            submit(&app, &s, claim(&format!("CLM-{i}"))).await.status,
            StatusCode::ACCEPTED
        );
    }
    let mut seen = Vec::new();
    let mut path = "/claims?limit=2".to_owned();
    loop {
        let page = app.get(&path, &s.access).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        seen.extend(
            page.body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["claim_id"].as_str().unwrap().to_owned()),
        );
        match page.body["next_cursor"].as_str() {
            Some(c) => path = format!("/claims?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, ["CLM-0", "CLM-1", "CLM-2", "CLM-3", "CLM-4"]);
    // The pipeline decides the claims while the test runs: let it settle, then every
    // claim is in exactly one status, and each filter returns only its own.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !app.get("/claims?status=received", &s.access).await.body["data"]
        .as_array()
        .unwrap()
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "claims were not decided"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut by_status = 0;
    for status in ["received", "processing", "pending_review", "completed"] {
        let page = app
            .get(
                &format!("/claims?status={status}&provider_id=PRV-1"),
                &s.access,
            )
            .await;
        let data = page.body["data"].as_array().unwrap();
        assert!(
            data.iter().all(|c| c["status"] == status),
            "{status}: {}",
            page.body
        );
        by_status += data.len();
    }
    assert_eq!(by_status, 5);
    assert_eq!(
        app.get("/claims?provider_id=PRV-2", &s.access).await.body["data"],
        json!([])
    );
    let none = app.get("/claims?outcome=BLOCKED", &s.access).await;
    assert_eq!(none.body["data"], json!([]));
    let later = app
        .get("/claims?received_after=2999-01-01T00:00:00Z", &s.access)
        .await;
    assert_eq!(later.body["data"], json!([]));
    for (bad, field) in [
        ("/claims?status=done", "status"),
        ("/claims?outcome=ok", "outcome"),
        ("/claims?received_after=yesterday", "received_after"),
    ] {
        let r = app.get(bad, &s.access).await;
        assert_eq!(
            r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
                .as_deref(),
            Some(field)
        );
    }
}
