//! Stage 3, fraud: input `claims.evaluated`. An explainable score in [0, 1] from named
//! features, each with a reason code and its contribution; the features combine as a
//! noisy-or, `1 − Π(1 − cᵢ)`, so each reads as "this much risk on its own".
//!
//! | code | feature |
//! |---|---|
//! | `AMOUNT_OUTLIER` | the amount against the provider's running mean and deviation (z-score over 2, once the provider has 5 claims) |
//! | `MEMBER_FREQUENCY` | the member's claims in the last 24 h (3 or more) |
//! | `NEAR_DUPLICATE` | an earlier claim with the same member, provider, service date and codes |
//! | `ROUND_AMOUNT` | an amount that is a whole multiple of 100.00 |
//!
//! State (per provider: count, mean, M2 by Welford; per member: recent claim
//! fingerprints) is kept in memory and written to compacted state topics with every
//! batch, so it is rebuilt from them on restart and when partitions move. A member's
//! history is written a claim at a time, each under a slot key of its own (see
//! [`Remembered`]), not rewritten whole with every claim: a busy member's record would
//! otherwise grow to its whole remembered history, written again for each new claim.
//!
//! Partitions: the input is keyed by member (`ClaimInProcess::key`), so a
//! member's claims all reach the one process that holds their partition, and its state
//! has a single writer. A provider's claims come from every partition, so its
//! statistics are kept in parts, one per input partition (state key
//! `tenant/provider#partition`), each written only by the partition's holder; a score
//! uses all parts (merged by Chan's parallel update). While several processes share the
//! stage, the parts of partitions held elsewhere are as of the last rebalance: a running
//! mean and deviation over many claims moves little in that time, and nothing that must
//! be exact (a member's history) is shared.
//!
//! State entries remember which claims they include, so a redelivered claim is counted
//! once and scored as before: its own contribution is taken out before scoring, and it
//! is compared only with the claims its member had before it. (The provider's statistics
//! may still include later claims of its batch; a redelivered claim decided differently
//! loses to its first decision, see `Store::write_decisions`.)
//!
//! Files: [`score`] the pure core, [`stats`] a provider's statistics, [`members`] a
//! member's history and its storage format, [`state`] the whole state; this file the
//! stage on the bus.

pub mod members;
pub mod score;
pub mod state;
pub mod stats;
#[cfg(test)]
mod tests;

pub use members::{members_from, MemberRecord, MemberState, Remembered, Seen, MEMBER_MEMORY};
pub use score::process;
pub use state::FraudState;
pub use stats::{parse_part_key, part_key, ProviderStats, FUSED_PARTS};

use super::runner::{decode, encode, Outputs, Stage, StageError};
use crate::bus::{Bus, Record, TopicSpec};
use crate::model::ClaimInProcess;
use crate::topics::Topics;

pub const MODEL_VERSION: &str = "fraud-v1";

#[derive(Debug)]
pub struct Fraud {
    pub topics: Topics,
    pub state: FraudState,
}

impl Fraud {
    /// Rebuilds the state from the compacted state topics.
    pub async fn restore(topics: Topics, bus: &Bus) -> Result<Self, StageError> {
        let state = Self::load(&topics, bus).await?;
        Ok(Self { topics, state })
    }

    /// The latest record of each key of the state topics. A record that does not parse
    /// is fatal, not skipped: scoring without a member's history or a provider's
    /// statistics would give wrong scores that look right.
    async fn load(topics: &Topics, bus: &Bus) -> Result<FraudState, StageError> {
        let corrupt = |r: &Record, e: serde_json::Error| {
            StageError::Fatal(format!(
                "the fraud state record {} at {}:{}:{} does not parse: {e}",
                r.key, r.topic, r.partition, r.offset
            ))
        };
        let mut state = FraudState::default();
        for r in bus.scan(&topics.fraud_providers).await? {
            let v = serde_json::from_slice(&r.value).map_err(|e| corrupt(&r, e))?;
            let (provider, partition) = parse_part_key(&r.key);
            state
                .providers
                .entry(provider.to_owned())
                .or_default()
                .insert(partition, v);
        }
        let mut members = Vec::new();
        for r in bus.scan(&topics.fraud_members).await? {
            let v = serde_json::from_slice(&r.value).map_err(|e| corrupt(&r, e))?;
            members.push((r.key, v));
        }
        state.members = members_from(members);
        tracing::info!(
            providers = state.providers.len(),
            members = state.members.len(),
            "Fraud state restored."
        );
        Ok(state)
    }
}

impl Stage for Fraud {
    fn name(&self) -> &'static str {
        "fraud"
    }

    fn input(&self) -> TopicSpec {
        self.topics.evaluated.clone()
    }

    /// The process that had the partitions wrote its state changes to the state topics,
    /// and after them only what it acknowledged: rebuilding from them takes its work in.
    async fn reassigned(&mut self, bus: &Bus) -> Result<(), StageError> {
        self.state = Self::load(&self.topics, bus).await?;
        Ok(())
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let mut out = Vec::with_capacity(batch.len() * 2);
        let claims: Vec<(ClaimInProcess, (u32, i64))> = batch
            .iter()
            .filter_map(|r| {
                decode(self.name(), r, &self.topics.dead_letter, &mut out)
                    .map(|c| (c, (r.partition, r.offset)))
            })
            .collect();
        let scored = self.step(claims, &mut out);
        for c in scored {
            out.push(encode(&self.topics.scored, c.key(), &c));
        }
        Ok(out)
    }
}

impl Fraud {
    /// Scores decoded claims, each at its input position, one out per claim in order,
    /// and adds the state entries the batch changed to `out`: the stage's own batch and
    /// the fused chain's (see [`super::chain`]).
    pub fn step(
        &mut self,
        claims: Vec<(ClaimInProcess, (u32, i64))>,
        out: &mut Outputs,
    ) -> Vec<ClaimInProcess> {
        let mut providers = Vec::new();
        let mut members = Vec::new();
        let mut scored = Vec::with_capacity(claims.len());
        for (claim, at) in claims {
            if claim.rejection.is_some() {
                scored.push(claim);
                continue;
            }
            let (claim, p, m) = process(claim, at, &mut self.state);
            providers.extend(p);
            members.extend(m);
            scored.push(claim);
        }
        // The state entries go into `out` before the caller adds the claims: on Kafka an
        // output published without its state change could be followed by a crash that
        // loses the change.
        providers.sort();
        providers.dedup();
        for (k, p) in providers {
            out.push(encode(
                &self.topics.fraud_providers,
                part_key(&k, p),
                &self.state.providers[&k][&p],
            ));
        }
        // In order: two claims of a member more than MEMBER_MEMORY apart in one batch
        // share a slot, and the later must be the one compaction keeps.
        for m in members {
            out.push(encode(&self.topics.fraud_members, m.key(), &m.record()));
        }
        scored
    }
}
