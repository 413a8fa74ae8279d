//! Retiring an access-token signing key (`claims admin retire-key`): the tokens it
//! signed stop verifying, even those verified before, and it leaves the JWKS; a process
//! whose own key is retired signs with a new one that verifies everywhere.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, LineEnding};
use rsa::traits::PublicKeyParts;
use serde_json::{json, Value};

use crate::admin_cli::{claims, claims_ok};
use crate::support::{jwt, Backend, TestApp};

crate::both_backends!(
    a_retired_key_stops_verifying_its_tokens_and_leaves_the_jwks,
    retiring_the_services_own_key_moves_it_to_a_new_key,
    retiring_an_unknown_key_is_not_found_and_changes_nothing,
    a_process_that_starts_with_a_retired_key_moves_to_a_new_key,
);

/// The public half of `key` as a JWK, its kid the RFC 7638 thumbprint.
fn jwk_of(key: &rsa::RsaPrivateKey) -> Value {
    let mut jwk = json!({
        "kty": "RSA", "use": "sig", "alg": "RS256",
        "n": jwt::b64(key.n().to_bytes_be()), "e": jwt::b64(key.e().to_bytes_be()),
    });
    jwk["kid"] = json!(jwt::thumbprint(&jwk));
    jwk
}

/// The id of the key that signed `token`.
fn kid_of(token: &str) -> String {
    jwt::parts(token).0["kid"].as_str().unwrap().to_owned()
}

/// The key in the service's key file: the one a restart signs with.
fn kept_key(app: &TestApp) -> rsa::RsaPrivateKey {
    let pem = std::fs::read_to_string(app.data_dir.join("keys/signing.pem")).unwrap();
    rsa::RsaPrivateKey::from_pkcs8_pem(&pem).unwrap()
}

async fn status(app: &TestApp, token: &str) -> StatusCode {
    app.get("/tenant/settings", token).await.status
}

async fn a_retired_key_stops_verifying_its_tokens_and_leaves_the_jwks(b: Backend) {
    let app = TestApp::spawn(b).await;
    let session = app.session("acme", "tenant:configure").await;
    // Another process's key, registered as that process would, signing a genuine
    // session's claims.
    let other = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048).unwrap();
    let jwk = jwk_of(&other);
    let kid = jwk["kid"].as_str().unwrap().to_owned();
    app.store
        .register_signing_key(&kid, "RS256", &jwk.to_string())
        .await
        .unwrap();
    app.state.keys.refresh().await.unwrap();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.clone());
    let pem = other.to_pkcs8_pem(LineEnding::LF).unwrap();
    let token = jsonwebtoken::encode(
        &header,
        &jwt::parts(&session.access).1,
        &EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap(),
    )
    .unwrap();
    assert_eq!(status(&app, &token).await, StatusCode::OK);
    assert!(app.jwks_kids().await.contains(&kid));

    let retired = claims_ok(&app, &["admin", "retire-key", "--kid", &kid]);
    assert_eq!(retired["kid"], kid.as_str());
    assert!(retired["retired_at"].as_i64().is_some());
    let again = claims_ok(&app, &["admin", "retire-key", "--kid", &kid]);
    assert_eq!(
        again["retired_at"], retired["retired_at"],
        "the first retirement stands"
    );
    let listed = claims_ok(&app, &["admin", "list-keys"]);
    let keys = listed["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2);
    let own = jwt::parts(&session.access).0["kid"].clone();
    for key in keys {
        let retired = !key["retired_at"].is_null();
        assert_eq!(retired, key["kid"] == kid.as_str(), "{key}");
        assert!(key["kid"] == kid.as_str() || key["kid"] == own);
    }

    // Every running service reads the keys again every 10 s.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while status(&app, &token).await == StatusCode::OK {
        assert!(
            std::time::Instant::now() < deadline,
            "the retired key's token still verifies after 15 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    app.get("/tenant/settings", &token)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    assert!(!app.jwks_kids().await.contains(&kid));
    assert_eq!(
        status(&app, &session.access).await,
        StatusCode::OK,
        "the service's own tokens still verify"
    );
}

async fn retiring_the_services_own_key_moves_it_to_a_new_key(b: Backend) {
    let app = TestApp::spawn(b).await;
    let (email, password) = app.user("acme", "tenant:configure").await;
    let before = app.login(&email, &password).await;
    let old_kid = kid_of(&before.access);
    assert_eq!(status(&app, &before.access).await, StatusCode::OK);

    claims_ok(&app, &["admin", "retire-key", "--kid", &old_kid]);
    app.state.keys.refresh().await.unwrap();

    app.get("/tenant/settings", &before.access)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    let after = app.login(&email, &password).await;
    let new_kid = kid_of(&after.access);
    assert_ne!(new_kid, old_kid);
    assert_eq!(status(&app, &after.access).await, StatusCode::OK);
    assert_eq!(app.jwks_kids().await, [new_kid.as_str()]);
    // The key file holds the new key, so a restart keeps signing with it.
    let kept = kept_key(&app);
    assert_eq!(jwk_of(&kept)["kid"], new_kid.as_str());
    assert!(jwt::verify_rs256(&after.access, &jwk_of(&kept)));
}

async fn retiring_an_unknown_key_is_not_found_and_changes_nothing(b: Backend) {
    let app = TestApp::spawn(b).await;
    let session = app.session("acme", "tenant:configure").await;
    let (ok, out, err) = claims(&app, &["admin", "retire-key", "--kid", "no-such-kid"]);
    assert!(!ok);
    assert_eq!(out, Value::Null);
    assert_eq!(err["error"]["code"], "NOT_FOUND", "{err}");
    app.state.keys.refresh().await.unwrap();
    assert_eq!(status(&app, &session.access).await, StatusCode::OK);
    assert_eq!(app.jwks_kids().await.len(), 1);
}

async fn a_process_that_starts_with_a_retired_key_moves_to_a_new_key(b: Backend) {
    let mut first = TestApp::spawn(b).await;
    let (email, password) = first.user("acme", "tenant:configure").await;
    let before = first.login(&email, &password).await;
    let old_kid = kid_of(&before.access);
    first.stop().await;
    // Retired while no process runs: the key file still holds the retired key.
    claims_ok(&first, &["admin", "retire-key", "--kid", &old_kid]);

    let second = first.spawn_sibling(|_| {}).await;
    let after = second.login(&email, &password).await;
    let new_kid = kid_of(&after.access);
    assert_ne!(new_kid, old_kid);
    assert_eq!(status(&second, &after.access).await, StatusCode::OK);
    second
        .get("/tenant/settings", &before.access)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    assert_eq!(second.jwks_kids().await, [new_kid.as_str()]);
    assert_eq!(jwk_of(&kept_key(&second))["kid"], new_kid.as_str());
}
