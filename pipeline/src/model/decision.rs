//! The decision on one claim: the automatic one (version 1) or an officer's (a later
//! version), with the events it causes. The snapshot writer stores it; the store makes
//! its audit record.

use schemas::adjudication::LineView;
use schemas::claim::{ClaimStatus, Outcome, Reason};
use schemas::TenantId;
use serde::{Deserialize, Serialize};

use super::event::DomainEvent;
use crate::model::FraudScore;
use crate::rules::TraceEntry;

/// The decision on one claim, as the snapshot writer stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub tenant_id: TenantId,
    pub claim_id: String,
    /// 1 for the automatic decision; an officer's decision is a later version.
    pub version: i64,
    pub status: ClaimStatus,
    pub outcome: Outcome,
    pub approved_amount: i64,
    pub fraud: Option<FraudScore>,
    pub reasons: Vec<Reason>,
    pub rulebook_version: i64,
    pub audit_id: String,
    pub task_id: Option<String>,
    pub priority: i64,
    pub decided_at_ms: i64,
    pub trace: Vec<TraceEntry>,
    pub events: Vec<DomainEvent>,
    /// The claim's lines with their adjudication; their approved amounts add up to
    /// `approved_amount`. Empty in decisions written before lines were adjudicated.
    #[serde(default)]
    pub lines: Vec<LineView>,
    /// The officer (user id) whose review made this decision; none for the automatic one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub officer: Option<String>,
}
