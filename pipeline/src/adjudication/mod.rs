//! Line-level adjudication (contract part 2): each service line's allowed and paid
//! amounts, the member's share and the adjustments that explain every cent, against
//! the contract's fee schedule, the rules' verdicts and the member's plan and what the
//! member has used of it this year.
//!
//! Pure: no store, no bus, no clock. The stage that owns a member's accumulators calls
//! [`adjudicate`] with the member's year so far and applies the [`Usage`] it returns.
//!
//! Files: [`lines`] the adjudicator, [`pricing`] what the decide stage fixed before the
//! member's year applies, [`usage`] a member's year and what each claim added to it (each kept
//! packed, [`packed`]),
//! [`eligibility`] whether the member is covered on the service date.

pub mod eligibility;
pub mod lines;
mod packed;
pub mod pricing;
#[cfg(test)]
mod tests;
pub mod usage;

pub use eligibility::{eligibility, Eligibility};
pub use lines::{
    adjudicate, adjudicate_lines, adjudicate_views, approved_total, settle, Adjudicated, Cap,
    Denial, LineIn, Verdict,
};
pub use pricing::{usage_of, Pricing};
pub use usage::{Counted, MemberYear, Usage, Visits};
