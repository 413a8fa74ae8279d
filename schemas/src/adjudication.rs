//! A service line's adjudication (contract part 2: Line-level adjudication): what was
//! allowed and paid, the member's share, and every cut as an adjustment in the
//! industry's terms (group and CARC, optionally RARC), so that for every line
//! `amount = approved_amount + sum(adjustments.amount)`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The X12 claim adjustment group: who bears the amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub enum Group {
    /// Contractual obligation: the provider writes it off.
    CO,
    /// Patient responsibility: the member owes it.
    PR,
    /// Other adjustment.
    OA,
    /// Payer-initiated reduction.
    PI,
}

/// Claim adjustment reason codes the service itself uses; rules may name others.
pub mod carc {
    /// Deductible amount.
    pub const DEDUCTIBLE: &str = "1";
    /// Coinsurance amount.
    pub const COINSURANCE: &str = "2";
    /// Co-payment amount.
    pub const COPAY: &str = "3";
    /// Expenses incurred after coverage terminated.
    pub const NOT_COVERED: &str = "27";
    /// Patient cannot be identified as our insured.
    pub const MEMBER_UNKNOWN: &str = "31";
    /// Charge exceeds fee schedule or maximum allowable.
    pub const FEE_SCHEDULE: &str = "45";
    /// Non-covered charges: the default for a decline or a denied line.
    pub const NON_COVERED: &str = "96";
    /// Benefit maximum for this time period has been reached.
    pub const BENEFIT_MAXIMUM: &str = "119";
    /// Claim/service denied: the default for a block.
    pub const DENIED: &str = "A1";
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Adjustment {
    pub group: Group,
    pub carc: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rarc: Option<String>,
    /// Minor units, positive.
    pub amount: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LineStatus {
    /// Paid as billed.
    Approved,
    /// Paid in part, or owed by the member in part.
    Adjusted,
    /// Not paid: denied by a rule, a limit or the claim's outcome.
    Denied,
}

/// The member's share of a line, by kind. Each is also a `PR` adjustment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemberResponsibility {
    pub deductible: i64,
    pub coinsurance: i64,
    pub copay: i64,
}

impl MemberResponsibility {
    pub fn total(&self) -> i64 {
        self.deductible + self.coinsurance + self.copay
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LineAdjudication {
    pub status: LineStatus,
    /// The amount after the fee schedule: what the plan recognises for the service.
    pub allowed_amount: i64,
    /// What the plan pays.
    pub approved_amount: i64,
    pub member_responsibility: MemberResponsibility,
    /// In the order they were taken.
    pub adjustments: Vec<Adjustment>,
}

impl LineAdjudication {
    pub fn adjusted_total(&self) -> i64 {
        self.adjustments.iter().map(|a| a.amount).sum()
    }
}

/// A claim's line as reads show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LineView {
    pub line_no: i64,
    pub procedure_code: Option<String>,
    pub units: i64,
    pub amount: i64,
    pub modifiers: Vec<String>,
    /// Present once the claim is decided.
    pub adjudication: Option<LineAdjudication>,
}
