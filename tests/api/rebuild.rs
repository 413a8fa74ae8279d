//! Rebuilding from the topics (contract part 2: Operations and analysts): 10,000
//! claims of members on a plan, with reviews, uploads and a replacement, then
//! `claims replay --into` an empty database and `claims snapshot checksum` over both.
//! On the embedded default and on Kafka with PostgreSQL.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::admin_cli::claims_text;
use crate::benefits::plan_and_member;
use crate::claims::{ready_tenant, submit, submit_batch};
use crate::pipeline::decided;
use crate::support::{Backend, Database, Session, TestApp};
use crate::workflow::{claim_task, transition};

mod sqlite {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_snapshots_rebuilt_from_the_topics_are_the_live_ones() {
        super::the_snapshots_rebuilt_from_the_topics_are_the_live_ones(
            crate::support::Backend::Sqlite,
        )
        .await
    }
}

mod kafka {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_snapshots_rebuilt_from_the_topics_are_the_live_ones() {
        super::the_snapshots_rebuilt_from_the_topics_are_the_live_ones(
            crate::support::Backend::Kafka,
        )
        .await
    }
}

const CLAIMS: usize = 10_000;
const MEMBERS: usize = 100;

/// Claim `i`: of member `i % MEMBERS`, on a day of its own for that member; every 50th
/// is over the review limit.
fn claim(i: usize) -> Value {
    let amount = if i % 50 == 7 {
        60_000
    } else {
        5_000 + (i % 13) as i64 * 1_000
    };
    let day = time::Date::from_ordinal_date(2026, 1 + (i / MEMBERS) as u16).unwrap();
    json!({
        "claim_id": format!("C-{i:05}"), "member_id": format!("M-{:03}", i % MEMBERS),
        "provider_id": "PRV-1", "claim_amount": amount, "service_date": day.to_string(),
        "lines": [{"procedure_code": "99213", "units": 1, "amount": amount}],
    })
}

/// Waits until no claim is in flight, then until each officer decision is applied.
async fn settled_but_review(app: &TestApp, s: &Session) {
    wait_for(app, s, &["received", "processing"]).await;
}

async fn wait_for(app: &TestApp, s: &Session, statuses: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let mut busy = false;
        for st in statuses {
            let r = app
                .get(&format!("/claims?status={st}&limit=1"), &s.access)
                .await;
            busy |= r.body["data"] != json!([]);
        }
        if !busy {
            return;
        }
        assert!(Instant::now() < deadline, "claims still in flight");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Officers work through the queue, approving and declining in turn, until no claim
/// is in flight or waiting.
async fn review_all(app: &TestApp, s: &Session, reviewed: &mut usize) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        assert!(Instant::now() < deadline, "{reviewed} reviews");
        settled_but_review(app, s).await;
        let open = app
            .get("/workflow/tasks?status=open&limit=100", &s.access)
            .await;
        let tasks: Vec<String> = open.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["task_id"].as_str().unwrap().to_owned())
            .collect();
        if tasks.is_empty() {
            return;
        }
        for t in &tasks {
            assert_eq!(claim_task(app, s, t).await.status, StatusCode::OK);
            let action = if *reviewed % 2 == 0 {
                json!({"action": "approve"})
            } else {
                json!({"action": "decline", "note": "not covered"})
            };
            let d = transition(app, s, t, action).await;
            assert_eq!(d.status, StatusCode::OK, "{}", d.body);
            *reviewed += 1;
        }
    }
}

/// `claims snapshot checksum` of the database at `url`.
fn checksums(app: &TestApp, url: &str) -> Value {
    let (ok, out, err) = claims_text(app, &["snapshot", "checksum", "--database", url]);
    assert!(ok, "{out}{err}");
    serde_json::from_str::<Value>(&out).unwrap()["tables"].clone()
}

async fn the_snapshots_rebuilt_from_the_topics_are_the_live_ones(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    for m in 0..MEMBERS {
        plan_and_member(
            &app,
            &s,
            &format!("M-{m:03}"),
            json!([{"from": "2026-01-01"}]),
        )
        .await;
    }
    app.publish_rulebook(&s.access, json!([{"rule_id": "big", "when": "claim.claim_amount > 50000", "action": "flag", "reason_code": "BIG"}])).await;
    for chunk in (0..CLAIMS).collect::<Vec<_>>().chunks(1000) {
        let r = submit_batch(&app, &s, chunk.iter().map(|i| claim(*i)).collect()).await;
        assert_eq!(r.body["accepted"], 1000, "{}", r.body);
    }
    // Documents for a few claims: they are kept beside the snapshots, not in them.
    for i in 0..3 {
        let r = crate::uploads::upload(
            &app,
            &s.access,
            &format!("C-{i:05}"),
            "referral.pdf",
            "application/pdf",
            &b"%PDF-1.4 a referral letter".repeat(20),
        )
        .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    }
    // Officers take the queue once the claims are decided, approving and declining in
    // turn (see docs/decisions.md on reviews racing automatic decisions).
    let mut reviewed = 0;
    review_all(&app, &s, &mut reviewed).await;
    assert_eq!(reviewed, CLAIMS / 50);
    wait_for(&app, &s, &["received", "processing", "pending_review"]).await;
    // A replacement: C-00001 corrected to a smaller amount.
    let mut replacement = claim(1);
    replacement["claim_id"] = json!("C-00001-R");
    replacement["claim_amount"] = json!(2_000);
    replacement["lines"][0]["amount"] = json!(2_000);
    replacement["frequency"] = json!("replacement");
    replacement["replaces_claim_id"] = json!("C-00001");
    let r = submit(&app, &s, replacement).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    decided(&app, &s, "C-00001-R").await;
    // It reads as a near-duplicate of the claim it replaces, and goes to review.
    review_all(&app, &s, &mut reviewed).await;
    let c = app.get("/claims/C-00001", &s.access).await.body;
    assert_eq!(c["superseded_by"], "C-00001-R", "{c}");
    wait_for(&app, &s, &["received", "processing", "pending_review"]).await;

    let live = checksums(&app, app.config.store.url());
    assert_eq!(live["claims"]["rows"], CLAIMS + 1, "{live}");
    assert_eq!(live["tasks"]["rows"], reviewed, "{live}");
    assert!(
        live["accumulators"]["rows"].as_u64().unwrap() > CLAIMS as u64 / 2,
        "{live}"
    );
    assert!(
        live["decisions"]["rows"].as_u64().unwrap() >= (CLAIMS + 1 + reviewed) as u64,
        "{live}"
    );

    let dir = tempfile::tempdir().unwrap();
    let target = Database::create(
        if b == Backend::Sqlite {
            Backend::Sqlite
        } else {
            Backend::Postgres
        },
        dir.path(),
    )
    .await;
    let (ok, out, err) = claims_text(&app, &["replay", "--into", &target.url]);
    assert!(ok, "{out}{err}");
    // JSON progress lines (stdout is no terminal), then the result.
    let docs: Vec<Value> = serde_json::Deserializer::from_str(&out)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect();
    let (result, progress) = docs.split_last().unwrap();
    assert!(
        !progress.is_empty() && progress.iter().all(|p| p["progress"]["total"].is_u64()),
        "{out}"
    );
    assert_eq!(result["rebuilt"]["claims"], CLAIMS + 1, "{result}");
    assert_eq!(result["rebuilt"]["officer_decisions"], reviewed, "{result}");
    // On the embedded default the snapshot stage applies the officers' decisions beside
    // the fused chain, and records each as written; on Kafka it applies the topic in
    // order and there is nothing to record.
    let twins = if b == Backend::Sqlite { reviewed } else { 0 };
    assert_eq!(result["rebuilt"]["from_twins"], twins, "{result}");
    assert_eq!(checksums(&app, &target.url), live);
    // Replay builds into an empty database only. Checked before this test opens the
    // rebuilt database itself: a bulk load leaves the database's write-ahead log, which
    // SQLite refuses while any other process has the file open, and this process was
    // seen to keep it open (four descriptors and the log) through a whole second
    // replay after closing its store.
    let (ok, out, err) = claims_text(&app, &["replay", "--into", &target.url]);
    assert!(
        !ok,
        "a second replay into the same database is refused: {out}"
    );
    assert!(err.contains("empty database"), "{err}");
    // The checksum leaves the chain's links out (they follow the order writers took
    // it); the rebuilt chain links the records in the order the rebuild wrote them, a
    // page of 4,000 at a time, and verifies.
    let rebuilt = pipeline::store::Store::connect(&target.url, &Default::default())
        .await
        .unwrap();
    let verified = rebuilt.verify_audit("acme").await.unwrap();
    rebuilt.close().await;
    assert!(
        verified
            .as_ref()
            .is_ok_and(|records| *records > CLAIMS as u64),
        "{verified:?}"
    );
}
