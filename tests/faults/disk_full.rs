//! The data directory's disk fills up under the embedded default. Intake answers 503
//! `SERVICE_UNAVAILABLE` in the spec's error body and stores nothing of what it refuses;
//! nothing accepted before is lost; once room returns, intake and the stages resume by
//! themselves.

use std::time::{Duration, Instant};

use pipeline::store::{Store, StoreOptions};

use crate::backend::Backend;
use crate::servers::SmallDisk;
use crate::service::{self, Env, Submitted};
use crate::{assert_only_503s, finish};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_intake_with_503_and_recovers_when_space_returns() {
    let disk = SmallDisk::mount("96m");
    let data = disk.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let logs = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", data.join("claims.db").display());
    let mut env = Env::new(&data, &url, "faults", vec![]);
    // The service's own log lives elsewhere, as a journal would.
    env.log = logs.path().join("service.log");
    service::create_tenant(&env);
    let client = service::client();
    let child = env.start();
    service::wait_ready(&client, &env.base).await;
    let token = service::set_up_tenant(&client, &env.base).await;
    let submitted = Submitted::default();
    let before = submitted.spawn(
        client.clone(),
        token.clone(),
        env.base.clone(),
        0..500,
        Duration::ZERO,
    );
    before.await.unwrap();

    let ballast = disk.fill();
    let during = submitted.spawn(
        client.clone(),
        token,
        env.base.clone(),
        500..1500,
        Duration::from_millis(20),
    );
    // The WAL and free pages absorb a little; then every write needs room it lacks.
    let deadline = Instant::now() + Duration::from_secs(90);
    while submitted.refusals.lock().unwrap().len() < 5 {
        assert!(
            Instant::now() < deadline,
            "intake never refused while the disk was full; see {}",
            env.log.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let accepted_while_full = submitted.accepted().len();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        submitted.accepted().len() <= accepted_while_full + 100,
        "intake kept accepting on a full disk"
    );
    let live = client
        .get(format!("{}/health/live", env.base))
        .send()
        .await
        .unwrap();
    assert!(live.status().is_success(), "the process is alive");

    std::fs::remove_file(&ballast).unwrap();
    if tokio::time::timeout(Duration::from_secs(120), during)
        .await
        .is_err()
    {
        let last = submitted.refusals.lock().unwrap().last().cloned();
        panic!(
            "intake did not resume once room returned; the last refusal: {last:?}; the log:\n{}",
            service::log_tail(&env.log)
        );
    }
    assert_eq!(submitted.accepted().len(), 1500);
    assert_only_503s(&env, &submitted);
    let store = Store::connect(&url, &StoreOptions::default())
        .await
        .unwrap();
    let (bus, topics) = service::bus(Backend::Sqlite, &store, "", "");
    finish(&env, vec![child], &store, &bus, &topics, &submitted).await;
}
