//! Records that can never be processed as they are (contract part 2: Operations and
//! analysts): a claim whose rulebook is corrupt in the store is parked on the
//! dead-letter topic with the reason, never approved under an empty rulebook; the
//! claims behind it go on; `claims dead-letters redrive` after a fix completes it.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::admin_cli::claims_ok;
use crate::claims::{claim, ready_tenant, submit};
use crate::pipeline::decided;
use crate::support::{Backend, TestApp};

crate::all_backends!(claims_under_a_corrupt_rulebook_are_parked_and_redriven_once_it_is_fixed);

/// Replaces the rules of the tenant's active rulebook in the store, as a bad migration
/// or a hand edit would.
async fn set_rules(app: &TestApp, tenant: &str, rules: &str) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(app.config.store.url())
        .await
        .unwrap();
    let n =
        sqlx::query("UPDATE rulebooks SET rules = $1 WHERE tenant_id = $2 AND status = 'active'")
            .bind(rules)
            .bind(tenant)
            .execute(&pool)
            .await
            .unwrap()
            .rows_affected();
    assert_eq!(n, 1);
    pool.close().await;
}

/// `claims dead-letters list` once it shows `n` records (or after 30 s).
fn parked(app: &TestApp, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = claims_ok(app, &["dead-letters", "list"]);
        let list = out["dead_letters"].as_array().unwrap().clone();
        if list.len() >= n || Instant::now() > deadline {
            return list;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

async fn claims_under_a_corrupt_rulebook_are_parked_and_redriven_once_it_is_fixed(b: Backend) {
    let app = TestApp::spawn(b).await;
    let fine = ready_tenant(&app, "acme").await;
    let garbled = ready_tenant(&app, "garbled").await;
    let broken = ready_tenant(&app, "broken").await;
    // Rules that do not parse, and a rule that parses but no longer compiles.
    set_rules(&app, "garbled", "[{\"rule_id\": \"r1\", \"when\": ").await;
    let uncompilable = r#"[{"rule_id": "r1", "when": "claim.claim_amount >", "action": "flag", "reason_code": "X"}]"#;
    set_rules(&app, "broken", uncompilable).await;

    // The bad tenants' claims ahead of and among a good tenant's.
    for i in 0..3 {
        for (s, prefix) in [(&garbled, "G"), (&fine, "A"), (&broken, "B")] {
            let r = submit(&app, s, claim(&format!("{prefix}-{i}"))).await;
            assert_eq!(r.status, reqwest::StatusCode::ACCEPTED, "{}", r.body);
        }
    }
    for i in 0..3 {
        let c = decided(&app, &fine, &format!("A-{i}")).await;
        assert_eq!(c["outcome"], "ADJUDICATED", "{c}");
    }

    let list = parked(&app, 6);
    assert_eq!(list.len(), 6, "{list:?}");
    for p in &list {
        let key = p["key"].as_str().unwrap();
        let error = p["error"].as_str().unwrap();
        assert!(!p["stage"].as_str().unwrap().is_empty());
        assert!(p["source"]["topic"].as_str().unwrap().contains("claims."));
        assert!(p["source"]["offset"].as_i64().is_some());
        if key.starts_with("garbled/") {
            assert!(
                error.contains("corrupt stored data") && error.contains("rules"),
                "{error}"
            );
        } else {
            assert!(key.starts_with("broken/"), "{key}");
            assert!(error.contains("does not compile"), "{error}");
        }
    }
    let shown = claims_ok(&app, &["dead-letters", "show", &list[0]["id"].to_string()]);
    // The record as the stage read it: the intake command (fused chain) or the claim in
    // process (separate stages), carrying a parked claim of the member the key names.
    let member = list[0]["key"].as_str().unwrap().split('/').nth(1).unwrap();
    let value = shown["value"].to_string();
    assert!(
        value.contains(&format!("\"member_id\":\"{member}\"")),
        "{shown}"
    );
    assert!(
        ["G-", "B-"]
            .iter()
            .any(|p| value.contains(&format!("\"claim_id\":\"{p}"))),
        "{shown}"
    );
    // Parked claims are not decided: no approval under a rulebook that cannot be read.
    for (s, id) in [(&garbled, "G-0"), (&broken, "B-2")] {
        let c = app.get(&format!("/claims/{id}"), &s.access).await;
        assert_eq!(c.body["status"], "received", "{}", c.body);
        assert!(c.body["outcome"].is_null(), "{}", c.body);
    }
    let metrics = app
        .client
        .get(format!("http://{}/api/v1/metrics", app.addr))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.lines().any(|l| l == "claims_dead_letters_total 6"),
        "{metrics}"
    );

    // Fixed, and redriven: each parked claim is decided once.
    let good = r#"[{"rule_id": "r1", "when": "claim.claim_amount > 5000000", "action": "block", "reason_code": "AMOUNT_LIMIT"}]"#;
    set_rules(&app, "garbled", good).await;
    set_rules(&app, "broken", good).await;
    let out = claims_ok(&app, &["dead-letters", "redrive"]);
    assert_eq!(out["redriven"], 6, "{out}");
    for i in 0..3 {
        for (s, prefix) in [(&garbled, "G"), (&broken, "B")] {
            let c = decided(&app, s, &format!("{prefix}-{i}")).await;
            assert_eq!(c["status"], "completed", "{c}");
            assert_eq!(c["outcome"], "ADJUDICATED", "{c}");
        }
    }
    let out = claims_ok(&app, &["dead-letters", "list"]);
    assert_eq!(out["dead_letters"], serde_json::json!([]));
    let all = claims_ok(&app, &["dead-letters", "list", "--all"]);
    assert_eq!(all["dead_letters"].as_array().unwrap().len(), 6);
    // A second redrive has nothing left to put back.
    let again = claims_ok(&app, &["dead-letters", "redrive"]);
    assert_eq!(again["redriven"], 0);
}
