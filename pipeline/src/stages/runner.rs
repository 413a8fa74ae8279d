//! Drives a stage on the bus without loss: a batch's outputs and its offsets commit
//! together, so the group moves past a batch exactly when its outputs are durable.
//! Failures are classified by how the runner reacts ([`StageError`]):
//! - transient (the store or the bus did not answer): the same batch is retried with
//!   backoff, so the partition waits rather than skipping work;
//! - poison (a record that can never succeed as it is: it does not decode, its rulebook
//!   is missing or does not compile, stored data it needs is corrupt): the batch is
//!   handled again a record at a time, and each record that fails so is parked on the
//!   dead-letter topic with the stage, the error and its source position
//!   ([`crate::dead_letters`]), and the stage goes on with the next;
//! - fatal (the process cannot work, such as a database of an unknown schema): the
//!   stage stops the process with the reason.

use std::time::Duration;

use tokio::sync::watch;

use crate::bus::{Bus, BusError, Consumer, Message, Record, TopicSpec};
use crate::dead_letters::DeadLetter;
use crate::retry::backoff;
use crate::store::StoreError;

/// Stage failures, by how the runner reacts.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// A record of the batch can never succeed as it is: parked, and the stage goes on.
    #[error("{0}")]
    Poison(String),
    /// Worth retrying: the store or the bus did not answer.
    #[error("transient: {0}")]
    Transient(String),
    /// The process cannot go on.
    #[error("fatal: {0}")]
    Fatal(String),
}

impl From<BusError> for StageError {
    fn from(e: BusError) -> Self {
        StageError::Transient(e.to_string())
    }
}

impl From<StoreError> for StageError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Corrupt(_) => StageError::Poison(e.to_string()),
            StoreError::Migration(_) => StageError::Fatal(e.to_string()),
            _ => StageError::Transient(e.to_string()),
        }
    }
}

/// What a stage publishes for a batch: messages per topic.
pub type Outputs = Vec<(TopicSpec, Message)>;

/// A stage: the consumer group it forms, its input topic, and how it turns a batch into
/// outputs. `handle` gathers the batch's state (I/O) and calls the stage's pure
/// `process` for each record.
pub trait Stage: Send + 'static {
    /// The consumer group; one name per stage.
    fn name(&self) -> &'static str;
    fn input(&self) -> TopicSpec;
    /// Partitions came to this process from another after it started, which may have
    /// moved on state this stage keeps in memory: rebuild it. Most stages keep none.
    fn reassigned(
        &mut self,
        _bus: &Bus,
    ) -> impl std::future::Future<Output = Result<(), StageError>> + Send {
        async { Ok(()) }
    }
    /// Turns decoded records into outputs; `Err` retries the whole batch.
    fn handle(
        &mut self,
        batch: &[Record],
    ) -> impl std::future::Future<Output = Result<Outputs, StageError>> + Send;
    /// Handles the batch and publishes its outputs with its offsets; `Err` retries the
    /// whole batch. A stage that writes store rows of its own in the same transaction
    /// (the fused chain) overrides it.
    fn handle_and_commit(
        &mut self,
        batch: &[Record],
        consumer: &mut Consumer,
    ) -> impl std::future::Future<Output = Result<(), StageError>> + Send {
        handle_then_publish(self, batch, consumer)
    }
    /// Waits until every batch handed to [`Self::handle_and_commit`] is committed: a
    /// stage that commits a batch while it handles the next (the fused chain) finishes
    /// before the runner stops. Most stages commit before they return.
    fn settle(&mut self) -> impl std::future::Future<Output = ()> + Send {
        async {}
    }
}

/// [`Stage::handle_and_commit`] as most stages do it: the outputs of `handle`, published
/// with the batch's offsets.
pub(crate) async fn handle_then_publish<S: Stage + ?Sized>(
    stage: &mut S,
    batch: &[Record],
    consumer: &mut Consumer,
) -> Result<(), StageError> {
    let started = std::time::Instant::now();
    let outputs = stage.handle(batch).await?;
    let handled = started.elapsed();
    consumer
        .publish_and_commit(&by_topic(outputs), batch)
        .await?;
    tracing::debug!(stage = stage.name(), records = batch.len(), ?handled, committed = ?started.elapsed() - handled, "Batch done.");
    Ok(())
}

/// Runs `stage` until `shutdown` turns true; finishes the batch in hand first. Parks
/// poison records on `dead_letter`. Answers a fatal error.
pub async fn run<S: Stage>(
    mut stage: S,
    bus: Bus,
    batch_size: usize,
    dead_letter: TopicSpec,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), StageError> {
    let Some(mut consumer) = join(&stage, &bus, &mut shutdown).await else {
        return Ok(());
    };
    loop {
        if *shutdown.borrow() {
            break;
        }
        let batch = tokio::select! {
            polled = consumer.poll(batch_size, Duration::from_secs(1)) => polled,
            _ = shutdown.changed() => break,
        };
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(stage = stage.name(), error = %e, "Polling failed; retrying.");
                if consumer.lost().is_none() {
                    tokio::time::sleep(backoff(3)).await;
                    continue;
                }
                Vec::new()
            }
        };
        if let Some(why) = consumer.lost() {
            // Nothing of the batch in hand is committed: its records go to whichever
            // member has their partitions once this one has joined again.
            tracing::error!(stage = stage.name(), reason = %why, "The consumer was put out of its group for good; joining it afresh.");
            stage.settle().await;
            // A fenced client cannot leave the group; it closes on a thread of its own.
            drop(consumer);
            let Some(fresh) = join(&stage, &bus, &mut shutdown).await else {
                return Ok(());
            };
            consumer = fresh;
            continue;
        }
        if batch.is_empty() {
            continue;
        }
        // Before the batch, which may come from the partitions just taken over.
        if consumer.reassigned() {
            let mut attempt = 0;
            loop {
                match stage.reassigned(&bus).await {
                    Ok(()) => break,
                    Err(StageError::Fatal(e)) => return Err(StageError::Fatal(e)),
                    Err(e) => {
                        tracing::warn!(stage = stage.name(), error = %e, "Restoring state failed; retrying.");
                        tokio::time::sleep(backoff(attempt)).await;
                        attempt += 1;
                    }
                }
            }
        }
        match until_done(&mut stage, &batch, &mut consumer).await? {
            Done::Committed | Done::Lost => {}
            Done::Poison(poison) => {
                tracing::warn!(stage = stage.name(), records = batch.len(), error = %poison, "A batch holds a record that cannot be processed; handling its records one at a time.");
                stage.settle().await;
                for record in &batch {
                    let one = std::slice::from_ref(record);
                    match until_done(&mut stage, one, &mut consumer).await? {
                        Done::Committed => {}
                        Done::Lost => break,
                        Done::Poison(poison) => {
                            stage.settle().await;
                            park(stage.name(), &poison, record, &dead_letter, &mut consumer).await;
                        }
                    }
                }
            }
        }
    }
    stage.settle().await;
    leave(stage.name(), consumer).await;
    Ok(())
}

/// Closes `consumer`, its partitions going to the group's other members at once.
async fn leave(stage: &str, consumer: Consumer) {
    if let Err(e) = consumer.close().await {
        tracing::warn!(stage, error = %e, "Leaving the group did not finish; its partitions move once its session runs out.");
    }
}

/// Joins `stage`'s consumer group, retrying with backoff; `None` once `shutdown` turns.
async fn join<S: Stage>(
    stage: &S,
    bus: &Bus,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<Consumer> {
    let mut attempt = 0;
    loop {
        match bus.consumer(stage.name(), &[stage.input()]).await {
            Ok(c) => return Some(c),
            Err(e) => {
                tracing::warn!(stage = stage.name(), error = %e, attempt, "Joining the group failed; retrying.");
                tokio::select! {
                    _ = tokio::time::sleep(backoff(attempt)) => attempt += 1,
                    _ = shutdown.changed() => return None,
                }
            }
        }
    }
}

/// How handing a batch to its stage ended.
enum Done {
    /// Its outputs and offsets are committed.
    Committed,
    /// A record of it can never succeed as it is, for this reason.
    Poison(String),
    /// The consumer was put out of its group ([`Consumer::lost`]): nothing of the batch
    /// is committed, and the runner joins again.
    Lost,
}

/// Handles and commits `batch`, retrying transient failures with backoff until it is
/// committed, a record of it is poison, or the consumer is lost; `Err` when fatal.
async fn until_done<S: Stage>(
    stage: &mut S,
    batch: &[Record],
    consumer: &mut Consumer,
) -> Result<Done, StageError> {
    let mut attempt = 0;
    loop {
        match stage.handle_and_commit(batch, consumer).await {
            Ok(()) => return Ok(Done::Committed),
            Err(StageError::Poison(reason)) => return Ok(Done::Poison(reason)),
            Err(StageError::Fatal(e)) => return Err(StageError::Fatal(e)),
            Err(StageError::Transient(_)) if consumer.lost().is_some() => return Ok(Done::Lost),
            Err(StageError::Transient(e)) => {
                tracing::warn!(stage = stage.name(), error = %e, attempt, "Batch failed; retrying.");
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
        }
    }
}

/// Puts `record` on the dead-letter topic with why, and moves the group past it, in one
/// commit; retried until done, as the partition cannot go on before.
async fn park(
    stage: &str,
    reason: &str,
    record: &Record,
    dead_letter: &TopicSpec,
    consumer: &mut Consumer,
) {
    tracing::error!(stage, topic = %record.topic, partition = record.partition, offset = record.offset, key = %record.key, error = %reason, "Parking a record on the dead-letter topic.");
    let letter = DeadLetter::of(stage, reason, record).message();
    let outputs = [(dead_letter.clone(), vec![letter])];
    let mut attempt = 0;
    while let Err(e) = consumer
        .publish_and_commit(&outputs, std::slice::from_ref(record))
        .await
    {
        tracing::warn!(stage, error = %e, attempt, "Parking a record failed; retrying.");
        tokio::time::sleep(backoff(attempt)).await;
        attempt += 1;
    }
}

/// Groups outputs by topic, keeping their order within each topic.
pub(crate) fn by_topic(outputs: Outputs) -> Vec<(TopicSpec, Vec<Message>)> {
    let mut by_topic: Vec<(TopicSpec, Vec<Message>)> = Vec::new();
    for (topic, m) in outputs {
        match by_topic.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, ms)) => ms.push(m),
            None => by_topic.push((topic, vec![m])),
        }
    }
    by_topic
}

/// Decodes a record's JSON value; a record that does not decode is reported for the
/// dead-letter topic instead of stalling the stage.
pub fn decode<T: serde::de::DeserializeOwned>(
    stage: &str,
    r: &Record,
    dead: &TopicSpec,
    out: &mut Outputs,
) -> Option<T> {
    match serde_json::from_slice(&r.value) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::error!(stage, topic = %r.topic, partition = r.partition, offset = r.offset, error = %e, "Parking an undecodable record.");
            let reason = format!("the record does not decode: {e}");
            out.push((dead.clone(), DeadLetter::of(stage, &reason, r).message()));
            None
        }
    }
}

/// Decodes every record of a batch with [`decode`], parking the undecodable ones.
pub fn decode_all<T: serde::de::DeserializeOwned>(
    stage: &str,
    batch: &[Record],
    dead: &TopicSpec,
    out: &mut Outputs,
) -> Vec<T> {
    batch
        .iter()
        .filter_map(|r| decode(stage, r, dead, out))
        .collect()
}

pub fn encode<T: serde::Serialize>(
    topic: &TopicSpec,
    key: String,
    value: &T,
) -> (TopicSpec, Message) {
    (topic.clone(), message(key, value))
}

/// A value as a record's JSON, under `key`.
pub fn message<T: serde::Serialize>(key: String, value: &T) -> Message {
    // serde_json fails only on a map whose keys are not strings or a `Serialize` that
    // errs; no record type has either, so a failure is a bug that must not publish an
    // empty record.
    let value = serde_json::to_vec(value)
        .unwrap_or_else(|e| panic!("a record of key {key} does not serialise: {e}"));
    Message { key, value }
}
