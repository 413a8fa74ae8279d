//! Stage 5, snapshot: input `claims.decided`. Writes each batch of decisions to the
//! store in one transaction: the queryable claim, the decision's audit record and the
//! review task of a flagged claim. Then it publishes each decision's domain events on
//! `claims.events`: a webhook receiver or analyst who reads `claim.completed` and asks
//! the API for the claim finds it completed. A decision that lost to an earlier,
//! different one of the same version (see [`Store::write_decisions`]) publishes nothing,
//! so the events always tell the decision the store holds.
//!
//! It keeps the members' accumulators ([`accumulators`]): decisions are keyed by
//! member, so a member's decisions, the automatic ones and the officers', reach one
//! process in order. Before a batch is written, each decision for a member on a plan
//! has the plan applied to its lines against the member's year, and a final payable
//! outcome counts in it ([`settle`]); the counted claims go to the store with their
//! decisions (the queryable copy) and to `state.accumulators` with the events.
//!
//! Files: [`settle`] the pure core for benefits, [`accumulators`] the state, [`twins`]
//! the records of decisions as written that `claims replay` rebuilds from; this file
//! the stage on the bus and the events of a batch.

pub mod accumulators;
pub mod settle;
pub mod twins;

use super::passed::Passed;
use super::runner::{by_topic, decode_all, encode, message, Outputs, Stage, StageError};
use crate::bus::{Bus, Consumer, Message, Record, TopicSpec};
use crate::model::{Decision, EventKind, Written, WRITTEN_PREFIX};
use crate::store::Store;
use crate::topics::Topics;
use accumulators::{lock, Accumulators, Shared};
use settle::Count;

#[derive(Debug, Clone)]
pub struct Snapshot {
    pub topics: Topics,
    pub store: Store,
    pub accumulators: Shared,
    /// Set in a process whose fused chain shares the accumulators: each decision made
    /// outside the chain that the stage writes goes back onto `claims.decided` as
    /// written, for `claims replay` (see [`twins`]).
    pub twins: bool,
    /// Progress over batches of written decisions alone, not committed yet (see
    /// [`super::passed`]).
    pub passed: Passed,
}

impl Stage for Snapshot {
    fn name(&self) -> &'static str {
        "snapshot"
    }

    fn input(&self) -> TopicSpec {
        self.topics.decided.clone()
    }

    async fn reassigned(&mut self, bus: &Bus) -> Result<(), StageError> {
        let fresh = Accumulators::load(&self.topics.accumulators, bus).await?;
        *lock(&self.accumulators) = fresh;
        Ok(())
    }

    async fn handle_and_commit(
        &mut self,
        batch: &[Record],
        consumer: &mut Consumer,
    ) -> Result<(), StageError> {
        if batch.iter().all(is_written) && self.passed.defer(batch) {
            return Ok(());
        }
        let outputs = self.handle(batch).await?;
        let done = self.passed.with(batch);
        consumer
            .publish_and_commit(&by_topic(outputs), &done)
            .await?;
        Ok(())
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        // The fused chain's decisions are in the store already, their events published.
        if batch.iter().any(is_written) {
            let batch: Vec<Record> = batch.iter().filter(|r| !is_written(r)).cloned().collect();
            return self.write(&batch).await;
        }
        self.write(batch).await
    }
}

/// Whether a record of `claims.decided` is a decision the fused chain wrote itself.
fn is_written(r: &Record) -> bool {
    r.value.starts_with(WRITTEN_PREFIX)
}

impl Snapshot {
    /// Writes a batch of `claims.decided` as it is, written decisions too (see
    /// [`Decision::written`]), and answers its outputs: the stage's work.
    pub async fn write(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let mut out = Vec::new();
        let mut decisions: Vec<Decision> =
            decode_all(self.name(), batch, &self.topics.dead_letter, &mut out);
        let (counted, held) = self.apply(&mut decisions).await?;
        out.extend(state_entries(&self.topics, &counted, &held));
        out.extend(process(&self.topics, &decisions, &held));
        if self.twins {
            out.extend(
                twins::needing_twins(&decisions, &held)
                    .map(|d| encode(&self.topics.decided, d.key(), &Written::new(d))),
            );
        }
        Ok(out)
    }

    /// Applies decoded decisions in order to the members' years and writes them to the
    /// store: per decision, the changes to its member's year that stand, and whether
    /// the store holds it (a count whose decision the store turned down is taken
    /// back). The stage's work without its outputs, and `claims replay`'s.
    pub async fn apply(
        &mut self,
        decisions: &mut [Decision],
    ) -> Result<(Vec<Vec<Count>>, Vec<bool>), StageError> {
        let counted = settle::process(decisions, &mut lock(&self.accumulators));
        let held = match self.store.write_decisions(decisions).await {
            Ok(held) => held,
            Err(e) => {
                // The batch is retried: it must find the years as they were.
                let mut state = lock(&self.accumulators);
                counted
                    .iter()
                    .rev()
                    .for_each(|c| settle::undo(&mut state, c));
                return Err(e.into());
            }
        };
        let mut state = lock(&self.accumulators);
        for (changes, held) in counted.iter().zip(&held) {
            if !*held {
                settle::undo(&mut state, changes);
            }
        }
        Ok((counted, held))
    }
}

/// The state entries of the claims a batch counted whose decisions the store holds,
/// for `state.accumulators`.
pub fn state_entries(topics: &Topics, counted: &[Vec<Count>], held: &[bool]) -> Outputs {
    counted
        .iter()
        .zip(held)
        .filter(|(_, held)| **held)
        .flat_map(|(changes, _)| changes)
        .map(|c| encode(&topics.accumulators, c.entry.key(), &c.entry))
        .collect()
}

/// The events of the decisions the store holds (`held`, per decision), for
/// `claims.events`.
pub fn process(topics: &Topics, decisions: &[Decision], held: &[bool]) -> Outputs {
    decisions
        .iter()
        .zip(held)
        .filter(|(_, held)| **held)
        .flat_map(|(d, _)| event_messages(d))
        .map(|m| (topics.events.clone(), m))
        .collect()
}

/// A decision's events as `claims.events` carries them, each keyed by the claim it is
/// about (a replacement's decision tells `claim.replaced` of the claim it replaces): a
/// subscriber's deliveries of one claim stay in order.
pub fn event_messages(d: &Decision) -> impl Iterator<Item = Message> + '_ {
    d.events.iter().map(move |e| {
        let other = match e.kind() {
            Some(EventKind::ClaimReplaced | EventKind::ClaimVoided) => {
                e.value()["claim_id"].as_str().map(str::to_owned)
            }
            _ => None,
        };
        let about = other.as_deref().unwrap_or(&d.claim_id);
        message(crate::model::claim_key(&d.tenant_id, about), e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DomainEvent, EventKind};

    fn decision(claim_id: &str, kinds: &[EventKind]) -> Decision {
        let events = kinds
            .iter()
            .map(|k| {
                DomainEvent::new(
                    *k,
                    &schemas::TenantId::parse("acme").unwrap(),
                    claim_id,
                    "2026-01-01T00:00:00Z".into(),
                    serde_json::json!({}),
                )
            })
            .collect();
        Decision {
            events,
            ..Decision::sample(claim_id, "M-1", 1)
        }
    }

    #[test]
    fn only_the_decisions_the_store_holds_are_announced_in_order_keyed_by_claim() {
        let topics = Topics::new("p.", 4);
        let decisions = [
            decision("C-1", &[EventKind::ClaimFlagged, EventKind::ClaimCompleted]),
            decision("C-2", &[EventKind::ClaimCompleted]),
            decision("C-3", &[EventKind::ClaimBlocked, EventKind::ClaimCompleted]),
        ];
        let out = process(&topics, &decisions, &[true, false, true]);
        assert!(out.iter().all(|(t, _)| t.name == "p.claims.events"));
        let got: Vec<(String, String)> = out
            .iter()
            .map(|(_, m)| {
                let e: DomainEvent = serde_json::from_slice(&m.value).unwrap();
                (m.key.clone(), e.event)
            })
            .collect();
        let want = [
            ("acme/C-1", "claim.flagged"),
            ("acme/C-1", "claim.completed"),
            ("acme/C-3", "claim.blocked"),
            ("acme/C-3", "claim.completed"),
        ];
        assert_eq!(
            got,
            want.map(|(k, e)| (k.to_owned(), e.to_owned())),
            "a decision that lost to an earlier one announces nothing"
        );
    }
}
