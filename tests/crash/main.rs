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
mod payments;
mod reprocess;
// Each suite uses a part of the shared support.
#[allow(dead_code)]
#[path = "../support/service.rs"]
mod service;

use std::time::{Duration, Instant};

use backend::{Backend, Database};
use pipeline::store::{Store, StoreOptions};
use rand::Rng;
use service::{Env, Submitted};

const CLAIMS: usize = 3000;
const KILLS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_kill_9_loses_and_doubles_nothing() {
    run(Backend::Sqlite, Plan::RestartOne).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_kill_9_loses_and_doubles_nothing() {
    run(Backend::Postgres, Plan::RestartOne).await
}

/// On Kafka a kill between a batch's outputs and its commit redelivers the batch: an
/// event may then be on the topic twice, always with the same id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_kill_9_loses_and_doubles_nothing() {
    run(Backend::Kafka, Plan::RestartOne).await
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

async fn run(b: Backend, plan: Plan) {
    let dir = service::WorkDir::new();
    let db = Database::create(b, dir.path()).await;
    let prefix = format!("crash{}.", uuid::Uuid::new_v4().simple());
    let mut extra: Vec<(String, String)> = Vec::new();
    if b == Backend::Kafka {
        extra.push(("CLAIMS_KAFKA_BROKERS".into(), backend::kafka_brokers()));
        extra.push(("CLAIMS_TOPIC_PREFIX".into(), prefix.clone()));
    }
    let env = Env::new(dir.path(), &db.url, "crash-test", extra);
    service::create_tenant(&env);
    let client = service::client();
    let mut child = env.start();
    service::wait_ready(&client, &env.base).await;
    let token = service::set_up_tenant(&client, &env.base).await;
    let submitted = Submitted::default();
    let submitter = submitted.spawn(
        client.clone(),
        token.clone(),
        env.base.clone(),
        0..CLAIMS,
        Duration::from_millis(100),
    );

    // The second process: the same service on another port, under its own name, its
    // stages logging each batch they finish.
    let second = (plan == Plan::KillTheSecond).then(|| {
        let mut other = env.sibling("crash-test-2", dir.path());
        other.set("RUST_LOG", "warn,pipeline::stages::runner=debug");
        let child = other.start();
        (other, child)
    });
    let mut kills_during_intake = 0;
    if let Some((other, mut child2)) = second {
        // Killed as soon as it has taken a share of the work.
        service::wait_ready(&client, &other.base).await;
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
        service::wait_ready(&client, &env.base).await;
    }
    assert!(
        kills_during_intake > 0 || plan == Plan::KillTheSecond,
        "no kill landed while claims were being submitted"
    );
    submitter.await.unwrap();
    let accepted = submitted.accepted();
    assert_eq!(
        accepted.len(),
        CLAIMS,
        "every claim was eventually accepted"
    );

    let store = Store::connect(&db.url, &StoreOptions::default())
        .await
        .unwrap();
    let (bus, topics) = service::bus(b, &store, &backend::kafka_brokers(), &prefix);
    service::assert_each_claim_decided_once(&store, &bus, &topics, &accepted, &env.log).await;
    child.kill().unwrap();
    child.wait().unwrap();
    env.assert_audit_chain_verifies();
}
