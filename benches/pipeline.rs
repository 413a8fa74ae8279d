//! End-to-end throughput of a running service on the embedded default (or on
//! `CLAIMS_DATABASE_URL`): intake claims/s by batch and by single request, end-to-end
//! claims/s (first 202 to last claim decided), p50/p99 latency from acceptance to
//! decision, the service's CPU per claim and its RSS sampled every second, and beside
//! them, measured in the same run on the same machine, the ceilings they are compared
//! with: an axum hello-world process under the same client (for single intake) and the
//! store appending the same bytes per claim with nothing in between (for end to end).
//! Every claim's member is on a plan with a deductible, coinsurance and a copay. Run
//! with `scripts/bench [N]`.
#![allow(clippy::print_stdout, clippy::unwrap_used)] // a benchmark prints its figures

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use serde_json::json;
use support::{
    claim, create_bench_user, free_port, login, peak_rss_mib, seed, send_batches, service_envs,
    service_store, spawn_hello_world, store_bytes, store_ceiling, undecided, wait_ready, CpuMark,
    MEMBERS,
};

mod support;

const BATCH: usize = 1000;
const BATCH_CONCURRENCY: usize = 4;
const SINGLE_CONCURRENCY: usize = 32;
/// Single intake again with this many requests in flight: each answer waits for its
/// group's commit on the store's writer, which takes turns with the stages', so at 32
/// in flight the rate is bound by how long a turn takes; a payer sending claims one
/// request each keeps many more in flight.
const WIDE_CONCURRENCY: usize = 256;
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// What one stretch of single requests measured.
struct Singles {
    /// Requests answered 202 per second.
    rate: f64,
    /// Each request's time from sent to answered, in ms, sorted.
    latencies: Vec<f64>,
}

/// Submits claims `ids` one request each, `in_flight` at once, with an
/// `Idempotency-Key` each when `keyed`.
async fn send_singles(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    ids: std::ops::Range<usize>,
    keyed: bool,
    in_flight: usize,
) -> Singles {
    let count = ids.len();
    let started = Instant::now();
    let mut latencies: Vec<f64> = stream::iter(ids)
        .map(|i| {
            let mut req = client
                .post(format!("{base}/claims/intake"))
                .bearer_auth(token)
                .json(&claim(i));
            if keyed {
                req = req.header("idempotency-key", format!("bench-{i}"));
            }
            async move {
                let sent = Instant::now();
                let accepted = req.send().await.unwrap().status().as_u16() == 202;
                accepted.then(|| sent.elapsed().as_secs_f64() * 1e3)
            }
        })
        .buffer_unordered(in_flight)
        .filter_map(std::future::ready)
        .collect()
        .await;
    assert_eq!(latencies.len(), count, "every single claim accepted");
    latencies.sort_by(|a, b| a.total_cmp(b));
    Singles {
        rate: count as f64 / started.elapsed().as_secs_f64(),
        latencies,
    }
}

fn main() {
    // The hello-world ceiling is this binary started again (see `spawn_hello_world`).
    support::serve_hello_world_if_asked();
    tokio::runtime::Runtime::new().unwrap().block_on(run());
}

async fn run() {
    support::print_background_load();
    let n = support::claims_to_send();
    let singles = (n / 10).clamp(1, 10_000);
    // BENCH_KEEP_DIR=1 keeps the service's data for inspection afterwards.
    let temp = support::scratch_dir();
    let dir = temp.path().to_owned();
    let _cleanup = match std::env::var_os("BENCH_KEEP_DIR") {
        Some(_) => {
            println!("data kept in {}", support::keep(temp).display());
            None
        }
        None => Some(temp),
    };
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}/api/v1");
    let bin = support::claims_bin();
    let bin = bin.as_str();
    let envs = service_envs(&dir, port, "bench");
    create_bench_user(
        bin,
        &envs,
        "claims:write claims:read providers:write rulebooks:write tenant:configure",
    );
    // Webhooks are delivered by a later process of their own, so that their rate is
    // measured apart from the pipeline's.
    let mut child: Child = support::serve(bin, &envs, support::DECIDING);

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(WIDE_CONCURRENCY)
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    wait_ready(&client, &base).await;
    let token = login(&client, &base).await;
    let import_secs = seed(&client, &base, &token).await;
    let receiver = Receiver::start().await;
    let hook = client
        .post(format!("{base}/webhooks"))
        .bearer_auth(&token)
        .json(&json!({"url": receiver.url(), "events": ["claim.completed"], "secret": "bench-secret"}))
        .send()
        .await
        .unwrap();
    assert_eq!(hook.status().as_u16(), 201, "the webhook is created");

    let bus = if envs.iter().any(|(k, _)| k == "CLAIMS_KAFKA_BROKERS") {
        "Kafka"
    } else {
        "the embedded log"
    };
    println!(
        "members import: {:>8.0} members/s ({MEMBERS} in one request of {:.2} s)",
        MEMBERS as f64 / import_secs,
        import_secs
    );
    println!("bench: {} claims by batch ({BATCH} per request, {BATCH_CONCURRENCY} at once), {singles} by single intake ({SINGLE_CONCURRENCY} at once); store: {}; bus: {bus}", n, if envs.iter().any(|(k, _)| k == "CLAIMS_DATABASE_URL") { "PostgreSQL" } else { "SQLite (embedded default)" });
    let store = service_store(&dir).await;
    let bytes_before = store_bytes(&store).await;
    let cpu = CpuMark::now(child.id());
    let rss = support::RssSampler::start(child.id());
    let started = Instant::now();
    let accepted = send_batches(&client, &base, &token, n, BATCH, BATCH_CONCURRENCY).await;
    let batch_secs = started.elapsed().as_secs_f64();
    assert_eq!(accepted, n, "every batched claim accepted");
    println!(
        "intake, batch:  {:>9.0} claims/s ({n} in {batch_secs:.2} s)",
        n as f64 / batch_secs
    );

    // Wait for the batch load to be decided before measuring single intake alone.
    while undecided(&store).await {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let e2e_secs = started.elapsed().as_secs_f64();
    let service_cpu = cpu.used();
    let (samples, rss_peak, rss_drift) = rss.stop().await;
    let e2e_rate = n as f64 / e2e_secs;
    println!(
        "end to end:     {e2e_rate:>9.0} claims/s (first 202 to last decision: {e2e_secs:.2} s)"
    );
    let bytes_per_claim = ((store_bytes(&store).await - bytes_before) as f64 / n as f64).max(1.0);
    let us_per_claim = service_cpu * 1e6 / n as f64;
    println!(
        "service CPU:    {us_per_claim:>9.0} µs per claim (api and every stage but webhooks in one process; {service_cpu:.2} s for {n} claims); 10,000 claims/s would take {:.1} cores of it",
        us_per_claim * 10_000.0 / 1e6
    );
    // Below the machine's cores, the pipeline waits on a chain of steps that take turns
    // rather than on CPU (docs/decisions.md, "The fused chain").
    println!(
        "service busy:   {:>9.2} of {} cores while the end to end ran",
        service_cpu / e2e_secs,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "service RSS while the load ran: peak {rss_peak:.0} MiB; drift over the second half {:+.1}% ({samples} samples, one a second)",
        rss_drift * 100.0
    );

    let mut single_rates = Vec::new();
    for (k, in_flight) in [SINGLE_CONCURRENCY, WIDE_CONCURRENCY]
        .into_iter()
        .enumerate()
    {
        let first = n + k * singles;
        let s = send_singles(
            &client,
            &base,
            &token,
            first..first + singles,
            false,
            in_flight,
        )
        .await;
        println!(
            "intake, single: {:>9.0} claims/s ({singles} claims, {in_flight} in flight; answered in p50 {:.1} ms, p99 {:.1} ms)",
            s.rate,
            percentile(&s.latencies, 0.5),
            percentile(&s.latencies, 0.99),
        );
        single_rates.push(s.rate);
        while undecided(&store).await {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    while undecided(&store).await {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Latency from acceptance to decision, from the snapshots' own timestamps.
    let mut latencies: Vec<f64> = store
        .all_claims("bench")
        .await
        .unwrap()
        .iter()
        .map(|(received, c)| {
            let decided = time::OffsetDateTime::parse(
                &c.updated_at,
                &time::format_description::well_known::Rfc3339,
            )
            .unwrap();
            (pipeline::clock::to_ms(decided) - received) as f64
        })
        .collect();
    latencies.sort_by(|a, b| a.total_cmp(b));
    println!(
        "latency 202 to decision: p50 {:.0} ms, p99 {:.0} ms ({} claims)",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.len()
    );
    println!("service peak RSS: {:.0} MiB", peak_rss_mib(child.id()));
    child.kill().unwrap();
    child.wait().unwrap();
    if bus == "Kafka" {
        print_bus_records_per_claim(bin, &envs, (n + 2 * singles) as f64);
    }

    // The ceiling of single intake: an axum hello-world process that parses the same
    // bodies and answers 202, under the same client and concurrency.
    let (mut hello, hello_base) = spawn_hello_world();
    wait_listening(&hello_base).await;
    let mut hello_narrow = 0.0;
    for (in_flight, single_rate) in [SINGLE_CONCURRENCY, WIDE_CONCURRENCY]
        .into_iter()
        .zip(single_rates)
    {
        let hello_rate = send_singles(&client, &hello_base, &token, 0..singles, false, in_flight)
            .await
            .rate;
        if in_flight == SINGLE_CONCURRENCY {
            hello_narrow = hello_rate;
        }
        println!(
            "ceiling, hello-world: {hello_rate:>7.0} requests/s (axum, same client, {in_flight} in flight); single intake / hello-world = {:.2}",
            single_rate / hello_rate
        );
    }
    hello.kill().unwrap();
    hello.wait().unwrap();

    // What rate limiting and idempotency cost single intake: two API-only processes on
    // the same store, one with both on and one with both off, measured in alternating
    // rounds so that drift on a shared machine falls on both alike.
    // Two generations of the pair, spawned in opposite order, so that whatever favours
    // one process of a pair (which started first, which got which core) falls on both
    // settings alike. Within a generation each pair of rounds runs the two in opposite
    // order, so that a trend in the machine's load does not favour either; the figure is
    // also given as the median of the rounds' ratios, which one disturbed round cannot
    // move far.
    let rounds = 8;
    // BENCH_GUARD_CLAIMS sets the claims of this comparison (default 16,000: fewer left
    // the ratio at the mercy of a shared machine's noise).
    let guard_claims = std::env::var("BENCH_GUARD_CLAIMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16_000);
    let per_round = guard_claims.max(rounds) / rounds;
    let (mut on_secs, mut off_secs, mut ratios) = (0.0, 0.0, Vec::new());
    let mut next = n + 2 * singles;
    let mut keyed = 0.0;
    for generation in 0..2 {
        // apis[0] has the guards on, apis[1] off; spawned in this generation's order.
        let mut apis: [Option<(Child, String)>; 2] = [None, None];
        let spawn_order = if generation == 0 { [0, 1] } else { [1, 0] };
        for which in spawn_order {
            let guards = if which == 0 { "true" } else { "false" };
            let port = free_port();
            let child = Command::new(bin)
                .args(["serve", "--stages", "api"])
                .envs(envs.iter().cloned())
                .env("CLAIMS_HTTP_ADDR", format!("127.0.0.1:{port}"))
                .env("CLAIMS_RATE_LIMIT_ENABLED", guards)
                .env("CLAIMS_IDEMPOTENCY_ENABLED", guards)
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap();
            let base = format!("http://127.0.0.1:{port}/api/v1");
            wait_ready(&client, &base).await;
            apis[which] = Some((child, base));
        }
        let apis = apis.map(Option::unwrap);
        for round in 0..rounds / 2 {
            let mut rate = [0.0; 2];
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                rate[which] = send_singles(
                    &client,
                    &apis[which].1,
                    &token,
                    next..next + per_round,
                    false,
                    SINGLE_CONCURRENCY,
                )
                .await
                .rate;
                next += per_round;
            }
            on_secs += per_round as f64 / rate[0];
            off_secs += per_round as f64 / rate[1];
            ratios.push(rate[0] / rate[1]);
        }
        if generation == 1 {
            keyed = send_singles(
                &client,
                &apis[0].1,
                &token,
                next..next + per_round,
                true,
                SINGLE_CONCURRENCY,
            )
            .await
            .rate;
        }
        for (mut child, _) in apis {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
    ratios.sort_by(|a, b| a.total_cmp(b));
    let total = (rounds * per_round) as f64;
    let (on, off) = (total / on_secs, total / off_secs);
    println!(
        "intake, single, rate limit + idempotency on:  {on:>7.0} claims/s; off: {off:>7.0} claims/s; on/off = {:.3}, median of {rounds} rounds' ratios {:.3} (rounds of {per_round}, 2 generations of the pair)",
        on / off,
        percentile(&ratios, 0.5)
    );
    println!(
        "intake, single, each with an Idempotency-Key: {keyed:>7.0} claims/s ({per_round} claims)"
    );
    // The front end alone against the same ceiling: hello-world had the machine to
    // itself, which single intake beside the stages shares with them.
    println!(
        "intake, single, API process alone (rate limit + idempotency on, {SINGLE_CONCURRENCY} in flight) / hello-world = {:.2}",
        on / hello_narrow
    );

    // Webhooks: one `claim.completed` per claim, queued and sent by a process running
    // only the webhook stage, to a local receiver answering 200.
    let deliveries = n + 2 * singles;
    let mut sender: Child = Command::new(bin)
        .args(["serve", "--stages", "webhooks"])
        .envs(envs.iter().cloned())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let sender_cpu = CpuMark::now(sender.id());
    let deadline = Instant::now() + Duration::from_secs(600);
    while receiver.count() < deliveries {
        assert!(
            Instant::now() < deadline,
            "only {} of {deliveries} webhooks arrived",
            receiver.count()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (first, last) = receiver.span();
    let secs = (last - first).as_secs_f64();
    println!(
        "webhooks:       {:>9.0} deliveries/s ({deliveries} signed deliveries in {secs:.2} s, first to last)",
        (deliveries - 1) as f64 / secs
    );
    println!(
        "webhook process: {:.0} µs CPU per delivery (start-up included), peak RSS {:.0} MiB",
        sender_cpu.used() * 1e6 / deliveries as f64,
        peak_rss_mib(sender.id())
    );
    sender.kill().unwrap();
    sender.wait().unwrap();

    // The store's ceiling: the same bytes per claim, appended as the embedded default
    // commits them, with no service in between (on a fresh SQLite file, or in a table
    // of its own in the PostgreSQL database).
    let ceiling_store = match std::env::var("CLAIMS_DATABASE_URL") {
        Ok(url) => pipeline::store::Store::connect(&url, &Default::default()).await,
        Err(_) => {
            pipeline::store::Store::connect(
                &format!("sqlite://{}", dir.join("ceiling.db").display()),
                &Default::default(),
            )
            .await
        }
    }
    .unwrap();
    let decide_batch = if bus == "Kafka" {
        pipeline::stages::KAFKA_BATCH
    } else {
        pipeline::stages::EMBEDDED_BATCH
    };
    let ceiling = store_ceiling(
        &ceiling_store,
        n,
        BATCH,
        decide_batch,
        bytes_per_claim as usize,
    )
    .await;
    println!(
        "ceiling, store: {ceiling:>9.0} claims/s ({bytes_per_claim:.0} bytes per claim; per {BATCH} claims one commit of their intake and commits of {decide_batch} of their decisions, as the service wrote them); end to end / store ceiling = {:.2}",
        e2e_rate / ceiling
    );
}

/// Waits until something listens at `base`'s address.
async fn wait_listening(base: &str) {
    let addr = base
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(&addr).await.is_err() {
        assert!(Instant::now() < deadline, "nothing listens at {addr}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Deliveries received, and when the first and the last arrived.
type Tally = std::sync::Arc<std::sync::Mutex<(usize, Option<Instant>, Option<Instant>)>>;

/// A local webhook receiver: counts deliveries and notes when the first and the last
/// arrived.
#[derive(Clone)]
struct Receiver {
    addr: std::net::SocketAddr,
    hits: Tally,
}

impl Receiver {
    async fn start() -> Self {
        let hits: Tally = std::sync::Arc::default();
        let h = hits.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |_body: axum::body::Bytes| {
                let h = h.clone();
                async move {
                    let mut g = h.lock().unwrap();
                    let now = Instant::now();
                    g.0 += 1;
                    g.1.get_or_insert(now);
                    g.2 = Some(now);
                    axum::http::StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, hits }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn count(&self) -> usize {
        self.hits.lock().unwrap().0
    }

    fn span(&self) -> (Instant, Instant) {
        let g = self.hits.lock().unwrap();
        (g.1.unwrap(), g.2.unwrap())
    }
}

/// On Kafka: the records the broker carried per claim decided, from `claims topics`
/// (records written on every topic, and read by every consumer group), for
/// `scripts/bench` to set beside the broker's own rate (`scripts/bench-broker`).
fn print_bus_records_per_claim(bin: &str, envs: &[(String, String)], claims: f64) {
    let listed: serde_json::Value =
        serde_json::from_slice(&support::cli(bin, envs, &["topics"])).unwrap();
    let (mut produced, mut consumed) = (0_i64, 0_i64);
    for t in listed["topics"].as_array().unwrap() {
        let written = t["end_offset_total"].as_i64().unwrap();
        produced += written;
        for g in t["groups"].as_array().unwrap() {
            consumed += written - g["lag"].as_i64().unwrap();
        }
    }
    println!(
        "bus records per claim: {:.2} produced, {:.2} consumed ({produced} and {consumed} for {claims} claims, from claims topics)",
        produced as f64 / claims,
        consumed as f64 / claims
    );
}
