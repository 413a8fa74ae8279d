//! Providers and contracts (contract: Providers and contracts).

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{Backend, TestApp};

crate::both_backends!(
    a_provider_is_created_read_and_listed_with_pagination,
    provider_input_is_validated,
    contracts_are_created_listed_and_change_status_with_terminated_final,
    contract_input_is_validated,
    the_contracted_check_follows_status_and_dates,
    providers_of_another_tenant_are_invisible,
);

async fn a_provider_is_created_read_and_listed_with_pagination(b: Backend) {
    let app = TestApp::spawn(b).await;
    let w = app.session("acme", "providers:write providers:read").await;
    let r = app
        .call(Method::POST, "/providers", Some(&w.access), Some(json!({"provider_id": "PRV-1", "name": "Heart Clinic", "npi": "1234567893", "specialty": "cardiology"})))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.header("location"), Some("/api/v1/providers/PRV-1"));
    assert_eq!(r.body["provider_id"], "PRV-1");
    assert_eq!(r.body["npi"], "1234567893");
    let dup = app
        .call(
            Method::POST,
            "/providers",
            Some(&w.access),
            Some(json!({"provider_id": "PRV-1", "name": "Again"})),
        )
        .await;
    dup.assert_error(StatusCode::CONFLICT, "CONFLICT");

    for i in 2..=5 {
        app.call(
            Method::POST,
            "/providers",
            Some(&w.access),
            Some(json!({"provider_id": format!("PRV-{i}"), "name": "P"})),
        )
        .await;
    }
    let got = app.get("/providers/PRV-1", &w.access).await;
    assert_eq!(got.body["name"], "Heart Clinic");
    app.get("/providers/PRV-404", &w.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/providers?limit=2&cursor={c}"),
            None => "/providers?limit=2".to_owned(),
        };
        let page = app.get(&path, &w.access).await;
        assert_eq!(page.status, StatusCode::OK);
        let data = page.body["data"].as_array().unwrap();
        assert!(data.len() <= 2);
        seen.extend(
            data.iter()
                .map(|p| p["provider_id"].as_str().unwrap().to_owned()),
        );
        match page.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, ["PRV-1", "PRV-2", "PRV-3", "PRV-4", "PRV-5"]);
}

async fn provider_input_is_validated(b: Backend) {
    let app = TestApp::spawn(b).await;
    let w = app.session("acme", "providers:write providers:read").await;
    for (body, status, code, field) in [
        (
            json!({"name": "x"}),
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
            Some("provider_id"),
        ),
        (
            json!({"provider_id": "bad id", "name": "x"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "VALIDATION_ERROR",
            Some("provider_id"),
        ),
        (
            json!({"provider_id": "P1", "name": ""}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "VALIDATION_ERROR",
            Some("name"),
        ),
        (
            json!({"provider_id": "P1", "name": "x", "npi": "1234567890"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "VALIDATION_ERROR",
            Some("npi"),
        ),
        (
            json!({"provider_id": "P1", "name": "x", "colour": "red"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "VALIDATION_ERROR",
            None,
        ),
    ] {
        let r = app
            .call(
                Method::POST,
                "/providers",
                Some(&w.access),
                Some(body.clone()),
            )
            .await;
        let got = r.assert_error(status, code);
        if field.is_some() {
            assert_eq!(got.as_deref(), field, "{body}");
        }
    }
    for bad in [
        "/providers?limit=0",
        "/providers?limit=501",
        "/providers?limit=x",
        "/providers?cursor=%%%",
    ] {
        let r = app.get(bad, &w.access).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {}",
            r.body
        );
    }
    let r = app.get("/providers?limit=abc", &w.access).await;
    assert_eq!(
        r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
            .as_deref(),
        Some("limit")
    );
    assert_eq!(
        app.get("/providers", &w.access).await.body["data"],
        json!([]),
        "nothing was created"
    );
}

async fn create_provider(app: &TestApp, token: &str, id: &str) {
    let r = app
        .call(
            Method::POST,
            "/providers",
            Some(token),
            Some(json!({"provider_id": id, "name": "P"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
}

async fn contracts_are_created_listed_and_change_status_with_terminated_final(b: Backend) {
    let app = TestApp::spawn(b).await;
    let w = app.session("acme", "providers:write providers:read").await;
    create_provider(&app, &w.access, "PRV-1").await;
    let r = app
        .call(
            Method::POST,
            "/providers/PRV-1/contracts",
            Some(&w.access),
            Some(json!({"effective_from": "2024-01-01", "fee_schedule": {"99213": 9000}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["status"], "active");
    assert_eq!(r.body["effective_to"], serde_json::Value::Null);
    assert_eq!(r.body["fee_schedule"]["99213"], 9000);
    let id = r.body["contract_id"].as_str().unwrap().to_owned();
    assert_eq!(
        r.header("location").unwrap(),
        format!("/api/v1/providers/PRV-1/contracts/{id}")
    );

    let list = app.get("/providers/PRV-1/contracts", &w.access).await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 1);

    let path = format!("/providers/PRV-1/contracts/{id}");
    for status in ["suspended", "active", "terminated"] {
        let r = app
            .call(
                Method::PATCH,
                &path,
                Some(&w.access),
                Some(json!({"status": status})),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["status"], status);
    }
    let reopen = app
        .call(
            Method::PATCH,
            &path,
            Some(&w.access),
            Some(json!({"status": "active"})),
        )
        .await;
    reopen.assert_error(StatusCode::CONFLICT, "CONFLICT");
    let bad = app
        .call(
            Method::PATCH,
            &path,
            Some(&w.access),
            Some(json!({"status": "paused"})),
        )
        .await;
    assert_eq!(
        bad.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
            .as_deref(),
        Some("status")
    );
    app.call(
        Method::PATCH,
        "/providers/PRV-1/contracts/nope",
        Some(&w.access),
        Some(json!({"status": "active"})),
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
}

async fn contract_input_is_validated(b: Backend) {
    let app = TestApp::spawn(b).await;
    let w = app.session("acme", "providers:write providers:read").await;
    create_provider(&app, &w.access, "PRV-1").await;
    for (body, field) in [
        (json!({"effective_from": "2024-02-30"}), "effective_from"),
        (
            json!({"effective_from": "2024-02-01", "effective_to": "2024-01-01"}),
            "effective_to",
        ),
        (
            json!({"effective_from": "2024-02-01", "fee_schedule": {"99213": 0}}),
            "fee_schedule.99213",
        ),
        (
            json!({"effective_from": "2024-02-01", "fee_schedule": {"99213": "x"}}),
            "fee_schedule.99213",
        ),
    ] {
        let r = app
            .call(
                Method::POST,
                "/providers/PRV-1/contracts",
                Some(&w.access),
                Some(body.clone()),
            )
            .await;
        assert_eq!(
            r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
                .as_deref(),
            Some(field),
            "{body}"
        );
    }
    app.call(
        Method::POST,
        "/providers/PRV-1/contracts",
        Some(&w.access),
        Some(json!({})),
    )
    .await
    .assert_error(StatusCode::BAD_REQUEST, "BAD_REQUEST");
    app.call(
        Method::POST,
        "/providers/NOPE/contracts",
        Some(&w.access),
        Some(json!({"effective_from": "2024-01-01"})),
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    assert_eq!(
        app.get("/providers/PRV-1/contracts", &w.access).await.body["data"],
        json!([])
    );
}

async fn the_contracted_check_follows_status_and_dates(b: Backend) {
    use schemas::Date;
    let app = TestApp::spawn(b).await;
    let w = app.session("acme", "providers:write providers:read").await;
    create_provider(&app, &w.access, "PRV-1").await;
    create_provider(&app, &w.access, "PRV-2").await;
    let day = |s: &str| Date::parse(s).unwrap();
    let r = app
        .call(
            Method::POST,
            "/providers/PRV-1/contracts",
            Some(&w.access),
            Some(json!({"effective_from": "2025-01-01", "effective_to": "2025-12-31"})),
        )
        .await;
    let id = r.body["contract_id"].as_str().unwrap().to_owned();
    let check = |d: &'static str, p: &'static str| {
        let store = app.store.clone();
        async move {
            store
                .contracted_provider("acme", p, day(d))
                .await
                .unwrap()
                .map(|c| c.contract.contract_id)
        }
    };
    assert_eq!(
        check("2025-06-01", "PRV-1").await.as_deref(),
        Some(id.as_str())
    );
    assert_eq!(
        check("2024-12-31", "PRV-1").await,
        None,
        "before the contract starts"
    );
    assert_eq!(check("2026-01-01", "PRV-1").await, None, "after it ends");
    assert_eq!(check("2025-06-01", "PRV-2").await, None, "no contract");
    assert!(
        app.store
            .contracted_provider("other", "PRV-1", day("2025-06-01"))
            .await
            .unwrap()
            .is_none(),
        "another tenant"
    );
    app.call(
        Method::PATCH,
        &format!("/providers/PRV-1/contracts/{id}"),
        Some(&w.access),
        Some(json!({"status": "suspended"})),
    )
    .await;
    assert_eq!(check("2025-06-01", "PRV-1").await, None, "suspended");
}

async fn providers_of_another_tenant_are_invisible(b: Backend) {
    let app = TestApp::spawn(b).await;
    let a = app
        .session("tenant-a", "providers:write providers:read")
        .await;
    let other = app
        .session("tenant-b", "providers:write providers:read")
        .await;
    create_provider(&app, &a.access, "PRV-1").await;
    app.get("/providers/PRV-1", &other.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    assert_eq!(
        app.get("/providers", &other.access).await.body["data"],
        json!([])
    );
    app.call(
        Method::POST,
        "/providers/PRV-1/contracts",
        Some(&other.access),
        Some(json!({"effective_from": "2024-01-01"})),
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    // The same id is free in the other tenant.
    create_provider(&app, &other.access, "PRV-1").await;
}
