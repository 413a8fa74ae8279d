//! What a rule sees (contract: Claims, the CEL paragraph): `claim` (the intake fields,
//! `service_date` as a string), `provider`, `contract` and `member_history`; and
//! (contract part 2) `member` (null for a member not on the roster) and, in a
//! `deny_line` rule, `line`, the line being decided. Numbers are all signed integers,
//! so that CEL comparisons with integer literals just work.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LineFacts {
    /// From 1, in the order submitted.
    #[serde(default)]
    pub line_no: i64,
    pub procedure_code: String,
    pub units: i64,
    pub amount: i64,
    #[serde(default)]
    pub modifiers: Vec<String>,
}

/// The claim's member on the roster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemberFacts {
    /// Whole years on the service date.
    pub age: i64,
    /// `F`, `M` or `U`.
    pub sex: String,
    pub plan_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClaimFacts {
    pub claim_id: String,
    pub member_id: String,
    pub provider_id: String,
    pub claim_amount: i64,
    pub service_date: String,
    pub lines: Vec<LineFacts>,
    pub diagnosis_codes: Vec<String>,
    pub metadata: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderFacts {
    pub provider_id: String,
    pub name: String,
    pub npi: Option<String>,
    pub specialty: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContractFacts {
    pub contract_id: String,
    /// Maximum amount per unit of each procedure code.
    pub fee_schedule: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MemberHistory {
    pub claims_last_24h: i64,
    pub amount_last_30d: i64,
}

/// Everything one evaluation reads.
#[derive(Debug, Clone, Default)]
pub struct EvalInput {
    pub claim: ClaimFacts,
    pub provider: ProviderFacts,
    pub contract: ContractFacts,
    pub member_history: MemberHistory,
    /// `None` for a member not on the roster (CEL sees `null`).
    pub member: Option<MemberFacts>,
    /// The line a `deny_line` rule is deciding; `None` for every other rule.
    pub line: Option<LineFacts>,
}
