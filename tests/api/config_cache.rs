//! The configuration cache of the hot path: a change made through a process is seen
//! there at once; a change made through another process is seen within the bound
//! (`CLAIMS_CONFIG_CACHE_TTL_MS`).

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use schemas::Date;
use serde_json::json;

use crate::support::{Backend, TestApp};

crate::both_backends!(
    a_processs_own_changes_are_seen_at_once,
    another_processs_changes_are_seen_within_the_bound,
);

const SCOPES: &str =
    "tenant:configure providers:write providers:read rulebooks:write rulebooks:read";

async fn a_processs_own_changes_are_seen_at_once(b: Backend) {
    let app = TestApp::spawn_with(b, |s| s.config_cache_ttl_ms = 60_000).await;
    let s = app.session("acme", SCOPES).await;
    let cache = &app.state.config_cache;
    let today = Date::today_utc();

    assert_eq!(
        cache.settings("acme").await.unwrap().fraud_flag_threshold,
        0.8
    );
    assert!(cache.active_rulebook("acme").await.unwrap().is_none());
    app.call(
        Method::POST,
        "/providers",
        Some(&s.access),
        Some(json!({"provider_id": "PRV-1", "name": "P"})),
    )
    .await;
    assert!(cache
        .contracted("acme", "PRV-1", today)
        .await
        .unwrap()
        .is_none());

    // With a one-minute bound, only invalidation can make these visible now.
    app.call(
        Method::PATCH,
        "/tenant/settings",
        Some(&s.access),
        Some(json!({"fraud_flag_threshold": 0.5})),
    )
    .await;
    assert_eq!(
        cache.settings("acme").await.unwrap().fraud_flag_threshold,
        0.5
    );

    let r = app
        .call(
            Method::POST,
            "/providers/PRV-1/contracts",
            Some(&s.access),
            Some(json!({"effective_from": "2020-01-01"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let contracted = cache
        .contracted("acme", "PRV-1", today)
        .await
        .unwrap()
        .expect("contracted now");
    assert_eq!(
        contracted.contract.contract_id,
        r.body["contract_id"].as_str().unwrap()
    );

    let id = app.publish_rulebook(&s.access, json!([{"rule_id": "r1", "when": "claim.claim_amount > 10", "action": "flag", "reason_code": "BIG"}])).await;
    let active = cache
        .active_rulebook("acme")
        .await
        .unwrap()
        .expect("active now");
    assert_eq!(active.rulebook_id, id);
    assert_eq!(active.version, 1);
}

async fn another_processs_changes_are_seen_within_the_bound(b: Backend) {
    let bound = Duration::from_millis(300);
    let a = TestApp::spawn_with(b, |s| s.config_cache_ttl_ms = 300).await;
    let other = a.spawn_sibling(|s| s.config_cache_ttl_ms = 300).await;
    let s = a.session("acme", SCOPES).await;
    let cache = &other.state.config_cache;
    assert_eq!(
        cache.settings("acme").await.unwrap().fraud_flag_threshold,
        0.8
    );
    assert!(cache.active_rulebook("acme").await.unwrap().is_none());

    a.call(
        Method::PATCH,
        "/tenant/settings",
        Some(&s.access),
        Some(json!({"fraud_flag_threshold": 0.25})),
    )
    .await;
    let id = a.publish_rulebook(&s.access, json!([])).await;
    let changed = Instant::now();

    let deadline = changed + bound + Duration::from_secs(2);
    loop {
        let settings = cache.settings("acme").await.unwrap();
        let active = cache.active_rulebook("acme").await.unwrap();
        if settings.fraud_flag_threshold == 0.25 && active.is_some_and(|r| r.rulebook_id == id) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the other process did not see the change"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
