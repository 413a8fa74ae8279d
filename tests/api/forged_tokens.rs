//! Tokens that must not pass (spec: Authentication 3, 5): `alg: none`, HS256 keyed
//! with the public key, a tampered payload, another key's signature, an expired token,
//! and tokens whose session or issuer is wrong.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
use serde_json::{json, Value};

use crate::support::{jwt, Backend, TestApp};

crate::both_backends!(
    alg_none_is_rejected,
    hs256_keyed_with_the_public_key_is_rejected,
    a_tampered_payload_is_rejected,
    a_token_signed_by_another_key_is_rejected,
    an_expired_token_signed_by_the_right_key_is_token_expired,
    a_token_used_while_valid_is_token_expired_once_it_expires,
    an_expired_token_signed_by_another_key_is_unauthorized,
    a_genuine_signature_over_an_unknown_session_or_issuer_is_rejected,
    a_missing_or_malformed_authorization_header_is_unauthorized,
    a_genuine_signature_naming_another_tenant_or_user_than_its_session_is_rejected,
    a_genuine_signature_issued_in_the_future_or_living_too_long_is_rejected,
);

/// A real session's token and its claims, and the service's own key.
async fn setup(b: Backend) -> (TestApp, String, Value, String) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure").await;
    assert_eq!(
        app.get("/tenant/settings", &s.access).await.status,
        StatusCode::OK
    );
    let (header, claims) = jwt::parts(&s.access);
    let pem = std::fs::read_to_string(app.data_dir.join("keys/signing.pem")).unwrap();
    let _ = header;
    (app, s.access, claims, pem)
}

fn kid_of(token: &str) -> String {
    jwt::parts(token).0["kid"].as_str().unwrap().to_owned()
}

fn sign_rs256(claims: &Value, kid: &str, pem: &str) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(
        &header,
        claims,
        &EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap(),
    )
    .unwrap()
}

/// A fresh RSA key the service has never seen, as PKCS#8 PEM.
fn another_key() -> String {
    let key = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048).unwrap();
    key.to_pkcs8_pem(LineEnding::LF).unwrap().to_string()
}

/// Moves the token's lifetime into the past: issued 905 s ago, expired 5 s ago.
fn expire(claims: &mut Value) {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    claims["iat"] = json!(now - 905);
    claims["exp"] = json!(now - 5);
}

async fn rejected(app: &TestApp, token: &str, code: &str) {
    app.get("/tenant/settings", token)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, code);
}

async fn alg_none_is_rejected(b: Backend) {
    let (app, token, claims, _) = setup(b).await;
    let header = json!({ "alg": "none", "typ": "JWT", "kid": kid_of(&token) });
    for sig in ["", "AAAA"] {
        let forged = format!(
            "{}.{}.{sig}",
            jwt::b64(serde_json::to_vec(&header).unwrap()),
            jwt::b64(serde_json::to_vec(&claims).unwrap())
        );
        rejected(&app, &forged, "UNAUTHORIZED").await;
    }
}

async fn hs256_keyed_with_the_public_key_is_rejected(b: Backend) {
    let (app, token, claims, pem) = setup(b).await;
    let private =
        <rsa::RsaPrivateKey as rsa::pkcs8::DecodePrivateKey>::from_pkcs8_pem(&pem).unwrap();
    let public_pem = private
        .to_public_key()
        .to_public_key_pem(LineEnding::LF)
        .unwrap();
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid_of(&token));
    let forged = jsonwebtoken::encode(
        &header,
        &claims,
        &EncodingKey::from_secret(public_pem.as_bytes()),
    )
    .unwrap();
    rejected(&app, &forged, "UNAUTHORIZED").await;
}

async fn a_tampered_payload_is_rejected(b: Backend) {
    let (app, token, mut claims, _) = setup(b).await;
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    claims["tenant_id"] = json!("another-tenant");
    claims["scope"] = json!("tenant:configure audit:read");
    parts[1] = jwt::b64(serde_json::to_vec(&claims).unwrap());
    rejected(&app, &parts.join("."), "UNAUTHORIZED").await;
}

async fn a_token_signed_by_another_key_is_rejected(b: Backend) {
    let (app, token, claims, _) = setup(b).await;
    let other_pem = another_key();
    // Claiming the service's kid, and claiming a kid of its own.
    rejected(
        &app,
        &sign_rs256(&claims, &kid_of(&token), &other_pem),
        "UNAUTHORIZED",
    )
    .await;
    rejected(
        &app,
        &sign_rs256(&claims, "some-other-kid", &other_pem),
        "UNAUTHORIZED",
    )
    .await;
}

async fn an_expired_token_signed_by_the_right_key_is_token_expired(b: Backend) {
    let (app, token, mut claims, pem) = setup(b).await;
    expire(&mut claims);
    let expired = sign_rs256(&claims, &kid_of(&token), &pem);
    rejected(&app, &expired, "TOKEN_EXPIRED").await;
}

/// A token is checked once and then remembered (its signature costs more than the rest
/// of a small request): it must still stop working the second it expires.
async fn a_token_used_while_valid_is_token_expired_once_it_expires(b: Backend) {
    let (app, token, mut claims, pem) = setup(b).await;
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    claims["iat"] = json!(now);
    claims["exp"] = json!(now + 2);
    let short = sign_rs256(&claims, &kid_of(&token), &pem);
    for _ in 0..3 {
        let r = app.get("/tenant/settings", &short).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    }
    // Expired once the clock has passed `exp`, in whole seconds.
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    rejected(&app, &short, "TOKEN_EXPIRED").await;
}

async fn an_expired_token_signed_by_another_key_is_unauthorized(b: Backend) {
    let (app, token, mut claims, _) = setup(b).await;
    expire(&mut claims);
    let other_pem = another_key();
    // Only a genuine token may be told it merely expired.
    rejected(
        &app,
        &sign_rs256(&claims, &kid_of(&token), &other_pem),
        "UNAUTHORIZED",
    )
    .await;
}

async fn a_genuine_signature_over_an_unknown_session_or_issuer_is_rejected(b: Backend) {
    let (app, token, claims, pem) = setup(b).await;
    let kid = kid_of(&token);
    let mut no_session = claims.clone();
    no_session["sid"] = json!(uuid::Uuid::new_v4().to_string());
    rejected(&app, &sign_rs256(&no_session, &kid, &pem), "UNAUTHORIZED").await;
    let mut other_issuer = claims.clone();
    other_issuer["iss"] = json!("someone-else");
    rejected(&app, &sign_rs256(&other_issuer, &kid, &pem), "UNAUTHORIZED").await;
    // The unaltered claims re-signed with the right key still pass: the checks above
    // failed for the reason named, not by accident.
    assert_eq!(
        app.get("/tenant/settings", &sign_rs256(&claims, &kid, &pem))
            .await
            .status,
        StatusCode::OK
    );
}

async fn a_missing_or_malformed_authorization_header_is_unauthorized(b: Backend) {
    let (app, token, _, _) = setup(b).await;
    app.call(reqwest::Method::GET, "/tenant/settings", None, None)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    for header in [
        format!("Basic {token}"),
        "Bearer".to_owned(),
        format!("Token {token}"),
        "Bearer not.a.jwt".to_owned(),
    ] {
        let res = app
            .client
            .get(app.url("/tenant/settings"))
            .header("authorization", header)
            .send()
            .await
            .unwrap();
        crate::support::Reply::from(res)
            .await
            .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    }
}

async fn a_genuine_signature_naming_another_tenant_or_user_than_its_session_is_rejected(
    b: Backend,
) {
    let (app, token, claims, pem) = setup(b).await;
    let kid = kid_of(&token);
    // The control: the same claims signed again pass.
    assert_eq!(
        app.get("/tenant/settings", &sign_rs256(&claims, &kid, &pem))
            .await
            .status,
        StatusCode::OK
    );
    let other = app.session("globex", "tenant:configure").await;
    let (_, other_claims) = jwt::parts(&other.access);
    let mut wrong_tenant = claims.clone();
    wrong_tenant["tenant_id"] = other_claims["tenant_id"].clone();
    rejected(&app, &sign_rs256(&wrong_tenant, &kid, &pem), "UNAUTHORIZED").await;
    let mut wrong_user = claims.clone();
    wrong_user["sub"] = other_claims["sub"].clone();
    rejected(&app, &sign_rs256(&wrong_user, &kid, &pem), "UNAUTHORIZED").await;
}

async fn a_genuine_signature_issued_in_the_future_or_living_too_long_is_rejected(b: Backend) {
    let (app, token, claims, pem) = setup(b).await;
    let kid = kid_of(&token);
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let mut future = claims.clone();
    future["iat"] = json!(now + 3600);
    future["exp"] = json!(now + 3600 + 900);
    rejected(&app, &sign_rs256(&future, &kid, &pem), "UNAUTHORIZED").await;
    let mut long = claims.clone();
    long["iat"] = json!(now);
    long["exp"] = json!(now + 901);
    rejected(&app, &sign_rs256(&long, &kid, &pem), "UNAUTHORIZED").await;
    // Exactly the lifetime the service issues passes.
    let mut exact = claims;
    exact["iat"] = json!(now);
    exact["exp"] = json!(now + 900);
    assert_eq!(
        app.get("/tenant/settings", &sign_rs256(&exact, &kid, &pem))
            .await
            .status,
        StatusCode::OK
    );
}
