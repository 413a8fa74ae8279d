//! The bus: keyed records in partitioned topics, read by consumer groups that commit
//! offsets only after processing, with compacted topics for state. The semantics are
//! Kafka's, so that the Kafka implementation slots in behind the same types; the first
//! implementation is the embedded log, durable in the store.
//!
//! A stage's loop is: `poll` a batch, process it, then `publish_and_commit`: every
//! output and the group's progress past the batch become durable together. A crash
//! before that redelivers the batch; stages are idempotent all the same, since a stage's
//! own store writes (snapshots) commit separately.

pub mod embedded;
mod error;
mod inspect;
mod record;
mod topic;

use std::time::Duration;

pub use embedded::{EmbeddedConsumer, EmbeddedLog};
pub use error::BusError;
pub use inspect::{topic_info, GroupLag, RecordView, TopicInfo};
pub use record::{partition_for, Message, Record};
pub use topic::TopicSpec;

/// The bus a process runs on, chosen by configuration.
#[derive(Debug, Clone)]
pub enum Bus {
    Embedded(EmbeddedLog),
}

/// A member of a consumer group.
#[derive(Debug)]
pub enum Consumer {
    Embedded(EmbeddedConsumer),
}

impl Bus {
    /// Appends the messages, each to the partition its key hashes to, in order per key.
    /// Durable when it returns.
    pub async fn publish(&self, topic: &TopicSpec, messages: &[Message]) -> Result<(), BusError> {
        match self {
            Bus::Embedded(log) => log.publish(topic, messages).await.map(|_| ()),
        }
    }

    /// Every record of `topic` from the beginning, in order per partition: how state
    /// stores are rebuilt from their compacted topics.
    pub async fn scan(&self, topic: &TopicSpec) -> Result<Vec<Record>, BusError> {
        match self {
            Bus::Embedded(log) => log.scan(topic).await,
        }
    }

    /// Joins consumer group `group` on `topics`, starting at the group's committed
    /// offsets (the beginning for a new group).
    pub async fn consumer(&self, group: &str, topics: &[TopicSpec]) -> Result<Consumer, BusError> {
        match self {
            Bus::Embedded(log) => Ok(Consumer::Embedded(log.consumer(group, topics).await?)),
        }
    }
}

impl Consumer {
    /// Up to `max` records, waiting up to `wait` for the first.
    pub async fn poll(&mut self, max: usize, wait: Duration) -> Result<Vec<Record>, BusError> {
        match self {
            Consumer::Embedded(c) => c.poll(max, wait).await,
        }
    }

    /// Marks these records processed: the group resumes after them.
    pub async fn commit(&mut self, records: &[Record]) -> Result<(), BusError> {
        match self {
            Consumer::Embedded(c) => c.commit(records).await,
        }
    }

    /// Publishes `outputs` (messages per topic, in order per key) and marks `records`
    /// processed, atomically: either both are durable or neither is. This is Kafka's
    /// transactional produce with the consumer's offsets in the transaction; on the
    /// embedded log it is one store transaction.
    pub async fn publish_and_commit(
        &mut self,
        outputs: &[(TopicSpec, Vec<Message>)],
        records: &[Record],
    ) -> Result<(), BusError> {
        match self {
            Consumer::Embedded(c) => c.publish_and_commit(outputs, records).await,
        }
    }
}
