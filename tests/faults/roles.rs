//! The scaled-out shape: each role in a process of its own, on the embedded log over
//! PostgreSQL. Each process is SIGKILLed alone while claims stream in, and started again
//! under the same name; the others carry on.

use std::time::Duration;

use pipeline::store::{Store, StoreOptions};
use rand::Rng;

use crate::backend::{Backend, Database};
use crate::finish;
use crate::service::{self, Env, Submitted};

const CLAIMS: usize = 3000;
/// Every role of a claim's way, the HTTP front end first: each stage but the upload
/// scanners, which no claim passes through.
fn roles() -> Vec<&'static str> {
    std::iter::once("api")
        .chain(
            pipeline::stages::NAMES
                .into_iter()
                .filter(|n| !matches!(*n, "scan" | "ocr")),
        )
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_killed_alone_loses_and_doubles_nothing() {
    let dir = service::WorkDir::new();
    let db = Database::create(Backend::Postgres, dir.path()).await;
    let api = Env::new(dir.path(), &db.url, "role-api", vec![]);
    service::create_tenant(&api);
    let roles = roles();
    let envs: Vec<Env> = roles
        .iter()
        .map(|role| match *role {
            "api" => api.clone(),
            _ => api.sibling(&format!("role-{role}"), dir.path()),
        })
        .collect();
    let mut children: Vec<crate::service::Running> = roles
        .iter()
        .zip(&envs)
        .map(|(role, env)| env.start_roles(role))
        .collect();
    let client = service::client();
    service::wait_ready(&client, &api.base).await;
    let token = service::set_up_tenant(&client, &api.base).await;
    let submitted = Submitted::default();
    let submitter = submitted.spawn(
        client.clone(),
        token,
        api.base.clone(),
        0..CLAIMS,
        Duration::from_millis(100),
    );
    let mut kills_during_intake = 0;
    for (i, role) in roles.iter().enumerate() {
        let pause = rand::thread_rng().gen_range(200..500);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        kills_during_intake += usize::from(!submitter.is_finished());
        children[i].kill().unwrap(); // SIGKILL
        children[i].wait().unwrap();
        children[i] = envs[i].start_roles(role);
        if *role == "api" {
            service::wait_ready(&client, &api.base).await;
        }
    }
    assert!(
        kills_during_intake >= roles.len() / 2,
        "most kills must land while claims stream in: {kills_during_intake}"
    );
    tokio::time::timeout(Duration::from_secs(180), submitter)
        .await
        .expect("every claim is accepted")
        .unwrap();
    assert_eq!(submitted.accepted().len(), CLAIMS);
    let store = Store::connect(&db.url, &StoreOptions::default())
        .await
        .unwrap();
    let (bus, topics) = service::bus(Backend::Postgres, &store, "", "");
    finish(&api, children, &store, &bus, &topics, &submitted).await;
}
