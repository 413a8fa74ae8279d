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
use crate::store::{DecisionTexts, Store};
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

    async fn reassigned(&mut self, _bus: &Bus) -> Result<(), StageError> {
        let fresh = Accumulators::restore(&self.store).await?;
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
        let (counted, held) = self.apply(&mut decisions, Vec::new()).await?;
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
    /// back). The stage's work without its outputs, and `claims replay`'s, which passes
    /// the store's texts of some decisions made ahead (`texts`, empty for none): only of
    /// decisions that [`settle::process`] leaves as they are, the written ones.
    pub async fn apply(
        &mut self,
        decisions: &mut [Decision],
        texts: Vec<Option<DecisionTexts>>,
    ) -> Result<(Vec<Vec<Count>>, Vec<bool>), StageError> {
        let counted = settle::process(decisions, &mut lock(&self.accumulators));
        let held = match self.store.write_decisions(decisions, texts).await {
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
    use crate::adjudication::Pricing;
    use crate::bus::EmbeddedLog;
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

    /// A decision of member M-1's on a plan with a 500.00 deductible and 20%
    /// coinsurance, for one line of `amount`.
    fn priced(claim_id: &str, amount: i64) -> Decision {
        let mut d = decision(claim_id, &[EventKind::ClaimCompleted]);
        d.lines = vec![serde_json::from_value(serde_json::json!({
            "line_no": 1, "procedure_code": "99213", "units": 1, "amount": amount,
            "modifiers": [], "adjudication": null,
        }))
        .unwrap()];
        d.pricing = Some(Pricing::sample().into());
        d
    }

    fn records(topics: &Topics, decisions: &[Decision]) -> Vec<Record> {
        decisions
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let (_, m) = encode(&topics.decided, d.key(), d);
                Record {
                    topic: topics.decided.name.clone(),
                    partition: 0,
                    offset: i as i64,
                    key: m.key,
                    value: m.value,
                    timestamp_ms: 0,
                }
            })
            .collect()
    }

    fn on<'a>(topic: &'a TopicSpec, out: &'a Outputs) -> impl Iterator<Item = &'a Message> {
        out.iter()
            .filter(move |(t, _)| t.name == topic.name)
            .map(|(_, m)| m)
    }

    /// The events among `out`, as text.
    fn events<'a>(topics: &'a Topics, out: &'a Outputs) -> Vec<&'a str> {
        on(&topics.events, out)
            .map(|m| std::str::from_utf8(&m.value).unwrap())
            .collect()
    }

    /// A batch redelivered after a crash finds its members' years as the store holds
    /// them, whatever of its records reached `state.accumulators`: on Kafka they land
    /// partition by partition, and a year restored with a later claim's count but not
    /// an earlier one's would price the later claim again against less; the store
    /// would keep the first decision and its events would never be published.
    #[tokio::test]
    async fn a_batch_redelivered_after_a_restart_is_decided_as_the_store_holds_it() {
        let (store, path) = crate::store::temp("snapshot").await;
        let bus = Bus::Embedded(EmbeddedLog::new(store.clone()));
        let topics = Topics::new("p.", 4);
        bus.ensure_topics(&topics.all()).await.unwrap();
        let snapshot = || Snapshot {
            topics: topics.clone(),
            store: store.clone(),
            accumulators: Default::default(),
            twins: false,
            passed: Passed::default(),
        };
        // F is flagged: priced against the year as it stands, an estimate for the
        // officer, counting nothing. C-1 meets 400.00 of the deductible; C-2 the last
        // 100.00, then coinsurance.
        let flagged = Decision {
            status: schemas::claim::ClaimStatus::PendingReview,
            outcome: schemas::claim::Outcome::Flagged,
            task_id: Some("task_F".into()),
            events: decision("F", &[EventKind::ClaimFlagged]).events,
            ..priced("F", 20_000)
        };
        let batch = records(
            &topics,
            &[flagged, priced("C-1", 40_000), priced("C-2", 30_000)],
        );

        let mut first = snapshot();
        let out = first.write(&batch).await.unwrap();
        let first_events = events(&topics, &out);
        assert_eq!(first_events.len(), 3, "F is flagged, C-1 and C-2 complete");
        // The crash: C-2's state record landed, C-1's did not.
        let landed: Vec<Message> = on(&topics.accumulators, &out)
            .filter(|m| m.key.ends_with("/C-2"))
            .cloned()
            .collect();
        assert_eq!(landed.len(), 1);
        bus.publish(&topics.accumulators, &landed).await.unwrap();

        let mut again = snapshot();
        again.reassigned(&bus).await.unwrap();
        let redelivered = again.write(&batch).await.unwrap();
        assert_eq!(
            events(&topics, &redelivered),
            first_events,
            "the redelivered batch is decided as the first time, and its events published \
             (F's estimate, priced against the year with C-1 and C-2 counted, aside)"
        );
        assert_eq!(
            on(&topics.accumulators, &redelivered).count(),
            2,
            "both counts are published again, the one that had not landed too"
        );
        let year = store
            .member_accumulators("acme", "M-1", 2026)
            .await
            .unwrap();
        assert_eq!((year.deductible, year.paid), (50_000, 16_000));
        crate::store::remove_temp(store, &path).await;
    }

    /// A rebuild makes the store's texts of a written decision while the pages before
    /// it are written (`rebuild.rs`), before this stage counts it: counting it must
    /// leave it as the store writes it, which adjudicating it again would not.
    #[test]
    fn counting_a_written_decision_leaves_what_the_store_writes_of_it_as_it_was() {
        // The chain decided C-2 against M-1's year without C-1 in it.
        let mut written = priced("C-2", 30_000);
        settle::process(
            std::slice::from_mut(&mut written),
            &mut Accumulators::default(),
        );
        written.written = true;
        // The rebuild's year has C-1 counted first: priced again against it, C-2's
        // lines and the year its facts name would change.
        let mut state = Accumulators::default();
        settle::process(&mut [priced("C-1", 40_000)], &mut state);
        let ahead = format!("{:?}", DecisionTexts::of(&written));

        let counted = settle::process(std::slice::from_mut(&mut written), &mut state);

        assert_eq!(format!("{:?}", DecisionTexts::of(&written)), ahead);
        assert_eq!(
            counted[0].len(),
            1,
            "C-2 counts in the year once, as written"
        );
    }
}
