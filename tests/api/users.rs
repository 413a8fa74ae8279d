//! Tenant users (contract: Tenants and users).

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{Backend, TestApp};

crate::both_backends!(
    users_are_created_listed_changed_and_deleted,
    disabling_a_user_ends_their_sessions_at_once,
    user_input_is_validated,
    users_of_another_tenant_are_invisible,
    a_user_cannot_disable_or_delete_themselves,
);

async fn a_user_cannot_disable_or_delete_themselves(b: Backend) {
    let app = TestApp::spawn(b).await;
    let admin = app.session("acme", "tenant:configure").await;
    let (_, claims) = crate::support::jwt::parts(&admin.access);
    let me = format!("/tenant/users/{}", claims["sub"].as_str().unwrap());
    let r = app
        .call(
            Method::PATCH,
            &me,
            Some(&admin.access),
            Some(json!({"disabled": true})),
        )
        .await;
    assert_eq!(
        r.assert_error(StatusCode::CONFLICT, "CONFLICT").as_deref(),
        Some("user_id")
    );
    app.call(Method::DELETE, &me, Some(&admin.access), None)
        .await
        .assert_error(StatusCode::CONFLICT, "CONFLICT");
    // Still there, still able to work.
    let r = app.get("/tenant/users", &admin.access).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["data"][0]["disabled"], false);
}

async fn users_are_created_listed_changed_and_deleted(b: Backend) {
    let app = TestApp::spawn(b).await;
    let admin = app.session("acme", "tenant:configure").await;
    let r = app
        .call(Method::POST, "/tenant/users", Some(&admin.access), Some(json!({"email": "Officer@Acme.example", "password": "long-password", "scopes": ["workflow:manage", "claims:read"]})))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["email"], "officer@acme.example");
    assert_eq!(r.body["scopes"], json!(["claims:read", "workflow:manage"]));
    assert_eq!(r.body["disabled"], false);
    assert!(r.body.get("password").is_none() && r.body.get("password_hash").is_none());
    let user_id = r.body["user_id"].as_str().unwrap().to_owned();

    let officer = app.login("officer@acme.example", "long-password").await;
    let list = app.get("/tenant/users", &admin.access).await;
    assert!(list.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|u| u["user_id"] == user_id.as_str()));

    let r = app
        .call(
            Method::PATCH,
            &format!("/tenant/users/{user_id}"),
            Some(&admin.access),
            Some(json!({"scopes": ["claims:read"]})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["scopes"], json!(["claims:read"]));
    // A scope change keeps the session; the next token carries the new scopes.
    let refreshed = app
        .call(
            Method::POST,
            "/auth/refresh",
            None,
            Some(json!({"refresh_token": officer.refresh})),
        )
        .await;
    assert_eq!(refreshed.status, StatusCode::OK);
    let token = refreshed.body["access_token"].as_str().unwrap();
    assert_eq!(crate::support::jwt::parts(token).1["scope"], "claims:read");

    let d = app
        .call(
            Method::DELETE,
            &format!("/tenant/users/{user_id}"),
            Some(&admin.access),
            None,
        )
        .await;
    assert_eq!(d.status, StatusCode::NO_CONTENT);
    app.get("/health/live", token).await;
    let login =
        crate::support::Reply::from(app.login_raw("officer@acme.example", "long-password").await)
            .await;
    login.assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    app.call(
        Method::DELETE,
        &format!("/tenant/users/{user_id}"),
        Some(&admin.access),
        None,
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
}

async fn disabling_a_user_ends_their_sessions_at_once(b: Backend) {
    let app = TestApp::spawn(b).await;
    let admin = app.session("acme", "tenant:configure").await;
    let (email, password) = app.user("acme", "tenant:configure").await;
    let victim = app.login(&email, &password).await;
    assert_eq!(
        app.get("/tenant/settings", &victim.access).await.status,
        StatusCode::OK
    );
    let user_id = crate::support::jwt::parts(&victim.access).1["sub"]
        .as_str()
        .unwrap()
        .to_owned();

    let r = app
        .call(
            Method::PATCH,
            &format!("/tenant/users/{user_id}"),
            Some(&admin.access),
            Some(json!({"disabled": true})),
        )
        .await;
    assert_eq!(r.body["disabled"], true);
    app.get("/tenant/settings", &victim.access)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    app.call(
        Method::POST,
        "/auth/refresh",
        None,
        Some(json!({"refresh_token": victim.refresh})),
    )
    .await
    .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    crate::support::Reply::from(app.login_raw(&email, &password).await)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    // Enabled again, the user can log in.
    app.call(
        Method::PATCH,
        &format!("/tenant/users/{user_id}"),
        Some(&admin.access),
        Some(json!({"disabled": false})),
    )
    .await;
    app.login(&email, &password).await;
}

async fn user_input_is_validated(b: Backend) {
    let app = TestApp::spawn(b).await;
    let admin = app.session("acme", "tenant:configure").await;
    for (body, status, field) in [
        (
            json!({"email": "nope", "password": "long-password", "scopes": []}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "email",
        ),
        (
            json!({"email": "a@b.example", "password": "short", "scopes": []}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "password",
        ),
        (
            json!({"email": "a@b.example", "password": "long-password", "scopes": ["root"]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "scopes[0]",
        ),
        (
            json!({"email": "a@b.example", "scopes": []}),
            StatusCode::BAD_REQUEST,
            "password",
        ),
    ] {
        let r = app
            .call(
                Method::POST,
                "/tenant/users",
                Some(&admin.access),
                Some(body.clone()),
            )
            .await;
        let code = if status == StatusCode::BAD_REQUEST {
            "BAD_REQUEST"
        } else {
            "VALIDATION_ERROR"
        };
        assert_eq!(
            r.assert_error(status, code).as_deref(),
            Some(field),
            "{body}"
        );
    }
    let (taken, _) = app.user("elsewhere", "claims:read").await;
    let r = app
        .call(
            Method::POST,
            "/tenant/users",
            Some(&admin.access),
            Some(json!({"email": taken, "password": "long-password", "scopes": []})),
        )
        .await;
    assert_eq!(
        r.assert_error(StatusCode::CONFLICT, "CONFLICT").as_deref(),
        Some("email")
    );
}

async fn users_of_another_tenant_are_invisible(b: Backend) {
    let app = TestApp::spawn(b).await;
    let a = app.session("tenant-a", "tenant:configure").await;
    let other = app.session("tenant-b", "tenant:configure").await;
    let a_id = crate::support::jwt::parts(&a.access).1["sub"]
        .as_str()
        .unwrap()
        .to_owned();
    app.call(
        Method::PATCH,
        &format!("/tenant/users/{a_id}"),
        Some(&other.access),
        Some(json!({"disabled": true})),
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    app.call(
        Method::DELETE,
        &format!("/tenant/users/{a_id}"),
        Some(&other.access),
        None,
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    let list = app.get("/tenant/users", &other.access).await;
    assert!(list.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|u| u["user_id"] != a_id.as_str()));
    assert_eq!(
        app.get("/tenant/settings", &a.access).await.status,
        StatusCode::OK,
        "A is untouched"
    );
}
