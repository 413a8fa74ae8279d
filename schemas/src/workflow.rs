//! Review tasks and the officers' actions on them (contract: Workflow).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::claim::Reason;

/// Where a review task stands: waiting, held by an officer, or decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Open,
    Claimed,
    Done,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Open => "open",
            TaskStatus::Claimed => "claimed",
            TaskStatus::Done => "done",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "open" => Some(TaskStatus::Open),
            "claimed" => Some(TaskStatus::Claimed),
            "done" => Some(TaskStatus::Done),
            _ => None,
        }
    }
}

/// A review task as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Task {
    pub task_id: String,
    pub claim_id: String,
    pub status: TaskStatus,
    /// The officer (user id) holding the task, if any.
    pub assignee: Option<String>,
    /// Higher first: the fraud score weighs most, then the amount at stake.
    pub priority: i64,
    /// Why the claim was flagged.
    pub reasons: Vec<Reason>,
    pub created_at: String,
    /// `approve` or `decline`, once done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<TaskAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_amount: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What an officer does with a task they hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskAction {
    /// The claim becomes payable: `claim.approved`, then `claim.completed` (`APPROVED`).
    Approve,
    /// The claim is refused and its provider told: `claim.declined`, then
    /// `claim.completed` (`DECLINED`).
    Decline,
    /// The task goes back to the queue.
    Release,
}

impl TaskAction {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskAction::Approve => "approve",
            TaskAction::Decline => "decline",
            TaskAction::Release => "release",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "approve" => Some(TaskAction::Approve),
            "decline" => Some(TaskAction::Decline),
            "release" => Some(TaskAction::Release),
            _ => None,
        }
    }
}

/// Largest note accepted, in characters.
pub const MAX_NOTE_CHARS: usize = 2000;

/// `POST /workflow/tasks/{task_id}/transition`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Transition {
    pub action: TaskAction,
    /// The officer's note, kept with the task and in the audit log; at most 2,000
    /// characters.
    #[schema(max_length = 2000)]
    pub note: Option<String>,
    /// For `approve`: the amount to pay, from 0 to the claim amount; default the amount
    /// automatic processing approved.
    #[schema(minimum = 0)]
    pub approved_amount: Option<i64>,
}

/// An audit record (contract: Audit): one link of the tenant's hash chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditRecordView {
    pub audit_id: String,
    /// Its place in the tenant's chain, from 1.
    pub seq: i64,
    pub at: String,
    /// The user id who acted, or `pipeline` for automatic processing.
    pub actor: String,
    pub action: String,
    pub entity_type: String,
    pub entity_id: String,
    #[schema(value_type = Object)]
    pub details: serde_json::Value,
    /// `hash` of the record before it; 64 zeros for the first.
    pub prev_hash: String,
    /// Hex SHA-256 of the record's canonical form (docs/decisions.md, Audit).
    pub hash: String,
}
