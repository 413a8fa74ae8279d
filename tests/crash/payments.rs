//! A payment run under SIGKILL (issue 35): the real `claims serve` process is killed
//! while payment runs are under way, and restarted, several times; a last run pays what
//! is left. Every payable claim is paid exactly once, in exactly one payment with one
//! `payment.issued` event and one record on `claims.payments`, and the payments add up
//! to the claims' approved amounts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use rand::Rng;
use reqwest::Method;
use serde_json::{json, Value};

use crate::backend::{Backend, Database};
use crate::service::{self, Env, TENANT};
use pipeline::store::{Store, StoreOptions};

const CLAIMS: usize = 1000;
const KILLS: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_payment_runs_killed_mid_run_pay_each_claim_exactly_once() {
    run(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_payment_runs_killed_mid_run_pay_each_claim_exactly_once() {
    run(Backend::Postgres).await
}

/// The tenant's claims once none is waiting to be decided.
async fn decided(store: &Store) -> Vec<schemas::claim::ClaimView> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let all = store.all_claims(TENANT).await.unwrap();
        if all.len() == CLAIMS
            && all
                .iter()
                .all(|(_, c)| !matches!(c.status.as_str(), "received" | "processing"))
        {
            return all.into_iter().map(|(_, c)| c).collect();
        }
        assert!(Instant::now() < deadline, "claims not decided");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn run_payments(client: &reqwest::Client, env: &Env, token: &str) -> Option<Value> {
    let today = schemas::Date::today_utc().to_string();
    let res = client
        .post(format!("{}/payments/runs", env.base))
        .bearer_auth(token)
        .json(&json!({"through": today}))
        .send()
        .await
        .ok()?;
    if res.status() != reqwest::StatusCode::CREATED {
        return None;
    }
    res.json().await.ok()
}

async fn run(b: Backend) {
    let dir = service::WorkDir::new();
    let db = Database::create(b, dir.path()).await;
    let env = Env::new(dir.path(), &db.url, "payments-crash", Vec::new());
    service::create_tenant(&env);
    let client = service::client();
    let mut child = env.start();
    service::wait_ready(&client, &env.base).await;
    let token = service::set_up_tenant(&client, &env.base).await;
    service::submit_claims(&client, &env.base, &token, CLAIMS).await;
    let store = Store::connect(&db.url, &StoreOptions::default())
        .await
        .unwrap();
    let payable: BTreeMap<String, i64> = decided(&store)
        .await
        .into_iter()
        .filter(|c| c.outcome.map(|o| o.as_str()) == Some("ADJUDICATED"))
        .map(|c| {
            (
                c.submission.claim_id.as_str().to_owned(),
                c.approved_amount.unwrap(),
            )
        })
        .collect();
    assert!(payable.len() > CLAIMS / 2, "{} payable", payable.len());

    // Runs started, and the process killed at a random moment of each. A run that
    // answered before its kill paid everything left, and the runs after it pay nothing
    // and answer at once: each answer halves the longest pause, so that a kill lands.
    let mut unanswered = 0;
    let mut longest = 40;
    for _ in 0..KILLS {
        let (c, e, t) = (client.clone(), env.clone(), token.clone());
        let attempt = tokio::spawn(async move { run_payments(&c, &e, &t).await });
        let pause = rand::thread_rng().gen_range(0..longest);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        if attempt.await.unwrap().is_none() {
            unanswered += 1;
        } else {
            longest = (longest / 2).max(1);
        }
        child = env.start();
        service::wait_ready(&client, &env.base).await;
    }
    assert!(unanswered > 0, "no kill landed before a run answered");
    assert!(run_payments(&client, &env, &token).await.is_some());

    // What was paid, from the events: one per payment.
    let (bus, topics) = service::bus(b, &store, "", "");
    let mut issued: HashMap<String, usize> = HashMap::new();
    for r in bus.scan(&topics.events).await.unwrap() {
        let e: Value = serde_json::from_slice(&r.value).unwrap();
        if e["event"] == "payment.issued" {
            *issued
                .entry(e["data"]["payment_id"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    assert!(
        issued.values().all(|n| *n == 1),
        "an event doubled: {issued:?}"
    );
    let mut records: HashMap<String, usize> = HashMap::new();
    for r in bus.scan(&topics.payments).await.unwrap() {
        let v: Value = serde_json::from_slice(&r.value).unwrap();
        *records
            .entry(v["payment_id"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(records, issued, "one record on claims.payments per payment");
    let mut paid: BTreeMap<String, i64> = BTreeMap::new();
    for payment_id in issued.keys() {
        let p = service::call(
            &client,
            &token,
            Method::GET,
            format!("{}/payments/{payment_id}", env.base),
            Value::Null,
        )
        .await;
        let mut sum = 0;
        for id in p["claims"].as_array().unwrap() {
            let id = id.as_str().unwrap().to_owned();
            let amount = payable
                .get(&id)
                .copied()
                .unwrap_or_else(|| panic!("{id} is not payable but was paid"));
            sum += amount;
            assert!(paid.insert(id.clone(), amount).is_none(), "{id} paid twice");
        }
        assert_eq!(p["amount"], sum, "a payment is its claims' amounts");
    }
    assert_eq!(
        paid.keys().collect::<BTreeSet<_>>(),
        payable.keys().collect::<BTreeSet<_>>(),
        "every payable claim paid; see {}",
        env.log.display()
    );
    assert_eq!(paid.values().sum::<i64>(), payable.values().sum::<i64>());
    child.kill().unwrap();
    child.wait().unwrap();
    env.assert_audit_chain_verifies();
}
