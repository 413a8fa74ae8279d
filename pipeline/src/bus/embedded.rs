//! The embedded log: the bus kept in the store, so that a newcomer needs nothing
//! installed and a publish is durable once its transaction commits.
//!
//! - Offsets are allocated per partition from `bus_partitions` inside the publishing
//!   transaction, so concurrent publishers never collide and offsets have no gaps.
//! - A consumer group's position is `bus_offsets`, written only by `commit`.
//! - One process at a time consumes a group's topic: it holds a lease in `bus_leases`,
//!   renewed while it polls; if it dies, another process takes over when the lease
//!   expires ([`LEASE`]) and resumes from the committed offsets.
//! - Consumers in this process are woken the moment a publish commits; consumers in
//!   another process notice within [`CROSS_PROCESS_POLL`]. The embedded log serves one
//!   machine; Kafka is the answer for scale.
//! - A poll that finds only a few records goes on taking what each publish adds for up
//!   to [`LINGER`], so that a steady trickle reaches a stage in fewer, larger batches:
//!   each batch is a turn on the store's one writer.
//! - Compacted topics keep only the latest record per key once [`EmbeddedLog::compact`]
//!   runs; consumed records of other topics are trimmed by [`EmbeddedLog::trim`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::codec;
use super::record::{partition_for, Message, Record};
use super::topic::TopicSpec;
use super::BusError;
use crate::clock::now_ms;
use crate::store::{values_list, Backend, Store, StoreError};

/// How long a consumer's lease on a group's topic lasts without renewal.
pub const LEASE: Duration = Duration::from_secs(5);
/// How often a waiting consumer looks for records published by another process.
pub const CROSS_PROCESS_POLL: Duration = Duration::from_millis(200);
/// How long a poll that found fewer than [`LINGER_RECORDS`] goes on taking what each
/// publish adds, until it holds that many, before it hands them out. On SQLite
/// every batch a stage handles is a transaction on the one writer, and each page it
/// dirties is written whole into the write-ahead log: at a steady rate, batches of a
/// few dozen claims made the writer the bottleneck of intake and of every stage
/// (measurements: docs/decisions.md, "The embedded log").
pub const LINGER: Duration = Duration::from_millis(10);
/// What a lingering poll waits to hold: 125 records, or a quarter of its batch when
/// that is less. A number of records rather than a share of the batch, so that a
/// smaller batch (the stages' 500 on this log) does not make the turns on the writer
/// at a steady rate smaller and more frequent too.
const LINGER_RECORDS: usize = 125;
/// Rows per INSERT statement (SQLite allows 32,766 bound values; 7 per row).
const ROWS_PER_INSERT: usize = 2000;

#[derive(Debug, Clone)]
pub struct EmbeddedLog {
    store: Store,
    /// Identifies this process as a lease holder.
    owner: Arc<str>,
    wakers: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
    /// [`LINGER`], unless a test wants it longer.
    linger: Duration,
}

impl EmbeddedLog {
    /// A log whose leases belong to this process alone.
    pub fn new(store: Store) -> Self {
        Self::with_instance(store, None)
    }

    /// A log whose leases belong to `instance` when given: a restarted instance with
    /// the same name resumes its leases at once instead of waiting for them to expire.
    /// Two live processes must never share a name.
    pub fn with_instance(store: Store, instance: Option<&str>) -> Self {
        Self {
            store,
            owner: instance
                .map(str::to_owned)
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
                .into(),
            wakers: Arc::default(),
            linger: LINGER,
        }
    }

    /// This log with polls lingering `linger` instead of [`LINGER`].
    pub fn with_linger(self, linger: Duration) -> Self {
        Self { linger, ..self }
    }

    fn waker(&self, topic: &str) -> Arc<Notify> {
        let mut wakers = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
        wakers.entry(topic.to_owned()).or_default().clone()
    }

    /// Creates the topic's partitions if they do not exist.
    pub async fn ensure_topic(&self, topic: &TopicSpec) -> Result<(), BusError> {
        let sql = format!(
            "INSERT INTO bus_partitions (topic, partition, next_offset) VALUES {} ON CONFLICT (topic, partition) DO NOTHING",
            values_list(self.store.backend(), topic.partitions as usize, 3)
        );
        let mut q = sqlx::query(&sql);
        for p in 0..topic.partitions {
            q = q.bind(&topic.name).bind(i64::from(p)).bind(0i64);
        }
        q.execute(self.store.writer())
            .await
            .map_err(StoreError::from)?;
        Ok(())
    }

    /// Creates every topic that does not exist yet.
    pub async fn ensure_topics(&self, topics: &[TopicSpec]) -> Result<(), BusError> {
        for t in topics {
            self.ensure_topic(t).await?;
        }
        Ok(())
    }

    /// Appends `messages`; answers the (partition, offset) of each, in input order.
    pub async fn publish(
        &self,
        topic: &TopicSpec,
        messages: &[Message],
    ) -> Result<Vec<(u32, i64)>, BusError> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let placed = match self.append(topic, messages).await {
            Err(BusError::UnknownTopic(_)) => {
                self.ensure_topic(topic).await?;
                self.append(topic, messages).await?
            }
            other => other?,
        };
        self.wake(&topic.name);
        Ok(placed)
    }

    async fn append(
        &self,
        topic: &TopicSpec,
        messages: &[Message],
    ) -> Result<Vec<(u32, i64)>, BusError> {
        let mut tx = self
            .store
            .writer()
            .begin()
            .await
            .map_err(StoreError::from)?;
        let placed = self.append_in(&mut tx, topic, messages).await?;
        tx.commit().await.map_err(StoreError::from)?;
        Ok(placed)
    }

    /// Wakes this process's consumers of `topic`, after a transaction that appended to
    /// it committed.
    pub fn wake(&self, topic: &str) {
        self.waker(topic).notify_waiters();
    }

    /// Appends inside the caller's transaction, so that records and the caller's own
    /// rows commit together. The caller commits, then calls [`Self::wake`].
    pub async fn append_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        topic: &TopicSpec,
        messages: &[Message],
    ) -> Result<Vec<(u32, i64)>, BusError> {
        self.append_packed_in(tx, topic, messages, None).await
    }

    /// [`Self::append_in`], with the values packed ahead when `packed` is given:
    /// `packed[i]` made of `messages[i]` by [`codec::pack_all`].
    async fn append_packed_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        topic: &TopicSpec,
        messages: &[Message],
        packed: Option<&codec::Packed>,
    ) -> Result<Vec<(u32, i64)>, BusError> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let now = now_ms();
        let partitions: Vec<u32> = messages
            .iter()
            .map(|m| partition_for(&m.key, topic.partitions))
            .collect();
        let mut counts: HashMap<u32, i64> = HashMap::new();
        for p in &partitions {
            *counts.entry(*p).or_default() += 1;
        }
        // Reserve a block of offsets in each partition touched.
        let mut touched: Vec<(u32, i64)> = counts.into_iter().collect();
        touched.sort_unstable();
        let mut next = self.reserve(tx, topic, &touched).await?;
        let mut placed = Vec::with_capacity(messages.len());
        for p in &partitions {
            let slot = next
                .get_mut(p)
                .ok_or_else(|| BusError::UnknownTopic(topic.name.clone()))?;
            placed.push((*p, *slot));
            *slot += 1;
        }
        let values: Vec<_> = match packed {
            Some(packed) => messages
                .iter()
                .zip(packed)
                .map(|(m, p)| match p {
                    Some(p) => (codec::Codec::Lz4, Cow::Borrowed(&p[..])),
                    None => (codec::Codec::Plain, Cow::Borrowed(&m.value[..])),
                })
                .collect(),
            None => messages.iter().map(|m| codec::stored(&m.value)).collect(),
        };
        for chunk in messages
            .iter()
            .zip(&placed)
            .zip(&values)
            .collect::<Vec<_>>()
            .chunks(ROWS_PER_INSERT)
        {
            let sql = format!(
                "INSERT INTO bus_records (topic, partition, \"offset\", record_key, value, timestamp_ms, codec) VALUES {}",
                values_list(self.store.backend(), chunk.len(), 7)
            );
            let mut q = sqlx::query(&sql);
            for ((m, (p, o)), (codec, value)) in chunk {
                q = q
                    .bind(&topic.name)
                    .bind(i64::from(*p))
                    .bind(*o)
                    .bind(&m.key)
                    .bind(value.as_ref())
                    .bind(now)
                    .bind(*codec as i64);
            }
            q.execute(&mut **tx).await.map_err(StoreError::from)?;
        }
        Ok(placed)
    }

    /// Moves each partition's next offset past `counts` records (partition, count;
    /// sorted by partition) and answers each one's first reserved offset.
    async fn reserve(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        topic: &TopicSpec,
        counts: &[(u32, i64)],
    ) -> Result<HashMap<u32, i64>, BusError> {
        let mut next = HashMap::with_capacity(counts.len());
        match self.store.backend() {
            // One statement for all of them: each statement is a round trip to the
            // store's thread while the one writer waits, and a batch touches every
            // partition of a topic. SQLite has that one writer, so the order in which
            // the rows are locked cannot matter.
            Backend::Sqlite => {
                let sql = format!(
                    "UPDATE bus_partitions SET next_offset = bus_partitions.next_offset + v.column3 \
                     FROM (VALUES {}) AS v \
                     WHERE bus_partitions.topic = v.column1 AND bus_partitions.partition = v.column2 \
                     RETURNING bus_partitions.partition, bus_partitions.next_offset",
                    values_list(Backend::Sqlite, counts.len(), 3)
                );
                let mut q = sqlx::query_as::<_, (i64, i64)>(&sql);
                for (p, n) in counts {
                    q = q.bind(&topic.name).bind(i64::from(*p)).bind(*n);
                }
                let ends: HashMap<i64, i64> = q
                    .fetch_all(&mut **tx)
                    .await
                    .map_err(StoreError::from)?
                    .into_iter()
                    .collect();
                for (p, n) in counts {
                    let end = ends
                        .get(&i64::from(*p))
                        .ok_or_else(|| BusError::UnknownTopic(topic.name.clone()))?;
                    next.insert(*p, end - n);
                }
            }
            // One partition at a time, in partition order: concurrent transactions lock
            // the rows in one order and cannot deadlock.
            Backend::Postgres => {
                for (p, n) in counts {
                    let end: Option<i64> = sqlx::query_scalar(
                        "UPDATE bus_partitions SET next_offset = next_offset + $1 WHERE topic = $2 AND partition = $3 \
                         RETURNING next_offset",
                    )
                    .bind(*n)
                    .bind(&topic.name)
                    .bind(i64::from(*p))
                    .fetch_optional(&mut **tx)
                    .await
                    .map_err(StoreError::from)?;
                    let end = end.ok_or_else(|| BusError::UnknownTopic(topic.name.clone()))?;
                    next.insert(*p, end - n);
                }
            }
        }
        Ok(next)
    }

    /// Joins `group` on `topics`.
    pub async fn consumer(
        &self,
        group: &str,
        topics: &[TopicSpec],
    ) -> Result<EmbeddedConsumer, BusError> {
        for t in topics {
            self.ensure_topic(t).await?;
        }
        Ok(EmbeddedConsumer {
            log: self.clone(),
            group: group.to_owned(),
            topics: topics.to_vec(),
            positions: HashMap::new(),
            leases: HashMap::new(),
            takes: 0,
            assignments: Default::default(),
            rotation: 0,
        })
    }

    /// Every record of the topic, in order per partition.
    pub async fn scan(&self, topic: &TopicSpec) -> Result<Vec<Record>, BusError> {
        let rows = sqlx::query_as::<_, Row>(&format!(
            "{ROWS} WHERE topic = $1 ORDER BY partition, \"offset\""
        ))
        .bind(&topic.name)
        .fetch_all(self.store.reader())
        .await
        .map_err(StoreError::from)?;
        Ok(rows
            .into_iter()
            .map(|r| r.into_record(&topic.name))
            .collect())
    }

    /// Each partition of `topic` that holds records: (partition, first offset, offset
    /// after the last).
    pub async fn extent(&self, topic: &TopicSpec) -> Result<Vec<(u32, i64, i64)>, BusError> {
        let rows: Vec<(i64, i64, i64)> = sqlx::query_as(
            "SELECT partition, MIN(\"offset\"), MAX(\"offset\") + 1 FROM bus_records \
             WHERE topic = $1 GROUP BY partition ORDER BY partition",
        )
        .bind(&topic.name)
        .fetch_all(self.store.reader())
        .await
        .map_err(StoreError::from)?;
        Ok(rows
            .into_iter()
            .map(|(p, lo, hi)| (p as u32, lo, hi))
            .collect())
    }

    /// The records of one partition of `topic` in `[from, to)`, in order.
    pub async fn read(
        &self,
        topic: &TopicSpec,
        partition: u32,
        from: i64,
        to: i64,
    ) -> Result<Vec<Record>, BusError> {
        let rows = sqlx::query_as::<_, Row>(&format!(
            "{ROWS} WHERE topic = $1 AND partition = $2 AND \"offset\" >= $3 AND \"offset\" < $4 \
             ORDER BY \"offset\""
        ))
        .bind(&topic.name)
        .bind(i64::from(partition))
        .bind(from)
        .bind(to)
        .fetch_all(self.store.reader())
        .await
        .map_err(StoreError::from)?;
        Ok(rows
            .into_iter()
            .map(|r| r.into_record(&topic.name))
            .collect())
    }

    /// Keeps only the latest record of each key of a compacted topic, a partition per
    /// statement: each statement holds the writer for a share of the topic, not all of
    /// it.
    pub async fn compact(&self, topic: &TopicSpec) -> Result<u64, BusError> {
        let mut removed = 0;
        for partition in 0..i64::from(topic.partitions) {
            // The latest record of a key is its highest offset in its one partition.
            removed += sqlx::query(
                "DELETE FROM bus_records WHERE topic = $1 AND partition = $2 AND \"offset\" NOT IN \
                 (SELECT MAX(\"offset\") FROM bus_records WHERE topic = $3 AND partition = $4 \
                  GROUP BY record_key)",
            )
            .bind(&topic.name)
            .bind(partition)
            .bind(&topic.name)
            .bind(partition)
            .execute(self.store.writer())
            .await
            .map_err(StoreError::from)?
            .rows_affected();
        }
        Ok(removed)
    }

    /// Removes records of a non-compacted topic that every group has consumed and that
    /// are older than `retention`, a partition at a time and at most [`TRIM_CHUNK`]
    /// records per statement. Records are appended in time order, so what goes is a
    /// run at the start of each partition: finding its end reads the records that go
    /// and one more, not every record held, and the writer is never held for long.
    /// (One statement over the whole topic read all of its records, every minute,
    /// holding the writer: with a few million held, longer than anyone waits for it.)
    pub async fn trim(&self, topic: &TopicSpec, retention: Duration) -> Result<u64, BusError> {
        let cutoff = now_ms() - retention.as_millis() as i64;
        let mut removed = 0;
        for partition in 0..i64::from(topic.partitions) {
            let young: Option<i64> = sqlx::query_scalar(
                "SELECT \"offset\" FROM bus_records WHERE topic = $1 AND partition = $2 \
                 AND timestamp_ms >= $3 ORDER BY \"offset\" LIMIT 1",
            )
            .bind(&topic.name)
            .bind(partition)
            .bind(cutoff)
            .fetch_optional(self.store.reader())
            .await
            .map_err(StoreError::from)?;
            let consumed: i64 = sqlx::query_scalar(
                "SELECT COALESCE(MIN(next_offset), 0) FROM bus_offsets \
                 WHERE topic = $1 AND partition = $2",
            )
            .bind(&topic.name)
            .bind(partition)
            .fetch_one(self.store.reader())
            .await
            .map_err(StoreError::from)?;
            let end = young.map_or(consumed, |y| y.min(consumed));
            loop {
                let first: Option<i64> = sqlx::query_scalar(
                    "SELECT MIN(\"offset\") FROM bus_records WHERE topic = $1 AND partition = $2",
                )
                .bind(&topic.name)
                .bind(partition)
                .fetch_one(self.store.reader())
                .await
                .map_err(StoreError::from)?;
                let Some(first) = first.filter(|f| *f < end) else {
                    break;
                };
                // The bounds were read before: a group cannot move back, and a record
                // once old stays old, so they still hold.
                removed += sqlx::query(
                    "DELETE FROM bus_records WHERE topic = $1 AND partition = $2 \
                     AND \"offset\" < $3",
                )
                .bind(&topic.name)
                .bind(partition)
                .bind(end.min(first + TRIM_CHUNK))
                .execute(self.store.writer())
                .await
                .map_err(StoreError::from)?
                .rows_affected();
            }
        }
        Ok(removed)
    }

    /// Records appended to `topic` so far, over all its partitions.
    async fn appended(&self, topic: &TopicSpec) -> Result<i64, BusError> {
        let appended: i64 = sqlx::query_scalar(
            // PostgreSQL sums BIGINTs as NUMERIC, which the Any driver does not read.
            "SELECT CAST(COALESCE(SUM(next_offset), 0) AS BIGINT) FROM bus_partitions WHERE topic = $1",
        )
        .bind(&topic.name)
        .fetch_one(self.store.reader())
        .await
        .map_err(StoreError::from)?;
        Ok(appended)
    }

    /// Records `topic` holds, over all its partitions.
    async fn held(&self, topic: &TopicSpec) -> Result<i64, BusError> {
        let held: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM bus_records WHERE topic = $1")
            .bind(&topic.name)
            .fetch_one(self.store.reader())
            .await
            .map_err(StoreError::from)?;
        Ok(held)
    }
}

/// Records a trim deletes per statement: each statement holds the writer.
const TRIM_CHUNK: i64 = 10_000;

/// New records a compacted topic takes before it is compacted again, at least: below
/// this, compacting every minute would cost more than the records it removes.
const COMPACT_AFTER_AT_LEAST: i64 = 10_000;

/// When each compacted topic was last compacted: the records appended to it by then
/// and those it held after. A topic is compacted again once it has taken as many new
/// records as it held (Kafka's `min.cleanable.dirty.ratio` of one half): a compaction
/// reads every record held, so compacting every minute regardless read millions of
/// records a minute, holding the writer, for topics whose keys rarely repeat.
#[derive(Debug, Default)]
struct Compactions(HashMap<String, (i64, i64)>);

impl Compactions {
    /// Compacts `topic` if it took enough new records since its last compaction, or
    /// since this process first looked; answers the records removed. A process does not
    /// compact at first sight: every restart would then compact every compacted topic
    /// in full, and a process restarted often would hold the writer for little gain.
    async fn maybe_compact(
        &mut self,
        log: &EmbeddedLog,
        topic: &TopicSpec,
    ) -> Result<u64, BusError> {
        let appended = log.appended(topic).await?;
        let Some((then, held)) = self.0.get(&topic.name) else {
            let held = log.held(topic).await?;
            self.0.insert(topic.name.clone(), (appended, held));
            return Ok(0);
        };
        if appended - then < (*held).max(COMPACT_AFTER_AT_LEAST) {
            return Ok(0);
        }
        let removed = log.compact(topic).await?;
        let held = log.held(topic).await?;
        self.0.insert(topic.name.clone(), (appended, held));
        Ok(removed)
    }
}

impl EmbeddedLog {
    /// Per partition of `topic`: the next offset to be written and the records held
    /// (fewer than the offset once records are trimmed or compacted away).
    pub async fn partition_ends(&self, topic: &str) -> Result<Vec<(u32, i64, i64)>, BusError> {
        let rows: Vec<(i64, i64, i64)> = sqlx::query_as(
            "SELECT p.partition, p.next_offset, \
             (SELECT COUNT(*) FROM bus_records r WHERE r.topic = p.topic AND r.partition = p.partition) \
             FROM bus_partitions p WHERE p.topic = $1 ORDER BY p.partition",
        )
        .bind(topic)
        .fetch_all(self.store.reader())
        .await
        .map_err(StoreError::from)?;
        Ok(rows
            .into_iter()
            .map(|(p, next, held)| (p as u32, next, held))
            .collect())
    }

    /// Per consumer group of `topic` and partition: the committed next offset.
    pub async fn group_offsets(&self, topic: &str) -> Result<Vec<(String, u32, i64)>, BusError> {
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT group_id, partition, next_offset FROM bus_offsets WHERE topic = $1 \
             ORDER BY group_id, partition",
        )
        .bind(topic)
        .fetch_all(self.store.reader())
        .await
        .map_err(StoreError::from)?;
        Ok(rows.into_iter().map(|(g, p, o)| (g, p as u32, o)).collect())
    }

    /// The latest `limit` records of `topic` over all its partitions, oldest first.
    pub async fn latest(&self, topic: &str, limit: usize) -> Result<Vec<Record>, BusError> {
        let mut rows = sqlx::query_as::<_, Row>(&format!(
            "{ROWS} WHERE topic = $1 ORDER BY timestamp_ms DESC, partition DESC, \"offset\" DESC LIMIT $2"
        ))
        .bind(topic)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.store.reader())
        .await
        .map_err(StoreError::from)?;
        rows.reverse();
        Ok(rows.into_iter().map(|r| r.into_record(topic)).collect())
    }
}

/// Keeps the embedded log small: every `every`, compacts the compacted topics and trims
/// records of the others that every group consumed more than `retention` ago. Runs
/// until `shutdown` turns true.
pub async fn maintain(
    log: EmbeddedLog,
    topics: Vec<TopicSpec>,
    every: Duration,
    retention: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut compactions = Compactions::default();
    while crate::clock::sleep_unless_stopped(every, &mut shutdown).await {
        for t in &topics {
            let result = if t.kept {
                // A topic of record: the history `claims replay` rebuilds from.
                continue;
            } else if t.compacted {
                compactions.maybe_compact(&log, t).await
            } else {
                log.trim(t, t.retention.unwrap_or(retention)).await
            };
            match result {
                Ok(0) => {}
                Ok(n) => {
                    tracing::debug!(topic = %t.name, removed = n, "Log maintenance removed records.")
                }
                Err(e) => tracing::warn!(topic = %t.name, error = %e, "Log maintenance failed."),
            }
        }
    }
}

/// Next offset to read per (topic, partition).
type Positions = HashMap<(String, u32), i64>;

/// One process's membership in a consumer group.
#[derive(Debug)]
pub struct EmbeddedConsumer {
    log: EmbeddedLog,
    group: String,
    topics: Vec<TopicSpec>,
    /// Next offset to read per (topic, partition): ahead of the committed offset by the
    /// records handed out and not yet committed.
    positions: Positions,
    /// When each topic's lease was last renewed by this consumer.
    leases: HashMap<String, Instant>,
    /// The partition each read starts at, advanced every read.
    rotation: u32,
    /// Leases taken afresh, and how many were reported.
    takes: u64,
    assignments: super::Assignments,
}

/// The columns of a [`Row`], for every read of records.
const ROWS: &str =
    "SELECT partition, \"offset\", record_key, value, timestamp_ms, codec FROM bus_records";

#[derive(sqlx::FromRow)]
struct Row {
    partition: i64,
    offset: i64,
    record_key: String,
    value: Vec<u8>,
    timestamp_ms: i64,
    codec: i64,
}

impl Row {
    fn into_record(self, topic: &str) -> Record {
        Record {
            topic: topic.to_owned(),
            partition: self.partition as u32,
            offset: self.offset,
            key: self.record_key,
            value: codec::published(self.codec, self.value),
            timestamp_ms: self.timestamp_ms,
        }
    }
}

impl EmbeddedConsumer {
    /// Up to `max` records from this consumer's positions, waiting up to `wait` for the
    /// first. The positions move past what it answers only when it answers: a read
    /// that fails part way (the store went away) hands nothing out and moves nothing,
    /// so the next poll reads those records again instead of passing them by.
    pub async fn poll(&mut self, max: usize, wait: Duration) -> Result<Vec<Record>, BusError> {
        let mut moved = Positions::new();
        let records = self.poll_from(&mut moved, max, wait).await?;
        self.positions.extend(moved);
        Ok(records)
    }

    /// [`Self::poll`], with the positions it moves kept in `moved`.
    async fn poll_from(
        &mut self,
        moved: &mut Positions,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Record>, BusError> {
        let deadline = Instant::now() + wait;
        let wakers: Vec<Arc<Notify>> = self
            .topics
            .iter()
            .map(|t| self.log.waker(&t.name))
            .collect();
        loop {
            // Register for wake-ups before reading, so a publish between the read and
            // the wait is not missed.
            let mut notified = enabled(&wakers);
            let mut records = self.read(moved, max).await?;
            if !records.is_empty() {
                let until = (Instant::now() + self.log.linger).min(deadline);
                while records.len() < LINGER_RECORDS.min(max / 4) && Instant::now() < until {
                    // As for the first read: wake-ups registered before each read.
                    let left = until.saturating_duration_since(Instant::now());
                    let _ = tokio::time::timeout(left, futures_select_all(notified)).await;
                    notified = enabled(&wakers);
                    let more = self.read(moved, max - records.len()).await?;
                    records.extend(more);
                }
                return Ok(records);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            let nap = (deadline - now).min(CROSS_PROCESS_POLL);
            let any = futures_select_all(notified);
            let _ = tokio::time::timeout(nap, any).await;
        }
    }

    /// Reads up to `max` records from the positions, as moved by this poll so far
    /// (`moved`, which it moves on).
    async fn read(&mut self, moved: &mut Positions, max: usize) -> Result<Vec<Record>, BusError> {
        let mut out = Vec::new();
        let topics = self.topics.clone();
        for topic in &topics {
            if !self.hold_lease(&topic.name, moved).await? {
                continue;
            }
            // An even share of the batch from each partition first, then what is left
            // from those that had more. A batch then spans one stretch of time across
            // the partitions rather than a long stretch of one: the claims it decides
            // were accepted together, so their rows share pages and each page is
            // rewritten once, not once per partition's batch. Starting at a rotating
            // partition keeps a busy one from starving the others.
            let start = self.rotation;
            self.rotation = self.rotation.wrapping_add(1);
            let share = (max - out.len()).div_ceil(topic.partitions as usize).max(1);
            let mut more = Vec::new();
            for i in 0..topic.partitions {
                let p = (start + i) % topic.partitions;
                if out.len() >= max {
                    break;
                }
                let want = share.min(max - out.len());
                if self.read_partition(moved, topic, p, want, &mut out).await? == want {
                    more.push(p);
                }
            }
            for p in more {
                if out.len() >= max {
                    break;
                }
                self.read_partition(moved, topic, p, max - out.len(), &mut out)
                    .await?;
            }
        }
        Ok(out)
    }

    /// Reads up to `limit` records of one partition onto `out`, from its position as
    /// this poll moved it, else as the consumer holds it, else the group's commit; moves
    /// it in `moved` and answers how many.
    async fn read_partition(
        &self,
        moved: &mut Positions,
        topic: &TopicSpec,
        p: u32,
        limit: usize,
        out: &mut Vec<Record>,
    ) -> Result<usize, BusError> {
        let key = (topic.name.clone(), p);
        let from = match moved.get(&key).or_else(|| self.positions.get(&key)) {
            Some(o) => *o,
            None => self.committed(&topic.name, p).await?,
        };
        let rows = sqlx::query_as::<_, Row>(&format!(
            "{ROWS} WHERE topic = $1 AND partition = $2 AND \"offset\" >= $3 ORDER BY \"offset\" LIMIT $4"
        ))
        .bind(&topic.name)
        .bind(i64::from(p))
        .bind(from)
        .bind(limit as i64)
        .fetch_all(self.log.store.reader())
        .await
        .map_err(StoreError::from)?;
        let next = rows.last().map(|r| r.offset + 1).unwrap_or(from);
        moved.insert(key, next);
        let n = rows.len();
        out.extend(rows.into_iter().map(|r| r.into_record(&topic.name)));
        Ok(n)
    }

    async fn committed(&self, topic: &str, partition: u32) -> Result<i64, BusError> {
        let o: Option<i64> = sqlx::query_scalar(
            "SELECT next_offset FROM bus_offsets WHERE group_id = $1 AND topic = $2 AND partition = $3",
        )
        .bind(&self.group)
        .bind(topic)
        .bind(i64::from(partition))
        .fetch_optional(self.log.store.reader())
        .await
        .map_err(StoreError::from)?;
        Ok(o.unwrap_or(0))
    }

    /// Takes or renews the lease on the group's topic; `false` while another live
    /// process holds it. On taking it afresh, positions (the consumer's and those this
    /// poll `moved`) restart from the committed offsets, since the previous holder may
    /// have moved them.
    async fn hold_lease(&mut self, topic: &str, moved: &mut Positions) -> Result<bool, BusError> {
        if let Some(at) = self.leases.get(topic) {
            if at.elapsed() < LEASE / 3 {
                return Ok(true);
            }
        }
        let now = now_ms();
        let held = sqlx::query(
            "INSERT INTO bus_leases (group_id, topic, owner, expires_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (group_id, topic) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at \
             WHERE bus_leases.owner = excluded.owner OR bus_leases.expires_at < $5",
        )
        .bind(&self.group)
        .bind(topic)
        .bind(&*self.log.owner)
        .bind(now + LEASE.as_millis() as i64)
        .bind(now)
        .execute(self.log.store.writer())
        .await
        .map_err(StoreError::from)?
        .rows_affected()
            == 1;
        let afresh = if held {
            let afresh = self
                .leases
                .insert(topic.to_owned(), Instant::now())
                .is_none();
            self.takes += u64::from(afresh);
            afresh
        } else {
            self.leases.remove(topic);
            true
        };
        if afresh {
            self.positions.retain(|(t, _), _| t != topic);
            moved.retain(|(t, _), _| t != topic);
        }
        Ok(held)
    }

    /// See [`super::Consumer::reassigned`]: a lease taken again after it was lost.
    pub fn reassigned(&mut self) -> bool {
        self.assignments.reassigned(self.takes)
    }

    /// Stores, per partition, the offset after the last of `records`.
    pub async fn commit(&mut self, records: &[Record]) -> Result<(), BusError> {
        self.publish_and_commit(&[], records).await
    }

    /// Appends `outputs` and commits `records` in one transaction: see
    /// [`GroupWriter::publish_and_commit`].
    pub async fn publish_and_commit(
        &mut self,
        outputs: &[(TopicSpec, Vec<Message>)],
        records: &[Record],
    ) -> Result<(), BusError> {
        self.writer().publish_and_commit(outputs, records).await
    }

    /// What commits this group's progress, owned: a batch's transaction may then run
    /// while this consumer reads the next batch.
    pub fn writer(&self) -> GroupWriter {
        GroupWriter {
            log: self.log.clone(),
            group: self.group.clone(),
        }
    }
}

/// The writing half of a consumer: publishes a batch's outputs and moves the group past
/// the batch. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GroupWriter {
    log: EmbeddedLog,
    group: String,
}

impl GroupWriter {
    /// Appends `outputs` and commits `records` in one transaction: the outputs of a
    /// batch and the group's progress past it become durable together, so a crash never
    /// leaves outputs published for a batch that will be processed again. One fsync per
    /// batch instead of two.
    pub async fn publish_and_commit(
        &self,
        outputs: &[(TopicSpec, Vec<Message>)],
        records: &[Record],
    ) -> Result<(), BusError> {
        let mut attempt_create = true;
        loop {
            let mut tx = self.begin().await?;
            match self.publish_in(&mut tx, outputs, records).await {
                Err(BusError::UnknownTopic(name)) if attempt_create => {
                    drop(tx);
                    if let Some((topic, _)) = outputs.iter().find(|(t, _)| t.name == name) {
                        self.log.ensure_topic(topic).await?;
                    }
                    attempt_create = false;
                }
                Err(e) => return Err(e),
                Ok(()) => return self.finish(tx, outputs).await,
            }
        }
    }

    /// A transaction on the store's writer: [`Self::publish_in`] with the caller's own
    /// rows, then [`Self::finish`].
    pub async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, BusError> {
        // The chain's commit reads the decisions' audit records before it writes.
        Ok(self.log.store.begin_write().await?)
    }

    /// Appends `outputs` and commits `records` inside `tx`: the batch's outputs and
    /// progress become durable with the caller's rows in it, or none do.
    pub async fn publish_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        outputs: &[(TopicSpec, Vec<Message>)],
        records: &[Record],
    ) -> Result<(), BusError> {
        self.publish_packed_in(tx, outputs, &[], records).await
    }

    /// [`Self::publish_in`], with the outputs' values packed ahead: `packed[i]` made of
    /// `outputs[i]`'s by [`codec::pack_all`]; empty to pack them here.
    pub async fn publish_packed_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        outputs: &[(TopicSpec, Vec<Message>)],
        packed: &[codec::Packed],
        records: &[Record],
    ) -> Result<(), BusError> {
        for (i, (topic, messages)) in outputs.iter().enumerate() {
            self.log
                .append_packed_in(tx, topic, messages, packed.get(i))
                .await?;
        }
        self.commit_in(tx, records).await
    }

    /// Commits `tx`, then wakes this process's consumers of the topics it appended to.
    pub async fn finish(
        &self,
        tx: sqlx::Transaction<'static, sqlx::Any>,
        outputs: &[(TopicSpec, Vec<Message>)],
    ) -> Result<(), BusError> {
        tx.commit().await.map_err(StoreError::from)?;
        for (topic, _) in outputs {
            self.log.wake(&topic.name);
        }
        Ok(())
    }

    async fn commit_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        records: &[Record],
    ) -> Result<(), BusError> {
        let mut next: HashMap<(&str, u32), i64> = HashMap::new();
        for r in records {
            let e = next.entry((r.topic.as_str(), r.partition)).or_insert(0);
            *e = (*e).max(r.offset + 1);
        }
        if next.is_empty() {
            return Ok(());
        }
        // Never move a group backwards (a late commit of an older batch).
        let sql = format!(
            "INSERT INTO bus_offsets (group_id, topic, partition, next_offset) VALUES {} \
             ON CONFLICT (group_id, topic, partition) DO UPDATE SET next_offset = excluded.next_offset \
             WHERE bus_offsets.next_offset < excluded.next_offset",
            values_list(self.log.store.backend(), next.len(), 4)
        );
        let mut q = sqlx::query(&sql);
        for ((topic, p), o) in next {
            q = q.bind(&self.group).bind(topic).bind(i64::from(p)).bind(o);
        }
        q.execute(&mut **tx).await.map_err(StoreError::from)?;
        Ok(())
    }
}

/// Wake-ups for the next publish to any of `wakers`' topics, registered now.
fn enabled(wakers: &[Arc<Notify>]) -> Vec<std::pin::Pin<Box<tokio::sync::futures::Notified<'_>>>> {
    let mut notified: Vec<_> = wakers.iter().map(|w| Box::pin(w.notified())).collect();
    for n in &mut notified {
        n.as_mut().enable();
    }
    notified
}

/// Completes when any of the futures does.
async fn futures_select_all<F: std::future::Future<Output = ()> + Unpin>(mut futs: Vec<F>) {
    std::future::poll_fn(|cx| {
        for f in &mut futs {
            if std::pin::Pin::new(f).poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    })
    .await;
}
