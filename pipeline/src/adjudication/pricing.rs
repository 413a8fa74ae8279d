//! What the decide stage fixed about a claim's payment before the member's year
//! applies: the member's plan, the contract's fee schedule for the claim's codes, the
//! lines' rule denials and the claim-level cap. It travels with the decision to the
//! stage that keeps the members' accumulators (the snapshot stage), which adjudicates
//! the lines against the year as it stands there; it is stored with the claim, so that
//! an officer's approval is adjudicated against the year as it stands then.

use std::collections::BTreeMap;
use std::sync::Arc;

use schemas::adjudication::LineView;
use schemas::plan::Benefits;
use serde::{Deserialize, Serialize};

use super::lines::{adjudicate_lines, Cap, Denial, Verdict};
use super::usage::Usage;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pricing {
    pub member_id: String,
    pub plan_id: String,
    /// The plan's benefits when the claim was decided (shared with the decision's facts).
    pub benefits: Arc<Benefits>,
    /// The calendar year of the service date: the accumulators the claim counts in.
    pub year: i32,
    /// The contract's maximum per unit of each of the claim's procedure codes.
    #[serde(default)]
    pub fee_schedule: BTreeMap<String, i64>,
    /// Per line, the `deny_line` rule that denied it; empty when none did.
    #[serde(default)]
    pub denials: Vec<Option<Denial>>,
    #[serde(default)]
    pub cap: Option<Cap>,
}

#[cfg(test)]
impl Pricing {
    /// M-1's 2026 on plan `gold`: a deductible of 500.00 then 20% coinsurance, no fee
    /// schedule, no denials, no cap.
    pub fn sample() -> Self {
        Self {
            member_id: "M-1".into(),
            plan_id: "gold".into(),
            benefits: Arc::new(Benefits {
                deductible: 50_000,
                coinsurance_pct: 20,
                out_of_pocket_max: 1_000_000,
                ..Default::default()
            }),
            year: 2026,
            fee_schedule: Default::default(),
            denials: Vec::new(),
            cap: None,
        }
    }
}

impl Pricing {
    /// Adjudicates `lines` against the plan and `year`, what the member used before this
    /// claim, writing each line's adjudication; what the claim adds to the year.
    pub fn adjudicate(&self, lines: &mut [LineView], year: &Usage) -> Usage {
        let verdict = Verdict::Pay {
            cap: self.cap.clone(),
        };
        adjudicate_lines(
            lines,
            &self.fee_schedule,
            &self.denials,
            Some(&self.benefits),
            year,
            &verdict,
        )
    }
}

/// What a claim's adjudicated lines add to the member's year: the member's shares,
/// what the plan pays, and a visit per paid line with a procedure code. The same as
/// [`Pricing::adjudicate`] answers for the lines it adjudicated, and what an officer's
/// amount leaves of it.
pub fn usage_of(lines: &[LineView]) -> Usage {
    let mut usage = Usage::default();
    for l in lines {
        let Some(a) = &l.adjudication else { continue };
        if a.status == schemas::adjudication::LineStatus::Denied {
            continue;
        }
        let share = &a.member_responsibility;
        usage.deductible += share.deductible;
        usage.out_of_pocket += share.total();
        usage.paid += a.approved_amount;
        if let Some(code) = &l.procedure_code {
            usage.visits.add(code, 1);
        }
    }
    usage
}
