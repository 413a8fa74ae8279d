//! `claims replay --into` (contract part 2: Operations and analysts): builds the
//! store's queryable snapshots (claims, decisions, tasks, accumulators) in an empty
//! database from the topics of record alone, on the embedded log or on Kafka.
//!
//! Three passes, each a topic read a page at a time outside any consumer group (a
//! rebuild moves no live group's offsets), its partitions side by side (see
//! [`Bus::pages`]):
//! 1. `claims.intake`: every admitted claim's row, as intake wrote it; then the marks
//!    replacements leave on the claims they replace.
//! 2. `claims.decided`, each partition in order: the snapshot stage's own write
//!    ([`Snapshot::write`]), so a decision is rebuilt by the code that first wrote it,
//!    the member's year applied in the order the live stage applied it (a member's
//!    decisions share a partition). The fused chain's decisions are on it as written,
//!    and so are those a fused process's snapshot stage applied ([`twins`]).
//! 3. `claims.workflow`: the officers' decisions on their review tasks.
//!
//! What the snapshots hold beyond these (who holds an undecided task; the tenants'
//! configuration) is not on a topic: see docs/decisions.md, "Rebuilding from the
//! topics".

use std::collections::HashSet;

use crate::bus::{Bus, BusError, Record, TopicSpec};
use crate::clock::now_ms;
use crate::model::{ClaimSubmitted, Decision, WRITTEN_PREFIX};
use crate::stages::snapshot::{twins, Snapshot};
use crate::stages::StageError;
use crate::store::{DecisionTexts, NewClaim, Store, StoreError, TaskDecision};
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
    /// Decisions made outside the chain (officers', reprocessed claims') rebuilt from
    /// the record of them as written (see [`twins`]): the embedded default's.
    pub from_twins: u64,
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

/// A page read and decoded, ahead of the writes.
enum Page {
    /// Claims with their submissions as their rows keep them.
    Claims(Vec<(ClaimSubmitted, String)>),
    /// Decisions in the order to apply them (see [`twins`]), with the store's texts of
    /// those the snapshot stage leaves as they are (the written ones): made here, on
    /// the reading task, while the writer writes the pages before.
    Decisions(Vec<Decision>, Vec<Option<DecisionTexts>>),
    OfficerDecisions(Vec<OfficerDecision>),
}

/// A page with where the read is.
struct Read {
    page: Page,
    topic: String,
    records: u64,
    /// Records that did not decode: the live stages parked them too.
    skipped: u64,
}

/// Each topic of record with its partitions' (partition, first offset, end offset).
type Extents = Vec<(TopicSpec, Vec<(u32, i64, i64)>)>;

/// Pages read and decoded while the previous ones are written.
const READ_AHEAD: usize = 1;

/// Rebuilds the snapshots into `into` (migrated, empty, and on SQLite opened with
/// [`StoreOptions::bulk_load`](crate::store::StoreOptions::bulk_load), which keeps no
/// log to copy) from `bus`'s topics. One task reads and decodes pages, and serialises
/// what it can of them, while this one writes them, in order.
pub async fn rebuild(
    bus: &Bus,
    topics: &Topics,
    into: &Store,
    mut progress: impl FnMut(&Progress),
) -> Result<Rebuilt, RebuildError> {
    if !into.holds_no_claims().await? {
        return Err(RebuildError::NotEmpty);
    }
    let mut extents = Vec::new();
    for t in of_record(topics) {
        extents.push((t.clone(), bus.extent(t).await?));
    }
    let total = extents
        .iter()
        .flat_map(|(_, e)| e)
        .map(|(_, lo, hi)| (hi - lo) as u64)
        .sum();
    let indexes = into.drop_indexes_made_at_end().await?;
    let written = timed(
        "topics read and written",
        write_all(bus, topics, into, extents, total, &mut progress),
    )
    .await;
    // Made again whether or not the rebuild went through: the database is whole.
    timed("indexes made", into.remake_indexes(&indexes)).await?;
    // Opened as a bulk load, the database is durable from here on only.
    timed("database synced", into.sync()).await?;
    written
}

/// Awaits `part` of a rebuild and logs how long it took: an operator's view of where a
/// long rebuild spends its time.
async fn timed<T>(part: &str, work: impl std::future::Future<Output = T>) -> T {
    let started = std::time::Instant::now();
    let done = work.await;
    tracing::info!(seconds = started.elapsed().as_secs_f64(), "{part}");
    done
}

async fn write_all(
    bus: &Bus,
    topics: &Topics,
    into: &Store,
    extents: Extents,
    total: u64,
    progress: &mut impl FnMut(&Progress),
) -> Result<Rebuilt, RebuildError> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(READ_AHEAD);
    let reader = tokio::spawn(read_all(bus.clone(), topics.clone(), extents, tx));
    let mut at = Progress {
        topic: String::new(),
        done: 0,
        total,
    };
    let mut rebuilt = Rebuilt::default();
    let mut replaced: Vec<(String, String, String)> = Vec::new();
    let mut snapshot = Snapshot {
        topics: topics.clone(),
        store: into.clone(),
        accumulators: Default::default(),
        twins: false,
        passed: Default::default(),
    };
    while let Some(read) = rx.recv().await {
        let read: Read = read?;
        if !replaced.is_empty() && !matches!(read.page, Page::Claims(_)) {
            // Every claim is in: the marks of the replacements.
            for (tenant, claim, by) in replaced.drain(..) {
                into.supersede_replayed(&tenant, &claim, &by).await?;
            }
        }
        match read.page {
            Page::Claims(commands) => claims(into, commands, &mut rebuilt, &mut replaced).await?,
            Page::Decisions(page, texts) => {
                decisions(&mut snapshot, page, texts, &mut rebuilt).await?
            }
            Page::OfficerDecisions(decisions) => {
                officer_decisions(into, &decisions).await?;
                rebuilt.officer_decisions += decisions.len() as u64;
            }
        }
        rebuilt.skipped += read.skipped;
        at.done += read.records;
        at.topic = read.topic;
        progress(&at);
    }
    for (tenant, claim, by) in replaced.drain(..) {
        into.supersede_replayed(&tenant, &claim, &by).await?;
    }
    rebuilt.from_twins = reader
        .await
        .map_err(|e| RebuildError::Stage(StageError::Fatal(e.to_string())))?;
    Ok(rebuilt)
}

/// Decisions of `claims.decided`, in the order [`twins::Twins`] gives, written as the
/// snapshot stage writes them.
async fn decisions(
    snapshot: &mut Snapshot,
    mut decisions: Vec<Decision>,
    texts: Vec<Option<DecisionTexts>>,
    rebuilt: &mut Rebuilt,
) -> Result<(), RebuildError> {
    if decisions.is_empty() {
        return Ok(());
    }
    let (_, held) = snapshot.apply(&mut decisions, texts).await?;
    rebuilt.decisions += held.iter().filter(|h| **h).count() as u64;
    // Freed on the blocking pool: a page's decisions took an eighth of the writer's
    // time to free, and the writer is what a rebuild waits for.
    tokio::task::spawn_blocking(move || drop(decisions));
    Ok(())
}

/// Reads the topics of record page by page, in order, decoding each page and putting
/// the decisions in the order to apply them; stops at the first failure, which it
/// passes on. Answers the decisions that a written twin stood in for.
async fn read_all(
    bus: Bus,
    topics: Topics,
    extents: Extents,
    tx: tokio::sync::mpsc::Sender<Result<Read, RebuildError>>,
) -> u64 {
    let mut twins = twins::Twins::default();
    for (topic, extent) in extents {
        let as_published = bus.reads_as_published(&topic);
        let mut pages = bus.pages(&topic, extent, PAGE);
        loop {
            let read = match pages.next().await {
                Ok(None) => break,
                Ok(Some(records)) => decode(&topics, &topic, &records, as_published, &mut twins),
                Err(e) => Err(RebuildError::from(e)),
            };
            let failed = read.is_err();
            if tx.send(read).await.is_err() || failed {
                return twins.replaced;
            }
        }
        if topic == topics.decided {
            // The decisions are all read: those that waited for a twin in vain.
            let read = Read {
                page: Page::Decisions(twins.rest(), Vec::new()),
                topic: topic.name.clone(),
                records: 0,
                skipped: 0,
            };
            if tx.send(Ok(read)).await.is_err() {
                return twins.replaced;
            }
        }
    }
    twins.replaced
}

/// A page of `topic`'s records, decoded. `as_published`: the records are the JSON
/// text their writer published (see [`Bus::reads_as_published`]), so the decisions'
/// traces are written on as they were read: the text a decision's audit record holds.
fn decode(
    topics: &Topics,
    topic: &TopicSpec,
    records: &[Record],
    as_published: bool,
    twins: &mut twins::Twins,
) -> Result<Read, RebuildError> {
    /// The records that decode; those `as_text` names are read inside
    /// [`reading_as_text`](crate::model::reading_as_text).
    fn all<T: serde::de::DeserializeOwned>(
        records: &[Record],
        as_text: impl Fn(&Record) -> bool,
    ) -> (Vec<T>, u64) {
        let mut skipped = 0;
        let values = records
            .iter()
            .filter_map(|r| {
                let read = || serde_json::from_slice(&r.value).ok();
                let v = if as_text(r) {
                    crate::model::reading_as_text(read)
                } else {
                    read()
                };
                skipped += u64::from(v.is_none());
                v
            })
            .collect();
        (values, skipped)
    }
    let (page, skipped) = if topic == &topics.intake {
        let (v, s) = all::<ClaimSubmitted>(records, |_| false);
        let claims = v
            .into_iter()
            .map(|c| serde_json::to_string(&c.claim).map(|text| (c, text)))
            .collect::<Result<_, _>>()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        (Page::Claims(claims), s)
    } else if topic == &topics.decided {
        // The page's decisions repeat their claims' providers, contracts, members and
        // plans in their facts; their events are not rebuilt (they are on
        // `claims.events`). A decision the store wrote is written again as it is: its
        // trace, facts and pricing are written on as they were read, where that is as
        // they were written. The others are applied as the snapshot stage applies
        // them, which reads their pricing and sets their facts.
        let written = |r: &Record| as_published && r.value.starts_with(WRITTEN_PREFIX);
        let (v, s) = crate::model::shared::reading_shared(|| {
            crate::model::event::reading_without_events(|| all(records, written))
        });
        let ordered = twins.order(v);
        let texts = ordered
            .iter()
            .map(|d| d.written.then(|| DecisionTexts::of(d)))
            .collect();
        (Page::Decisions(ordered, texts), s)
    } else {
        let (v, s) = all(records, |_| false);
        (Page::OfficerDecisions(v), s)
    };
    Ok(Read {
        page,
        topic: topic.name.clone(),
        records: records.len() as u64,
        skipped,
    })
}

/// A page of `claims.intake`: the claims' rows, as intake wrote them.
async fn claims(
    into: &Store,
    page: Vec<(ClaimSubmitted, String)>,
    rebuilt: &mut Rebuilt,
    replaced: &mut Vec<(String, String, String)>,
) -> Result<(), RebuildError> {
    // A claim's command is on the topic once, unless a relay repeated it.
    let mut seen = HashSet::new();
    let (commands, submissions): (Vec<ClaimSubmitted>, Vec<String>) = page
        .into_iter()
        .filter(|(c, _)| seen.insert((c.tenant_id.to_string(), c.claim.claim_id.to_string())))
        .unzip();
    let rows = NewClaim::all(&commands, &submissions);
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
async fn officer_decisions(into: &Store, page: &[OfficerDecision]) -> Result<(), RebuildError> {
    for d in page {
        let decision = TaskDecision {
            action: d.action,
            note: d.note.as_deref(),
            approved_amount: d.approved_amount,
            at: d.decided_at_ms,
        };
        into.complete_task_replayed(&d.tenant_id, &d.task_id, &d.officer, &decision)
            .await?;
    }
    Ok(())
}

/// The topics `claims replay` reads.
pub fn of_record(topics: &Topics) -> [&TopicSpec; 3] {
    [&topics.intake, &topics.decided, &topics.workflow]
}
