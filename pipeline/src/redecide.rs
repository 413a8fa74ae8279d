//! A decided claim decided again: by a backtest's candidate rulebook, or by the active
//! one in a reprocess. The claim runs through the same pure cores as a new claim (the
//! rules stage's evaluation, the decide stage's decision) on the facts its decision
//! kept (see [`DecisionFacts`]), with its fraud score as it was: scoring it again would
//! count the claim twice in its member's and provider's figures.

use crate::model::{ClaimInProcess, DecidedClaim, Decision, Kept};
use crate::rules::{CompiledRulebook, Tracing};
use crate::stages::decide::{self, Pass};
use crate::stages::rules;

/// The rulebook a claim is decided again with.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub rulebook_id: &'a str,
    pub version: i64,
    pub compiled: &'a CompiledRulebook,
}

/// `claim` decided again with `candidate`: the automatic decision as it would have
/// been, its lines as the decide stage leaves them (a claim priced against its
/// member's plan is priced where the member's year is kept; see [`priced`]). The
/// decision carries the claim's facts, with its own outcome and amount.
pub fn redecide(
    claim: DecidedClaim,
    candidate: Candidate<'_>,
    now_ms: i64,
    pass: Pass<'_>,
) -> Decision {
    let DecidedClaim {
        mut submitted,
        fraud,
        mut facts,
    } = claim;
    submitted.rulebook_id = candidate.rulebook_id.to_owned();
    submitted.rulebook_version = candidate.version;
    // The facts the claim travels with are lent to it and taken back after.
    let mut input = ClaimInProcess::new(submitted);
    input.provider = facts.provider.take();
    input.contract = facts.contract.take();
    input.rejection = facts.rejection.take();
    input.fraud = fraud;
    // A backtest shows the rules a claim matched, never the whole trace.
    let tracing = match pass {
        Pass::Trial => Tracing::Matched,
        Pass::First | Pass::Again { .. } => Tracing::Full,
    };
    let mut evaluated = rules::evaluate(
        input,
        candidate.compiled,
        facts.member_history,
        &mut facts.member,
        tracing,
    );
    // The trace (every rule's result) moves into the decision instead of being copied
    // there; the decide stage reads only the hits.
    let trace = evaluated
        .rules
        .as_mut()
        .map(|e| std::mem::take(&mut e.trace));
    let mut decision = decide::decide(&evaluated, &facts, now_ms, pass);
    if let Some(trace) = trace {
        decision.trace = trace.into();
    }
    facts.provider = evaluated.provider;
    facts.contract = evaluated.contract;
    facts.rejection = evaluated.rejection;
    facts.outcome = Some(decision.outcome);
    facts.approved_amount = decision.approved_amount;
    decision.facts = Some(Box::new(facts).into());
    decision
}

/// The decision's approved amount once its member's plan applied against the year as
/// the claim first found it (its facts' `year_before`): what a backtest compares. The
/// member's later claims are not priced again, so a candidate that pays one claim
/// differently does not move the member's later claims.
pub fn priced(decision: &mut Decision) -> i64 {
    let year = decision
        .facts
        .as_ref()
        .and_then(Kept::value)
        .and_then(|f| f.year_before.clone());
    let pricing = decision.pricing.as_ref().and_then(Kept::value);
    if let (Some(pricing), Some(year)) = (pricing, year) {
        let mut lines = std::mem::take(&mut decision.lines);
        pricing.adjudicate(&mut lines, &year);
        decision.set_lines(lines);
    }
    decision.approved_amount
}
