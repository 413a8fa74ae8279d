//! Accepting claims: each accepted claim gets its snapshot row (`received`) and its
//! command on the intake topic in one store transaction, so a 202 means both are on
//! disk and neither exists without the other. The `(tenant_id, claim_id)` key decides
//! duplicates, also between simultaneous submissions: exactly one insert wins.

use tokio::sync::{mpsc, oneshot};

use crate::bus::{Bus, Message, TopicSpec};
use crate::clock::now_ms;
use crate::model::{ordered_id, ClaimSubmitted};
use crate::store::{values_list, AnyQuery, AuditEntry, Backend, PreparedEntry, Store, StoreError};

/// Rows per INSERT: 12 values each, within SQLite's limit on bound values.
const ROWS_PER_INSERT: usize = 2000;

/// Accepts the claims (already validated, distinct ids); answers, per claim, whether it
/// was new (`false`: a claim with that id exists for the tenant). The intake topic must
/// exist: the service creates its topics at start (`Bus::ensure_topics`).
pub async fn accept(
    store: &Store,
    bus: &Bus,
    topic: &TopicSpec,
    commands: &[ClaimSubmitted],
    actor: &str,
) -> Result<Vec<bool>, StoreError> {
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
) -> Result<Vec<bool>, StoreError> {
    if ready.is_empty() {
        return Ok(Vec::new());
    }
    let now = now_ms();
    // Taken apart before the writer is: what is left of `ready` is not dropped inside.
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
    // The statements are written and bound before the writer is taken.
    let backend = store.backend();
    let sql: Vec<InsertSql> = candidates
        .chunks(ROWS_PER_INSERT)
        .map(|chunk| InsertSql::new(backend, chunk.len()))
        .collect();
    let inserts: Vec<Insert> = candidates
        .chunks(ROWS_PER_INSERT)
        .zip(&sql)
        .map(|(chunk, sql)| Insert::new(sql, chunk, now))
        .collect();
    let mut tx = store.begin_write().await?;
    let mut inserted = Vec::with_capacity(candidates.len());
    for insert in inserts {
        inserted.extend(insert.run(&mut tx, backend, now).await?);
    }
    let mut inserted = inserted.into_iter();
    let fresh: Vec<bool> = first
        .iter()
        .map(|first| *first && inserted.next().unwrap_or(false))
        .collect();
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
    tx.commit().await?;
    bus.wake(&topic.name);
    Ok(fresh)
}

/// The text of one chunk's statements: on PostgreSQL an insert that returns its rows;
/// on SQLite a read of the claims stored already, and an insert of all of them.
struct InsertSql {
    read: Option<String>,
    insert: String,
}

impl InsertSql {
    fn new(backend: Backend, rows: usize) -> Self {
        match backend {
            Backend::Postgres => Self {
                read: None,
                insert: format!(
                    "{} RETURNING tenant_id, claim_id",
                    insert_sql(backend, rows)
                ),
            },
            Backend::Sqlite => Self {
                read: Some(format!(
                    "SELECT c.tenant_id, c.claim_id FROM (VALUES {}) AS v \
                     JOIN claims AS c ON c.tenant_id = v.column1 AND c.claim_id = v.column2",
                    values_list(backend, rows, 2)
                )),
                insert: insert_sql(backend, rows),
            },
        }
    }
}

fn insert_sql(backend: Backend, rows: usize) -> String {
    format!(
        "INSERT INTO claims (tenant_id, claim_id, member_id, provider_id, claim_amount, service_date, submission, \
         rulebook_id, rulebook_version, status, received_at, updated_at) VALUES {} \
         ON CONFLICT (tenant_id, claim_id) DO NOTHING",
        values_list(backend, rows, 12)
    )
}

/// One chunk of an intake transaction's claims, its statements bound.
struct Insert<'q> {
    chunk: &'q [&'q Row],
    read:
        Option<sqlx::query::QueryAs<'q, sqlx::Any, (String, String), sqlx::any::AnyArguments<'q>>>,
    insert: AnyQuery<'q>,
}

impl<'q> Insert<'q> {
    fn new(sql: &'q InsertSql, chunk: &'q [&'q Row], now: i64) -> Self {
        let read = sql.read.as_deref().map(|read| {
            chunk.iter().fold(sqlx::query_as(read), |q, r| {
                q.bind(r.command.tenant_id.as_str())
                    .bind(r.command.claim.claim_id.as_str())
            })
        });
        let insert = chunk
            .iter()
            .fold(sqlx::query(&sql.insert), |q, r| bind_claim(q, r, now));
        Self {
            chunk,
            read,
            insert,
        }
    }

    /// Inserts the chunk's claims not stored yet (by tenant and id), inside `tx`, and
    /// answers, per claim, whether it was inserted.
    async fn run(
        self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        backend: Backend,
        now: i64,
    ) -> Result<Vec<bool>, StoreError> {
        let key = |r: &Row| {
            let c = &r.command;
            (c.tenant_id.clone(), c.claim.claim_id.as_str().to_owned())
        };
        let Some(read) = self.read else {
            // PostgreSQL: concurrent transactions may insert the same claim; the insert
            // itself tells which rows were its own.
            let rows = self.insert.fetch_all(&mut **tx).await?;
            let returned = rows
                .iter()
                .map(|row| Ok((sqlx::Row::try_get(row, 0)?, sqlx::Row::try_get(row, 1)?)))
                .collect::<Result<std::collections::HashSet<(String, String)>, sqlx::Error>>()?;
            return Ok(self
                .chunk
                .iter()
                .map(|r| returned.contains(&key(r)))
                .collect());
        };
        // SQLite's one writer runs this transaction alone, so the claims stored already
        // are those its own read finds, and the insert returns nothing: returned rows
        // crossed from the store's thread one by one while the writer waited.
        let stored: std::collections::HashSet<(String, String)> =
            read.fetch_all(&mut **tx).await?.into_iter().collect();
        let new: Vec<bool> = self
            .chunk
            .iter()
            // Almost always none is stored: no key is built for the lookup then.
            .map(|r| stored.is_empty() || !stored.contains(&key(r)))
            .collect();
        let count = new.iter().filter(|n| **n).count();
        let added = if stored.is_empty() {
            self.insert.execute(&mut **tx).await?.rows_affected()
        } else if count == 0 {
            0
        } else {
            let sql = insert_sql(backend, count);
            let q = self
                .chunk
                .iter()
                .zip(&new)
                .filter(|(_, new)| **new)
                .fold(sqlx::query(&sql), |q, (r, _)| bind_claim(q, r, now));
            q.execute(&mut **tx).await?.rows_affected()
        };
        if added != count as u64 {
            // Another writer inserted some of them after the read: the transaction
            // must not go on as if they were new.
            return Err(StoreError::Conflict(
                "claims were stored by another writer during intake; retry".into(),
            ));
        }
        Ok(new)
    }
}

/// Binds a claim's row for an intake insert.
fn bind_claim<'q>(q: AnyQuery<'q>, r: &'q Row, now: i64) -> AnyQuery<'q> {
    let c = &r.command;
    q.bind(c.tenant_id.as_str())
        .bind(c.claim.claim_id.as_str())
        .bind(c.claim.member_id.as_str())
        .bind(c.claim.provider_id.as_str())
        .bind(c.claim.claim_amount)
        .bind(c.claim.service_date.to_string())
        .bind(r.submission.as_str())
        .bind(c.rulebook_id.as_str())
        .bind(c.rulebook_version)
        .bind("received")
        .bind(c.received_at_ms)
        .bind(now)
}

/// Claims waiting for the [`Committer`]'s next transaction, at most: the batches of a
/// busy moment (each up to 1,000 claims in the usual client) share one.
const MOST_PER_GROUP: usize = 4000;

/// One request's claims waiting for a transaction, and where its answer goes.
#[derive(Debug)]
struct Waiting {
    ready: Vec<Ready>,
    answer: oneshot::Sender<Result<Vec<bool>, StoreError>>,
}

/// Group commit for intake requests: each request's claims wait for the next
/// transaction, which takes every request that arrived while the last one committed.
/// A request alone in the store paid a transaction and a sync of its own, one after
/// another on SQLite's single writer, and each transaction rewrote the pages of the
/// claims' index by member, where every claim lands on a page of its own; the requests
/// of a busy moment now share them. Each request is still answered only once its claims
/// are durable, and a claim submitted by two requests of one group is new for the first
/// only.
#[derive(Debug)]
pub struct Committer {
    store: Store,
    bus: Bus,
    topic: TopicSpec,
    /// The transactions' task, started by the first submission (which runs on the
    /// runtime); it ends when the committer is dropped.
    queue: std::sync::OnceLock<mpsc::Sender<Waiting>>,
}

impl Committer {
    pub fn new(store: Store, bus: Bus, topic: TopicSpec) -> Self {
        Self {
            store,
            bus,
            topic,
            queue: std::sync::OnceLock::new(),
        }
    }

    /// Accepts `commands` as [`accept`] does, in the next group's transaction.
    pub async fn accept(
        &self,
        commands: Vec<ClaimSubmitted>,
        actor: &str,
    ) -> Result<Vec<bool>, StoreError> {
        let ready = Ready::all(commands, actor)?;
        let (answer, answered) = oneshot::channel();
        let gone = || StoreError::Config("the intake committer has stopped".into());
        let waiting = Waiting { ready, answer };
        self.queue().send(waiting).await.map_err(|_| gone())?;
        answered.await.map_err(|_| gone())?
    }

    /// A batch request's claims: in the next group on SQLite, whose one writer takes
    /// transactions one at a time anyway; in a transaction of its own on PostgreSQL,
    /// where the batches of several requests commit side by side.
    pub async fn accept_batch(
        &self,
        commands: Vec<ClaimSubmitted>,
        actor: &str,
    ) -> Result<Vec<bool>, StoreError> {
        match self.store.backend() {
            Backend::Sqlite => self.accept(commands, actor).await,
            Backend::Postgres => {
                let ready = Ready::all(commands, actor)?;
                accept_ready(&self.store, &self.bus, &self.topic, ready).await
            }
        }
    }

    fn queue(&self) -> &mpsc::Sender<Waiting> {
        self.queue.get_or_init(|| {
            let (queue, waiting) = mpsc::channel(MOST_PER_GROUP);
            let (store, bus, topic) = (self.store.clone(), self.bus.clone(), self.topic.clone());
            tokio::spawn(commit_groups(store, bus, topic, waiting));
            queue
        })
    }
}

/// The committer's task: one transaction at a time, for every request waiting.
async fn commit_groups(
    store: Store,
    bus: Bus,
    topic: TopicSpec,
    mut waiting: mpsc::Receiver<Waiting>,
) {
    while let Some(first) = waiting.recv().await {
        let mut claims = first.ready.len();
        let mut group = vec![first];
        while claims < MOST_PER_GROUP {
            match waiting.try_recv() {
                Ok(w) => {
                    claims += w.ready.len();
                    group.push(w);
                }
                Err(_) => break,
            }
        }
        let mut sizes = Vec::with_capacity(group.len());
        let mut answers = Vec::with_capacity(group.len());
        let mut ready = Vec::with_capacity(claims);
        for w in group {
            sizes.push(w.ready.len());
            answers.push(w.answer);
            ready.extend(w.ready);
        }
        let result = accept_ready(&store, &bus, &topic, ready).await;
        let mut fresh = result.as_ref().map(|f| f.iter());
        for (size, answer) in sizes.into_iter().zip(answers) {
            let answer_is = match &mut fresh {
                Ok(f) => Ok(f.by_ref().take(size).copied().collect()),
                Err(e) => Err(e.for_another()),
            };
            // A request that went away has nothing to be told; its claims are stored.
            let _ = answer.send(answer_is);
        }
    }
}

/// The audit record of a claim's intake; its id derives from the claim.
fn received_entry(c: &ClaimSubmitted, actor: &str) -> AuditEntry {
    let claim_id = c.claim.claim_id.as_str();
    AuditEntry {
        audit_id: ordered_id("aud", c.received_at_ms, &c.tenant_id, claim_id, "intake"),
        tenant_id: c.tenant_id.clone(),
        at: c.received_at_ms,
        actor: actor.to_owned(),
        action: "claim.received".into(),
        entity_type: "claim".into(),
        entity_id: claim_id.to_owned(),
        details: serde_json::json!({
            "member_id": c.claim.member_id.as_str(), "provider_id": c.claim.provider_id.as_str(),
            "claim_amount": c.claim.claim_amount, "rulebook_version": c.rulebook_version,
        })
        .to_string(),
    }
}

pub(crate) fn into_store(e: crate::bus::BusError) -> StoreError {
    match e {
        crate::bus::BusError::Unavailable(s) => s,
        other => StoreError::Config(other.to_string()),
    }
}
