//! `claims replay --into` (contract part 2: Operations and analysts): builds the
//! store's queryable snapshots (claims, decisions, tasks, accumulators) in an empty
//! database from the topics of record alone, on the embedded log or on Kafka.
//!
//! Three passes, each a topic read a page at a time outside any consumer group (a
//! rebuild moves no live group's offsets):
//! 1. `claims.intake`: every admitted claim's row, as intake wrote it; then the marks
//!    replacements leave on the claims they replace.
//! 2. `claims.decided`, each partition in order: the snapshot stage's own write
//!    ([`Snapshot::write`]), so a decision is rebuilt by the code that first wrote it,
//!    the member's year applied in the order the live stage applied it (a member's
//!    decisions share a partition). The fused chain's decisions are on it as written.
//! 3. `claims.workflow`: the officers' decisions on their review tasks.
//!
//! What the snapshots hold beyond these (who holds an undecided task; the tenants'
//! configuration) is not on a topic: see docs/decisions.md, "Rebuilding from the
//! topics".

use std::collections::HashSet;

use crate::bus::{Bus, BusError, Record, TopicSpec};
use crate::clock::now_ms;
use crate::model::ClaimSubmitted;
use crate::stages::snapshot::Snapshot;
use crate::stages::StageError;
use crate::store::{NewClaim, Store, StoreError, TaskDecision};
use crate::topics::Topics;
use crate::workflow::OfficerDecision;

/// Records read per page: a page of decisions is one store transaction.
const PAGE: i64 = 4000;

/// How far a rebuild is, after each page.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Progress {
    /// The topic being read.
    pub topic: String,
    /// Records read so far, over all three topics.
    pub done: u64,
    /// Records the three topics held when the rebuild started.
    pub total: u64,
}

/// What a rebuild wrote.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Rebuilt {
    pub claims: u64,
    pub decisions: u64,
    pub officer_decisions: u64,
    /// Records that did not decode: the live stages parked them too.
    pub skipped: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    #[error(
        "the database to rebuild into holds claims already; replay builds into an empty database"
    )]
    NotEmpty,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Bus(#[from] BusError),
    #[error("{0}")]
    Stage(#[from] StageError),
}

/// Rebuilds the snapshots into `into` (migrated, empty) from `bus`'s topics.
pub async fn rebuild(
    bus: &Bus,
    topics: &Topics,
    into: &Store,
    mut progress: impl FnMut(&Progress),
) -> Result<Rebuilt, RebuildError> {
    if !into.holds_no_claims().await? {
        return Err(RebuildError::NotEmpty);
    }
    let passes = of_record(topics);
    let mut extents = Vec::with_capacity(passes.len());
    for t in passes {
        extents.push(bus.extent(t).await?);
    }
    let total = extents
        .iter()
        .flatten()
        .map(|(_, lo, hi)| (hi - lo) as u64)
        .sum();
    let mut at = Progress {
        topic: String::new(),
        done: 0,
        total,
    };
    let mut rebuilt = Rebuilt::default();
    let mut replaced = Vec::new();
    let mut snapshot = Snapshot {
        topics: topics.clone(),
        store: into.clone(),
        accumulators: Default::default(),
    };
    for (topic, extent) in passes.into_iter().zip(extents) {
        at.topic.clone_from(&topic.name);
        for (partition, from, to) in extent {
            let mut next = from;
            while next < to {
                let end = to.min(next + PAGE);
                let page = bus.read(topic, partition, next, end).await?;
                next = end;
                at.done += page.len() as u64;
                if topic == &topics.intake {
                    claims(into, &page, &mut rebuilt, &mut replaced).await?;
                } else if topic == &topics.decided {
                    let decisions = page.len();
                    let parked = snapshot
                        .write(&page)
                        .await?
                        .iter()
                        .filter(|(t, _)| t == &topics.dead_letter)
                        .count();
                    rebuilt.decisions += (decisions - parked) as u64;
                    rebuilt.skipped += parked as u64;
                } else {
                    officer_decisions(into, &page, &mut rebuilt).await?;
                }
                progress(&at);
            }
        }
        if topic == &topics.intake {
            for (tenant, claim, by) in replaced.drain(..) {
                into.supersede_replayed(&tenant, &claim, &by).await?;
            }
        }
    }
    Ok(rebuilt)
}

/// A page of `claims.intake`: the claims' rows, as intake wrote them.
async fn claims(
    into: &Store,
    page: &[Record],
    rebuilt: &mut Rebuilt,
    replaced: &mut Vec<(String, String, String)>,
) -> Result<(), RebuildError> {
    let mut seen = HashSet::new();
    let mut commands = Vec::with_capacity(page.len());
    for r in page {
        match serde_json::from_slice::<ClaimSubmitted>(&r.value) {
            // A claim's command is on the topic once, unless a relay repeated it.
            Ok(c) => {
                if seen.insert((c.tenant_id.to_string(), c.claim.claim_id.to_string())) {
                    commands.push(c)
                }
            }
            Err(_) => rebuilt.skipped += 1,
        }
    }
    let submissions = commands
        .iter()
        .map(|c| serde_json::to_string(&c.claim))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let rows: Vec<NewClaim> = commands
        .iter()
        .zip(&submissions)
        .map(|(command, submission)| NewClaim {
            command,
            submission,
        })
        .collect();
    let tenants: HashSet<&str> = commands.iter().map(|c| c.tenant_id.as_str()).collect();
    let mut tx = into.begin_write().await?;
    into.ensure_tenants_in(&mut tx, &tenants.into_iter().collect::<Vec<_>>())
        .await?;
    let inserted = into.insert_claims_in(&mut tx, &rows, now_ms()).await?;
    tx.commit().await.map_err(StoreError::from)?;
    for (c, new) in commands.iter().zip(inserted) {
        if !new {
            continue;
        }
        rebuilt.claims += 1;
        if let Some(r) = &c.claim.replaces_claim_id {
            replaced.push((
                c.tenant_id.to_string(),
                r.to_string(),
                c.claim.claim_id.to_string(),
            ));
        }
    }
    Ok(())
}

/// A page of `claims.workflow`: the review tasks the officers decided.
async fn officer_decisions(
    into: &Store,
    page: &[Record],
    rebuilt: &mut Rebuilt,
) -> Result<(), RebuildError> {
    for r in page {
        match serde_json::from_slice::<OfficerDecision>(&r.value) {
            Ok(d) => {
                let decision = TaskDecision {
                    action: d.action,
                    note: d.note.as_deref(),
                    approved_amount: d.approved_amount,
                    at: d.decided_at_ms,
                };
                into.complete_task_replayed(&d.tenant_id, &d.task_id, &d.officer, &decision)
                    .await?;
                rebuilt.officer_decisions += 1;
            }
            Err(_) => rebuilt.skipped += 1,
        }
    }
    Ok(())
}

/// The topics `claims replay` reads.
pub fn of_record(topics: &Topics) -> [&TopicSpec; 3] {
    [&topics.intake, &topics.decided, &topics.workflow]
}
