//! The fused chain: validate → rules → fraud → decide (→ snapshot) on one batch in
//! memory, for the embedded log when one process runs those stages.
//!
//! Each hop between stages costs the embedded log a write of the batch to the store
//! (one transaction on SQLite's single writer), a read back, and a JSON encoding and
//! decoding of every claim. Kafka spreads that work over brokers and machines; the
//! embedded log has one file, so those hops set its pace. The chain keeps the stages
//! (their pure cores and their batch steps are the same code) and drops the hops: it
//! consumes `claims.intake` as the validate group, and in the one transaction that
//! commits its offsets it writes the fraud state entries, any dead letters, and the
//! decisions: straight into the store with their events on `claims.events` when this
//! process runs the snapshot stage too (and with the webhook stage, the events'
//! deliveries, handed to the sender as the transaction commits), else onto
//! `claims.decided`. A crash therefore loses or doubles nothing, exactly as with
//! separate stages; and as a decision commits with its input, a redelivered batch
//! cannot leave a second, different decision.
//!
//! What differs: `claims.validated`, `claims.evaluated`, `claims.scored` (and with the
//! snapshot, `claims.decided`, which then carries officers' decisions only) stay empty
//! while the chain runs, and the fraud stage's provider statistics are kept in parts of
//! the intake partitions ([`super::fraud::FUSED_PARTS`]). The chain starts only when
//! nothing is left on the first three for the separate stages (see [`fusable`]), so
//! that switching between the two ways loses no claim in flight.

use std::collections::HashSet;

use super::decide::Decide;
use super::fraud::{Fraud, FUSED_PARTS};
use super::rules::Rules;
use super::runner::{
    by_topic, decode, encode, handle_then_publish, message, Outputs, Stage, StageError,
};
use super::snapshot::accumulators::{lock, Accumulators, Shared};
use super::snapshot::{event_messages, settle};
use super::validate::Validate;
use super::webhooks::Deliveries;
use crate::bus::{
    pack_all, Bus, BusError, Consumer, GroupWriter, Message, Packed, Record, TopicSpec,
};
use crate::model::{ClaimSubmitted, Decision, Written};
use crate::retry::backoff;
use crate::store::{DecisionTexts, PreparedDecisions, Store};
use crate::topics::Topics;

/// The stages the chain replaces, by their `--stages` names.
pub const FUSED: [&str; 4] = ["validate", "rules", "fraud", "decide"];

#[derive(Debug)]
pub struct Chain {
    pub topics: Topics,
    pub validate: Validate,
    pub rules: Rules,
    pub fraud: Fraud,
    pub decide: Decide,
    /// Set when this process runs the snapshot stage too: the decisions are written to
    /// the store and their events published in the chain's own transaction, instead of
    /// passing through `claims.decided`.
    pub snapshot: Option<Store>,
    /// With the snapshot in this process: the members' accumulators, shared with the
    /// snapshot stage (which takes the officers' decisions), applied to the decisions
    /// before they are written as the snapshot stage would.
    pub accumulators: Option<Shared>,
    /// The commit of the last batch handled, while it runs, and when it was started.
    pub committing: Option<(tokio::task::JoinHandle<()>, std::time::Instant)>,
    /// Set when this process runs the webhook stage too (and the snapshot): the
    /// deliveries of the events the chain publishes are queued in the same transaction
    /// and handed to the sender as it commits, rather than a writer's turn later by
    /// the webhook stage, which then finds them queued and passes them by.
    pub webhooks: Option<Deliveries>,
}

impl Stage for Chain {
    /// The validate group's: its offsets on the intake topic are the chain's, so either
    /// way of running resumes where the other stopped.
    fn name(&self) -> &'static str {
        "validate"
    }

    fn input(&self) -> TopicSpec {
        self.topics.intake.clone()
    }

    async fn reassigned(&mut self, bus: &Bus) -> Result<(), StageError> {
        // The state is reread from the topics and the store, which must hold every
        // batch handled.
        self.settle().await;
        if let (Some(shared), Some(store)) = (&self.accumulators, &self.snapshot) {
            *lock(shared) = Accumulators::restore(store).await?;
        }
        self.fraud.reassigned(bus).await
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let (mut out, decisions) = self.decide(batch).await?;
        for d in &decisions {
            out.push(encode(&self.topics.decided, d.key(), d));
        }
        Ok(out)
    }

    /// With the snapshot in this process, a batch commits in a task of its own while
    /// the next batch is handled: the chain's CPU work and the store's writer then run
    /// side by side instead of taking turns. What the commit writes (the decisions'
    /// texts, records and events, packed) is made with the deciding, beside the last
    /// commit, so that the commit's task only runs the transaction. Batches still commit one at a time and in
    /// order, each after the one before it, and a failed commit is retried (the same
    /// outputs, decided once) before the next one starts; so the group never moves past
    /// a batch whose outputs are not durable.
    async fn handle_and_commit(
        &mut self,
        batch: &[Record],
        consumer: &mut Consumer,
    ) -> Result<(), StageError> {
        let (Some(store), Consumer::Embedded(consumer)) = (self.snapshot.clone(), &mut *consumer)
        else {
            return handle_then_publish(self, batch, consumer).await;
        };
        let started = std::time::Instant::now();
        // Since the last batch went to its commit: this batch's poll.
        let polled = self.committing.as_ref().map(|(_, at)| started - *at);
        let (writer, topics, records) = (consumer.writer(), self.topics.clone(), batch.to_vec());
        let webhooks = self.webhooks.clone();
        let mut commit = crate::cpu::heavy(async {
            let (out, decisions) = self.decide(batch).await?;
            Ok::<_, StageError>(Commit::new(store, writer, &topics, records, out, decisions))
        })
        .await?;
        commit.webhooks = webhooks;
        let handled = started.elapsed();
        self.settle().await;
        tracing::debug!(stage = "chain", records = batch.len(), ?polled, ?handled, settled = ?started.elapsed() - handled, "Batch decided.");
        let committing = tokio::spawn(async move {
            let started = std::time::Instant::now();
            let mut attempt = 0;
            while let Err(e) = commit.run().await {
                tracing::warn!(stage = "chain", error = %e, attempt, "Committing a batch failed; retrying.");
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            tracing::debug!(stage = "chain", records = commit.batch.len(), ?handled, committed = ?started.elapsed(), "Batch done.");
        });
        self.committing = Some((committing, std::time::Instant::now()));
        Ok(())
    }

    async fn settle(&mut self) {
        if let Some((committing, _)) = self.committing.take() {
            if let Err(e) = committing.await {
                // The commit task only ends early by panicking; going on would commit
                // later batches past a lost one.
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
}

/// One batch's transaction: the fraud state entries and dead letters, the decisions'
/// rows in the store and their events, and the group's offsets past the batch.
struct Commit {
    store: Store,
    writer: GroupWriter,
    batch: Vec<Record>,
    /// The fraud state entries and dead letters, then every decision's events (on the
    /// events topic, the last entry): all encoded before the writer is taken, as
    /// SQLite's one writer waits for whatever runs inside the transaction.
    outputs: Vec<(TopicSpec, Vec<Message>)>,
    /// The outputs' values as the log stores them, packed ahead too.
    packed: Vec<Packed>,
    /// Per decision, how many of the events are its own, in order.
    events_of: Vec<usize>,
    decisions: Vec<Decision>,
    /// What the store writes of each decision, made once: its record on
    /// `claims.decided` takes the same texts, and a retried commit writes them again.
    texts: Vec<DecisionTexts>,
    /// Where the events' deliveries are queued, when the webhook stage runs here.
    webhooks: Option<Deliveries>,
}

impl Commit {
    fn new(
        store: Store,
        writer: GroupWriter,
        topics: &Topics,
        batch: Vec<Record>,
        out: Outputs,
        decisions: Vec<Decision>,
    ) -> Self {
        let events: Vec<Message> = decisions.iter().flat_map(event_messages).collect();
        let events_of = decisions.iter().map(|d| d.events.len()).collect();
        let texts: Vec<DecisionTexts> = decisions.iter().map(DecisionTexts::of).collect();
        // The record of each decision, for `claims replay`: `claims.decided` is a topic
        // of record, and the decisions the chain writes itself pass it by otherwise.
        let written = decisions
            .iter()
            .zip(&texts)
            .map(|(d, t)| message(d.key(), &Written::with(d, t.parts())))
            .collect();
        let mut outputs = by_topic(out);
        outputs.push((topics.decided.clone(), written));
        outputs.push((topics.events.clone(), events));
        let packed = outputs
            .iter()
            .map(|(_, messages)| pack_all(messages.iter().map(|m| &m.value[..])))
            .collect();
        Self {
            store,
            writer,
            batch,
            outputs,
            packed,
            events_of,
            decisions,
            texts,
            webhooks: None,
        }
    }

    async fn run(&self) -> Result<(), StageError> {
        let prepared = PreparedDecisions::borrowing(&self.decisions, &self.texts);
        // The subscriptions are read before the writer is taken.
        let fanned = match &self.webhooks {
            Some(w) => Some(
                w.fan_out(self.decisions.iter().flat_map(|d| &d.events))
                    .await?,
            ),
            None => None,
        };
        // Reads first; the decisions' own rows last, as they lock the audit chain's head.
        let asked = std::time::Instant::now();
        let mut tx = self.writer.begin().await?;
        let taken = std::time::Instant::now();
        let check = self.store.check_decisions_in(&mut tx, &prepared).await?;
        let held = held_only(&self.outputs, &self.events_of, &check.held);
        // Outputs left out change what is appended: those are packed in the turn.
        let (outputs, packed) = match &held {
            Some(held) => (&held[..], &[][..]),
            None => (&self.outputs[..], &self.packed[..]),
        };
        let queued = match (&self.webhooks, fanned) {
            (Some(w), Some(mut fanned)) => {
                // Only the events published: those of the decisions the store holds.
                let published: HashSet<&str> = self
                    .decisions
                    .iter()
                    .zip(&check.held)
                    .filter(|(_, held)| **held)
                    .flat_map(|(d, _)| d.events.iter().map(|e| e.id.as_str()))
                    .collect();
                fanned
                    .deliveries
                    .retain(|d| published.contains(d.event_id.as_str()));
                Some(w.queue_in(&mut tx, fanned).await?)
            }
            _ => None,
        };
        self.writer
            .publish_packed_in(&mut tx, outputs, packed, &self.batch)
            .await?;
        self.store
            .write_checked_decisions_in(&mut tx, &prepared, &check)
            .await?;
        let written = std::time::Instant::now();
        self.writer.finish(tx, outputs).await?;
        tracing::debug!(stage = "chain", waited = ?(taken - asked), writing = ?(written - taken), syncing = ?written.elapsed(), "Batch written.");
        if let Some(queued) = queued {
            queued.hand_over();
        }
        Ok(())
    }
}

/// `outputs` (a [`Commit`]'s) without the records and events of decisions the store
/// does not hold (see [`super::snapshot`]); none when it holds them all, as it does but
/// for a redelivered batch decided again.
fn held_only(
    outputs: &[(TopicSpec, Vec<Message>)],
    events_of: &[usize],
    held: &[bool],
) -> Option<Vec<(TopicSpec, Vec<Message>)>> {
    if held.iter().all(|h| *h) {
        return None;
    }
    let mut outputs = outputs.to_vec();
    let n = outputs.len();
    // The last two: a record per decision, then each decision's events.
    keep_held(&mut outputs[n - 2].1, &vec![1; held.len()], held);
    keep_held(&mut outputs[n - 1].1, events_of, held);
    Some(outputs)
}

/// Keeps of `messages`, `count` per decision in order, those of the held decisions.
fn keep_held(messages: &mut Vec<Message>, count: &[usize], held: &[bool]) {
    let mut all = std::mem::take(messages).into_iter();
    for (count, held) in count.iter().zip(held) {
        let own = all.by_ref().take(*count);
        if *held {
            messages.extend(own);
        } else {
            own.for_each(drop);
        }
    }
}

impl Chain {
    /// The batch through validate, rules, fraud and decide: the fraud state entries and
    /// dead letters to publish, and the decisions.
    async fn decide(&mut self, batch: &[Record]) -> Result<(Outputs, Vec<Decision>), StageError> {
        let mut out = Vec::with_capacity(batch.len());
        let mut at = Vec::with_capacity(batch.len());
        let cmds: Vec<ClaimSubmitted> = batch
            .iter()
            .filter_map(|r| {
                let cmd = decode("validate", r, &self.topics.dead_letter, &mut out)?;
                at.push((FUSED_PARTS + r.partition, r.offset));
                Some(cmd)
            })
            .collect();
        let validated = self.validate.step(cmds).await?;
        let evaluated = self.rules.step(validated).await?;
        let scored = self
            .fraud
            .step(evaluated.into_iter().zip(at).collect(), &mut out);
        let mut decisions = self.decide.step(&scored).await?;
        if let Some(shared) = &self.accumulators {
            // The decisions commit with the batch's offsets, so the store holds each
            // one (a redelivered batch was never committed): every count is published.
            let counted = settle::process(&mut decisions, &mut lock(shared));
            for c in counted.into_iter().flatten() {
                out.push(encode(&self.topics.accumulators, c.entry.key(), &c.entry));
            }
        }
        Ok((out, decisions))
    }
}

/// Whether the chain may take over from separate stages: nothing is waiting for rules,
/// fraud or decide on their input topics (a claim there would wait for stages that no
/// longer run).
pub async fn fusable(bus: &Bus, topics: &Topics) -> Result<bool, BusError> {
    let inputs = [
        (&topics.validated, "rules"),
        (&topics.evaluated, "fraud"),
        (&topics.scored, "decide"),
    ];
    let specs: Vec<TopicSpec> = inputs.iter().map(|(t, _)| (*t).clone()).collect();
    for (info, (_, group)) in bus.describe(&specs).await?.iter().zip(inputs) {
        let consumed: i64 = info
            .groups
            .iter()
            .find(|g| g.group == group)
            .map_or(0, |g| g.committed.iter().sum());
        if info.end_offset_total > consumed {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(key: &str) -> Message {
        Message {
            key: key.into(),
            value: Vec::new(),
        }
    }

    #[test]
    fn only_the_records_and_events_of_held_decisions_are_published() {
        let topics = Topics::new("", 4);
        let outputs = vec![
            (topics.dead_letter.clone(), vec![msg("dead")]),
            (topics.decided.clone(), vec![msg("a"), msg("b"), msg("c")]),
            (
                topics.events.clone(),
                vec![msg("a1"), msg("b1"), msg("b2"), msg("c1")],
            ),
        ];
        let events_of = [1, 2, 1];
        assert_eq!(held_only(&outputs, &events_of, &[true, true, true]), None);
        let kept = held_only(&outputs, &events_of, &[true, false, true]).unwrap();
        let keys = |i: usize| -> Vec<&str> { kept[i].1.iter().map(|m| m.key.as_str()).collect() };
        assert_eq!(keys(0), ["dead"], "other outputs stay");
        assert_eq!(keys(1), ["a", "c"]);
        assert_eq!(keys(2), ["a1", "c1"]);
    }
}
