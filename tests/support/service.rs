//! The real `claims serve` process under load, as the crash and fault suites drive it:
//! its environment, a tenant set up with a plan, members and a rulebook, a submitter that
//! sends claims until each is accepted, and the check that every accepted claim reached
//! exactly one outcome with its events, accumulators and audit chain intact.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pipeline::bus::{Bus, EmbeddedLog, KafkaBus, KafkaSettings};
use pipeline::store::Store;
use pipeline::topics::Topics;
use reqwest::Method;
use serde_json::{json, Value};

pub const BATCH: usize = 100;
pub const MEMBERS: usize = 97;
/// The plan's yearly deductible: a member's first few claims consume it.
pub const DEDUCTIBLE: i64 = 100_000;
pub const TENANT: &str = "acme";

/// A test's data directory, kept when the test fails (its path printed), so that the
/// service's log and database can be read after a failure seen once in many runs.
pub struct WorkDir(Option<tempfile::TempDir>);

impl WorkDir {
    pub fn new() -> WorkDir {
        WorkDir(Some(tempfile::tempdir().unwrap()))
    }

    pub fn path(&self) -> &Path {
        self.0.as_ref().map(tempfile::TempDir::path).unwrap()
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(dir) = self.0.take() {
                eprintln!(
                    "The test failed; its data directory is kept: {}",
                    dir.keep().display()
                );
            }
        }
    }
}

/// How to start the service: its variables, its API's base url and where it logs.
#[derive(Debug, Clone)]
pub struct Env {
    pub vars: Vec<(String, String)>,
    pub base: String,
    pub log: PathBuf,
}

impl Env {
    /// The service on `data_dir` and `database_url`, with 4 partitions, under
    /// `instance` (a restart under the same name resumes the dead process's leases at
    /// once), plus `extra` variables.
    pub fn new(
        data_dir: &Path,
        database_url: &str,
        instance: &str,
        extra: Vec<(String, String)>,
    ) -> Env {
        let port = free_port();
        let vars = [
            ("CLAIMS_DATA_DIR", data_dir.display().to_string()),
            ("CLAIMS_DATABASE_URL", database_url.to_owned()),
            ("CLAIMS_HTTP_ADDR", format!("127.0.0.1:{port}")),
            ("CLAIMS_COOKIE_SECURE", "false".into()),
            ("CLAIMS_PARTITIONS", "4".into()),
            ("CLAIMS_INSTANCE_ID", instance.to_owned()),
            ("RUST_LOG", "warn".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .chain(extra)
        .collect();
        Env {
            vars,
            base: format!("http://127.0.0.1:{port}/api/v1"),
            log: data_dir.join(format!("{instance}.log")),
        }
    }

    /// The same service as another process: its own port, name and log.
    pub fn sibling(&self, instance: &str, log_dir: &Path) -> Env {
        let mut other = self.clone();
        other.log = log_dir.join(format!("{instance}.log"));
        for (k, v) in &mut other.vars {
            match k.as_str() {
                "CLAIMS_HTTP_ADDR" => {
                    *v = format!("127.0.0.1:{}", free_port());
                    other.base = format!("http://{v}/api/v1");
                }
                "CLAIMS_INSTANCE_ID" => *v = instance.to_owned(),
                _ => {}
            }
        }
        other
    }

    pub fn set(&mut self, key: &str, value: &str) {
        self.vars.retain(|(k, _)| k != key);
        self.vars.push((key.to_owned(), value.to_owned()));
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_claims"));
        c.args(args)
            .env_clear()
            .envs(self.vars.iter().map(|(k, v)| (k, v)));
        c
    }

    /// `claims serve` with every role.
    pub fn start(&self) -> Running {
        self.serve(&["serve"])
    }

    /// `claims serve --stages <roles>`.
    pub fn start_roles(&self, roles: &str) -> Running {
        self.serve(&["serve", "--stages", roles])
    }

    fn serve(&self, args: &[&str]) -> Running {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        Running(
            self.command(args)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        )
    }

    /// `claims admin verify-audit` walks the tenant's chain and says it holds.
    pub fn assert_audit_chain_verifies(&self) {
        let out = self
            .command(&["admin", "verify-audit", "--tenant-id", TENANT])
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "the audit chain: {printed}");
        let v: Value = serde_json::from_str(&printed).unwrap();
        assert_eq!(v["verified"], true, "{v}");
    }
}

/// The bus the service runs on, read from outside: the embedded log in the store, or
/// Kafka at `brokers` with topics under `prefix`.
pub fn bus(
    b: crate::backend::Backend,
    store: &Store,
    brokers: &str,
    prefix: &str,
) -> (Bus, Topics) {
    match b {
        crate::backend::Backend::Kafka => (
            Bus::Kafka(
                KafkaBus::connect(
                    KafkaSettings {
                        brokers: brokers.to_owned(),
                        replication: 1,
                        group_prefix: prefix.to_owned(),
                        instance_id: None,
                        schema_registry: None,
                    },
                    store.clone(),
                )
                .unwrap(),
            ),
            Topics::new(prefix, 4),
        ),
        _ => (
            Bus::Embedded(EmbeddedLog::new(store.clone())),
            Topics::new("", 4),
        ),
    }
}

/// The last lines of a service's log, for a failure message.
pub fn log_tail(path: &Path) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// The service log's errors (a request that failed names its cause there), then its
/// last lines.
pub fn log_errors(path: &Path) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("ERROR"))
        .take(20)
        .collect();
    format!(
        "errors:\n{}\nlast lines:\n{}",
        errors.join("\n"),
        log_tail(path)
    )
}

/// A service process, SIGKILLed when dropped: a test that fails leaves none behind.
#[derive(Debug)]
pub struct Running(pub Child);

impl std::ops::Deref for Running {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

pub async fn wait_ready(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(r) = client.get(format!("{base}/health/ready")).send().await {
            if r.status().is_success() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the service at {base} did not become ready");
}

pub async fn call(
    client: &reqwest::Client,
    token: &str,
    method: Method,
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

/// Claims `0..n` ([`claim`]) in batches of [`BATCH`], each accepted before the next.
pub async fn submit_claims(client: &reqwest::Client, base: &str, token: &str, n: usize) {
    for start in (0..n).step_by(BATCH) {
        let items: Vec<Value> = (start..(start + BATCH).min(n)).map(claim).collect();
        call(
            client,
            token,
            Method::POST,
            format!("{base}/claims/batch"),
            json!(items),
        )
        .await;
    }
}

pub fn claim(i: usize) -> Value {
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

/// Creates the tenant and its user with the admin commands (before the service
/// starts, as an operator would).
pub fn create_tenant(env: &Env) {
    let tenant = [
        "admin",
        "create-tenant",
        "--tenant-id",
        TENANT,
        "--name",
        "Acme",
    ];
    assert!(env.command(&tenant).output().unwrap().status.success());
    let scopes = "claims:write claims:read providers:write rulebooks:write tenant:configure";
    let user = [
        "admin",
        "create-user",
        "--tenant-id",
        TENANT,
        "--email",
        "ops@acme.example",
        "--password",
        "crash-test-pw",
        "--scopes",
        scopes,
    ];
    assert!(env.command(&user).output().unwrap().status.success());
}

/// Logs in and gives the tenant a contracted provider, a plan with a deductible, its
/// members and a published rulebook that blocks some claims and flags others. Answers
/// the access token.
pub async fn set_up_tenant(client: &reqwest::Client, base: &str) -> String {
    let login: Value = client
        .post(format!("{base}/auth/login"))
        .json(&json!({"email": "ops@acme.example", "password": "crash-test-pw"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = login["access_token"].as_str().unwrap().to_owned();
    let post =
        |path: &str, body: Value| call(client, &token, Method::POST, format!("{base}{path}"), body);
    post(
        "/providers",
        json!({"provider_id": "PRV-1", "name": "Clinic"}),
    )
    .await;
    post(
        "/providers/PRV-1/contracts",
        json!({"effective_from": "2020-01-01"}),
    )
    .await;
    post("/plans", json!({"plan_id": "PPO", "name": "PPO",
        "benefits": {"deductible": DEDUCTIBLE, "coinsurance_pct": 20, "out_of_pocket_max": 400_000}})).await;
    let members: Vec<Value> = (0..MEMBERS)
        .map(|m| {
            json!({"member_id": format!("MBR-{m}"), "date_of_birth": "1970-01-01", "sex": "U",
                        "plan_id": "PPO", "coverage": [{"from": "2026-01-01"}]})
        })
        .collect();
    let imported = post("/members/import", json!(members)).await;
    assert_eq!(imported["imported"], MEMBERS, "{imported}");
    let rb = post("/rulebooks", json!({"name": "R", "rules": [
        {"rule_id": "big", "when": "claim.claim_amount > 85000", "action": "block", "reason_code": "LIMIT"},
        {"rule_id": "sevens", "when": "claim.claim_amount % 7 == 0", "action": "flag", "reason_code": "SEVENS"}
    ]}))
    .await;
    let publish = format!("/rulebooks/{}/publish", rb["rulebook_id"].as_str().unwrap());
    post(&publish, json!({})).await;
    token
}

/// Claims sent in batches, each batch until an answer comes back; a claim counts as
/// accepted when it is `received` or, on a resend, a `CLAIM_DUPLICATE`. Any other
/// answer to a batch (a refused connection, a 503 while the store is away) is kept in
/// `refusals` and the batch sent again.
#[derive(Debug, Clone, Default)]
pub struct Submitted {
    pub accepted: Arc<Mutex<HashSet<String>>>,
    pub refusals: Arc<Mutex<Vec<(u16, Value)>>>,
}

impl Submitted {
    pub fn spawn(
        &self,
        client: reqwest::Client,
        token: String,
        base: String,
        claims: std::ops::Range<usize>,
        pause: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            for start in claims.clone().step_by(BATCH) {
                let items: Vec<Value> = (start..(start + BATCH).min(claims.end))
                    .map(claim)
                    .collect();
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
                    let status = r.status().as_u16();
                    let body = r.json::<Value>().await.unwrap_or(Value::Null);
                    let Some(results) = body["results"].as_array().filter(|_| status == 200) else {
                        this.refusals.lock().unwrap().push((status, body));
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    };
                    for item in results {
                        let ok = item["status"] == "received"
                            || item["error"]["code"] == "CLAIM_DUPLICATE";
                        assert!(ok, "unexpected item result {item}");
                        this.accepted
                            .lock()
                            .unwrap()
                            .insert(item["claim_id"].as_str().unwrap().to_owned());
                    }
                    break;
                }
                tokio::time::sleep(pause).await;
            }
        })
    }

    pub fn accepted(&self) -> HashSet<String> {
        self.accepted.lock().unwrap().clone()
    }
}

/// Waits until no accepted claim is undecided, then checks what a tenant would: every
/// accepted claim and no other is in the store with one decision and one audit record;
/// one review task per flagged claim; per claim one event id per kind and the kinds
/// its outcome calls for; accumulators in the store and on the topic equal to those
/// recomputed from the decisions.
pub async fn assert_each_claim_decided_once(
    store: &Store,
    bus: &Bus,
    topics: &Topics,
    accepted: &HashSet<String>,
    log: &Path,
) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let pending = store
            .claims(
                TENANT,
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
            "claims still undecided; see {}; its errors and last lines:\n{}",
            log.display(),
            log_errors(log)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let all = store.all_claims(TENANT).await.unwrap();
    let ids: HashSet<String> = all
        .iter()
        .map(|(_, c)| c.submission.claim_id.as_str().to_owned())
        .collect();
    assert_eq!(&ids, accepted, "the stored claims are the accepted ones");
    for (_, c) in &all {
        assert!(
            c.outcome.is_some() && c.audit_id.is_some(),
            "{} undecided",
            c.submission.claim_id
        );
    }
    let audits = store.audit_counts(TENANT).await.unwrap();
    assert_eq!(audits.len(), accepted.len(), "one audit record per claim");
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
        .tasks(TENANT, None, None, 10 * accepted.len() as i64 + 10)
        .await
        .unwrap()
        .into_iter()
        .map(|(t, _)| t.claim_id)
        .collect();
    assert_eq!(tasks.len(), flagged.len(), "one task per flagged claim");
    assert_eq!(tasks.into_iter().collect::<HashSet<_>>(), flagged);

    // The events follow each claim's snapshot; a batch whose snapshot was written by a
    // process killed before it published them is published again by whichever process
    // takes its partition over (on Kafka, once the dead member's session expires). On
    // Kafka a kill between a batch's outputs and its commit redelivers the batch: an
    // event may then be on the topic twice, always with the same id.
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
        if per_claim.len() == accepted.len() || Instant::now() > deadline {
            break per_claim;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    if per_claim.len() != accepted.len() {
        let missing: Vec<&String> = accepted
            .iter()
            .filter(|id| !per_claim.contains_key(*id))
            .collect();
        let report = missing_events_report(store, bus, topics, &missing, log).await;
        panic!(
            "claims with events {} vs {}; without any:\n{report}",
            per_claim.len(),
            accepted.len()
        );
    }
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
    assert_accumulators(store, bus, topics, &all).await;
}

/// What a claim decided without events went through, for the failure's message (a CI
/// run keeps its output, not the service's data directory): the claim as the store
/// holds it, its decision's audit record, its records on `claims.decided`, its member's
/// records on `state.accumulators`, and the end of the service's log.
async fn missing_events_report(
    store: &Store,
    bus: &Bus,
    topics: &Topics,
    missing: &[&String],
    log: &Path,
) -> String {
    use std::fmt::Write as _;
    let mut report = String::new();
    // The missing claims' records on `claims.decided`, each decoded once.
    let decided: Vec<(pipeline::bus::Record, Value)> = bus
        .scan(&topics.decided)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| {
            let d: Value = serde_json::from_slice(&r.value).ok()?;
            missing
                .iter()
                .any(|id| d["claim_id"] == id.as_str())
                .then_some((r, d))
        })
        .collect();
    for id in missing {
        let claim = store.claim(TENANT, id).await.ok().flatten();
        let _ = writeln!(
            report,
            "{id}: status {:?}, outcome {:?}, audit {:?}",
            claim.as_ref().map(|c| c.status),
            claim.as_ref().and_then(|c| c.outcome),
            claim.as_ref().and_then(|c| c.audit_id.clone()),
        );
        if let Some(audit_id) = claim.and_then(|c| c.audit_id) {
            if let Ok(Some(r)) = store.audit_record(TENANT, &audit_id).await {
                let _ = writeln!(report, "  audit details {:.400}", r.details);
            }
        }
        for (r, _) in decided.iter().filter(|(_, d)| d["claim_id"] == id.as_str()) {
            let _ = writeln!(
                report,
                "  claims.decided {}:{} at {} ({} bytes, key {})",
                r.partition,
                r.offset,
                r.timestamp_ms,
                r.value.len(),
                r.key
            );
        }
    }
    // The members' records on `state.accumulators`: which of a batch's counts landed
    // before a kill (docs/decisions.md, "Accumulators", restored from the store).
    let members: HashSet<&str> = decided
        .iter()
        .filter_map(|(_, d)| d["member_id"].as_str())
        .collect();
    for r in bus.scan(&topics.accumulators).await.unwrap_or_default() {
        if members.iter().any(|m| r.key.contains(&format!("/{m}/"))) {
            let _ = writeln!(
                report,
                "  state.accumulators {}:{} at {} key {}",
                r.partition, r.offset, r.timestamp_ms, r.key
            );
        }
    }
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let _ = writeln!(report, "the end of {}:", log.display());
    for line in &lines[lines.len().saturating_sub(40)..] {
        let _ = writeln!(report, "  {line}");
    }
    report
}

/// Each member's accumulators, in the store and on `state.accumulators`, are the sum of
/// what the claims' final decisions say the member used; and the deductible went to
/// the member's first payable claims, in acceptance (claim id) order.
async fn assert_accumulators(
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
            .member_accumulators(TENANT, &member, 2026)
            .await
            .unwrap();
        assert_eq!(stored, recomputed, "{member}: the store's accumulators");
        let on_topic = state
            .year(TENANT, &member, 2026)
            .map(|y| y.totals.clone())
            .unwrap_or_default();
        assert_eq!(on_topic, recomputed, "{member}: state.accumulators");
    }
    assert!(
        counted > all.len() / 2,
        "most claims are payable: {counted}"
    );
}
