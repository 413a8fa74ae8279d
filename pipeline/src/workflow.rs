//! Officers' decisions on review tasks. The task's row settles who holds it (see
//! `store::tasks`); a decision marks the task done and puts an [`OfficerDecision`] on
//! the workflow topic in one store transaction, so an answered 200 means both are on
//! disk. The workflow stage then applies it to the claim, ordered with the claim's
//! other records (same key), and emits the events.

use schemas::workflow::{Task, TaskAction};
use schemas::TenantId;
use serde::{Deserialize, Serialize};

use crate::bus::{Bus, Message, TopicSpec};
use crate::model::claim_key;
use crate::store::{AuditEntry, Store, StoreError, TaskDecision, TaskRefusal};

/// The record on `claims.workflow`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OfficerDecision {
    pub tenant_id: TenantId,
    pub claim_id: String,
    pub task_id: String,
    /// The officer's user id.
    pub officer: String,
    pub action: TaskAction,
    /// For `approve`: the amount to pay, already checked against the claim.
    pub approved_amount: Option<i64>,
    pub note: Option<String>,
    pub decided_at_ms: i64,
}

impl OfficerDecision {
    pub fn key(&self) -> String {
        claim_key(&self.tenant_id, &self.claim_id)
    }
}

/// Marks the task done with the officer's decision and publishes it, atomically.
pub async fn decide(
    store: &Store,
    bus: &Bus,
    topic: &TopicSpec,
    d: &OfficerDecision,
) -> Result<Result<Task, TaskRefusal>, StoreError> {
    let mut tx = store.writer().begin().await?;
    let decided = store
        .decide_task_in(
            &mut tx,
            &d.tenant_id,
            &d.task_id,
            &d.officer,
            &TaskDecision {
                action: d.action,
                note: d.note.as_deref(),
                approved_amount: d.approved_amount,
                at: d.decided_at_ms,
            },
        )
        .await?;
    if !decided {
        tx.rollback().await?;
        return store
            .refusal(&d.tenant_id, &d.task_id, &d.officer, Some(d.action))
            .await;
    }
    let message = Message {
        key: d.key(),
        value: serde_json::to_vec(d).map_err(|e| StoreError::Config(e.to_string()))?,
    };
    bus.append_in(&mut tx, topic, &[message])
        .await
        .map_err(crate::intake::into_store)?;
    let entry = AuditEntry::new(
        &d.tenant_id,
        &d.officer,
        &format!("task.{}", past_tense(d.action)),
        ("task", &d.task_id),
        serde_json::json!({ "claim_id": d.claim_id, "note": d.note, "approved_amount": d.approved_amount }),
    );
    store.append_audit_in(&mut tx, &[entry]).await?;
    tx.commit().await?;
    bus.wake(&topic.name);
    Ok(store
        .task(&d.tenant_id, &d.task_id)
        .await?
        .ok_or(TaskRefusal::NotFound))
}

fn past_tense(a: TaskAction) -> &'static str {
    match a {
        TaskAction::Approve => "approved",
        TaskAction::Decline => "declined",
        TaskAction::Release => "released",
    }
}
