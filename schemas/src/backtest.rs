//! Backtesting a rulebook (contract part 2, "Decisions you can explain, test and
//! redo"): the tenant's decided claims run through a rulebook, usually a draft, on the
//! facts they were decided with, against the decisions they got.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::claim::Outcome;

/// `POST /rulebooks/{rulebook_id}/backtest`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BacktestRequest {
    /// Claims received at or after this RFC 3339 time.
    #[serde(default)]
    pub since: Option<String>,
    /// Claims received before this RFC 3339 time.
    #[serde(default)]
    pub until: Option<String>,
    /// The most claims to run, oldest first: 1 to 1,000,000, 10,000 when left out.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1_000_000)]
    pub limit: Option<i64>,
}

impl BacktestRequest {
    pub const DEFAULT_LIMIT: i64 = 10_000;
    pub const MAX_LIMIT: i64 = 1_000_000;
}

/// The result: how the candidate would have decided the claims the baseline decided.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BacktestReport {
    /// The candidate.
    pub rulebook_id: String,
    /// The rulebook that decided most of the claims run (each claim's baseline is the
    /// decision it got, whichever rulebook made it); none when no claim was run.
    pub baseline_rulebook_id: Option<String>,
    /// Claims run.
    pub claims: u64,
    /// Claims whose outcome or approved amount would change.
    pub changed: u64,
    /// Claims per `"BASELINE->CANDIDATE"` outcome pair, unchanged pairs included, so
    /// that the counts add up to `claims`.
    pub transitions: BTreeMap<String, u64>,
    pub approved_amount: AmountTotals,
    /// Up to 20 changed claims, oldest first.
    pub samples: Vec<BacktestSample>,
}

/// The approved amounts of the claims run, in minor units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AmountTotals {
    pub baseline: i64,
    pub candidate: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BacktestSample {
    pub claim_id: String,
    pub baseline: SampleDecision,
    pub candidate: SampleDecision,
    /// The candidate's rules that matched the claim, in rulebook order.
    pub rules_matched: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SampleDecision {
    pub outcome: Outcome,
    pub approved_amount: i64,
}
