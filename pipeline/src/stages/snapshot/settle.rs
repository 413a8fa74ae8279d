//! The snapshot stage's pure core for benefits: applies each decision's [`Pricing`] to
//! its lines against the member's year, and counts a final payable outcome in it. The
//! automatic decision on a replacement or a void first takes the claim it replaces out
//! of the member's year (contract part 2: a replacement is adjudicated after the one it
//! replaces is reversed).
//!
//! A decision the fused chain wrote already ([`Decision::written`], met only by `claims
//! replay`) has its benefits applied: it is counted as it was, not adjudicated again.
//!
//! A claim counted already (a redelivery, or a restart that restored it) is
//! adjudicated against the year as it stood before it (its `seq`), so it is decided the
//! same way again and counted once. A flagged claim is adjudicated against the year as
//! it stands, as an estimate for the officer, and counts only when approved.
//!
//! [`Pricing`]: crate::adjudication::Pricing

use crate::adjudication::{settle, usage_of, Counted, Usage};
use crate::model::{Decision, Kept};

use super::accumulators::{Accumulators, Entry};

/// A change to a member's year: a claim counted, or one taken out (`entry.reversed`).
#[derive(Debug, Clone, PartialEq)]
pub struct Count {
    /// Its state entry, to publish (again, for a change made before: publishing it twice
    /// changes nothing, and the first publication may not have happened).
    pub entry: Entry,
    /// Whether this call made the change, so that it is undone should the store not
    /// hold the decision or the batch fail.
    pub fresh: bool,
}

/// Applies `decisions` in order to the members' years. Per decision, the changes it
/// made.
pub fn process(decisions: &mut [Decision], state: &mut Accumulators) -> Vec<Vec<Count>> {
    decisions
        .iter_mut()
        .map(|d| {
            let mut changes: Vec<Count> = reverse_replaced(d, state).into_iter().collect();
            changes.extend(if d.written {
                restore(d, state)
            } else {
                apply(d, state)
            });
            changes
        })
        .collect()
}

/// The automatic decision on a replacement or a void: the claim it replaces leaves the
/// member's year.
fn reverse_replaced(d: &Decision, state: &mut Accumulators) -> Option<Count> {
    let replaced = d.replaces_claim_id.as_deref().filter(|_| d.version == 1)?;
    let tenant = d.tenant_id.to_string();
    let (year, counted) = state.take(&tenant, &d.member_id, replaced)?;
    Some(Count {
        entry: Entry {
            tenant_id: tenant,
            member_id: d.member_id.clone(),
            year,
            claim_id: replaced.to_owned(),
            seq: counted.seq,
            reversed: true,
            usage: counted.usage,
        },
        fresh: true,
    })
}

/// A written decision's count, as the chain made it.
fn restore(d: &mut Decision, state: &mut Accumulators) -> Option<Count> {
    let (year, usage) = d.counted.clone()?;
    let c = count(d, state, year, usage)?;
    d.counted_seq = c.entry.seq;
    Some(c)
}

/// Counts the decision's claim in its member's year, if not counted yet.
fn count(d: &Decision, state: &mut Accumulators, year: i32, usage: Usage) -> Option<Count> {
    let member_year = state.year_mut(d.tenant_id.as_str(), &d.member_id, year);
    let fresh = member_year.count(&d.claim_id, usage);
    let counted = member_year.counted(&d.claim_id)?;
    let entry = Entry {
        tenant_id: d.tenant_id.to_string(),
        member_id: d.member_id.clone(),
        year,
        claim_id: d.claim_id.clone(),
        seq: counted.seq,
        reversed: false,
        usage: counted.usage,
    };
    Some(Count { entry, fresh })
}

fn apply(d: &mut Decision, state: &mut Accumulators) -> Option<Count> {
    let pricing = d.pricing.as_ref()?.value()?;
    let year_of_service = pricing.year;
    let (tenant, member) = (d.tenant_id.as_str(), d.member_id.as_str());
    let before = state
        .year(tenant, member, year_of_service)
        .map(|y| y.before(&d.claim_id))
        .unwrap_or_default();
    let mut lines = std::mem::take(&mut d.lines);
    let mut usage = pricing.adjudicate(&mut lines, &before);
    // The year as the claim found it: a backtest prices the claim against it again.
    if let Some(facts) = d.facts.as_mut().and_then(Kept::value_mut) {
        facts.year_before = Some(before);
    }
    if let Some(amount) = d.officer_amount {
        settle(&mut lines, amount);
        usage = usage_of(&lines);
    }
    d.set_lines(lines);
    if let Some(facts) = d.facts.as_mut().and_then(Kept::value_mut) {
        facts.approved_amount = d.approved_amount;
    }
    if !d.is_payable() {
        return None;
    }
    let c = count(d, state, year_of_service, usage)?;
    d.counted = Some((year_of_service, c.entry.usage.clone()));
    d.counted_seq = c.entry.seq;
    Some(c)
}

/// Undoes what [`process`] changed fresh: for a decision the store turned down (a
/// redelivered claim decided differently: the first decision stands), or a batch that
/// failed and is handled again. Changes are undone last first.
pub fn undo(state: &mut Accumulators, changes: &[Count]) {
    for c in changes.iter().rev().filter(|c| c.fresh) {
        let e = &c.entry;
        let year = state.year_mut(&e.tenant_id, &e.member_id, e.year);
        if e.reversed {
            year.restore(
                &e.claim_id,
                Counted {
                    seq: e.seq,
                    usage: e.usage.clone(),
                },
            );
        } else {
            year.reverse(&e.claim_id);
        }
    }
}
