//! Rate limiting (spec: Limits; contract: Conventions): per tenant, per client address
//! before authentication, headers on every response, shared among API processes.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{Backend, Reply, Session, TestApp, ALL_SCOPES};

crate::both_backends!(
    every_response_carries_the_rate_limit_headers,
    a_tenant_over_its_limit_is_refused_and_another_tenant_is_not,
    logins_are_limited_per_client_address,
    a_login_carrying_a_valid_token_is_still_limited_per_address,
    api_processes_share_a_tenants_limit,
);

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The three headers, as numbers.
#[track_caller]
fn limits(r: &Reply) -> (u64, u64, u64) {
    let get = |name: &str| -> u64 {
        r.header(name)
            .unwrap_or_else(|| panic!("{} response without {name}", r.status))
            .parse()
            .unwrap_or_else(|_| panic!("{name} is not an integer"))
    };
    (
        get("x-ratelimit-limit"),
        get("x-ratelimit-remaining"),
        get("x-ratelimit-reset"),
    )
}

async fn set_limit(app: &TestApp, s: &Session, per_minute: u32) {
    let r = app
        .call(
            Method::PATCH,
            "/tenant/settings",
            Some(&s.access),
            Some(json!({ "rate_limit_per_minute": per_minute })),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
}

async fn every_response_carries_the_rate_limit_headers(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", ALL_SCOPES).await;

    let ok = app.get("/tenant/settings", &s.access).await;
    assert_eq!(ok.status, StatusCode::OK);
    let (limit, remaining, reset) = limits(&ok);
    assert_eq!(limit, 60_000, "the tenant's default");
    assert!(remaining < limit && remaining > 59_000, "{remaining}");
    assert!(reset >= now_secs() && reset <= now_secs() + 61);

    let unauthorized = app.call(Method::GET, "/claims", None, None).await;
    unauthorized.assert_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    assert_eq!(
        limits(&unauthorized).0,
        600,
        "limited per address before auth"
    );

    let not_found = app.get("/claims/CLM-NOPE", &s.access).await;
    not_found.assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");
    // At 60,000 a minute one request comes back every millisecond, so Remaining is
    // back at its top between these calls; the counting is shown with small limits.
    assert_eq!(limits(&not_found).0, 60_000);

    set_limit(&app, &s, 2).await;
    let _ = app.get("/tenant/settings", &s.access).await;
    let _ = app.get("/tenant/settings", &s.access).await;
    let limited = app.get("/tenant/settings", &s.access).await;
    limited.assert_error(StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED");
    assert_eq!(limits(&limited).1, 0);
}

async fn a_tenant_over_its_limit_is_refused_and_another_tenant_is_not(b: Backend) {
    let app = TestApp::spawn(b).await;
    let acme = app.session("acme", ALL_SCOPES).await;
    let globex = app.session("globex", ALL_SCOPES).await;
    // Applies at once, to the very next request.
    set_limit(&app, &acme, 6).await;
    for left in (0..6).rev() {
        let r = app.get("/tenant/settings", &acme.access).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(limits(&r), (6, left, limits(&r).2));
    }
    let refused = app
        .call(
            Method::POST,
            "/webhooks",
            Some(&acme.access),
            Some(json!({"url": "https://example.com/hook", "events": ["claim.completed"], "secret": "a-long-enough-secret"})),
        )
        .await;
    refused.assert_error(StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED");
    // Six a minute: the next request is allowed ten seconds after the first was made.
    let retry: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((8..=10).contains(&retry), "Retry-After {retry}");
    let (_, remaining, reset) = limits(&refused);
    assert_eq!(remaining, 0);
    let expected = now_secs() + retry;
    assert!(
        reset.abs_diff(expected) <= 1,
        "Reset {reset} is the moment of Retry-After ({expected})"
    );
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{retry} seconds")),
        "the message states the wait: {message}"
    );
    // The refused request changed nothing.
    assert!(app
        .store
        .webhooks("acme", None, 10)
        .await
        .unwrap()
        .is_empty());

    let other = app.get("/tenant/settings", &globex.access).await;
    assert_eq!(other.status, StatusCode::OK, "another tenant is unaffected");
    assert_eq!(limits(&other).0, 60_000);
}

async fn logins_are_limited_per_client_address(b: Backend) {
    let app = TestApp::spawn_with(b, |s| s.rate_limit_anonymous_per_minute = 3).await;
    let (email, password) = app.user("acme", ALL_SCOPES).await;
    let s = app.login(&email, &password).await;
    for _ in 0..2 {
        let r = app.login_raw(&email, "wrong password").await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    }
    // The fourth attempt from this address is refused, even with the right password.
    let r = Reply::from(app.login_raw(&email, &password).await).await;
    r.assert_error(StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED");
    assert!(r.header("retry-after").is_some());
    assert_eq!(limits(&r).0, 3);
    // An authenticated caller is counted against the tenant instead.
    let ok = app.get("/tenant/settings", &s.access).await;
    assert_eq!(ok.status, StatusCode::OK);
    assert_eq!(limits(&ok).0, 60_000);
}

async fn a_login_carrying_a_valid_token_is_still_limited_per_address(b: Backend) {
    let app = TestApp::spawn_with(b, |s| s.rate_limit_anonymous_per_minute = 3).await;
    let (email, password) = app.user("acme", ALL_SCOPES).await;
    let s = app.login(&email, &password).await;
    // Password guesses that carry the tenant's valid token: charged to this address's
    // three, not to the tenant's 60,000.
    let guess = || {
        app.client
            .post(app.url("/auth/login"))
            .bearer_auth(&s.access)
            .json(&json!({ "email": email, "password": "a guess" }))
            .send()
    };
    for _ in 0..2 {
        let r = Reply::from(guess().await.unwrap()).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert_eq!(limits(&r).0, 3, "charged to the address limit");
    }
    let r = Reply::from(guess().await.unwrap()).await;
    r.assert_error(StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED");
    // Refresh and logout too.
    for path in ["/auth/refresh", "/auth/logout"] {
        let r = Reply::from(
            app.client
                .post(app.url(path))
                .bearer_auth(&s.access)
                .send()
                .await
                .unwrap(),
        )
        .await;
        r.assert_error(StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED");
    }
    // The tenant's own allowance is untouched.
    let ok = app.get("/tenant/settings", &s.access).await;
    assert_eq!(ok.status, StatusCode::OK);
    assert_eq!(limits(&ok).0, 60_000);
}

async fn api_processes_share_a_tenants_limit(b: Backend) {
    let app = TestApp::spawn_with(b, |s| s.api_processes = 2).await;
    let sibling = app.spawn_sibling(|s| s.api_processes = 2).await;
    let s = app.session("acme", ALL_SCOPES).await;
    set_limit(&app, &s, 10).await;
    // Each of the two processes enforces half of the tenant's ten.
    let mut allowed = 0;
    for server in [&app, &sibling] {
        loop {
            let r = server.get("/tenant/settings", &s.access).await;
            if r.status == StatusCode::TOO_MANY_REQUESTS {
                break;
            }
            assert_eq!(r.status, StatusCode::OK);
            assert_eq!(limits(&r).0, 5, "the headers give this process's share");
            allowed += 1;
            assert!(allowed <= 20, "no limit enforced");
        }
    }
    assert_eq!(
        allowed, 10,
        "together the processes allow the tenant's limit"
    );
}
