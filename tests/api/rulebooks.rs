//! Rulebooks (contract: Rulebooks).

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{Backend, TestApp};

crate::both_backends!(
    a_rulebook_is_created_as_a_draft_with_the_next_version_and_published,
    an_expression_that_does_not_compile_is_refused_with_its_field,
    a_rule_that_cannot_work_is_refused_at_create_with_its_field_and_why,
    many_simultaneous_publishes_leave_exactly_one_active_rulebook,
    rulebooks_of_another_tenant_are_invisible,
);

fn sample_rules() -> Value {
    json!([
        {"rule_id": "big", "description": "Very large claims", "when": "claim.claim_amount > 1000000", "action": "block", "reason_code": "AMOUNT_LIMIT"},
        {"rule_id": "cardio", "when": "provider.specialty == 'cardiology'", "action": "flag", "reason_code": "SPECIALTY_REVIEW"},
        {"rule_id": "cosmetic", "when": "'Z41.1' in claim.diagnosis_codes", "action": "decline", "reason_code": "NOT_COVERED"},
        {"rule_id": "discount", "when": "member_history.claims_last_24h > 5", "action": "adjust", "reason_code": "FREQUENCY", "approved_amount": "claim.claim_amount / 2"}
    ])
}

async fn create(app: &TestApp, token: &str, name: &str) -> Value {
    let r = app
        .call(
            Method::POST,
            "/rulebooks",
            Some(token),
            Some(json!({"name": name, "rules": sample_rules()})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    r.body
}

async fn a_rulebook_is_created_as_a_draft_with_the_next_version_and_published(b: Backend) {
    let app = TestApp::spawn(b).await;
    let w = app.session("acme", "rulebooks:write rulebooks:read").await;
    app.get("/rulebooks/active", &w.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");

    let first = create(&app, &w.access, "Standard").await;
    assert_eq!(first["status"], "draft");
    assert_eq!(first["version"], 1);
    assert_eq!(
        first["rules"],
        sample_rules()
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.as_object_mut()
                    .unwrap()
                    .entry("description")
                    .or_insert(json!(""));
                r
            })
            .collect::<Value>()
    );
    let second = create(&app, &w.access, "Stricter").await;
    assert_eq!(second["version"], 2);

    let id1 = first["rulebook_id"].as_str().unwrap();
    let id2 = second["rulebook_id"].as_str().unwrap();
    let p = app
        .call(
            Method::POST,
            &format!("/rulebooks/{id1}/publish"),
            Some(&w.access),
            None,
        )
        .await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.body);
    assert_eq!(p.body["status"], "active");
    assert!(p.body["published_at"].is_string());
    assert_eq!(
        app.get("/rulebooks/active", &w.access).await.body["rulebook_id"],
        id1
    );

    app.call(
        Method::POST,
        &format!("/rulebooks/{id2}/publish"),
        Some(&w.access),
        None,
    )
    .await;
    assert_eq!(
        app.get("/rulebooks/active", &w.access).await.body["rulebook_id"],
        id2
    );
    assert_eq!(
        app.get(&format!("/rulebooks/{id1}"), &w.access).await.body["status"],
        "retired"
    );
    // Rolling back: the retired one again.
    app.call(
        Method::POST,
        &format!("/rulebooks/{id1}/publish"),
        Some(&w.access),
        None,
    )
    .await;
    assert_eq!(
        app.get("/rulebooks/active", &w.access).await.body["version"],
        1
    );

    let list = app.get("/rulebooks?limit=1", &w.access).await;
    assert_eq!(list.body["data"][0]["version"], 2, "newest first");
    let next = list.body["next_cursor"].as_str().unwrap();
    let rest = app
        .get(&format!("/rulebooks?limit=1&cursor={next}"), &w.access)
        .await;
    assert_eq!(rest.body["data"][0]["version"], 1);
    assert_eq!(rest.body["next_cursor"], Value::Null);

    app.call(
        Method::POST,
        "/rulebooks/rb_nope/publish",
        Some(&w.access),
        None,
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
}

async fn a_rule_that_cannot_work_is_refused_at_create_with_its_field_and_why(b: Backend) {
    let app = TestApp::spawn(b).await;
    let w = app.session("acme", "rulebooks:write rulebooks:read").await;
    // (rule, field, expression, what the message must say)
    let cases = [
        (
            0,
            "when",
            "claim.claim_amout > 100",
            "no field `claim_amout`",
        ),
        (1, "when", "claim.claim_amount > \"100\"", "int and string"),
        (
            1,
            "when",
            "size(claim.claim_amount) > 1",
            "`size` cannot be applied to int",
        ),
        (
            2,
            "when",
            "claim.claim_amount + 1",
            "must be a condition (bool)",
        ),
        (
            3,
            "approved_amount",
            "claim.claim_amount * 0.5",
            "int and double",
        ),
        (
            3,
            "approved_amount",
            "double(claim.claim_amount) / 2.0",
            "integer amount",
        ),
        (
            3,
            "approved_amount",
            "claim.claim_amount > 1",
            "integer amount",
        ),
        (0, "carc", "forty-five", "must be a CARC"),
        (
            1,
            "when",
            "line.amount > 100",
            "defined only in deny_line rules",
        ),
        (1, "rarc", "n130", "must be a RARC"),
    ];
    for (i, field, expr, says) in cases {
        let mut rules = sample_rules();
        rules[i][field] = json!(expr);
        let r = app
            .call(
                Method::POST,
                "/rulebooks",
                Some(&w.access),
                Some(json!({"name": "Unworkable", "rules": rules})),
            )
            .await;
        assert_eq!(
            r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
                .as_deref(),
            Some(format!("rules[{i}].{field}").as_str()),
            "{expr}"
        );
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{expr}: {message}");
    }
    // Nothing was created.
    let listed = app.get("/rulebooks", &w.access).await;
    assert_eq!(listed.body["data"], json!([]), "{}", listed.body);
}

async fn an_expression_that_does_not_compile_is_refused_with_its_field(b: Backend) {
    let app = TestApp::spawn(b).await;
    let w = app.session("acme", "rulebooks:write rulebooks:read").await;
    let mut rules = sample_rules();
    rules[1]["when"] = json!("provider.specialty ==");
    let r = app
        .call(
            Method::POST,
            "/rulebooks",
            Some(&w.access),
            Some(json!({"name": "Broken", "rules": rules})),
        )
        .await;
    assert_eq!(
        r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
            .as_deref(),
        Some("rules[1].when")
    );

    let mut rules = sample_rules();
    rules[2]["when"] = json!("patient.age > 40");
    let r = app
        .call(
            Method::POST,
            "/rulebooks",
            Some(&w.access),
            Some(json!({"name": "Unknown", "rules": rules})),
        )
        .await;
    assert_eq!(
        r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
            .as_deref(),
        Some("rules[2].when")
    );
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("patient"));

    let mut rules = sample_rules();
    rules[3]["approved_amount"] = json!("claim.claim_amount *");
    let r = app
        .call(
            Method::POST,
            "/rulebooks",
            Some(&w.access),
            Some(json!({"name": "Adj", "rules": rules})),
        )
        .await;
    assert_eq!(
        r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
            .as_deref(),
        Some("rules[3].approved_amount")
    );

    let mut rules = sample_rules();
    rules[0]["action"] = json!("escalate");
    let r = app
        .call(
            Method::POST,
            "/rulebooks",
            Some(&w.access),
            Some(json!({"name": "Act", "rules": rules})),
        )
        .await;
    assert_eq!(
        r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
            .as_deref(),
        Some("rules[0].action")
    );

    let r = app
        .call(
            Method::POST,
            "/rulebooks",
            Some(&w.access),
            Some(json!({"rules": []})),
        )
        .await;
    assert_eq!(
        r.assert_error(StatusCode::BAD_REQUEST, "BAD_REQUEST")
            .as_deref(),
        Some("name")
    );

    assert_eq!(
        app.get("/rulebooks", &w.access).await.body["data"],
        json!([]),
        "nothing was stored"
    );
}

async fn many_simultaneous_publishes_leave_exactly_one_active_rulebook(b: Backend) {
    let app = TestApp::spawn_with(b, |s| s.database_max_connections = Some(8)).await;
    let w = app.session("acme", "rulebooks:write rulebooks:read").await;
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(
            create(&app, &w.access, &format!("rb{i}")).await["rulebook_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    // Every rulebook published at once, twice over.
    let paths: Vec<String> = ids
        .iter()
        .chain(ids.iter())
        .map(|id| format!("/rulebooks/{id}/publish"))
        .collect();
    let publishes = paths
        .iter()
        .map(|p| app.call(Method::POST, p, Some(&w.access), None));
    let replies = futures::future::join_all(publishes).await;
    for r in &replies {
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    }
    let all = app.get("/rulebooks?limit=100", &w.access).await;
    let active: Vec<&Value> = all.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "active")
        .collect();
    assert_eq!(active.len(), 1, "exactly one active rulebook");
    assert_eq!(
        app.get("/rulebooks/active", &w.access).await.body["rulebook_id"],
        active[0]["rulebook_id"]
    );
}

async fn rulebooks_of_another_tenant_are_invisible(b: Backend) {
    let app = TestApp::spawn(b).await;
    let a = app
        .session("tenant-a", "rulebooks:write rulebooks:read")
        .await;
    let other = app
        .session("tenant-b", "rulebooks:write rulebooks:read")
        .await;
    let id = create(&app, &a.access, "A's").await["rulebook_id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.get(&format!("/rulebooks/{id}"), &other.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    app.call(
        Method::POST,
        &format!("/rulebooks/{id}/publish"),
        Some(&other.access),
        None,
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    // Versions are per tenant.
    assert_eq!(create(&app, &other.access, "B's").await["version"], 1);
}
