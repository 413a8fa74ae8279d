//! Bulk reprocess (contract part 2): a job decides the tenant's claims pending review
//! again with the active rulebook. Each claim gets a new decision (its version + 1,
//! with ids derived from the job), which goes to `claims.decided` like any other: the
//! snapshot stage writes it with its audit record, prices it against the member's year,
//! closes the review task of a claim that no longer needs review, and announces its
//! events.
//!
//! Exactly once: a chunk of the job's items is settled in the same store transaction
//! that queues their decisions (on the embedded log, or Kafka's outbox), and an item
//! is settled only while still pending. A crash before the commit leaves the chunk
//! pending and nothing queued; after it, the chunk is done. A runner racing another
//! (two processes run the workflow role) finds the items settled and rolls back.
//!
//! Each claim is decided on the facts its decision kept, with its fraud score as it was
//! (see [`crate::redecide`]). A claim that has left review meanwhile (an officer decided
//! it) is settled as done with nothing to redo; a claim whose decision kept no facts
//! cannot be decided again, and its item fails with that reason.

use std::time::Duration;

use schemas::job::JobState;
use schemas::TenantId;
use tokio::sync::watch;

use crate::bus::{Bus, Message};
use crate::clock::now_ms;
use crate::model::Decision;
use crate::redecide::{redecide, Candidate};
use crate::rules::{compile, CompiledRulebook};
use crate::stages::decide::Pass;
use crate::store::{ItemEnd, RunningJob, Store, StoreError};
use crate::topics::Topics;

/// Items per transaction.
const CHUNK: i64 = 200;

/// How often the runner looks for running jobs.
const POLL: Duration = Duration::from_millis(500);

/// Runs the jobs until `shutdown` turns true. Store and bus failures are retried.
pub async fn run(store: Store, bus: Bus, topics: Topics, mut shutdown: watch::Receiver<bool>) {
    loop {
        match store.running_jobs().await {
            Ok(jobs) => {
                for job in jobs {
                    if *shutdown.borrow() {
                        return;
                    }
                    if let Err(e) = work(&store, &bus, &topics, &job, &shutdown).await {
                        tracing::warn!(job_id = %job.job_id, error = %e, "A reprocess job will be resumed.");
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "Running jobs could not be read."),
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}

async fn work(
    store: &Store,
    bus: &Bus,
    topics: &Topics,
    job: &RunningJob,
    shutdown: &watch::Receiver<bool>,
) -> Result<(), StoreError> {
    let tenant_id = TenantId::parse(&job.tenant_id)
        .map_err(|e| StoreError::Corrupt(format!("job {}: tenant: {e}", job.job_id)))?;
    let rulebook = store
        .rulebook(&job.tenant_id, &job.rulebook_id)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("job {}: no rulebook", job.job_id)))?;
    let compiled = match compile(&rulebook.rules) {
        Ok(c) => c,
        // A stored rulebook always compiles; a job that cannot is failed, not retried.
        Err(e) => {
            tracing::error!(job_id = %job.job_id, error = %e, "The job's rulebook does not compile.");
            return store.finish_job(&job.job_id, JobState::Failed).await;
        }
    };
    loop {
        if *shutdown.borrow() {
            return Ok(());
        }
        let items = store.pending_items(&job.job_id, CHUNK).await?;
        if items.is_empty() {
            tracing::info!(job_id = %job.job_id, "Reprocess job done.");
            return store.finish_job(&job.job_id, JobState::Done).await;
        }
        let (decisions, ends) = decide_chunk(store, &tenant_id, job, &compiled, &items).await?;
        let messages: Vec<Message> = decisions
            .iter()
            .map(|d| crate::stages::runner::message(d.key(), d))
            .collect();
        let mut tx = store.begin_write().await?;
        if !store.settle_items_in(&mut tx, &job.job_id, &ends).await? {
            // Another runner settled some of them: its decisions stand.
            tx.rollback().await?;
            continue;
        }
        bus.append_in(&mut tx, &topics.decided, &messages)
            .await
            .map_err(crate::intake::into_store)?;
        tx.commit().await?;
        bus.wake(&topics.decided.name);
    }
}

/// The chunk's claims decided again, and how each item ends.
async fn decide_chunk(
    store: &Store,
    tenant_id: &TenantId,
    job: &RunningJob,
    compiled: &CompiledRulebook,
    items: &[String],
) -> Result<(Vec<Decision>, Vec<(String, ItemEnd)>), StoreError> {
    let candidate = Candidate {
        rulebook_id: &job.rulebook_id,
        version: job.rulebook_version,
        compiled,
    };
    let now = now_ms();
    let mut decisions = Vec::new();
    let mut ends = Vec::with_capacity(items.len());
    for claim_id in items {
        let end = match store.decided_claim(tenant_id, claim_id).await? {
            None => ItemEnd::Failed("the claim no longer exists".into()),
            Some((s, _)) if s.status != "pending_review" => ItemEnd::Done,
            Some((_, None)) => {
                ItemEnd::Failed("the claim's decision kept no facts to decide it again on".into())
            }
            Some((s, Some(claim))) => {
                let pass = Pass::Again {
                    version: s.version + 1,
                    job_id: &job.job_id,
                };
                decisions.push(redecide(claim, candidate, now, pass));
                ItemEnd::Done
            }
        };
        ends.push((claim_id.clone(), end));
    }
    Ok((decisions, ends))
}
