//! Accepting claims: each accepted claim gets its snapshot row (`received`) and its
//! command on the intake topic in one store transaction, so a 202 means both are on
//! disk and neither exists without the other. The `(tenant_id, claim_id)` key decides
//! duplicates, also between simultaneous submissions: exactly one insert wins.

use schemas::claim::ClaimSubmission;
use serde::{Deserialize, Serialize};

use crate::bus::{Bus, Message, TopicSpec};
use crate::clock::now_ms;
use crate::store::{values_list, AuditEntry, Store, StoreError};

/// The record on the intake topic: the claim as submitted and what intake decided
/// about its context, so that processing uses the rulebook current at intake.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimSubmitted {
    pub tenant_id: String,
    pub claim: ClaimSubmission,
    pub rulebook_id: String,
    pub rulebook_version: i64,
    pub received_at_ms: i64,
}

impl ClaimSubmitted {
    /// Records of one claim share a key, so they stay in order in one partition.
    pub fn key(&self) -> String {
        claim_key(&self.tenant_id, self.claim.claim_id.as_str())
    }
}

pub fn claim_key(tenant_id: &str, claim_id: &str) -> String {
    format!("{tenant_id}/{claim_id}")
}

/// Rows per INSERT: 12 values each, within SQLite's limit on bound values.
const ROWS_PER_INSERT: usize = 2000;

/// Accepts the claims (already validated, distinct ids); answers, per claim, whether it
/// was new (`false`: a claim with that id exists for the tenant). The intake topic must
/// exist: the service creates its topics at start (`Bus::ensure_topics`).
pub async fn accept(
    store: &Store,
    bus: &Bus,
    topic: &TopicSpec,
    commands: &[ClaimSubmitted],
    actor: &str,
) -> Result<Vec<bool>, StoreError> {
    if commands.is_empty() {
        return Ok(Vec::new());
    }
    let now = now_ms();
    let mut tx = store.writer().begin().await?;
    let mut inserted = std::collections::HashSet::new();
    for chunk in commands.chunks(ROWS_PER_INSERT) {
        let sql = format!(
            "INSERT INTO claims (tenant_id, claim_id, member_id, provider_id, claim_amount, service_date, submission, \
             rulebook_id, rulebook_version, status, received_at, updated_at) VALUES {} \
             ON CONFLICT (tenant_id, claim_id) DO NOTHING RETURNING claim_id",
            values_list(store.backend(), chunk.len(), 12)
        );
        let mut q = sqlx::query_scalar::<_, String>(&sql);
        for c in chunk {
            let submission =
                serde_json::to_string(&c.claim).map_err(|e| StoreError::Config(e.to_string()))?;
            q = q
                .bind(&c.tenant_id)
                .bind(c.claim.claim_id.as_str().to_owned())
                .bind(c.claim.member_id.as_str().to_owned())
                .bind(c.claim.provider_id.as_str().to_owned())
                .bind(c.claim.claim_amount)
                .bind(c.claim.service_date.to_string())
                .bind(submission)
                .bind(&c.rulebook_id)
                .bind(c.rulebook_version)
                .bind("received")
                .bind(c.received_at_ms)
                .bind(now);
        }
        inserted.extend(q.fetch_all(&mut *tx).await?);
    }
    let fresh: Vec<bool> = commands
        .iter()
        .map(|c| inserted.contains(c.claim.claim_id.as_str()))
        .collect();
    let messages: Vec<Message> = commands
        .iter()
        .zip(&fresh)
        .filter(|(_, new)| **new)
        .map(|(c, _)| Message {
            key: c.key(),
            value: serde_json::to_vec(c).unwrap_or_default(),
        })
        .collect();
    bus.append_in(&mut tx, topic, &messages)
        .await
        .map_err(into_store)?;
    // Last, as the audit chain's head is the last lock a transaction takes.
    let entries: Vec<AuditEntry> = commands
        .iter()
        .zip(&fresh)
        .filter(|(_, new)| **new)
        .map(|(c, _)| received_entry(c, actor))
        .collect();
    // Their claims were inserted just now, so the records are new.
    store.append_new_audit_in(&mut tx, &entries).await?;
    tx.commit().await?;
    bus.wake(&topic.name);
    Ok(fresh)
}

/// The audit record of a claim's intake; its id derives from the claim.
fn received_entry(c: &ClaimSubmitted, actor: &str) -> AuditEntry {
    let claim_id = c.claim.claim_id.as_str();
    AuditEntry {
        audit_id: crate::stages::decide::ordered_id(
            "aud",
            c.received_at_ms,
            &c.tenant_id,
            claim_id,
            "intake",
        ),
        tenant_id: c.tenant_id.clone(),
        at: c.received_at_ms,
        actor: actor.to_owned(),
        action: "claim.received".into(),
        entity_type: "claim".into(),
        entity_id: claim_id.to_owned(),
        details: serde_json::json!({
            "member_id": c.claim.member_id.as_str(), "provider_id": c.claim.provider_id.as_str(),
            "claim_amount": c.claim.claim_amount, "rulebook_version": c.rulebook_version,
        })
        .to_string(),
    }
}

pub(crate) fn into_store(e: crate::bus::BusError) -> StoreError {
    match e {
        crate::bus::BusError::Unavailable(s) => s,
        other => StoreError::Config(other.to_string()),
    }
}
