//! The store's server and the broker restarted while claims stream in.

use std::time::Duration;

use pipeline::store::{Store, StoreOptions};
use rand::Rng;

use crate::backend::{Backend, Database};
use crate::servers::{Broker, Postgres};
use crate::service::{self, Env, Submitted};
use crate::{assert_only_503s, finish};

const CLAIMS: usize = 2000;
const RESTARTS: usize = 3;

/// PostgreSQL is stopped as a crash stops it (`-m immediate`) three times mid-load. While
/// it is away intake answers 503 and the stages wait; a claim answered `received`
/// was committed and flushed, so it survives the crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_crashed_and_restarted_mid_load_loses_and_doubles_nothing() {
    let pg = Postgres::start();
    pg.create_database("claims").await;
    let url = pg.url("claims");
    let dir = service::WorkDir::new();
    let env = Env::new(dir.path(), &url, "faults", vec![]);
    let (child, submitted) = under_load(&env, || {
        pg.restart_after_crash(Duration::from_millis(700));
    })
    .await;
    assert_only_503s(&env, &submitted);
    let store = Store::connect(&url, &StoreOptions::default())
        .await
        .unwrap();
    let (bus, topics) = service::bus(Backend::Postgres, &store, "", "");
    finish(&env, vec![child], &store, &bus, &topics, &submitted).await;
}

/// The broker is SIGKILLed and started again on its storage three times mid-load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_broker_killed_and_restarted_mid_load_loses_and_doubles_nothing() {
    let mut broker = Broker::start();
    let dir = service::WorkDir::new();
    let db = Database::create(Backend::Kafka, dir.path()).await;
    let prefix = format!("faults{}.", uuid::Uuid::new_v4().simple());
    let env = Env::new(
        dir.path(),
        &db.url,
        "faults",
        vec![
            ("CLAIMS_KAFKA_BROKERS".into(), broker.addr.clone()),
            ("CLAIMS_TOPIC_PREFIX".into(), prefix.clone()),
        ],
    );
    let addr = broker.addr.clone();
    let (child, submitted) = under_load(&env, || {
        broker.restart(Duration::from_millis(700));
    })
    .await;
    let store = Store::connect(&db.url, &StoreOptions::default())
        .await
        .unwrap();
    assert_only_503s(&env, &submitted);
    let (bus, topics) = service::bus(Backend::Kafka, &store, &addr, &prefix);
    finish(&env, vec![child], &store, &bus, &topics, &submitted).await;
}

/// Starts the service on `env`, sets the tenant up, streams `CLAIMS` claims and calls
/// `fault` `RESTARTS` times while they stream. Answers the running service and what
/// was submitted, once every claim has been accepted.
async fn under_load(env: &Env, mut fault: impl FnMut()) -> (crate::service::Running, Submitted) {
    service::create_tenant(env);
    let client = service::client();
    let child = env.start();
    service::wait_ready(&client, &env.base).await;
    let token = service::set_up_tenant(&client, &env.base).await;
    let submitted = Submitted::default();
    let submitter = submitted.spawn(
        client.clone(),
        token,
        env.base.clone(),
        0..CLAIMS,
        // Paced so that intake lasts beyond the last fault.
        Duration::from_millis(250),
    );
    for _ in 0..RESTARTS {
        let pause = rand::thread_rng().gen_range(300..900);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        assert!(
            !submitter.is_finished(),
            "the fault must land while claims stream in"
        );
        tokio::task::block_in_place(&mut fault);
    }
    tokio::time::timeout(Duration::from_secs(180), submitter)
        .await
        .expect("every claim is accepted once the fault is over")
        .unwrap();
    assert_eq!(submitted.accepted().len(), CLAIMS);
    (child, submitted)
}
