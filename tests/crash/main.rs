//! Nothing lost, nothing doubled (issue 4): the real `claims serve` process takes a
//! stream of claims while it is killed with SIGKILL several times and restarted. Every
//! claim that was accepted must reach exactly one decision, with one audit record and one
//! id per event, on each store. Every member is on a plan with a deductible: afterwards
//! each member's accumulators, in the store and on `state.accumulators`, equal the sum
//! recomputed from the claims' final decisions, and the deductible was taken by the
//! member's claims in the order they were accepted.

// A test reports failure by panicking; unwrapping is the idiom here.
#![allow(clippy::unwrap_used)]

#[path = "../api/support/backend.rs"]
mod backend;

use std::collections::{HashMap, HashSet};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backend::{Backend, Database};
use pipeline::bus::{Bus, EmbeddedLog, KafkaBus, KafkaSettings};
use pipeline::store::{Store, StoreOptions};
use pipeline::topics::Topics;
use rand::Rng;
use serde_json::{json, Value};

const CLAIMS: usize = 3000;
const BATCH: usize = 100;
const KILLS: usize = 8;
const MEMBERS: usize = 97;
/// The plan's yearly deductible: a member's first few claims consume it.
const DEDUCTIBLE: i64 = 100_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_kill_9_loses_and_doubles_nothing() {
    crash_test(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_kill_9_loses_and_doubles_nothing() {
    crash_test(Backend::Postgres).await
}

/// On Kafka a kill between a batch's outputs and its commit redelivers the batch: an
/// event may then be on the topic twice, always with the same id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_kill_9_loses_and_doubles_nothing() {
    crash_test(Backend::Kafka).await
}

/// Two processes in every stage's consumer group share the partitions; one is killed
/// for good while claims flow, and the other takes over its partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_two_processes_share_the_work_and_one_killed_loses_nothing() {
    run(Backend::Kafka, Plan::KillTheSecond).await
}

/// How the processes are killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// One process, killed and restarted `KILLS` times.
    RestartOne,
    /// Two processes; the second is killed once and stays dead.
    KillTheSecond,
}

async fn crash_test(b: Backend) {
    run(b, Plan::RestartOne).await
}

struct Env {
    vars: Vec<(String, String)>,
    base: String,
    log: std::path::PathBuf,
}

impl Env {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_claims"));
        c.args(args)
            .env_clear()
            .envs(self.vars.iter().map(|(k, v)| (k, v)));
        c
    }

    fn start(&self) -> Child {
        self.start_logging_to(&self.log)
    }

    fn start_logging_to(&self, path: &std::path::Path) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        self.command(&["serve"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn wait_ready(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(r) = client.get(format!("{base}/health/ready")).send().await {
            if r.status().is_success() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the service did not become ready");
}

async fn call(
    client: &reqwest::Client,
    token: &str,
    method: reqwest::Method,
    url: String,
    body: Value,
) -> Value {
    let r = client
        .request(method, url)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    r.json().await.unwrap_or(Value::Null)
}

fn claim(i: usize) -> Value {
    // Amounts vary so that some claims are flagged and some blocked; each of a member's
    // claims is on a day of its own, so that none reads as a near-duplicate.
    let amount = 1000 + (i as i64 * 7919) % 90_000;
    let day = i / MEMBERS % 31 + 1;
    json!({
        "claim_id": format!("CLM-{i:05}"), "member_id": format!("MBR-{}", i % MEMBERS), "provider_id": "PRV-1",
        "claim_amount": amount, "service_date": format!("2026-03-{day:02}"),
        "lines": [{"procedure_code": "99213", "units": 1, "amount": amount}]
    })
}

async fn run(b: Backend, plan: Plan) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(b, dir.path()).await;
    let port = free_port();
    let prefix = format!("crash{}.", uuid::Uuid::new_v4().simple());
    let mut vars: Vec<(String, String)> = Vec::new();
    if b == Backend::Kafka {
        vars.push(("CLAIMS_KAFKA_BROKERS".into(), backend::kafka_brokers()));
        vars.push(("CLAIMS_TOPIC_PREFIX".into(), prefix.clone()));
    }
    let env = Env {
        vars: vec![
            ("CLAIMS_DATA_DIR".into(), dir.path().display().to_string()),
            ("CLAIMS_DATABASE_URL".into(), db.url.clone()),
            ("CLAIMS_HTTP_ADDR".into(), format!("127.0.0.1:{port}")),
            ("CLAIMS_COOKIE_SECURE".into(), "false".into()),
            ("CLAIMS_PARTITIONS".into(), "4".into()),
            // A restart resumes the dead process's leases at once, so kills land while
            // the stages are busy rather than while they wait for leases to expire.
            ("CLAIMS_INSTANCE_ID".into(), "crash-test".into()),
            ("RUST_LOG".into(), "warn".into()),
        ]
        .into_iter()
        .chain(vars)
        .collect(),
        base: format!("http://127.0.0.1:{port}/api/v1"),
        log: dir.path().join("service.log"),
    };
    assert!(env
        .command(&[
            "admin",
            "create-tenant",
            "--tenant-id",
            "acme",
            "--name",
            "Acme"
        ])
        .output()
        .unwrap()
        .status
        .success());
    let scopes = "claims:write claims:read providers:write rulebooks:write tenant:configure";
    let user = [
        "admin",
        "create-user",
        "--tenant-id",
        "acme",
        "--email",
        "ops@acme.example",
        "--password",
        "crash-test-pw",
        "--scopes",
        scopes,
    ];
    assert!(env.command(&user).output().unwrap().status.success());

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut child = env.start();
    wait_ready(&client, &env.base).await;
    let login: Value = client
        .post(format!("{}/auth/login", env.base))
        .json(&json!({"email": "ops@acme.example", "password": "crash-test-pw"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = login["access_token"].as_str().unwrap().to_owned();
    use reqwest::Method;
    call(
        &client,
        &token,
        Method::POST,
        format!("{}/providers", env.base),
        json!({"provider_id": "PRV-1", "name": "Clinic"}),
    )
    .await;
    call(
        &client,
        &token,
        Method::POST,
        format!("{}/providers/PRV-1/contracts", env.base),
        json!({"effective_from": "2020-01-01"}),
    )
    .await;
    call(&client, &token, Method::POST, format!("{}/plans", env.base), json!({"plan_id": "PPO", "name": "PPO",
        "benefits": {"deductible": DEDUCTIBLE, "coinsurance_pct": 20, "out_of_pocket_max": 400_000}})).await;
    let members: Vec<Value> = (0..MEMBERS)
        .map(|m| {
            json!({"member_id": format!("MBR-{m}"), "date_of_birth": "1970-01-01", "sex": "U",
                        "plan_id": "PPO", "coverage": [{"from": "2026-01-01"}]})
        })
        .collect();
    let imported = call(
        &client,
        &token,
        Method::POST,
        format!("{}/members/import", env.base),
        json!(members),
    )
    .await;
    assert_eq!(imported["imported"], MEMBERS, "{imported}");
    let rb = call(&client, &token, Method::POST, format!("{}/rulebooks", env.base), json!({"name": "R", "rules": [
        {"rule_id": "big", "when": "claim.claim_amount > 85000", "action": "block", "reason_code": "LIMIT"},
        {"rule_id": "sevens", "when": "claim.claim_amount % 7 == 0", "action": "flag", "reason_code": "SEVENS"}
    ]})).await;
    call(
        &client,
        &token,
        Method::POST,
        format!(
            "{}/rulebooks/{}/publish",
            env.base,
            rb["rulebook_id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await;

    // The submitter: each batch is sent until an answer comes back; a claim counts as
    // accepted when it is `received` or, on a resend, a `CLAIM_DUPLICATE`.
    let accepted = Arc::new(Mutex::new(HashSet::new()));
    let submitter = {
        let (client, token, base, accepted) = (
            client.clone(),
            token.clone(),
            env.base.clone(),
            accepted.clone(),
        );
        tokio::spawn(async move {
            for start in (0..CLAIMS).step_by(BATCH) {
                let items: Vec<Value> = (start..start + BATCH).map(claim).collect();
                loop {
                    let sent = client
                        .post(format!("{base}/claims/batch"))
                        .bearer_auth(&token)
                        .json(&items)
                        .send()
                        .await;
                    let Ok(r) = sent else {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    };
                    let Ok(body) = r.json::<Value>().await else {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    };
                    for item in body["results"].as_array().unwrap() {
                        let ok = item["status"] == "received"
                            || item["error"]["code"] == "CLAIM_DUPLICATE";
                        assert!(ok, "unexpected item result {item}");
                        accepted
                            .lock()
                            .unwrap()
                            .insert(item["claim_id"].as_str().unwrap().to_owned());
                    }
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    // The second process: the same service on another port, under its own name, its
    // stages logging each batch they finish.
    let second = (plan == Plan::KillTheSecond).then(|| {
        let mut other = Env {
            vars: env.vars.clone(),
            base: String::new(),
            log: dir.path().join("second.log"),
        };
        for (k, v) in &mut other.vars {
            match k.as_str() {
                "CLAIMS_HTTP_ADDR" => {
                    *v = format!("127.0.0.1:{}", free_port());
                    other.base = format!("http://{v}/api/v1");
                }
                "CLAIMS_INSTANCE_ID" => *v = "crash-test-2".into(),
                "RUST_LOG" => *v = "warn,pipeline::stages::runner=debug".into(),
                _ => {}
            }
        }
        let child = other.start_logging_to(&other.log);
        (other, child)
    });
    let mut kills_during_intake = 0;
    if let Some((other, mut child2)) = second {
        // Killed as soon as it has taken a share of the work.
        wait_ready(&client, &other.base).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(&other.log)
            .unwrap_or_default()
            .contains("Batch done.")
        {
            assert!(
                Instant::now() < deadline,
                "the second process never got work; see {}",
                other.log.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        child2.kill().unwrap();
        child2.wait().unwrap();
        kills_during_intake += usize::from(!submitter.is_finished());
    }
    let kills = if plan == Plan::RestartOne { KILLS } else { 0 };
    for _ in 0..kills {
        let pause = rand::thread_rng().gen_range(150..700);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        if !submitter.is_finished() {
            kills_during_intake += 1;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        child = env.start();
        wait_ready(&client, &env.base).await;
    }
    assert!(
        kills_during_intake > 0 || plan == Plan::KillTheSecond,
        "no kill landed while claims were being submitted"
    );
    submitter.await.unwrap();
    let accepted = accepted.lock().unwrap().clone();
    assert_eq!(
        accepted.len(),
        CLAIMS,
        "every claim was eventually accepted"
    );

    // Wait for the pipeline to drain.
    let store = Store::connect(&db.url, &StoreOptions::default())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let pending = store
            .claims(
                "acme",
                &pipeline::store::ClaimFilter {
                    status: Some(schemas::claim::ClaimStatus::Received),
                    ..Default::default()
                },
                None,
                1,
            )
            .await
            .unwrap();
        if pending.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "claims still undecided; see {}",
            env.log.display()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Every accepted claim has one decision, and nothing else is in the store.
    let all = store.all_claims("acme").await.unwrap();
    let ids: HashSet<String> = all
        .iter()
        .map(|(_, c)| c.submission.claim_id.as_str().to_owned())
        .collect();
    assert_eq!(ids, accepted);
    for (_, c) in &all {
        assert!(
            c.outcome.is_some() && c.audit_id.is_some(),
            "{} undecided",
            c.submission.claim_id
        );
    }
    let audits = store.audit_counts("acme").await.unwrap();
    assert_eq!(audits.len(), CLAIMS, "one audit record per claim");
    assert!(
        audits.values().all(|n| *n == 1),
        "a claim has more than one decision record"
    );

    // A review task for each flagged claim and no other: a redelivered claim decided
    // again differently opens none.
    let flagged: HashSet<String> = all
        .iter()
        .filter(|(_, c)| c.outcome == Some(schemas::claim::Outcome::Flagged))
        .map(|(_, c)| c.submission.claim_id.as_str().to_owned())
        .collect();
    let tasks: Vec<String> = store
        .tasks("acme", None, None, 10 * CLAIMS as i64)
        .await
        .unwrap()
        .into_iter()
        .map(|(t, _)| t.claim_id)
        .collect();
    assert_eq!(tasks.len(), flagged.len(), "one task per flagged claim");
    assert_eq!(tasks.into_iter().collect::<HashSet<_>>(), flagged);

    // Events: per claim, one id per kind, and the kinds its outcome calls for.
    let (bus, topics) = match b {
        Backend::Kafka => (
            Bus::Kafka(
                KafkaBus::connect(
                    KafkaSettings {
                        brokers: backend::kafka_brokers(),
                        replication: 1,
                        group_prefix: prefix.clone(),
                        instance_id: None,
                        schema_registry: None,
                    },
                    store.clone(),
                )
                .unwrap(),
            ),
            Topics::new(&prefix, 4),
        ),
        _ => (
            Bus::Embedded(EmbeddedLog::new(store.clone())),
            Topics::new("", 4),
        ),
    };
    // The events follow each claim's snapshot; a batch whose snapshot was written by a
    // process killed before it published them is published again by whichever process
    // takes its partition over (on Kafka, once the dead member's session expires).
    let deadline = Instant::now() + Duration::from_secs(120);
    let per_claim = loop {
        let mut per_claim: HashMap<String, HashMap<String, HashSet<String>>> = HashMap::new();
        for r in bus.scan(&topics.events).await.unwrap() {
            let e: Value = serde_json::from_slice(&r.value).unwrap();
            per_claim
                .entry(e["data"]["claim_id"].as_str().unwrap().to_owned())
                .or_default()
                .entry(e["event"].as_str().unwrap().to_owned())
                .or_default()
                .insert(e["id"].as_str().unwrap().to_owned());
        }
        if per_claim.len() == CLAIMS || Instant::now() > deadline {
            break per_claim;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    child.kill().unwrap();
    child.wait().unwrap();
    check_accumulators(&store, &bus, &topics, &all).await;
    assert_eq!(per_claim.len(), CLAIMS, "claims with events");
    for (_, c) in &all {
        let kinds = &per_claim[c.submission.claim_id.as_str()];
        assert!(
            kinds.values().all(|ids| ids.len() == 1),
            "{}: {kinds:?}",
            c.submission.claim_id
        );
        let expected: HashSet<&str> = match c.outcome.unwrap() {
            schemas::claim::Outcome::Blocked => ["claim.blocked", "claim.completed"].into(),
            schemas::claim::Outcome::Flagged => {
                ["claim.flagged", "workflow.task.created", "claim.completed"].into()
            }
            _ => ["claim.completed"].into(),
        };
        assert_eq!(
            kinds.keys().map(String::as_str).collect::<HashSet<_>>(),
            expected,
            "{}",
            c.submission.claim_id
        );
    }
}

/// Each member's accumulators, in the store and on `state.accumulators`, are the sum of
/// what the claims' final decisions say the member used; and the deductible went to
/// the member's first payable claims, in acceptance (claim id) order.
async fn check_accumulators(
    store: &Store,
    bus: &Bus,
    topics: &Topics,
    all: &[(i64, schemas::claim::ClaimView)],
) {
    use pipeline::adjudication::{usage_of, Usage};
    use pipeline::stages::snapshot::accumulators::Accumulators;
    let mut by_member: HashMap<String, Vec<&schemas::claim::ClaimView>> = HashMap::new();
    for (_, c) in all {
        by_member
            .entry(c.submission.member_id.as_str().to_owned())
            .or_default()
            .push(c);
    }
    let state = Accumulators::from_entries(
        bus.scan(&topics.accumulators)
            .await
            .unwrap()
            .into_iter()
            .map(|r| serde_json::from_slice(&r.value).unwrap()),
    );
    let mut counted = 0;
    for (member, mut claims) in by_member {
        claims.sort_by(|a, b| {
            a.submission
                .claim_id
                .as_str()
                .cmp(b.submission.claim_id.as_str())
        });
        let mut recomputed = Usage::default();
        let mut deductible_left = DEDUCTIBLE;
        for c in claims.iter().filter(|c| {
            matches!(
                c.outcome,
                Some(schemas::claim::Outcome::Adjudicated | schemas::claim::Outcome::Approved)
            )
        }) {
            let used = usage_of(&c.lines);
            let allowed: i64 = c
                .lines
                .iter()
                .map(|l| l.adjudication.as_ref().unwrap().allowed_amount)
                .sum();
            assert_eq!(
                used.deductible,
                allowed.min(deductible_left),
                "{member}: claim {} took the deductible out of acceptance order",
                c.submission.claim_id
            );
            deductible_left -= used.deductible;
            recomputed.add(&used);
            counted += 1;
        }
        let stored = store
            .member_accumulators("acme", &member, 2026)
            .await
            .unwrap();
        assert_eq!(stored, recomputed, "{member}: the store's accumulators");
        let on_topic = state
            .year("acme", &member, 2026)
            .map(|y| y.totals.clone())
            .unwrap_or_default();
        assert_eq!(on_topic, recomputed, "{member}: state.accumulators");
    }
    assert!(counted > CLAIMS / 2, "most claims are payable: {counted}");
}
