//! The record that travels through the stages: the intake command, enriched by each
//! stage in turn. A stage fills its own part and passes the rest on unchanged.

use schemas::claim::Reason;
use serde::{Deserialize, Serialize};

use crate::intake::ClaimSubmitted;
use crate::rules::{ContractFacts, Evaluation, MemberHistory, ProviderFacts};

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
    pub fraud: Option<super::fraud::FraudScore>,
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

    /// The bus key: one claim's records stay in order in one partition.
    pub fn key(&self) -> String {
        self.submitted.key()
    }

    /// The key on `claims.evaluated`, the fraud stage's input: all of one member's
    /// claims meet in one partition, so one process holds the member's whole history
    /// however many share the stage.
    pub fn member_key(&self) -> String {
        format!(
            "{}/{}",
            self.submitted.tenant_id, self.submitted.claim.member_id
        )
    }

    pub fn tenant_id(&self) -> &str {
        &self.submitted.tenant_id
    }
}
