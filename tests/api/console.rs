//! The console (contract part 2, "The console"; issue 34): served at `/console` with
//! its assets built in, `/` redirecting there, and driven in Debian's Chromium by
//! Playwright (`tests/console/drive.py`): an officer approves a flagged claim with an
//! amount, a rule author fixes a draft's compile error on the right rule, backtests it
//! against 1,000 decided claims and publishes it. What they did is then read back over
//! the API. Screenshots of each page at 1280 and 390 px go to
//! `target/console-screenshots` (or `CLAIMS_CONSOLE_SHOTS`).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::claims::{ready_tenant, submit_batch};
use crate::pipeline::decided;
use crate::support::{python, Backend, TestApp};
use crate::workflow::completed;

const CLAIMS: usize = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_with_its_assets_and_without_a_token() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let root = app.base.trim_end_matches("/api/v1").to_owned();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = client.get(format!("{root}/")).send().await.unwrap();
    assert!(r.status().is_redirection(), "{}", r.status());
    assert_eq!(r.headers()["location"], "/console");
    for (path, kind) in [
        ("/console", "text/html"),
        ("/console/console.js", "text/javascript"),
        ("/console/console.css", "text/css"),
    ] {
        let r = client.get(format!("{root}{path}")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let ct = r.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(ct.starts_with(kind), "{path}: {ct}");
        let csp = r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(csp.contains("script-src 'self'"), "{csp}");
        let body = r.text().await.unwrap();
        // Nothing from another origin: the page works with no internet.
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path} loads from elsewhere"
        );
    }
    let r = client
        .get(format!("{root}/console/nope.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_officer_and_a_rule_author_do_their_work_in_chromium() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let s = ready_tenant(&app, "acme").await;
    app.publish_rulebook(
        &s.access,
        json!([{"rule_id": "big", "when": "claim.claim_amount > 10000", "action": "flag", "reason_code": "BIG"}]),
    )
    .await;
    // 1,000 claims: a tenth above 10,000 (flagged), a tenth of those above 20,000.
    let items: Vec<Value> = (0..CLAIMS)
        .map(|i| {
            let amount = if i % 10 == 0 { 12_000 + (i as i64 % 3) * 10_000 } else { 4_000 + i as i64 };
            json!({"claim_id": format!("C-{i:04}"), "member_id": format!("M-{}", i % 50), "provider_id": "PRV-1",
                   "claim_amount": amount, "service_date": format!("2026-0{}-{:02}", 1 + i % 9, 1 + i % 28),
                   "lines": [{"procedure_code": "99213", "units": 1, "amount": amount}]})
        })
        .collect();
    assert_eq!(submit_batch(&app, &s, items).await.status, StatusCode::OK);
    for i in 0..CLAIMS {
        decided(&app, &s, &format!("C-{i:04}")).await;
    }
    // A near duplicate of C-0000 (same member, provider, day and code): flagged by the
    // rule and by the fraud score, with a reason to read.
    let flagged = "C-DUP";
    let dup = json!([{"claim_id": flagged, "member_id": "M-0", "provider_id": "PRV-1", "claim_amount": 12_000,
                      "service_date": "2026-01-01", "lines": [{"procedure_code": "99213", "units": 1, "amount": 12_000}]}]);
    assert_eq!(
        submit_batch(&app, &s, dup.as_array().unwrap().clone())
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(decided(&app, &s, flagged).await["status"], "pending_review");
    let fraud = app
        .get(&format!("/claims/{flagged}/fraud"), &s.access)
        .await
        .body;
    assert!(!fraud["reasons"].as_array().unwrap().is_empty(), "{fraud}");

    let (officer_email, officer_password) = app
        .user("acme", "claims:read fraud:read workflow:manage audit:read")
        .await;
    let (author_email, author_password) = app
        .user("acme", "rulebooks:read rulebooks:write claims:read")
        .await;
    let out = std::env::var("CLAIMS_CONSOLE_SHOTS")
        .unwrap_or_else(|_| format!("{}/target/console-screenshots", env!("CARGO_MANIFEST_DIR")));
    let args = json!({
        "base": app.base.trim_end_matches("/api/v1"), "out": out,
        "officer": {"email": officer_email, "password": officer_password},
        "author": {"email": author_email, "password": author_password},
        "claim_id": flagged, "approve": "90.00", "claims": CLAIMS,
    });
    let script = format!("{}/tests/console/drive.py", env!("CARGO_MANIFEST_DIR"));
    let run = tokio::time::timeout(
        Duration::from_secs(300),
        tokio::process::Command::new(python())
            .arg(&script)
            .arg(args.to_string())
            .output(),
    )
    .await
    .expect("the browser run finished in 5 minutes")
    .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    assert!(
        run.status.success(),
        "the browser run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let said: Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap();

    // What they did, read over the API.
    let claim = completed(&app, &s, flagged).await;
    assert_eq!(
        (claim["outcome"].as_str(), claim["approved_amount"].as_i64()),
        (Some("APPROVED"), Some(9_000)),
        "{claim}"
    );
    let active = app.get("/rulebooks/active", &s.access).await.body;
    assert_eq!(active["rulebook_id"], said["published"], "{active}");
    assert_eq!(active["name"], "Stricter");
    let rules: Vec<&str> = active["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["when"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        ["claim.claim_amount > 10000", "claim.claim_amount > 20000"]
    );
    for page in [
        "queue",
        "claim",
        "rulebooks",
        "draft-error",
        "backtest",
        "published",
    ] {
        for width in [1280, 390] {
            let shot = format!("{out}/{page}-{width}.png");
            let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
            assert!(size > 1000, "{shot} was written");
        }
    }
}
