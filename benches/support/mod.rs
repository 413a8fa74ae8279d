//! What the benchmarks share: ports, readiness and memory of a service process.
#![allow(dead_code, clippy::unwrap_used)] // each benchmark uses part of it

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Peak resident memory of process `pid` so far (VmHWM), MiB.
pub fn peak_rss_mib(pid: u32) -> f64 {
    status_kib(pid, "VmHWM:") / 1024.0
}

/// Current resident memory of process `pid` (VmRSS), MiB.
pub fn rss_mib(pid: u32) -> f64 {
    status_kib(pid, "VmRSS:") / 1024.0
}

fn status_kib(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .unwrap_or(f64::NAN)
}

/// A free local port for a service process.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until the service at `base` answers ready.
pub async fn wait_ready(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while client
        .get(format!("{base}/health/ready"))
        .send()
        .await
        .map(|r| !r.status().is_success())
        .unwrap_or(true)
    {
        assert!(Instant::now() < deadline, "the service did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The claims a bench sends: its first argument, else `BENCH_N`, else 100,000.
pub fn claims_to_send() -> usize {
    std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .or_else(|| std::env::var("BENCH_N").ok()?.parse().ok())
        .unwrap_or(100_000)
}

/// The stages that decide claims, with the API: webhooks are delivered by a process
/// of their own where a bench measures them, so that their rate is measured apart.
pub const DECIDING: &str = "api,validate,rules,fraud,decide,snapshot";

/// The service's binary: this build's, or `BENCH_CLAIMS_BIN` to run another build under
/// the same bench (an old build against a new one, alternating).
pub fn claims_bin() -> String {
    std::env::var("BENCH_CLAIMS_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_claims").to_owned())
}

/// Starts `claims serve --stages {stages}` with `envs`, its log on this process's
/// standard error.
pub fn serve(bin: &str, envs: &[(String, String)], stages: &str) -> std::process::Child {
    Command::new(bin)
        .args(["serve", "--stages", stages])
        .envs(envs.iter().cloned())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Runs `claims ARGS` with `envs` to its end and answers what it printed; it must
/// succeed.
pub fn cli(bin: &str, envs: &[(String, String)], args: &[&str]) -> Vec<u8> {
    let out = Command::new(bin)
        .args(args)
        .envs(envs.iter().cloned())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "claims {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Creates the tenant `bench` and its user `bench@bench.example` with these scopes,
/// through `claims admin` on the service's store.
pub fn create_bench_user(bin: &str, envs: &[(String, String)], scopes: &str) {
    let admin = |args: &[&str]| {
        cli(bin, envs, args);
    };
    admin(&[
        "admin",
        "create-tenant",
        "--tenant-id",
        "bench",
        "--name",
        "Bench",
    ]);
    admin(&[
        "admin",
        "create-user",
        "--tenant-id",
        "bench",
        "--email",
        "bench@bench.example",
        "--password",
        "bench-password",
        "--scopes",
        scopes,
    ]);
}

/// Logs the bench user in; answers its access token.
pub async fn login(client: &reqwest::Client, base: &str) -> String {
    let body: Value = client
        .post(format!("{base}/auth/login"))
        .json(&json!({"email": "bench@bench.example", "password": "bench-password"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["access_token"].as_str().unwrap().to_owned()
}

/// CPU seconds (user + system) process `pid` has used so far, from `/proc/{pid}/stat`.
pub fn cpu_secs(pid: u32) -> f64 {
    let Some(fields) = stat_fields(pid) else {
        return f64::NAN;
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
        .sum();
    ticks / clock_ticks_per_sec()
}

/// The fields of `/proc/{pid}/stat` after the command's name (field 2, in parentheses,
/// which may hold spaces): the state first, then plain numbers.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`; 100 on Linux unless told).
fn clock_ticks_per_sec() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// Prints how busy the machine was for a second before the run, from `/proc/stat`. The
/// figures of a run are only as good as the quiet it had: a test broker left running,
/// idle but reading its storage, once kept one core of the two busy through every run.
/// What an earlier, killed run left running is stopped first.
pub fn print_background_load() {
    sweep_stopped_runs();
    // Busy and total jiffies over all cores (iowait counts as idle).
    fn busy_total() -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let v: Vec<u64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .take(8)
            .filter_map(|x| x.parse().ok())
            .collect();
        let total: u64 = v.iter().sum();
        Some((total - v.get(3)? - v.get(4)?, total))
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let before = busy_total();
    std::thread::sleep(Duration::from_secs(1));
    if let (Some((b0, t0)), Some((b1, t1))) = (before, busy_total()) {
        let busy = (b1 - b0) as f64 / (t1 - t0).max(1) as f64 * cores as f64;
        println!("machine before the run: {busy:.2} of {cores} cores busy (over 1 s)");
    }
}

/// CPU a process used over a stretch of a run: take [`CpuMark::now`] at its start.
#[derive(Debug, Clone, Copy)]
pub struct CpuMark {
    pid: u32,
    secs: f64,
}

impl CpuMark {
    pub fn now(pid: u32) -> Self {
        Self {
            pid,
            secs: cpu_secs(pid),
        }
    }

    /// CPU seconds used since the mark.
    pub fn used(&self) -> f64 {
        cpu_secs(self.pid) - self.secs
    }
}

/// When the benchmark binary is started as `<bench> --hello-world PORT`, it serves the
/// hello-world ceiling instead (see [`spawn_hello_world`]) and never returns.
pub fn serve_hello_world_if_asked() {
    let args: Vec<String> = std::env::args().collect();
    let Some(i) = args.iter().position(|a| a == "--hello-world") else {
        return;
    };
    let port: u16 = args[i + 1].parse().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        // What any intake must do at least: take a request's JSON body and answer 202.
        let app = axum::Router::new().route(
            "/api/v1/claims/intake",
            axum::routing::post(|body: axum::body::Bytes| async move {
                let ok = serde_json::from_slice::<serde_json::Value>(&body).is_ok();
                let status = if ok {
                    axum::http::StatusCode::ACCEPTED
                } else {
                    axum::http::StatusCode::BAD_REQUEST
                };
                (status, axum::Json(json!({"status": "received"})))
            }),
        );
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        axum::serve(listener, app).await.unwrap();
    });
    std::process::exit(0);
}

/// Starts this benchmark binary again as an axum hello-world server (a process of its
/// own, as the service is, on the same runtime settings): the ceiling single intake is
/// compared with. Answers the child and its base URL.
pub fn spawn_hello_world() -> (std::process::Child, String) {
    let port = free_port();
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--hello-world", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    (child, format!("http://127.0.0.1:{port}/api/v1"))
}

/// The bytes the store holds (pages in use on SQLite; the database's size on
/// PostgreSQL): the difference over a run is what the run wrote.
pub async fn store_bytes(store: &pipeline::store::Store) -> i64 {
    let mut tx = store.begin_write().await.unwrap();
    let bytes = match store.backend() {
        pipeline::store::Backend::Sqlite => {
            let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
                .fetch_one(&mut *tx)
                .await
                .unwrap();
            let free: i64 = sqlx::query_scalar("PRAGMA freelist_count")
                .fetch_one(&mut *tx)
                .await
                .unwrap();
            let size: i64 = sqlx::query_scalar("PRAGMA page_size")
                .fetch_one(&mut *tx)
                .await
                .unwrap();
            (pages - free) * size
        }
        pipeline::store::Backend::Postgres => {
            sqlx::query_scalar("SELECT pg_database_size(current_database())::BIGINT")
                .fetch_one(&mut *tx)
                .await
                .unwrap()
        }
    };
    tx.commit().await.unwrap();
    bytes
}

/// The store's durable-append ceiling in claims/s: `claims` claims of `bytes_per_claim`
/// bytes appended to a table of their own in `store` (a fresh one, with the service's
/// durability settings), as the service commits them: per `batch` claims, one
/// transaction for their intake, then their decisions in transactions of
/// `decide_batch` (the stages' batch), each appending half of every claim's bytes as a
/// row. No service, no encoding, no index but the key. On SQLite the log is copied
/// into the database file beside the writes, as the service and a rebuild do it
/// (`store::Checkpointing`).
pub async fn store_ceiling(
    store: &pipeline::store::Store,
    claims: usize,
    batch: usize,
    decide_batch: usize,
    bytes_per_claim: usize,
) -> f64 {
    let mut tx = store.begin_write().await.unwrap();
    sqlx::query("DROP TABLE IF EXISTS bench_ceiling")
        .execute(&mut *tx)
        .await
        .unwrap();
    // SQLite takes any type name and keeps a blob as it is; PostgreSQL needs BYTEA.
    sqlx::query("CREATE TABLE bench_ceiling (id BIGINT PRIMARY KEY, v BYTEA NOT NULL)")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let half = vec![b'x'; (bytes_per_claim / 2).max(1)];
    let checkpoints = pipeline::store::Checkpointing::start(store);
    let started = Instant::now();
    let mut id: i64 = 0;
    let mut commits = vec![batch];
    commits.extend(
        (0..batch.div_ceil(decide_batch)).map(|i| (batch - i * decide_batch).min(decide_batch)),
    );
    for _ in 0..claims.div_ceil(batch) {
        for &size in &commits {
            let mut tx = store.begin_write().await.unwrap();
            // 500 rows per statement: two bound values a row, under every bind limit.
            for chunk in 0..size.div_ceil(500) {
                let rows = (size - chunk * 500).min(500);
                let values: Vec<String> = (0..rows)
                    .map(|i| format!("(${}, ${})", 2 * i + 1, 2 * i + 2))
                    .collect();
                let sql = format!(
                    "INSERT INTO bench_ceiling (id, v) VALUES {}",
                    values.join(",")
                );
                let mut q = sqlx::query(&sql);
                for _ in 0..rows {
                    q = q.bind(id).bind(half.clone());
                    id += 1;
                }
                q.execute(&mut *tx).await.unwrap();
            }
            tx.commit().await.unwrap();
        }
    }
    let rate = claims as f64 / started.elapsed().as_secs_f64();
    checkpoints.stop().await;
    rate
}

/// Samples a process's RSS once a second until stopped.
pub struct RssSampler {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Vec<f64>>,
}

impl RssSampler {
    pub fn start(pid: u32) -> Self {
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut samples = vec![rss_mib(pid)];
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = tick.tick() => samples.push(rss_mib(pid)),
                    _ = &mut stopped => break,
                }
            }
            samples.push(rss_mib(pid));
            samples
        });
        Self { stop, task }
    }

    /// The samples taken, the peak (MiB), and the drift over the second half of the
    /// run: the last sample against the one at half time, as a fraction of the latter.
    pub async fn stop(self) -> (usize, f64, f64) {
        let _ = self.stop.send(());
        let samples = self.task.await.unwrap();
        let peak = samples.iter().copied().fold(0.0, f64::max);
        let half = samples[samples.len() / 2];
        let last = samples[samples.len() - 1];
        (samples.len(), peak, (last - half) / half)
    }
}

/// Members the claims are spread over, all on one plan.
pub const MEMBERS: usize = 5000;

/// Sends claims `0..n` ([`claim`]) closed loop: requests of `per_request` claims to
/// `POST /claims/batch`, `in_flight` at once. Answers how many were accepted.
pub async fn send_batches(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    n: usize,
    per_request: usize,
    in_flight: usize,
) -> usize {
    use futures::stream::{self, StreamExt};
    stream::iter((0..n).step_by(per_request))
        .map(|start| {
            let items: Vec<Value> = (start..(start + per_request).min(n)).map(claim).collect();
            let f = client
                .post(format!("{base}/claims/batch"))
                .bearer_auth(token)
                .json(&items)
                .send();
            async move {
                f.await.unwrap().json::<Value>().await.unwrap()["accepted"]
                    .as_u64()
                    .unwrap() as usize
            }
        })
        .buffer_unordered(in_flight)
        .fold(0, |a, b| async move { a + b })
        .await
}

pub fn claim(i: usize) -> Value {
    let amount = 1000 + (i as i64 * 7919) % 90_000;
    json!({
        "claim_id": format!("CLM-{i:07}"), "member_id": format!("MBR-{}", i % MEMBERS), "provider_id": format!("PRV-{}", i % 20),
        "claim_amount": amount, "service_date": "2026-01-15",
        "lines": [{"procedure_code": "99213", "units": 1, "amount": amount}]
    })
}

/// Sets up the tenant `bench` for a load: its rate limit out of the way, 20 contracted
/// providers, the plan `PPO` with every member of the claims on it, and a published
/// rulebook of 20 rules. Answers the seconds the members' import took.
pub async fn seed(client: &reqwest::Client, base: &str, token: &str) -> f64 {
    let post = |path: String, body: Value| {
        let (client, token) = (client.clone(), token.to_owned());
        async move {
            client
                .post(path)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    // The limiter is checked on every request but must not refuse the load itself.
    let raised = client
        .patch(format!("{base}/tenant/settings"))
        .bearer_auth(token)
        .json(&json!({"rate_limit_per_minute": 100_000_000}))
        .send()
        .await
        .unwrap();
    assert!(raised.status().is_success(), "the rate limit is raised");
    for p in 0..20 {
        post(
            format!("{base}/providers"),
            json!({"provider_id": format!("PRV-{p}"), "name": "Clinic"}),
        )
        .await;
        post(
            format!("{base}/providers/PRV-{p}/contracts"),
            json!({"effective_from": "2020-01-01", "fee_schedule": {"99213": 60000}}),
        )
        .await;
    }
    // Every claim's member is on a plan: the benefits and the accumulators are part of
    // the work measured.
    post(
        format!("{base}/plans"),
        json!({"plan_id": "PPO", "name": "PPO", "benefits": {
            "deductible": 50_000, "coinsurance_pct": 20, "out_of_pocket_max": 400_000,
            "copays": {"99213": 2_500}}}),
    )
    .await;
    let members: Vec<Value> = (0..MEMBERS)
        .map(|m| {
            json!({"member_id": format!("MBR-{m}"), "date_of_birth": "1970-01-01", "sex": "U",
                        "plan_id": "PPO", "coverage": [{"from": "2020-01-01"}]})
        })
        .collect();
    let import_started = Instant::now();
    let imported: Value = post(format!("{base}/members/import"), json!(members))
        .await
        .json()
        .await
        .unwrap();
    let import_secs = import_started.elapsed().as_secs_f64();
    assert_eq!(
        imported["imported"], MEMBERS,
        "the members are imported: {imported}"
    );
    let rules: Vec<Value> = (0..20)
        .map(|i| json!({"rule_id": format!("r{i}"), "when": format!("claim.claim_amount > {} && member_history.claims_last_24h > {}", 80_000 + i, 50 + i), "action": "flag", "reason_code": "R"}))
        .collect();
    let rb: Value = post(
        format!("{base}/rulebooks"),
        json!({"name": "Bench", "rules": rules}),
    )
    .await
    .json()
    .await
    .unwrap();
    post(
        format!(
            "{base}/rulebooks/{}/publish",
            rb["rulebook_id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await;

    import_secs
}

/// The environment of a service process for a benchmark: its data under `dir`, on
/// `port`, on `CLAIMS_DATABASE_URL` and `CLAIMS_KAFKA_BROKERS` when they are set (with
/// topics of this run's own, named after `prefix`, on a broker that may hold older
/// runs'). `BENCH_RUST_LOG` sets its log filter, for looking into a run.
pub fn service_envs(dir: &std::path::Path, port: u16, prefix: &str) -> Vec<(String, String)> {
    let mut envs: Vec<(String, String)> = vec![
        ("CLAIMS_DATA_DIR".into(), dir.display().to_string()),
        ("CLAIMS_HTTP_ADDR".into(), format!("127.0.0.1:{port}")),
        ("CLAIMS_COOKIE_SECURE".into(), "false".into()),
        (
            "RUST_LOG".into(),
            std::env::var("BENCH_RUST_LOG").unwrap_or_else(|_| "warn".into()),
        ),
        ("CLAIMS_WEBHOOK_ALLOW_PRIVATE".into(), "true".into()),
    ];
    if let Ok(url) = std::env::var("CLAIMS_DATABASE_URL") {
        envs.push(("CLAIMS_DATABASE_URL".into(), url));
    }
    if let Ok(brokers) = std::env::var("CLAIMS_KAFKA_BROKERS") {
        envs.push(("CLAIMS_KAFKA_BROKERS".into(), brokers));
        envs.push((
            "CLAIMS_TOPIC_PREFIX".into(),
            format!("{prefix}{}.", std::process::id()),
        ));
    }
    envs
}

/// The store the service of `dir` writes: `CLAIMS_DATABASE_URL`, or its SQLite file.
pub async fn service_store(dir: &std::path::Path) -> pipeline::store::Store {
    pipeline::store::Store::connect(
        &std::env::var("CLAIMS_DATABASE_URL")
            .unwrap_or_else(|_| format!("sqlite://{}", dir.join("claims.db").display())),
        &pipeline::store::StoreOptions::default(),
    )
    .await
    .unwrap()
}

/// Whether a claim of the tenant `bench` is still undecided.
pub async fn undecided(store: &pipeline::store::Store) -> bool {
    let filter = pipeline::store::ClaimFilter {
        status: Some(schemas::claim::ClaimStatus::Received),
        ..Default::default()
    };
    !store
        .claims("bench", &filter, None, 1)
        .await
        .unwrap()
        .is_empty()
}

/// Where a run's folders go: the system's temp folder, under names that say which run
/// made them, so that the next run can remove what a stopped one left.
const SCRATCH_PREFIX: &str = "claims-bench-";

/// A folder of this run's own for a service's data, removed when dropped. A run that is
/// killed never drops it, and a million-claim run leaves some 18 GB behind (enough to
/// fill the disk under the next run); so the folders of earlier runs whose process is
/// gone are removed first, and each is named on stderr.
pub fn scratch_dir() -> tempfile::TempDir {
    sweep_stopped_runs();
    tempfile::Builder::new()
        .prefix(&format!("{SCRATCH_PREFIX}{}-", std::process::id()))
        .tempdir()
        .unwrap()
}

/// Stops the services and removes the folders of earlier runs whose process is gone
/// (see [`scratch_dir`]); each is named on stderr.
pub fn sweep_stopped_runs() {
    let me = std::process::id();
    if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(SCRATCH_PREFIX))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            // A live process of that id may be the run itself, or another one beside it.
            if pid != me && !alive(pid) {
                stop_services_of(&entry.path());
                match std::fs::remove_dir_all(entry.path()) {
                    Ok(()) => eprintln!(
                        "removed {}, left by a run that was stopped",
                        entry.path().display()
                    ),
                    Err(e) => eprintln!("cannot remove {}: {e}", entry.path().display()),
                }
            }
        }
    }
}

/// Whether process `pid` runs: it has an entry in `/proc` and is no zombie (a killed
/// run whose parent is gone too waits there to be reaped by whichever process adopted
/// it, which may take its time).
fn alive(pid: u32) -> bool {
    stat_fields(pid)
        .is_some_and(|f| !matches!(f.first().map(String::as_str), Some("Z" | "X") | None))
}

/// Kills the processes whose data folder (`CLAIMS_DATA_DIR`) is `dir`: services that a
/// killed run started and left running, which would take the cores of the next run.
fn stop_services_of(dir: &std::path::Path) {
    let wanted = format!("CLAIMS_DATA_DIR={}", dir.display());
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for pid in procs
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|var| var == wanted.as_bytes())
        {
            let killed = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status()
                .is_ok_and(|s| s.success());
            if killed {
                // Gone before the next run measures how busy the machine is.
                let deadline = Instant::now() + Duration::from_secs(5);
                while alive(pid) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
                eprintln!("stopped process {pid}, left running by a run that was stopped");
            }
        }
    }
}

/// Keeps a scratch folder for good, renamed out of the reach of [`scratch_dir`]'s sweep.
pub fn keep(temp: tempfile::TempDir) -> std::path::PathBuf {
    let path = temp.keep();
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let kept = path.with_file_name(format!(
        "claims-kept-{}",
        name.trim_start_matches(SCRATCH_PREFIX)
    ));
    match std::fs::rename(&path, &kept) {
        Ok(()) => kept,
        Err(_) => path,
    }
}

/// A release build of the service on a fresh data folder, with the tenant `bench`
/// seeded and its user logged in.
pub struct BenchService {
    pub temp: tempfile::TempDir,
    pub envs: Vec<(String, String)>,
    pub child: std::process::Child,
    pub client: reqwest::Client,
    pub base: String,
    pub token: String,
}

/// Starts `claims serve --stages {stages}` with `extra` environment on top of
/// [`service_envs`], and seeds the tenant.
pub async fn start_service(prefix: &str, stages: &str, extra: &[(&str, String)]) -> BenchService {
    let temp = scratch_dir();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}/api/v1");
    let bin = claims_bin();
    let bin = bin.as_str();
    let mut envs = service_envs(temp.path(), port, prefix);
    envs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
    create_bench_user(
        bin,
        &envs,
        "claims:write claims:read providers:write rulebooks:write tenant:configure",
    );
    let child = serve(bin, &envs, stages);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3600))
        .build()
        .unwrap();
    wait_ready(&client, &base).await;
    let token = login(&client, &base).await;
    seed(&client, &base, &token).await;
    BenchService {
        temp,
        envs,
        child,
        client,
        base,
        token,
    }
}

/// Sends `n` claims in batches of 1,000, four at once, and waits until every one is
/// decided; prints how long it took.
pub async fn decide_all(s: &BenchService, n: usize) {
    let started = Instant::now();
    assert_eq!(
        send_batches(&s.client, &s.base, &s.token, n, 1000, 4).await,
        n
    );
    let store = service_store(s.temp.path()).await;
    while undecided(&store).await {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    store.close().await;
    println!(
        "decided: {n} claims through the pipeline in {:.2} s",
        started.elapsed().as_secs_f64()
    );
}
