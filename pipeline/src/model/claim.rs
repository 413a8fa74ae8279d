//! A claim on its way through the pipeline: the intake command as accepted, then the
//! record that travels through the stages, enriched by each stage in turn. A stage
//! fills its own part and passes the rest on unchanged.

use schemas::claim::{ClaimSubmission, Reason};
use schemas::TenantId;
use serde::{Deserialize, Serialize};

use crate::model::FraudScore;
use crate::rules::{ContractFacts, Evaluation, MemberHistory, ProviderFacts};

/// The record on the intake topic: the claim as submitted and what intake decided
/// about its context, so that processing uses the rulebook current at intake.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimSubmitted {
    pub tenant_id: TenantId,
    pub claim: ClaimSubmission,
    pub rulebook_id: String,
    pub rulebook_version: i64,
    pub received_at_ms: i64,
}

impl ClaimSubmitted {
    /// Records of one member share a key from intake on, so that a member's claims
    /// stay in acceptance order in one partition of every claim topic: the decide
    /// stage adjudicates them against the member's benefits in that order, and the
    /// fraud stage's member history has one writer.
    pub fn key(&self) -> String {
        member_key(&self.tenant_id, self.claim.member_id.as_str())
    }
}

/// The bus key of a member's claim records: `tenant/member`.
pub fn member_key(tenant_id: &str, member_id: &str) -> String {
    format!("{tenant_id}/{member_id}")
}

pub fn claim_key(tenant_id: &str, claim_id: &str) -> String {
    format!("{tenant_id}/{claim_id}")
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimInProcess {
    pub submitted: ClaimSubmitted,
    /// Set by validate: the contracted provider and its contract.
    #[serde(default)]
    pub provider: Option<ProviderFacts>,
    #[serde(default)]
    pub contract: Option<ContractFacts>,
    /// Set by validate when the claim cannot be processed; later stages pass it on and
    /// decide declines it with this reason.
    #[serde(default)]
    pub rejection: Option<Reason>,
    /// Set by rules: the member's recent history and the rulebook's verdict.
    #[serde(default)]
    pub member_history: Option<MemberHistory>,
    #[serde(default)]
    pub rules: Option<Evaluation>,
    /// Set by fraud.
    #[serde(default)]
    pub fraud: Option<FraudScore>,
}

impl ClaimInProcess {
    pub fn new(submitted: ClaimSubmitted) -> Self {
        Self {
            submitted,
            provider: None,
            contract: None,
            rejection: None,
            member_history: None,
            rules: None,
            fraud: None,
        }
    }

    /// The bus key, the member's (see [`ClaimSubmitted::key`]).
    pub fn key(&self) -> String {
        self.submitted.key()
    }

    pub fn tenant_id(&self) -> &str {
        &self.submitted.tenant_id
    }
}
