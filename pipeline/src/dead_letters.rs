//! The dead-letter topic (`claims.dead-letter`, contract part 2: Operations and
//! analysts): records a stage could not process and never will as they are (a record
//! that does not decode, a claim whose rulebook is missing or does not compile, stored
//! data that does not parse), parked with the stage, the error and the record's source
//! position, so that the stage goes on with the next record instead of stalling its
//! partition or silently defaulting.
//!
//! Redriving puts every parked record not yet redriven back on its source topic, as it
//! was read, for the stage to try again once the cause is fixed. What was redriven is
//! the progress of the consumer group [`REDRIVE_GROUP`] on the dead-letter topic, so a
//! record is redriven once; should the redrive stop between publishing and committing,
//! the next one publishes those records again, which the stages take as the redelivery
//! they already make harmless.

use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::bus::{Bus, BusError, Message, Record, TopicSpec};
use crate::clock::{ms_to_rfc3339, now_ms};
use crate::topics::Topics;

/// The consumer group whose committed offset marks what was redriven.
pub const REDRIVE_GROUP: &str = "dead-letters-redrive";

/// A parked record, as the dead-letter topic's value carries it (JSON on every bus).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// The stage (its consumer group) that parked it.
    pub stage: String,
    /// Why it cannot be processed.
    pub error: String,
    /// Where it was read.
    pub source: Source,
    pub key: String,
    /// The record's value as it was read, base64: a record that did not decode need not
    /// be text.
    pub value: String,
    pub parked_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub topic: String,
    pub partition: u32,
    pub offset: i64,
}

impl DeadLetter {
    pub fn of(stage: &str, error: &str, record: &Record) -> Self {
        Self {
            stage: stage.to_owned(),
            error: error.to_owned(),
            source: Source {
                topic: record.topic.clone(),
                partition: record.partition,
                offset: record.offset,
            },
            key: record.key.clone(),
            value: base64::engine::general_purpose::STANDARD.encode(&record.value),
            parked_at: ms_to_rfc3339(now_ms()),
        }
    }

    /// The dead-letter topic's record: keyed like the parked one.
    pub fn message(&self) -> Message {
        Message {
            key: self.key.clone(),
            // A struct of strings and numbers always serialises.
            value: serde_json::to_vec(self).unwrap_or_default(),
        }
    }

    /// A record of the dead-letter topic.
    fn read(r: &Record) -> Result<Self, DeadLetterError> {
        serde_json::from_slice(&r.value)
            .map_err(|e| DeadLetterError::Unreadable(format!("offset {}: {e}", r.offset)))
    }

    /// The parked record's value as it was read.
    pub fn original_value(&self) -> Result<Vec<u8>, DeadLetterError> {
        base64::engine::general_purpose::STANDARD
            .decode(&self.value)
            .map_err(|e| DeadLetterError::Unreadable(format!("value: {e}")))
    }
}

/// A parked record with its place on the dead-letter topic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parked {
    /// Its offset on the dead-letter topic: what `show` takes.
    pub id: i64,
    /// Put back on its source topic already.
    pub redriven: bool,
    #[serde(flatten)]
    pub letter: DeadLetter,
}

#[derive(Debug, thiserror::Error)]
pub enum DeadLetterError {
    #[error(transparent)]
    Bus(#[from] BusError),
    #[error("a dead-letter record is unreadable: {0}")]
    Unreadable(String),
    #[error("the source topic {0} is not one of this deployment's")]
    UnknownTopic(String),
}

/// Every record on the dead-letter topic, oldest first, each marked redriven or not.
pub async fn list(bus: &Bus, topics: &Topics) -> Result<Vec<Parked>, DeadLetterError> {
    let topic = &topics.dead_letter;
    let redriven_below = redriven_below(bus, topic).await?;
    bus.scan(topic)
        .await?
        .into_iter()
        .map(|r| {
            let letter = DeadLetter::read(&r)?;
            Ok(Parked {
                id: r.offset,
                redriven: r.offset < redriven_below,
                letter,
            })
        })
        .collect()
}

/// Records ever parked (the dead-letter topic's end offset): `claims_dead_letters_total`.
pub async fn total(bus: &Bus, topics: &Topics) -> Result<i64, BusError> {
    let info = bus
        .describe(std::slice::from_ref(&topics.dead_letter))
        .await?;
    Ok(info.first().map_or(0, |i| i.end_offset_total))
}

/// The offset below which the dead-letter topic was redriven.
async fn redriven_below(bus: &Bus, topic: &TopicSpec) -> Result<i64, BusError> {
    let info = bus.describe(std::slice::from_ref(topic)).await?;
    Ok(info
        .first()
        .and_then(|i| i.groups.iter().find(|g| g.group.ends_with(REDRIVE_GROUP)))
        .and_then(|g| g.committed.first().copied())
        .unwrap_or(0))
}

/// Puts every parked record not yet redriven back on its source topic, in the order
/// parked; answers them.
pub async fn redrive(bus: &Bus, topics: &Topics) -> Result<Vec<Parked>, DeadLetterError> {
    let all = topics.all();
    let pending = list(bus, topics)
        .await?
        .iter()
        .filter(|p| !p.redriven)
        .count();
    let mut consumer = bus
        .consumer(REDRIVE_GROUP, std::slice::from_ref(&topics.dead_letter))
        .await?;
    let mut redriven = Vec::new();
    // On Kafka the group's partition comes a moment after joining: wait for what is
    // pending, within bounds.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while redriven.len() < pending && tokio::time::Instant::now() < deadline {
        let batch = consumer.poll(500, Duration::from_secs(1)).await?;
        if batch.is_empty() {
            continue;
        }
        for r in &batch {
            let letter = DeadLetter::read(r)?;
            let source = all
                .iter()
                .find(|t| t.name == letter.source.topic)
                .ok_or_else(|| DeadLetterError::UnknownTopic(letter.source.topic.clone()))?;
            let message = Message {
                key: letter.key.clone(),
                value: letter.original_value()?,
            };
            bus.publish(source, &[message]).await?;
            redriven.push(Parked {
                id: r.offset,
                redriven: true,
                letter,
            });
        }
        consumer.commit(&batch).await?;
    }
    if let Err(e) = consumer.close().await {
        tracing::warn!(error = %e, "The redrive's consumer did not close cleanly.");
    }
    Ok(redriven)
}
