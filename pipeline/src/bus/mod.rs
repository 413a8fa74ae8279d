//! The bus: keyed records in partitioned topics, read by consumer groups that commit
//! offsets only after processing, with compacted topics for state. The semantics are
//! Kafka's, so that the Kafka implementation slots in behind the same types; the first
//! implementation is the embedded log, durable in the store.
//!
//! A stage's loop is: `poll` a batch, process it, then `publish_and_commit`: every
//! output and the group's progress past the batch become durable together. A crash
//! before that redelivers the batch; stages are idempotent all the same, since a stage's
//! own store writes (snapshots) commit separately. On Kafka the two are not atomic
//! (outputs are acknowledged first, then the offsets committed), which the same
//! idempotence absorbs.
//!
//! Work that must commit together with rows of the store (an accepted claim and its
//! command) uses [`Bus::append_in`] inside the store transaction, then [`Bus::wake`].

mod codec;
pub mod embedded;
mod error;
mod inspect;
pub mod kafka;
pub mod outbox;
mod pages;
mod record;
pub mod registry;
mod topic;
mod wire;

use std::time::Duration;

pub use codec::{pack_all, Packed};
pub use embedded::{EmbeddedConsumer, EmbeddedLog, GroupWriter};
pub use error::BusError;
pub use inspect::{topic_info, GroupLag, RecordView, TopicInfo};
pub use kafka::{KafkaBus, KafkaConsumer, KafkaSettings};
pub use pages::Pages;
pub use record::{partition_for, Message, Record};
pub use topic::TopicSpec;

/// The bus a process runs on, chosen by configuration.
#[derive(Debug, Clone)]
pub enum Bus {
    Embedded(EmbeddedLog),
    Kafka(KafkaBus),
}

/// A member of a consumer group.
#[derive(Debug)]
pub enum Consumer {
    Embedded(EmbeddedConsumer),
    Kafka(KafkaConsumer),
}

impl Bus {
    /// Whether `topic`'s records read back as the JSON text they were published as: on
    /// the embedded log, always; on Kafka, on a topic without a schema. (A topic with
    /// one carries Avro, and its records' JSON is written anew on reading.)
    pub fn reads_as_published(&self, topic: &TopicSpec) -> bool {
        match self {
            Bus::Embedded(_) => true,
            Bus::Kafka(_) => topic.schema.is_none(),
        }
    }

    /// Appends the messages, each to the partition its key hashes to, in order per key.
    /// Durable when it returns.
    pub async fn publish(&self, topic: &TopicSpec, messages: &[Message]) -> Result<(), BusError> {
        match self {
            Bus::Embedded(log) => log.publish(topic, messages).await.map(|_| ()),
            Bus::Kafka(k) => k.publish(topic, messages).await,
        }
    }

    /// Creates the topics that do not exist yet.
    pub async fn ensure_topics(&self, topics: &[TopicSpec]) -> Result<(), BusError> {
        match self {
            Bus::Embedded(log) => log.ensure_topics(topics).await,
            Bus::Kafka(k) => k.ensure_topics(topics).await,
        }
    }

    /// Appends `messages` inside the caller's store transaction, so that they are
    /// published exactly when the caller's rows commit: into the embedded log, or into
    /// the outbox that is relayed to Kafka. The caller commits, then calls [`Self::wake`].
    pub async fn append_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        topic: &TopicSpec,
        messages: &[Message],
    ) -> Result<(), BusError> {
        if messages.is_empty() {
            return Ok(());
        }
        match self {
            Bus::Embedded(log) => log.append_in(tx, topic, messages).await.map(|_| ()),
            Bus::Kafka(k) => outbox::stage_in(tx, k, topic, messages).await,
        }
    }

    /// After a transaction that called [`Self::append_in`] committed: wakes this
    /// process's consumers of `topic` (embedded log) or the outbox relay (Kafka).
    pub fn wake(&self, topic: &str) {
        match self {
            Bus::Embedded(log) => log.wake(topic),
            Bus::Kafka(k) => k.outbox_written(),
        }
    }

    /// Every record of `topic` from the beginning, in order per partition: how state
    /// stores are rebuilt from their compacted topics.
    pub async fn scan(&self, topic: &TopicSpec) -> Result<Vec<Record>, BusError> {
        match self {
            Bus::Embedded(log) => log.scan(topic).await,
            Bus::Kafka(k) => k.scan(topic).await,
        }
    }

    /// Each partition of `topic` that holds records, as (partition, first offset, offset
    /// after the last): with [`Self::read`], how a topic is read a page at a time
    /// outside any consumer group (`claims replay`).
    pub async fn extent(&self, topic: &TopicSpec) -> Result<Vec<(u32, i64, i64)>, BusError> {
        match self {
            Bus::Embedded(log) => log.extent(topic).await,
            Bus::Kafka(k) => Ok(k
                .watermarks(topic)
                .await?
                .into_iter()
                .filter(|(_, lo, hi)| hi > lo)
                .collect()),
        }
    }

    /// The records of each listed (partition, from, to) of `topic`, offsets in
    /// `[from, to)`: each partition's in order, the partitions in number order when
    /// listed so.
    pub async fn read_ranges(
        &self,
        topic: &TopicSpec,
        ranges: Vec<(u32, i64, i64)>,
    ) -> Result<Vec<Record>, BusError> {
        match self {
            Bus::Embedded(log) => {
                let mut out = Vec::new();
                for (partition, from, to) in ranges {
                    out.extend(log.read(topic, partition, from, to).await?);
                }
                Ok(out)
            }
            Bus::Kafka(k) => k.read_ranges(topic, ranges).await,
        }
    }

    /// Joins consumer group `group` on `topics`, starting at the group's committed
    /// offsets (the beginning for a new group).
    pub async fn consumer(&self, group: &str, topics: &[TopicSpec]) -> Result<Consumer, BusError> {
        match self {
            Bus::Embedded(log) => Ok(Consumer::Embedded(log.consumer(group, topics).await?)),
            Bus::Kafka(k) => Ok(Consumer::Kafka(k.consumer(group, topics).await?)),
        }
    }
}

impl Consumer {
    /// Up to `max` records, waiting up to `wait` for the first.
    pub async fn poll(&mut self, max: usize, wait: Duration) -> Result<Vec<Record>, BusError> {
        match self {
            Consumer::Embedded(c) => c.poll(max, wait).await,
            Consumer::Kafka(c) => c.poll(max, wait).await,
        }
    }

    /// Whether partitions came to this consumer since the last call, other than its
    /// first assignment: another process had them, and may have moved state on that
    /// this process keeps in memory.
    pub fn reassigned(&mut self) -> bool {
        match self {
            Consumer::Embedded(c) => c.reassigned(),
            Consumer::Kafka(c) => c.reassigned(),
        }
    }

    /// Why this consumer can no longer take part in its group, if it cannot: on Kafka,
    /// a fatal error of its client (another member with its `group.instance.id`
    /// fenced it, as a broker that restarted and lost the group's members may believe).
    /// Such a consumer never recovers; the runner joins the group afresh.
    pub fn lost(&self) -> Option<String> {
        match self {
            Consumer::Embedded(_) => None,
            Consumer::Kafka(c) => c.lost(),
        }
    }

    /// Leaves the group at once, its partitions going to the other members now rather
    /// than when its session runs out. On Kafka, `Err` when the client did not finish
    /// closing in time; it goes on closing on a thread of its own.
    pub async fn close(self) -> Result<(), BusError> {
        match self {
            Consumer::Embedded(_) => Ok(()),
            Consumer::Kafka(c) => c.close().await,
        }
    }

    /// Marks these records processed: the group resumes after them.
    pub async fn commit(&mut self, records: &[Record]) -> Result<(), BusError> {
        match self {
            Consumer::Embedded(c) => c.commit(records).await,
            Consumer::Kafka(c) => c.commit(records).await,
        }
    }

    /// Publishes `outputs` (messages per topic, in order per key) and marks `records`
    /// processed. On the embedded log this is one store transaction: both are durable or
    /// neither is. On Kafka the outputs are acknowledged before the offsets are stored,
    /// so a crash in between redelivers the batch to idempotent stages.
    pub async fn publish_and_commit(
        &mut self,
        outputs: &[(TopicSpec, Vec<Message>)],
        records: &[Record],
    ) -> Result<(), BusError> {
        match self {
            Consumer::Embedded(c) => c.publish_and_commit(outputs, records).await,
            Consumer::Kafka(c) => c.publish_and_commit(outputs, records).await,
        }
    }
}

/// A consumer's count of partition assignments as last reported.
#[derive(Debug, Default)]
pub(crate) struct Assignments {
    reported: u64,
}

impl Assignments {
    /// Whether `count` assignments so far include one after the first that was not
    /// reported yet.
    pub(crate) fn reassigned(&mut self, count: u64) -> bool {
        let new = count > self.reported.max(1);
        self.reported = count;
        new
    }
}
