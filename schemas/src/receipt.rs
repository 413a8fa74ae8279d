//! The decision receipt (contract part 2, "Decisions you can explain, test and redo"):
//! why a claim was decided as it was, rebuilt from its decision's audit record.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::adjudication::LineView;
use crate::claim::{Outcome, Reason};
use crate::rulebook::RuleAction;

/// `GET /claims/{claim_id}/decision`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DecisionReceipt {
    pub claim_id: String,
    pub outcome: Outcome,
    pub approved_amount: i64,
    /// The rulebook the claim was evaluated with (its automatic decision's).
    pub rulebook_id: Option<String>,
    pub rulebook_version: i64,
    /// Every rule of that rulebook, in rulebook order.
    pub rules: Vec<RuleOutcome>,
    pub fraud: Option<ReceiptFraud>,
    /// Whether the member was covered on the service date; absent for a claim the
    /// pipeline declined before eligibility was checked (a void, a rejected claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligibility: Option<EligibilityStatus>,
    pub reasons: Vec<Reason>,
    pub lines: Vec<LineView>,
    /// The officer (user id) whose review made this decision; absent for the automatic
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub officer: Option<String>,
    /// RFC 3339.
    pub decided_at: String,
    /// The audit record this receipt is read from.
    pub audit_id: String,
}

/// What one rule did with the claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RuleOutcome {
    pub rule_id: String,
    pub action: RuleAction,
    pub matched: bool,
    /// What `when` gave (and, for an adjust rule, the amount it set); absent on error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Why the rule could not be evaluated; such a rule flags the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The fraud score the claim was decided with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReceiptFraud {
    /// In [0, 1].
    pub score: f64,
    pub model_version: String,
    pub reasons: Vec<FraudReasonView>,
}

/// One reason of a fraud score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FraudReasonView {
    pub code: String,
    /// This feature's risk on its own, 0..1; the score combines them as a noisy-or.
    pub contribution: f64,
    pub detail: String,
}

/// The member's eligibility on the service date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EligibilityStatus {
    /// On the roster and covered on the service date.
    Covered,
    /// On the roster, not covered on the service date (declined, CARC 27).
    NotCovered,
    /// Not on the roster, and the tenant requires eligibility (declined, CARC 31).
    Unknown,
    /// Not on the roster; the tenant does not require eligibility.
    Unlisted,
}
