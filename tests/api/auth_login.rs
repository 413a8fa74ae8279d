//! Login (spec: Authentication 1-3; contract: Auth).

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::{jwt, set_cookie, Backend, TestApp, ALL_SCOPES};

crate::both_backends!(
    login_answers_a_token_that_an_independent_verifier_accepts_against_the_jwks,
    login_sets_the_refresh_cookie_with_the_contract_attributes,
    the_secure_attribute_can_be_turned_off_for_plain_http,
    wrong_email_and_wrong_password_get_the_same_answer,
    login_with_a_missing_field_or_bad_json_is_400,
    a_token_grants_the_scopes_of_its_user,
);

async fn login_answers_a_token_that_an_independent_verifier_accepts_against_the_jwks(b: Backend) {
    let app = TestApp::spawn(b).await;
    let (email, password) = app.user("acme", ALL_SCOPES).await;
    let res = app.login_raw(&email, &password).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["expires_in"], 900);
    assert_eq!(body["token_type"], "bearer");
    assert!(
        body.get("refresh_token").is_none(),
        "login keeps the refresh token in the cookie"
    );
    let token = body["access_token"].as_str().unwrap();

    let jwks = app
        .client
        .get(app.url("/.well-known/jwks.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(jwks.status(), StatusCode::OK);
    let jwks: Value = jwks.json().await.unwrap();
    let (header, claims) = jwt::parts(token);
    assert_eq!(header["alg"], "RS256");
    let kid = header["kid"].as_str().unwrap();
    let jwk = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == kid)
        .expect("the token's kid is in the JWKS");
    assert_eq!(jwk["kty"], "RSA");
    assert_eq!(jwk["alg"], "RS256");
    assert_eq!(jwt::thumbprint(jwk), kid, "kid is the RFC 7638 thumbprint");
    assert!(
        jwt::verify_rs256(token, jwk),
        "signature verifies independently"
    );

    for claim in [
        "iss",
        "sub",
        "tenant_id",
        "scope",
        "sid",
        "iat",
        "exp",
        "jti",
    ] {
        assert!(
            claims.get(claim).is_some(),
            "claim {claim} missing: {claims}"
        );
    }
    assert_eq!(claims["tenant_id"], "acme");
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        900
    );
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    assert!((claims["iat"].as_i64().unwrap() - now).abs() < 60);
}

async fn login_sets_the_refresh_cookie_with_the_contract_attributes(b: Backend) {
    let app = TestApp::spawn(b).await;
    let (email, password) = app.user("acme", "claims:read").await;
    let res = app.login_raw(&email, &password).await;
    let cookie = set_cookie(res.headers()).expect("Set-Cookie service_refresh_token");
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/api/v1/auth", "Secure"] {
        assert!(
            cookie.split("; ").any(|a| a == attr),
            "{attr} missing in {cookie}"
        );
    }
}

async fn the_secure_attribute_can_be_turned_off_for_plain_http(b: Backend) {
    let app = TestApp::spawn_with(b, |s| s.cookie_secure = false).await;
    let (email, password) = app.user("acme", "claims:read").await;
    let cookie = set_cookie(app.login_raw(&email, &password).await.headers()).unwrap();
    assert!(!cookie.contains("Secure"), "{cookie}");
    assert!(cookie.contains("HttpOnly"));
}

async fn wrong_email_and_wrong_password_get_the_same_answer(b: Backend) {
    let app = TestApp::spawn(b).await;
    let (email, _) = app.user("acme", "claims:read").await;
    let wrong_password =
        crate::support::Reply::from(app.login_raw(&email, "not the password").await).await;
    let wrong_email =
        crate::support::Reply::from(app.login_raw("nobody@example.com", "whatever1").await).await;
    wrong_password.assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    wrong_email.assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    assert_eq!(
        wrong_password.body["error"]["message"],
        wrong_email.body["error"]["message"]
    );
    assert!(crate::support::set_cookie(&wrong_password.headers).is_none());
}

async fn login_with_a_missing_field_or_bad_json_is_400(b: Backend) {
    let app = TestApp::spawn(b).await;
    let missing = app
        .call(
            reqwest::Method::POST,
            "/auth/login",
            None,
            Some(json!({ "email": "a@b.example" })),
        )
        .await;
    assert_eq!(
        missing
            .assert_error(StatusCode::BAD_REQUEST, "BAD_REQUEST")
            .as_deref(),
        Some("password")
    );

    let malformed = app
        .client
        .post(app.url("/auth/login"))
        .header("content-type", "application/json")
        .body("{\"email\": ")
        .send()
        .await
        .unwrap();
    crate::support::Reply::from(malformed)
        .await
        .assert_error(StatusCode::BAD_REQUEST, "BAD_REQUEST");

    let not_json = app
        .client
        .post(app.url("/auth/login"))
        .header("content-type", "text/plain")
        .body("email=a")
        .send()
        .await
        .unwrap();
    crate::support::Reply::from(not_json)
        .await
        .assert_error(StatusCode::BAD_REQUEST, "BAD_REQUEST");

    let wrong_type = app
        .call(
            reqwest::Method::POST,
            "/auth/login",
            None,
            Some(json!({ "email": 5, "password": "x" })),
        )
        .await;
    assert_eq!(
        wrong_type
            .assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
            .as_deref(),
        Some("email")
    );
}

async fn a_token_grants_the_scopes_of_its_user(b: Backend) {
    let app = TestApp::spawn(b).await;
    let reader = app.session("acme", "claims:read").await;
    let (_, claims) = jwt::parts(&reader.access);
    assert_eq!(claims["scope"], "claims:read");
    let admin = app.session("acme", "tenant:configure claims:read").await;
    let (_, claims) = jwt::parts(&admin.access);
    assert_eq!(claims["scope"], "claims:read tenant:configure");
    assert_eq!(
        app.get("/tenant/settings", &admin.access).await.status,
        StatusCode::OK
    );
}
