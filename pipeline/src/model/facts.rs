//! What the automatic decision on a claim read besides the claim, its rulebook and its
//! fraud score: the provider and contract validation found, the member's history and
//! standing, the tenant's thresholds and, for a member on a plan, the plan and the
//! member's year as it stood before the claim. It is kept with the
//! claim, so that a backtest decides the claim again with a draft rulebook on exactly
//! these facts, and a reprocess with the active rulebook (contract part 2, "Decisions
//! you can explain, test and redo").

use std::sync::Arc;

use schemas::claim::{Outcome, Reason};
use schemas::plan::Benefits;
use schemas::receipt::EligibilityStatus;
use serde::{Deserialize, Serialize};

use crate::adjudication::Usage;
use crate::model::{ClaimSubmitted, FraudScore};
use crate::rules::{ContractFacts, MemberFacts, MemberHistory, ProviderFacts};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DecisionFacts {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::shared::deserialize"
    )]
    pub provider: Option<ProviderFacts>,
    /// The contract with its fee schedule cut down to the claim's procedure codes: the
    /// only entries a decision on the claim can read.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::shared::deserialize"
    )]
    pub contract: Option<ContractFacts>,
    /// Validation's refusal, for a claim it declined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection: Option<Reason>,
    #[serde(default)]
    pub member_history: MemberHistory,
    /// The member on the roster (`null` to a rule for a member not on it).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::shared::deserialize"
    )]
    pub member: Option<MemberFacts>,
    /// The member's eligibility; none for a claim declined before it was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligibility: Option<EligibilityStatus>,
    /// The member's plan, for a member on one.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::shared::deserialize"
    )]
    pub plan: Option<PlanFacts>,
    /// For a claim priced against its member's plan: the member's year as the claim
    /// found it (set where the year is kept, the snapshot stage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub year_before: Option<Usage>,
    pub fraud_flag_threshold: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_approve_below: Option<i64>,
    /// What the decision made of the claim: a backtest's baseline. The amount is final
    /// once the member's plan applied (the snapshot stage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    #[serde(default)]
    pub approved_amount: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanFacts {
    pub plan_id: String,
    /// Shared with the pricing of the claim's decision, which keeps the same benefits.
    pub benefits: Arc<Benefits>,
}

/// A decided claim as kept: the intake command (with the rulebook that decided it),
/// its fraud score and the facts of its decision.
#[derive(Debug, Clone)]
pub struct DecidedClaim {
    pub submitted: ClaimSubmitted,
    pub fraud: Option<FraudScore>,
    pub facts: DecisionFacts,
}
