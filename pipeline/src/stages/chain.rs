//! The fused chain: validate → rules → fraud → decide on one batch in memory, for the
//! embedded log when one process runs all four.
//!
//! Each hop between stages costs the embedded log a write of the batch to the store
//! (one transaction on SQLite's single writer), a read back, and a JSON encoding and
//! decoding of every claim. Kafka spreads that work over brokers and machines; the
//! embedded log has one file, so those hops set its pace. The chain keeps the stages
//! (their pure cores and their batch steps are the same code) and drops the hops: it
//! consumes `claims.intake` as the validate group and publishes the decisions on
//! `claims.decided`, with the fraud state entries and any dead letters, in the same
//! transaction that commits its offsets. A crash therefore loses or doubles nothing,
//! exactly as with separate stages.
//!
//! What differs: `claims.validated`, `claims.evaluated` and `claims.scored` stay empty
//! while the chain runs, and the fraud stage's provider statistics are kept in parts
//! of the intake partitions ([`super::fraud::FUSED_PARTS`]). The chain starts only
//! when nothing is left on those topics for the separate stages (see [`fusable`]), so
//! that switching between the two ways loses no claim in flight.

use super::decide::Decide;
use super::fraud::{Fraud, FUSED_PARTS};
use super::rules::Rules;
use super::runner::{decode, encode, Outputs, Stage, StageError};
use super::validate::Validate;
use crate::bus::{Bus, BusError, Record, TopicSpec};
use crate::intake::ClaimSubmitted;
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
        self.fraud.reassigned(bus).await
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let mut out = Vec::with_capacity(batch.len() * 2);
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
        let decisions = self.decide.step(&scored).await?;
        for (claim, d) in scored.iter().zip(decisions) {
            out.push(encode(&self.topics.decided, claim.key(), &d));
        }
        Ok(out)
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
