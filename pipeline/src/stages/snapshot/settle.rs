//! The snapshot stage's pure core for benefits: applies each decision's [`Pricing`] to
//! its lines against the member's year, and counts a final payable outcome in it.
//!
//! A claim counted already (a redelivery, or a restart that restored it) is
//! adjudicated against the year as it stood before it (its `seq`), so it is decided the
//! same way again and counted once. A flagged claim is adjudicated against the year as
//! it stands, as an estimate for the officer, and counts only when approved.

use crate::adjudication::{settle, usage_of};
use crate::model::Decision;

use super::accumulators::{Accumulators, Entry};

/// A claim counted in its member's year.
#[derive(Debug, Clone, PartialEq)]
pub struct Count {
    /// Its state entry, to publish (again, for a claim counted before: publishing it
    /// twice changes nothing, and the first publication may not have happened).
    pub entry: Entry,
    /// Whether this call counted it, so that it is taken back should the store not
    /// hold the decision or the batch fail.
    pub fresh: bool,
}

/// Applies the plans of `decisions` in order. Per decision, its count when it is a
/// final payable outcome for a member on a plan.
pub fn process(decisions: &mut [Decision], state: &mut Accumulators) -> Vec<Option<Count>> {
    decisions.iter_mut().map(|d| apply(d, state)).collect()
}

fn apply(d: &mut Decision, state: &mut Accumulators) -> Option<Count> {
    let pricing = d.pricing.clone()?;
    let key = (d.tenant_id.to_string(), d.member_id.clone(), pricing.year);
    let before = state
        .year(&key)
        .map(|y| y.before(&d.claim_id))
        .unwrap_or_default();
    let mut lines = d.lines.clone();
    let mut usage = pricing.adjudicate(&mut lines, &before);
    if let Some(amount) = d.officer_amount {
        settle(&mut lines, amount);
        usage = usage_of(&lines);
    }
    d.set_lines(lines);
    if !d.is_payable() {
        return None;
    }
    let year = state.year_mut(key);
    let fresh = year.count(&d.claim_id, usage);
    let counted = year.counted(&d.claim_id)?.clone();
    d.counted = Some((pricing.year, counted.usage.clone()));
    let entry = Entry {
        tenant_id: d.tenant_id.to_string(),
        member_id: d.member_id.clone(),
        year: pricing.year,
        claim_id: d.claim_id.clone(),
        seq: counted.seq,
        reversed: false,
        usage: counted.usage,
    };
    Some(Count { entry, fresh })
}

/// Takes back what [`process`] counted fresh: for a decision the store turned down (a
/// redelivered claim decided differently: the first decision stands), or a batch that
/// failed and is handled again.
pub fn undo(state: &mut Accumulators, count: &Count) {
    if count.fresh {
        let e = &count.entry;
        let key = (e.tenant_id.clone(), e.member_id.clone(), e.year);
        state.year_mut(key).reverse(&e.claim_id);
    }
}
