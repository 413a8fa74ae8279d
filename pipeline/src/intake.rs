//! Accepting claims: each accepted claim gets its snapshot row (`received`) and its
//! command on the intake topic in one store transaction, so a 202 means both are on
//! disk and neither exists without the other. The `(tenant_id, claim_id)` key decides
//! duplicates, also between simultaneous submissions: exactly one insert wins. A
//! replacement or a void marks the claim it replaces in the same transaction, so of two
//! simultaneous replacements of one claim exactly one is accepted.

use crate::bus::{Bus, Message, TopicSpec};
use crate::clock::now_ms;
use crate::group_commit::{Commit, GroupCommit};
use crate::model::{ordered_id, ClaimSubmitted};
use crate::store::{AuditEntry, Backend, NewClaim, PreparedEntry, Store, StoreError};

/// What intake made of one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// Stored, and its command is on the intake topic.
    New,
    /// A claim with its id exists for the tenant.
    Duplicate,
    /// A replacement or void whose claim was replaced or voided meanwhile, or is no
    /// longer completed: nothing was stored.
    NotReplaceable,
}

impl Admitted {
    pub fn is_new(self) -> bool {
        self == Admitted::New
    }
}

/// Accepts the claims (already validated, distinct ids); answers, per claim, what
/// became of it. The intake topic must exist: the service creates its topics at start
/// (`Bus::ensure_topics`).
pub async fn accept(
    store: &Store,
    bus: &Bus,
    topic: &TopicSpec,
    commands: &[ClaimSubmitted],
    actor: &str,
) -> Result<Vec<Admitted>, StoreError> {
    let ready = Ready::all(commands.iter().cloned(), actor)?;
    accept_ready(store, bus, topic, ready).await
}

/// A claim made ready for the store before the writer is taken: the serialising, which
/// costs CPU, then happens in the submitting request's task, side by side with other
/// requests, and not while every writer waits.
#[derive(Debug)]
struct Ready {
    row: Row,
    message: Message,
    entry: PreparedEntry,
}

/// What a claim's row is written from.
#[derive(Debug)]
struct Row {
    command: ClaimSubmitted,
    /// The submission as the claim's row keeps it.
    submission: String,
}

impl Ready {
    fn new(command: ClaimSubmitted, actor: &str) -> Result<Self, StoreError> {
        let encoding = |e: serde_json::Error| StoreError::Config(e.to_string());
        Ok(Self {
            message: Message {
                key: command.key(),
                value: serde_json::to_vec(&command).map_err(encoding)?,
            },
            entry: received_entry(&command, actor).into(),
            row: Row {
                submission: serde_json::to_string(&command.claim).map_err(encoding)?,
                command,
            },
        })
    }

    fn all(
        commands: impl IntoIterator<Item = ClaimSubmitted>,
        actor: &str,
    ) -> Result<Vec<Self>, StoreError> {
        commands.into_iter().map(|c| Self::new(c, actor)).collect()
    }
}

/// Accepts claims of one or several requests in one transaction. A claim whose tenant
/// and id come again later in `ready` is new at most once, at its first place.
async fn accept_ready(
    store: &Store,
    bus: &Bus,
    topic: &TopicSpec,
    ready: Vec<Ready>,
) -> Result<Vec<Admitted>, StoreError> {
    if ready.is_empty() {
        return Ok(Vec::new());
    }
    let tx = store.begin_write().await?;
    accept_in(store, bus, topic, tx, ready).await
}

/// [`accept_ready`] in `tx`, a transaction on the store's writer, which it commits.
async fn accept_in(
    store: &Store,
    bus: &Bus,
    topic: &TopicSpec,
    mut tx: sqlx::Transaction<'static, sqlx::Any>,
    ready: Vec<Ready>,
) -> Result<Vec<Admitted>, StoreError> {
    let now = now_ms();
    // Taken apart by moving each part out, so that nothing of `ready` is freed while
    // the writer is held.
    let (mut rows, mut messages, mut entries) = (Vec::new(), Vec::new(), Vec::new());
    for r in ready {
        rows.push(r.row);
        messages.push(r.message);
        entries.push(r.entry);
    }
    // Only its first place in `ready` can make a claim new.
    let mut seen = std::collections::HashSet::new();
    let first: Vec<bool> = rows
        .iter()
        .map(|r| {
            seen.insert((
                r.command.tenant_id.as_str(),
                r.command.claim.claim_id.as_str(),
            ))
        })
        .collect();
    let candidates: Vec<&Row> = rows
        .iter()
        .zip(&first)
        .filter_map(|(r, first)| first.then_some(r))
        .collect();
    let new_claims: Vec<NewClaim> = candidates
        .iter()
        .map(|r| NewClaim {
            command: &r.command,
            submission: &r.submission,
        })
        .collect();
    let taken = std::time::Instant::now();
    let inserted = store.insert_claims_in(&mut tx, &new_claims, now).await?;
    let mut inserted = inserted.into_iter();
    let mut admitted: Vec<Admitted> = first
        .iter()
        .map(|first| match *first && inserted.next().unwrap_or(false) {
            true => Admitted::New,
            false => Admitted::Duplicate,
        })
        .collect();
    for (row, admitted) in rows.iter().zip(&mut admitted) {
        let (cmd, new) = (&row.command, *admitted == Admitted::New);
        let Some(replaced) = cmd.claim.replaces_claim_id.as_ref().filter(|_| new) else {
            continue;
        };
        let (tenant, claim_id) = (cmd.tenant_id.as_str(), cmd.claim.claim_id.as_str());
        let member = cmd.claim.member_id.as_str();
        if !store
            .supersede_in(&mut tx, tenant, replaced.as_str(), member, claim_id)
            .await?
        {
            store.uninsert_in(&mut tx, tenant, claim_id).await?;
            *admitted = Admitted::NotReplaceable;
        }
    }
    let fresh: Vec<bool> = admitted.iter().map(|a| a.is_new()).collect();
    if !fresh.iter().all(|new| *new) {
        let mut new = fresh.iter();
        messages.retain(|_| *new.next().unwrap_or(&false));
        let mut new = fresh.iter();
        entries.retain(|_| *new.next().unwrap_or(&false));
    }
    bus.append_in(&mut tx, topic, &messages)
        .await
        .map_err(into_store)?;
    // Last, as the audit chain's head is the last lock a transaction takes. Their
    // claims were inserted just now, so the records are new.
    let entries: Vec<&PreparedEntry> = entries.iter().collect();
    store.append_new_audit_in(&mut tx, &entries).await?;
    let written = std::time::Instant::now();
    tx.commit().await?;
    tracing::debug!(writing = ?(written - taken), syncing = ?written.elapsed(), "Intake written.");
    bus.wake(&topic.name);
    Ok(admitted)
}

/// Group commit for intake requests: each request's claims wait for the next
/// transaction, which takes every request waiting once it has the writer
/// ([`crate::group_commit`]). A request alone in the store paid a transaction and a
/// sync of its own, one after another on SQLite's single writer, and each transaction
/// rewrote the pages of the claims' index by member, where every claim lands on a page
/// of its own; the requests of a busy moment now share them. Each request is still
/// answered only once its claims are durable, and a claim submitted by two requests of
/// one group is new for the first only.
#[derive(Debug)]
pub struct Committer {
    groups: GroupCommit<Requests>,
}

/// Intake requests' claims, a group of requests in one transaction.
#[derive(Debug, Clone)]
struct Requests {
    store: Store,
    bus: Bus,
    topic: TopicSpec,
}

impl Commit for Requests {
    /// One request's claims.
    type Item = Vec<Ready>;
    type Answer = Vec<Admitted>;
    /// The writer's transaction, and how long the group waited for it.
    type Turn = (sqlx::Transaction<'static, sqlx::Any>, std::time::Duration);
    const NAME: &'static str = "intake committer";
    /// Claims of one transaction, at most: the batches of a busy moment (each up to
    /// 1,000 claims in the usual client) share one.
    const MOST_PER_GROUP: usize = 4000;

    fn weight(ready: &Vec<Ready>) -> usize {
        ready.len()
    }

    async fn begin(&self) -> Result<Self::Turn, StoreError> {
        let asked = std::time::Instant::now();
        let tx = self.store.begin_write().await?;
        Ok((tx, asked.elapsed()))
    }

    async fn commit(
        &self,
        (tx, waited): Self::Turn,
        requests: Vec<Vec<Ready>>,
    ) -> Result<Vec<Vec<Admitted>>, StoreError> {
        let sizes: Vec<usize> = requests.iter().map(Vec::len).collect();
        let claims = sizes.iter().sum::<usize>();
        let started = std::time::Instant::now();
        let admitted = accept_in(
            &self.store,
            &self.bus,
            &self.topic,
            tx,
            requests.into_iter().flatten().collect(),
        )
        .await?;
        tracing::debug!(requests = sizes.len(), claims, ?waited, took = ?started.elapsed(), "Intake group committed.");
        let mut admitted = admitted.into_iter();
        Ok(sizes
            .into_iter()
            .map(|size| admitted.by_ref().take(size).collect())
            .collect())
    }
}

impl Committer {
    pub fn new(store: Store, bus: Bus, topic: TopicSpec) -> Self {
        Self {
            groups: GroupCommit::new(Requests { store, bus, topic }),
        }
    }

    /// Accepts `commands` as [`accept`] does, in the next group's transaction.
    pub async fn accept(
        &self,
        commands: Vec<ClaimSubmitted>,
        actor: &str,
    ) -> Result<Vec<Admitted>, StoreError> {
        self.groups.submit(Ready::all(commands, actor)?).await
    }

    /// A batch request's claims: in the next group on SQLite, whose one writer takes
    /// transactions one at a time anyway; in a transaction of its own on PostgreSQL,
    /// where the batches of several requests commit side by side.
    pub async fn accept_batch(
        &self,
        commands: Vec<ClaimSubmitted>,
        actor: &str,
    ) -> Result<Vec<Admitted>, StoreError> {
        // A batch whose every item was refused writes nothing: no transaction to wait
        // for, and none to fail while the store is away.
        if commands.is_empty() {
            return Ok(Vec::new());
        }
        let Requests { store, bus, topic } = self.groups.committer();
        match store.backend() {
            Backend::Sqlite => self.accept(commands, actor).await,
            Backend::Postgres => {
                let ready = Ready::all(commands, actor)?;
                accept_ready(store, bus, topic, ready).await
            }
        }
    }
}

/// The audit record of a claim's intake; its id derives from the claim.
fn received_entry(c: &ClaimSubmitted, actor: &str) -> AuditEntry {
    let claim_id = c.claim.claim_id.as_str();
    AuditEntry {
        audit_id: ordered_id("aud", c.received_at_ms, &c.tenant_id, claim_id, "intake"),
        tenant_id: c.tenant_id.to_string(),
        at: c.received_at_ms,
        actor: actor.to_owned(),
        action: "claim.received".into(),
        entity_type: "claim".into(),
        entity_id: claim_id.to_owned(),
        details: serde_json::to_string(&ReceivedDetails {
            claim_amount: c.claim.claim_amount,
            member_id: c.claim.member_id.as_str(),
            provider_id: c.claim.provider_id.as_str(),
            rulebook_version: c.rulebook_version,
        })
        .unwrap_or_else(|_| "{}".into()),
    }
}

/// The details of a claim's `claim.received` audit record, members by name.
#[derive(serde::Serialize)]
struct ReceivedDetails<'a> {
    claim_amount: i64,
    member_id: &'a str,
    provider_id: &'a str,
    rulebook_version: i64,
}

pub(crate) fn into_store(e: crate::bus::BusError) -> StoreError {
    match e {
        crate::bus::BusError::Unavailable(s) => s,
        other => StoreError::Config(other.to_string()),
    }
}
