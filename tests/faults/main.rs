//! Faults survived (issue 33): the real service under load while what it depends on
//! fails. PostgreSQL crashes and comes back, the broker is killed and restarted, each
//! role's process is killed alone, the data directory's disk fills up, and webhook
//! receivers hang, trickle, redirect or fail forever. Each test asserts what a tenant
//! would: every accepted claim reached exactly one outcome, with its events, review
//! task and accumulators, nothing else was stored, and the audit chain verifies. Each
//! is bounded in time.

// A test reports failure by panicking; unwrapping is the idiom here.
#![allow(clippy::unwrap_used)]

#[allow(dead_code)]
#[path = "../api/support/backend.rs"]
mod backend;
// Each suite uses a part of the shared support.
#[allow(dead_code)]
#[path = "../support/service.rs"]
mod service;

mod disk_full;
mod receivers;
mod restarts;
mod roles;
mod servers;

use pipeline::bus::Bus;
use pipeline::store::Store;
use pipeline::topics::Topics;
use service::{Env, Submitted};

/// Every batch intake refused while a dependency was away was refused with 503
/// `SERVICE_UNAVAILABLE` in the spec's error body, never a 500 (whose cause is in the
/// service's log, shown with the failure).
fn assert_only_503s(env: &Env, submitted: &Submitted) {
    let refusals = submitted.refusals.lock().unwrap().clone();
    for (status, body) in &refusals {
        assert_eq!(*status, 503, "{body}\n{}", service::log_errors(&env.log));
        assert_eq!(body["error"]["code"], "SERVICE_UNAVAILABLE", "{body}");
        assert!(body["error"]["message"].is_string(), "{body}");
        assert!(body["error"]["request_id"].is_string(), "{body}");
    }
}

/// The checks every fault test ends with: each accepted claim decided once, the
/// service still running, the audit chain whole.
async fn finish(
    env: &Env,
    children: Vec<crate::service::Running>,
    store: &Store,
    bus: &Bus,
    topics: &Topics,
    submitted: &Submitted,
) {
    service::assert_each_claim_decided_once(store, bus, topics, &submitted.accepted(), &env.log)
        .await;
    for mut child in children {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the service rode out the fault without exiting; see the logs in {}",
            env.log.parent().unwrap().display()
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }
    env.assert_audit_chain_verifies();
}
