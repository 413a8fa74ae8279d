//! Stage 5, snapshot: input `claims.decided`. Writes each batch of decisions to the
//! store in one transaction: the queryable claim, the decision's audit record and the
//! review task of a flagged claim. Then it publishes each decision's domain events on
//! `claims.events`: a webhook receiver or analyst who reads `claim.completed` and asks
//! the API for the claim finds it completed. A decision that lost to an earlier,
//! different one of the same version (see [`Store::write_decisions`]) publishes nothing,
//! so the events always tell the decision the store holds.

use super::runner::{decode_all, message, Outputs, Stage, StageError};
use crate::bus::{Message, Record, TopicSpec};
use crate::model::Decision;
use crate::store::Store;
use crate::topics::Topics;

#[derive(Debug, Clone)]
pub struct Snapshot {
    pub topics: Topics,
    pub store: Store,
}

impl Stage for Snapshot {
    fn name(&self) -> &'static str {
        "snapshot"
    }

    fn input(&self) -> TopicSpec {
        self.topics.decided.clone()
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let mut out = Vec::new();
        let decisions: Vec<Decision> =
            decode_all(self.name(), batch, &self.topics.dead_letter, &mut out);
        let held = self.store.write_decisions(&decisions).await?;
        out.extend(announcements(&self.topics, &decisions, &held));
        Ok(out)
    }
}

/// The events of the decisions the store holds (`held`, per decision), for
/// `claims.events`.
pub fn announcements(topics: &Topics, decisions: &[Decision], held: &[bool]) -> Outputs {
    decisions
        .iter()
        .zip(held)
        .filter(|(_, held)| **held)
        .flat_map(|(d, _)| event_messages(d))
        .map(|m| (topics.events.clone(), m))
        .collect()
}

/// A decision's events as `claims.events` carries them, keyed by its claim.
pub fn event_messages(d: &Decision) -> impl Iterator<Item = Message> + '_ {
    let key = crate::model::claim_key(&d.tenant_id, &d.claim_id);
    d.events.iter().map(move |e| message(key.clone(), e))
}
