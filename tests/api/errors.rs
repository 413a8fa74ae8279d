//! The error conventions (spec: Errors; contract: Conventions): one body shape with the
//! request id, 400/403/404/405/413/422, on every route including axum's own refusals.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{Backend, Reply, TestApp};

crate::both_backends!(
    every_response_carries_a_request_id_and_a_valid_client_id_is_echoed,
    an_unknown_route_is_404_not_found,
    a_wrong_method_is_405_method_not_allowed,
    a_body_over_the_limit_is_413,
    a_token_without_the_scope_is_403_insufficient_scope,
);

async fn every_response_carries_a_request_id_and_a_valid_client_id_is_echoed(b: Backend) {
    let app = TestApp::spawn(b).await;
    let ok = app
        .client
        .get(app.url("/health/live"))
        .send()
        .await
        .unwrap();
    let generated = ok.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(uuid::Uuid::parse_str(&generated).is_ok(), "{generated}");

    let echoed = app
        .client
        .get(app.url("/no/such/route"))
        .header("x-request-id", "trace-123.abc:def")
        .send()
        .await
        .unwrap();
    let r = Reply::from(echoed).await;
    assert_eq!(r.header("x-request-id"), Some("trace-123.abc:def"));
    r.assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");

    // An id that could smuggle something into logs is replaced, not echoed.
    let replaced = app
        .client
        .get(app.url("/health/live"))
        .header("x-request-id", "bad id with spaces")
        .send()
        .await
        .unwrap();
    assert_ne!(replaced.headers()["x-request-id"], "bad id with spaces");
}

async fn an_unknown_route_is_404_not_found(b: Backend) {
    let app = TestApp::spawn(b).await;
    for path in [
        "/api/v1/nothing-here",
        "/api/v2/health/live",
        // `/` opens the console (tests/api/console.rs).
        "/nothing-here",
        "/console/nothing-here",
        "/api/v1/tenant/settings/extra",
    ] {
        let res = app
            .client
            .get(format!("http://{}{path}", app.addr))
            .send()
            .await
            .unwrap();
        Reply::from(res)
            .await
            .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    }
}

async fn a_wrong_method_is_405_method_not_allowed(b: Backend) {
    let app = TestApp::spawn(b).await;
    let r = app
        .call(Method::DELETE, "/tenant/settings", None, None)
        .await;
    r.assert_error(StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED");
    let r = app.call(Method::GET, "/auth/login", None, None).await;
    r.assert_error(StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED");
}

async fn a_body_over_the_limit_is_413(b: Backend) {
    let app = TestApp::spawn_with(b, |s| s.max_body_bytes = 4096).await;
    let s = app.session("acme", "tenant:configure").await;
    let big = json!({ "padding": "x".repeat(8192) });
    let r = app
        .call(
            Method::PATCH,
            "/tenant/settings",
            Some(&s.access),
            Some(big),
        )
        .await;
    r.assert_error(StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE");
    assert_eq!(
        r.body["error"]["message"],
        "the request body exceeds the limit of 4096 bytes"
    );
    // The unread rest of the body ends the connection, and the answer says so.
    assert_eq!(r.headers["connection"], "close");
    let r = app
        .call(
            Method::POST,
            "/auth/login",
            None,
            Some(json!({ "email": "x".repeat(8192), "password": "p" })),
        )
        .await;
    r.assert_error(StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE");
    // Nothing changed.
    assert_eq!(
        app.get("/tenant/settings", &s.access).await.body["rate_limit_per_minute"],
        60000
    );
}

async fn a_token_without_the_scope_is_403_insufficient_scope(b: Backend) {
    let app = TestApp::spawn(b).await;
    let reader = app.session("acme", "claims:read providers:read").await;
    let r = app.get("/tenant/settings", &reader.access).await;
    r.assert_error(StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("tenant:configure"));
    let r = app
        .call(
            Method::PATCH,
            "/tenant/settings",
            Some(&reader.access),
            Some(json!({ "fraud_flag_threshold": 0.1 })),
        )
        .await;
    r.assert_error(StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
    let admin = app.session("acme", "tenant:configure").await;
    assert_eq!(
        app.get("/tenant/settings", &admin.access).await.body["fraud_flag_threshold"],
        0.8
    );
}
