//! Refresh, rotation, reuse detection and logout (spec: Authentication 4, 7; contract:
//! Auth).

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{refresh_cookie, set_cookie, Backend, Reply, TestApp};

crate::both_backends!(
    refresh_from_the_cookie_rotates_the_token_and_answers_a_working_access_token,
    refresh_from_the_body_returns_the_rotated_token_in_the_body,
    a_reused_refresh_token_revokes_its_whole_session_and_only_that_one,
    concurrent_refreshes_with_one_token_rotate_it_once,
    refresh_without_a_token_or_with_an_unknown_one_is_401,
    logout_by_cookie_ends_the_session_and_its_access_tokens,
    logout_by_body_token_or_bearer_token_ends_the_session,
    logout_without_a_credential_is_401,
);

async fn refresh_with_cookie(app: &TestApp, token: &str) -> Reply {
    let res = app
        .client
        .post(app.url("/auth/refresh"))
        .header("cookie", format!("service_refresh_token={token}"))
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    Reply::from(res).await
}

async fn refresh_with_body(app: &TestApp, token: &str) -> Reply {
    app.call(
        Method::POST,
        "/auth/refresh",
        None,
        Some(json!({ "refresh_token": token })),
    )
    .await
}

async fn refresh_from_the_cookie_rotates_the_token_and_answers_a_working_access_token(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure").await;
    let r = refresh_with_cookie(&app, &s.refresh).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["expires_in"], 900);
    assert_eq!(r.body["token_type"], "bearer");
    assert!(
        r.body.get("refresh_token").is_none(),
        "cookie in, cookie out"
    );
    let rotated = refresh_cookie(&r.headers).expect("a new refresh cookie");
    assert_ne!(rotated, s.refresh);
    let access = r.body["access_token"].as_str().unwrap();
    assert_ne!(access, s.access);
    assert_eq!(
        app.get("/tenant/settings", access).await.status,
        StatusCode::OK
    );
    // The rotated token works in turn.
    assert_eq!(
        refresh_with_cookie(&app, &rotated).await.status,
        StatusCode::OK
    );
}

async fn refresh_from_the_body_returns_the_rotated_token_in_the_body(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure").await;
    let r = refresh_with_body(&app, &s.refresh).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let in_body = r.body["refresh_token"]
        .as_str()
        .expect("rotated token in the body")
        .to_owned();
    assert_eq!(
        refresh_cookie(&r.headers).as_deref(),
        Some(in_body.as_str()),
        "and in the cookie"
    );
    assert_ne!(in_body, s.refresh);
    assert_eq!(
        refresh_with_body(&app, &in_body).await.status,
        StatusCode::OK
    );
}

async fn a_reused_refresh_token_revokes_its_whole_session_and_only_that_one(b: Backend) {
    let app = TestApp::spawn(b).await;
    let (email, password) = app.user("acme", "tenant:configure").await;
    let victim = app.login(&email, &password).await;
    let other = app.login(&email, &password).await;

    let first = refresh_with_cookie(&app, &victim.refresh).await;
    assert_eq!(first.status, StatusCode::OK);
    let current = refresh_cookie(&first.headers).unwrap();
    let new_access = first.body["access_token"].as_str().unwrap().to_owned();

    // The old token again: a thief or a replay. The whole session ends.
    refresh_with_cookie(&app, &victim.refresh)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    refresh_with_cookie(&app, &current)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    for access in [&victim.access, &new_access] {
        app.get("/tenant/settings", access)
            .await
            .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    }
    // The user's other session lives on.
    assert_eq!(
        app.get("/tenant/settings", &other.access).await.status,
        StatusCode::OK
    );
    assert_eq!(
        refresh_with_cookie(&app, &other.refresh).await.status,
        StatusCode::OK
    );
}

async fn concurrent_refreshes_with_one_token_rotate_it_once(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "claims:read").await;
    let attempts = (0..8).map(|_| refresh_with_cookie(&app, &s.refresh));
    let replies = futures::future::join_all(attempts).await;
    let ok = replies
        .iter()
        .filter(|r| r.status == StatusCode::OK)
        .count();
    assert!(
        ok <= 1,
        "at most one presentation of a token may rotate it, got {ok}"
    );
    for r in replies.iter().filter(|r| r.status != StatusCode::OK) {
        r.assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    }
}

async fn refresh_without_a_token_or_with_an_unknown_one_is_401(b: Backend) {
    let app = TestApp::spawn(b).await;
    let none = app.call(Method::POST, "/auth/refresh", None, None).await;
    none.assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    refresh_with_cookie(&app, "not-a-token")
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    refresh_with_body(&app, "not-a-token")
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    let bad_body = app
        .call(
            Method::POST,
            "/auth/refresh",
            None,
            Some(json!({ "refresh_token": 7 })),
        )
        .await;
    bad_body.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
}

async fn logout_by_cookie_ends_the_session_and_its_access_tokens(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure").await;
    assert_eq!(
        app.get("/tenant/settings", &s.access).await.status,
        StatusCode::OK
    );
    let res = app
        .client
        .post(app.url("/auth/logout"))
        .header("cookie", format!("service_refresh_token={}", s.refresh))
        .send()
        .await
        .unwrap();
    let r = Reply::from(res).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let cleared = set_cookie(&r.headers).expect("the cookie is cleared");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    assert!(cleared.contains("Path=/api/v1/auth"), "{cleared}");
    app.get("/tenant/settings", &s.access)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    refresh_with_cookie(&app, &s.refresh)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
}

async fn logout_by_body_token_or_bearer_token_ends_the_session(b: Backend) {
    let app = TestApp::spawn(b).await;
    let (email, password) = app.user("acme", "tenant:configure").await;
    let by_body = app.login(&email, &password).await;
    let by_bearer = app.login(&email, &password).await;
    let survivor = app.login(&email, &password).await;

    let r = app
        .call(
            Method::POST,
            "/auth/logout",
            None,
            Some(json!({ "refresh_token": by_body.refresh })),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = app
        .call(Method::POST, "/auth/logout", Some(&by_bearer.access), None)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);

    for gone in [&by_body, &by_bearer] {
        app.get("/tenant/settings", &gone.access)
            .await
            .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    }
    assert_eq!(
        app.get("/tenant/settings", &survivor.access).await.status,
        StatusCode::OK
    );
}

async fn logout_without_a_credential_is_401(b: Backend) {
    let app = TestApp::spawn(b).await;
    app.call(Method::POST, "/auth/logout", None, None)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    app.call(Method::POST, "/auth/logout", Some("garbage"), None)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
}
