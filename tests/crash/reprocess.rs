//! A reprocess job under SIGKILL (issue 34): the real `claims serve` process is killed
//! while it decides 1,000 pended claims again, and restarted. Every pended claim is
//! decided exactly once more (one new decision record, one new `claim.completed` id),
//! the others not at all, and the job ends `done` with every item counted.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use rand::Rng;
use reqwest::Method;
use serde_json::{json, Value};

use crate::backend::{Backend, Database};
use crate::service::{self, Env, TENANT};
use pipeline::store::{Store, StoreOptions};

const CLAIMS: usize = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_reprocess_killed_mid_job_decides_each_claim_exactly_once_more() {
    run(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_reprocess_killed_mid_job_decides_each_claim_exactly_once_more() {
    run(Backend::Postgres).await
}

async fn publish(client: &reqwest::Client, env: &Env, token: &str, rules: Value) -> String {
    let rb = service::call(
        client,
        token,
        Method::POST,
        format!("{}/rulebooks", env.base),
        json!({"name": "R", "rules": rules}),
    )
    .await;
    let id = rb["rulebook_id"].as_str().unwrap().to_owned();
    service::call(
        client,
        token,
        Method::POST,
        format!("{}/rulebooks/{id}/publish", env.base),
        json!({}),
    )
    .await;
    id
}

async fn run(b: Backend) {
    let dir = service::WorkDir::new();
    let db = Database::create(b, dir.path()).await;
    let env = Env::new(dir.path(), &db.url, "reprocess-crash", Vec::new());
    service::create_tenant(&env);
    let client = service::client();
    let mut child = env.start();
    service::wait_ready(&client, &env.base).await;
    let token = service::set_up_tenant(&client, &env.base).await;
    // Every claim under 85,000 to review; the rest blocked.
    publish(&client, &env, &token, json!([
        {"rule_id": "big", "when": "claim.claim_amount > 85000", "action": "block", "reason_code": "LIMIT"},
        {"rule_id": "all", "when": "claim.claim_amount > 0", "action": "flag", "reason_code": "ALL"}
    ]))
    .await;
    service::submit_claims(&client, &env.base, &token, CLAIMS).await;
    let store = Store::connect(&db.url, &StoreOptions::default())
        .await
        .unwrap();
    let first = settled(&store, |c| c.status.as_str() != "received").await;
    let pended: HashSet<String> = first
        .iter()
        .filter(|(_, c)| c.status.as_str() == "pending_review")
        .map(|(id, _)| id.clone())
        .collect();
    assert!(pended.len() > CLAIMS / 2, "{} pended", pended.len());

    // The flag fixed; the job started, and the process killed while it runs.
    publish(&client, &env, &token, json!([
        {"rule_id": "big", "when": "claim.claim_amount > 85000", "action": "block", "reason_code": "LIMIT"}
    ]))
    .await;
    let job = service::call(
        &client,
        &token,
        Method::POST,
        format!("{}/claims/reprocess", env.base),
        json!({"status": "pending_review", "rulebook": "active"}),
    )
    .await;
    assert_eq!(job["claims"], pended.len(), "{job}");
    let job_id = job["job_id"].as_str().unwrap().to_owned();
    let mut kills_mid_job = 0;
    for _ in 0..3 {
        let pause = rand::thread_rng().gen_range(20..400);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let progress = store.job(TENANT, &job_id).await.unwrap().unwrap();
        if progress.state == schemas::job::JobState::Running {
            kills_mid_job += 1;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        child = env.start();
        service::wait_ready(&client, &env.base).await;
    }
    assert!(kills_mid_job > 0, "no kill landed while the job ran");

    let deadline = Instant::now() + Duration::from_secs(180);
    let job = loop {
        let j = store.job(TENANT, &job_id).await.unwrap().unwrap();
        if j.state != schemas::job::JobState::Running {
            break j;
        }
        assert!(
            Instant::now() < deadline,
            "the job did not finish: {j:?}; see {}",
            env.log.display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        (job.state, job.total, job.done, job.failed),
        (
            schemas::job::JobState::Done,
            pended.len() as i64,
            pended.len() as i64,
            0
        ),
        "see {}",
        env.log.display()
    );
    // Every pended claim decided again: its decision is no longer the first one.
    let after = settled(&store, |c| c.status.as_str() != "received").await;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut after = after;
    while pended
        .iter()
        .any(|id| after[id].audit_id == first[id].audit_id)
    {
        assert!(
            Instant::now() < deadline,
            "claims not decided again; see {}",
            env.log.display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        after = settled(&store, |_| true).await;
    }

    let audits = store.audit_counts(TENANT).await.unwrap();
    for id in first.keys() {
        let want = if pended.contains(id) { 2 } else { 1 };
        assert_eq!(audits[id], want, "decision records of {id}");
    }
    // One id per event kind per decision: two `claim.completed` ids for a pended
    // claim, one for the others (an event published again after a kill keeps its id).
    let (bus, topics) = service::bus(b, &store, "", "");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut completed: HashMap<String, HashSet<String>> = HashMap::new();
        for r in bus.scan(&topics.events).await.unwrap() {
            let e: Value = serde_json::from_slice(&r.value).unwrap();
            if e["event"] == "claim.completed" {
                completed
                    .entry(e["data"]["claim_id"].as_str().unwrap().to_owned())
                    .or_default()
                    .insert(e["id"].as_str().unwrap().to_owned());
            }
        }
        let right = first.keys().all(|id| {
            let want = if pended.contains(id) { 2 } else { 1 };
            completed.get(id).map_or(0, HashSet::len) == want
        });
        let over = completed.values().any(|ids| ids.len() > 2);
        assert!(!over, "a claim completed more than twice");
        if right {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "events missing; see {}",
            env.log.display()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    env.assert_audit_chain_verifies();
}

/// The tenant's claims by id once every one satisfies `done`.
async fn settled(
    store: &Store,
    done: impl Fn(&schemas::claim::ClaimView) -> bool,
) -> HashMap<String, schemas::claim::ClaimView> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let all = store.all_claims(TENANT).await.unwrap();
        if all.len() == CLAIMS && all.iter().all(|(_, c)| done(c)) {
            return all
                .into_iter()
                .map(|(_, c)| (c.submission.claim_id.as_str().to_owned(), c))
                .collect();
        }
        assert!(Instant::now() < deadline, "claims not decided");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
