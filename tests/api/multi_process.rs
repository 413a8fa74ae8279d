//! Several processes on one store, as when the service is scaled out: tokens of one
//! verify in another even with different signing keys, and a logout reaches every
//! process within the session-cache bound.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};

use crate::support::{Backend, TestApp};

crate::both_backends!(
    tokens_of_one_process_verify_in_another_that_signs_with_a_different_key,
    a_logout_in_one_process_reaches_another_within_the_cache_bound,
);

async fn tokens_of_one_process_verify_in_another_that_signs_with_a_different_key(b: Backend) {
    let a = TestApp::spawn(b).await;
    let other_key = a.data_dir.join("keys/other.pem");
    let b2 = a
        .spawn_sibling(|s| s.jwt_key_file = Some(other_key.clone()))
        .await;
    let (email, password) = a.user("acme", "tenant:configure").await;
    let from_a = a.login(&email, &password).await;
    let from_b = b2.login(&email, &password).await;
    let kid = |t: &str| {
        crate::support::jwt::parts(t).0["kid"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_ne!(
        kid(&from_a.access),
        kid(&from_b.access),
        "the processes sign with different keys"
    );

    assert_eq!(
        b2.get("/tenant/settings", &from_a.access).await.status,
        StatusCode::OK
    );
    // A started first and learns B's key from the store on first sight of its kid.
    assert_eq!(
        a.get("/tenant/settings", &from_b.access).await.status,
        StatusCode::OK
    );
    let kids = a.jwks_kids().await;
    assert!(
        kids.contains(&kid(&from_a.access)) && kids.contains(&kid(&from_b.access)),
        "{kids:?}"
    );
}

async fn a_logout_in_one_process_reaches_another_within_the_cache_bound(b: Backend) {
    let bound = Duration::from_millis(400);
    let a = TestApp::spawn_with(b, |s| s.session_cache_ttl_ms = 400).await;
    let b2 = a.spawn_sibling(|s| s.session_cache_ttl_ms = 400).await;
    let s = a.session("acme", "tenant:configure").await;
    // B has now seen the session live and remembers it.
    assert_eq!(
        b2.get("/tenant/settings", &s.access).await.status,
        StatusCode::OK
    );

    let r = a
        .call(Method::POST, "/auth/logout", Some(&s.access), None)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let logged_out = Instant::now();
    // A forgets at once.
    a.get("/tenant/settings", &s.access)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    // B within the bound (plus scheduling slack on a busy machine).
    let deadline = logged_out + bound + Duration::from_secs(2);
    loop {
        let r = b2.get("/tenant/settings", &s.access).await;
        if r.status == StatusCode::UNAUTHORIZED {
            r.assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "process B still accepts a logged-out session"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
