//! Stage 4, decide: input `claims.scored`. Applies the contract's decision order and
//! produces the decision and its domain events (contract: Claims):
//! a validation rejection → `DECLINED`; any `block` rule → `BLOCKED`; else any
//! `decline` rule → `DECLINED`; else any `flag` rule, a rule that failed, or
//! `fraud_score >= fraud_flag_threshold` → `FLAGGED` (status `pending_review`, a review
//! task), unless the amount is below the tenant's `auto_approve_below`; else
//! `ADJUDICATED`. `approved_amount` is 0 for `BLOCKED` and `DECLINED`.
//!
//! Eligibility (contract part 2) comes right after validation: a member on the roster
//! not covered on the service date, or a member not on it when the tenant requires
//! eligibility, is `DECLINED` with the eligibility reason and its CARC. For a member on
//! a plan, the decision carries its [`Pricing`]: the snapshot stage, which keeps the
//! members' accumulators, applies the plan to the lines against the member's year.
//!
//! Every id is derived from the claim (UUIDv5), so a redelivered claim yields the same
//! audit id, task id and event ids, and receivers can drop the repeat.

use std::sync::Arc;

use schemas::adjudication::{carc, LineView};
use schemas::claim::{ClaimStatus, Frequency, Outcome, Reason};
use schemas::tenant::TenantSettings;
use serde_json::Value;

use super::rules::member_facts;
use super::runner::{decode_all, encode, Outputs, Stage, StageError};
use crate::adjudication::{
    adjudicate_views, approved_total, eligibility, Cap, Denial, Eligibility, Pricing, Verdict,
};
use crate::bus::{Record, TopicSpec};
use crate::clock::{ms_to_rfc3339, Clock};
use crate::config_cache::{ConfigCache, MemberPlan};
use crate::model::{
    ordered_id, ClaimInProcess, Decision, DecisionFacts, DomainEvent, EventKind, Kept, PlanFacts,
};
use crate::rules::{ContractFacts, Evaluation};
use crate::topics::Topics;

/// Review priority: higher first; fraud risk weighs most, then the amount at stake.
pub fn priority(fraud_score: f64, amount: i64) -> i64 {
    let risk = (fraud_score.clamp(0.0, 1.0) * 700.0) as i64;
    let stake = ((amount.max(1) as f64).log10() * 30.0).min(300.0) as i64;
    risk + stake
}

/// The pure core. `member` is the claim's member on the tenant's roster, if listed.
/// The decision carries the facts it was made with (see [`DecisionFacts`]).
pub fn process(
    claim: &ClaimInProcess,
    settings: &TenantSettings,
    member: Option<&MemberPlan>,
    now_ms: i64,
) -> Decision {
    let mut facts = facts_of(claim, settings, member);
    let mut decision = decide(claim, &facts, now_ms, Pass::First);
    facts.outcome = Some(decision.outcome);
    facts.approved_amount = decision.approved_amount;
    decision.facts = Some(Box::new(facts).into());
    decision
}

/// What deciding `claim` reads besides itself, gathered from the tenant's settings and
/// roster.
pub fn facts_of(
    claim: &ClaimInProcess,
    settings: &TenantSettings,
    member: Option<&MemberPlan>,
) -> DecisionFacts {
    let submission = &claim.submitted.claim;
    let service_date = submission.service_date;
    let void = submission.frequency == Frequency::Void && submission.replaces_claim_id.is_some();
    let checked = eligibility(
        member.map(|m| &*m.member),
        service_date,
        settings.eligibility_required,
    );
    DecisionFacts {
        provider: claim.provider.clone(),
        contract: claim.contract.as_ref().map(|c| ContractFacts {
            contract_id: c.contract_id.clone(),
            fee_schedule: submission
                .lines
                .iter()
                .filter_map(|l| {
                    let code = l.procedure_code.as_str();
                    Some((code.to_owned(), *c.fee_schedule.get(code)?))
                })
                .collect(),
        }),
        rejection: claim.rejection.clone(),
        member_history: claim.member_history.unwrap_or_default(),
        member: member.map(|m| member_facts(m, service_date)),
        eligibility: (!void && claim.rejection.is_none()).then(|| checked.status()),
        plan: member.and_then(|m| m.plan.as_deref()).map(|p| PlanFacts {
            plan_id: p.plan_id.clone(),
            benefits: Arc::new(p.benefits.clone()),
        }),
        year_before: None,
        fraud_flag_threshold: settings.fraud_flag_threshold,
        auto_approve_below: settings.auto_approve_below,
        outcome: None,
        approved_amount: 0,
    }
}

/// Which automatic decision on a claim: its first, or a reprocess job's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass<'a> {
    /// Version 1, with ids derived from the claim alone, so that a redelivered claim
    /// yields the same ones.
    First,
    /// A reprocess job's decision, the claim's version `version`, with ids derived from
    /// the job too: told apart from the first decision's, found again when the job
    /// resumes. It tells no replacement again, and a claim it leaves under review keeps
    /// its review task.
    Again { version: i64, job_id: &'a str },
    /// A backtest's decision: as the first, but told to nobody, so without events.
    Trial,
}

/// Decides `claim` (its rules evaluated, its fraud scored) on `facts`: a new claim on
/// the facts [`facts_of`] gathered, a claim decided before on the facts kept with it.
pub fn decide(
    claim: &ClaimInProcess,
    facts: &DecisionFacts,
    now_ms: i64,
    pass: Pass<'_>,
) -> Decision {
    let cmd = &claim.submitted;
    let (tenant_id, claim_id) = (&cmd.tenant_id, cmd.claim.claim_id.as_str());
    let amount = cmd.claim.claim_amount;
    let mut reasons = Vec::new();
    let fraud_score = claim.fraud.as_ref().map(|f| f.fraud_score).unwrap_or(0.0);
    let rule_reason = |h: &crate::rules::RuleHit, code: &str| Reason {
        source: "rule".into(),
        code: code.to_owned(),
        rule_id: Some(h.rule_id.to_string()),
        message: if h.description.is_empty() {
            format!("rule {} matched", h.rule_id)
        } else {
            h.description.to_string()
        },
        carc: None,
    };

    let refusal = facts
        .eligibility
        .and_then(|s| Eligibility::of_status(s).refusal());
    let replaced = cmd.claim.replaces_claim_id.as_ref().map(|c| c.as_str());
    let (outcome, blocking_rule) = if let (Frequency::Void, Some(replaced)) =
        (cmd.claim.frequency, replaced)
    {
        // A void is only the reversal of the claim it names, whatever else holds.
        reasons.push(Reason {
            source: "correction".into(),
            code: "VOID".into(),
            rule_id: None,
            message: format!("voids claim {replaced}"),
            carc: Some(carc::DENIED.into()),
        });
        (Outcome::Declined, None)
    } else if let Some(r) = &claim.rejection {
        reasons.push(r.clone());
        (Outcome::Declined, None)
    } else if let Some((code, carc, message)) = refusal {
        reasons.push(Reason {
            source: "eligibility".into(),
            code: code.into(),
            rule_id: None,
            message: message.into(),
            carc: Some(carc.into()),
        });
        (Outcome::Declined, None)
    } else {
        // Read where it lies: a copy took the whole trace with it.
        let none = Evaluation::default();
        let ev = claim.rules.as_ref().unwrap_or(&none);
        let fraud_flag = fraud_score >= facts.fraud_flag_threshold;
        // Every matching rule contributes its reason code (contract: Claims).
        for h in ev
            .blocks
            .iter()
            .chain(&ev.declines)
            .chain(&ev.flags)
            .chain(&ev.adjusts)
        {
            reasons.push(rule_reason(h, &h.reason_code));
        }
        // A deny_line rule once, however many lines it denied.
        let mut line_rules: Vec<&crate::rules::RuleHit> = Vec::new();
        for d in &ev.line_denials {
            if !line_rules.iter().any(|h| h.rule_id == d.rule.rule_id) {
                line_rules.push(&d.rule);
                reasons.push(rule_reason(&d.rule, &d.rule.reason_code));
            }
        }
        for h in &ev.errors {
            reasons.push(Reason {
                source: "rule".into(),
                code: "RULE_ERROR".into(),
                rule_id: Some(h.rule_id.to_string()),
                message: format!(
                    "rule {} could not be evaluated; the claim needs review",
                    h.rule_id
                ),
                carc: None,
            });
        }
        if let Some(f) = &claim.fraud {
            for r in &f.reasons {
                reasons.push(Reason {
                    source: "fraud".into(),
                    code: r.code.clone(),
                    rule_id: None,
                    message: r.detail.clone(),
                    carc: None,
                });
            }
        }
        if let Some(b) = ev.blocks.first() {
            (Outcome::Blocked, Some(b.clone()))
        } else if !ev.declines.is_empty() {
            (Outcome::Declined, None)
        } else if !ev.flags.is_empty() || !ev.errors.is_empty() || fraud_flag {
            if facts.auto_approve_below.is_some_and(|limit| amount < limit) {
                reasons.push(Reason {
                    source: "rule".into(),
                    code: "AUTO_APPROVED".into(),
                    rule_id: None,
                    message: "below the tenant's auto-approval amount; not sent to review".into(),
                    carc: None,
                });
                (Outcome::Adjudicated, None)
            } else {
                (Outcome::Flagged, None)
            }
        } else {
            (Outcome::Adjudicated, None)
        }
    };
    let pricing = match outcome {
        Outcome::Adjudicated | Outcome::Flagged => facts.plan.as_ref().map(|p| pricing(claim, p)),
        _ => None,
    };
    // A claim priced against its member's plan has its lines adjudicated where the
    // member's year is kept (the snapshot stage), which fills in its amounts and its
    // lines, here and in `claim.completed`; adjudicating them here too would be undone.
    let lines = if pricing.is_some() {
        claim.submitted.claim.service_lines()
    } else {
        let denial = denial(claim, outcome, &reasons, blocking_rule.as_ref());
        adjudicated_lines(claim, denial)
    };
    let approved_amount = approved_total(&lines);
    let status = if outcome == Outcome::Flagged {
        ClaimStatus::PendingReview
    } else {
        ClaimStatus::Completed
    };
    let received = cmd.received_at_ms;
    let (version, again) = match pass {
        Pass::First | Pass::Trial => (1, None),
        Pass::Again { version, job_id } => (version, Some(format!("reprocess/{job_id}"))),
    };
    let told = pass != Pass::Trial;
    // A backtest's decision is written and told nowhere: it needs no ids, and making
    // them was a tenth of a backtest's work.
    let audit_id = match &again {
        _ if !told => String::new(),
        None => ordered_id("aud", received, tenant_id, claim_id, "decision-1"),
        Some(tag) => ordered_id("aud", received, tenant_id, claim_id, tag),
    };
    let task_id = (outcome == Outcome::Flagged && told)
        .then(|| ordered_id("tsk", received, tenant_id, claim_id, "review"));
    let prio = priority(fraud_score, amount);
    let timestamp = if told {
        ms_to_rfc3339(now_ms)
    } else {
        String::new()
    };
    let event = |kind: EventKind, data: serde_json::Value| {
        DomainEvent::occurrence(
            kind,
            tenant_id,
            claim_id,
            again.as_deref(),
            timestamp.clone(),
            data,
        )
    };
    let replaced = replaced.filter(|_| again.is_none());
    let mut events = Vec::new();
    // The claim replaced is reversed first (by the snapshot stage), then this one told.
    if let Some(replaced) = replaced.filter(|_| told) {
        let kind = match cmd.claim.frequency {
            Frequency::Void => EventKind::ClaimVoided,
            _ => EventKind::ClaimReplaced,
        };
        events.push(DomainEvent::new(
            kind,
            tenant_id,
            replaced,
            timestamp.clone(),
            serde_json::json!({"claim_id": replaced, "replaced_by": claim_id, "audit_id": audit_id}),
        ));
    }
    match outcome {
        _ if !told => {}
        Outcome::Blocked => {
            let b = blocking_rule.as_ref();
            events.push(event(EventKind::ClaimBlocked, serde_json::json!({
                "claim_id": claim_id, "status": status, "outcome": outcome,
                "rule_id": b.map(|h| h.rule_id.to_string()), "reason_code": b.map(|h| h.reason_code.to_string()),
                "audit_id": audit_id,
            })));
        }
        Outcome::Flagged => {
            events.push(event(EventKind::ClaimFlagged, serde_json::json!({
                "claim_id": claim_id, "status": status, "outcome": outcome, "fraud_score": fraud_score,
                "reasons": reasons, "task_id": task_id, "audit_id": audit_id,
            })));
            if again.is_none() {
                events.push(event(
                    EventKind::WorkflowTaskCreated,
                    serde_json::json!({
                        "task_id": task_id, "claim_id": claim_id, "priority": prio, "reasons": reasons,
                    }),
                ));
            }
        }
        _ => {}
    }
    let mut decision = Decision {
        tenant_id: tenant_id.clone(),
        claim_id: claim_id.to_owned(),
        member_id: cmd.claim.member_id.to_string(),
        version,
        status,
        outcome,
        approved_amount,
        fraud: claim.fraud.clone(),
        reasons,
        rulebook_id: cmd.rulebook_id.clone(),
        rulebook_version: cmd.rulebook_version,
        audit_id,
        task_id,
        priority: prio,
        decided_at_ms: now_ms,
        trace: claim
            .rules
            .as_ref()
            .map(|e| e.trace.clone())
            .unwrap_or_default()
            .into(),
        events,
        lines,
        eligibility: facts.eligibility,
        reviews: None,
        officer: None,
        pricing: pricing.map(Kept::from),
        officer_amount: None,
        replaces_claim_id: replaced.map(str::to_owned),
        facts: None,
        counted: None,
        counted_seq: 0,
        written: false,
        lines_json: None,
    };
    if told {
        let completed = decision.completed_data(decision.pricing.is_none());
        decision
            .events
            .push(event(EventKind::ClaimCompleted, Value::Null));
        if let Some(e) = decision.events.last_mut() {
            e.data = completed;
        }
    }
    decision
}

/// What the snapshot stage needs to apply the member's plan to the claim's lines.
fn pricing(claim: &ClaimInProcess, plan: &PlanFacts) -> Pricing {
    let submission = &claim.submitted.claim;
    let fee_schedule = claim
        .contract
        .as_ref()
        .map(|c| {
            submission
                .lines
                .iter()
                .filter_map(|l| {
                    let code = l.procedure_code.as_str();
                    Some((code.to_owned(), *c.fee_schedule.get(code)?))
                })
                .collect()
        })
        .unwrap_or_default();
    Pricing {
        member_id: submission.member_id.to_string(),
        plan_id: plan.plan_id.clone(),
        benefits: plan.benefits.clone(),
        year: submission.service_date.year(),
        fee_schedule,
        // A claim submitted without lines has one.
        denials: line_denials(claim, submission.lines.len().max(1)),
        cap: cap(claim),
    }
}

/// An `adjust` rule's cap on the claim's total, with the first adjusting rule's CARC
/// (`45` by default) and RARC.
fn cap(claim: &ClaimInProcess) -> Option<Cap> {
    let ev = claim.rules.as_ref()?;
    let first = ev.adjusts.first()?;
    Some(Cap {
        total: ev.approved_amount,
        carc: first
            .carc
            .as_deref()
            .unwrap_or(carc::FEE_SCHEDULE)
            .to_owned(),
        rarc: first.rarc.as_deref().map(str::to_owned),
    })
}

/// Why a claim's lines are not paid, for an outcome that pays nothing: the deciding
/// rule's CARC and RARC (by default `A1` for a block, `96` for a decline) or the
/// eligibility refusal's.
fn denial(
    claim: &ClaimInProcess,
    outcome: Outcome,
    reasons: &[Reason],
    blocking_rule: Option<&crate::rules::RuleHit>,
) -> Option<Denial> {
    let of_rule = |h: &crate::rules::RuleHit, default: &str| Denial {
        carc: h.carc.as_deref().unwrap_or(default).to_owned(),
        rarc: h.rarc.as_deref().map(str::to_owned),
    };
    let plain = |carc: &str| Denial {
        carc: carc.to_owned(),
        rarc: None,
    };
    match outcome {
        Outcome::Blocked => {
            Some(blocking_rule.map_or(plain(carc::DENIED), |h| of_rule(h, carc::DENIED)))
        }
        Outcome::Declined => Some(
            if let Some(c) = reasons.iter().find_map(|r| r.carc.as_deref()) {
                plain(c)
            } else if let Some(h) = claim.rules.as_ref().and_then(|e| e.declines.first()) {
                of_rule(h, carc::NON_COVERED)
            } else {
                plain(carc::NON_COVERED)
            },
        ),
        _ => None,
    }
}

/// The claim's lines adjudicated without a plan: all denied with `denial`, or each
/// capped by the contract's fee schedule and denied where a `deny_line` rule matched
/// it, with an `adjust` rule setting the claim's total.
fn adjudicated_lines(claim: &ClaimInProcess, denial: Option<Denial>) -> Vec<LineView> {
    let submission = &claim.submitted.claim;
    let mut lines = submission.service_lines();
    let verdict = match denial {
        Some(d) => Verdict::Deny(d),
        None => Verdict::Pay { cap: cap(claim) },
    };
    let no_schedule = std::collections::BTreeMap::new();
    let schedule = claim
        .contract
        .as_ref()
        .map_or(&no_schedule, |c| &c.fee_schedule);
    let denials = line_denials(claim, lines.len());
    adjudicate_views(&mut lines, schedule, &denials, &verdict);
    lines
}

/// Per line, the first `deny_line` rule that matched it: `CO`, the rule's CARC (`96`
/// by default) and RARC.
fn line_denials(claim: &ClaimInProcess, lines: usize) -> Vec<Option<Denial>> {
    let mut denials = vec![None; lines];
    let matched = claim.rules.iter().flat_map(|e| &e.line_denials);
    for d in matched {
        let slot = usize::try_from(d.line_no - 1)
            .ok()
            .and_then(|i| denials.get_mut(i));
        if let Some(slot @ None) = slot {
            *slot = Some(Denial {
                carc: d
                    .rule
                    .carc
                    .as_deref()
                    .unwrap_or(carc::NON_COVERED)
                    .to_owned(),
                rarc: d.rule.rarc.as_deref().map(str::to_owned),
            });
        }
    }
    denials
}

#[derive(Debug, Clone)]
pub struct Decide {
    pub topics: Topics,
    pub config: ConfigCache,
    /// When decisions are made, and so when their events happened: the wall clock,
    /// which tests move forward (an hour of events in a receiver's outage).
    pub clock: Clock,
}

impl Stage for Decide {
    fn name(&self) -> &'static str {
        "decide"
    }

    fn input(&self) -> TopicSpec {
        self.topics.scored.clone()
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let mut out = Vec::with_capacity(batch.len());
        let claims = decode_all(self.name(), batch, &self.topics.dead_letter, &mut out);
        for (claim, d) in claims.iter().zip(self.step(&claims).await?) {
            // Its events travel inside the decision: the snapshot stage announces them
            // once the claim reads as decided.
            out.push(encode(&self.topics.decided, claim.key(), &d));
        }
        Ok(out)
    }
}

impl Decide {
    /// Decides decoded claims, one decision per claim in order: the stage's own batch
    /// and the fused chain's (see [`super::chain`]).
    pub async fn step(&self, claims: &[ClaimInProcess]) -> Result<Vec<Decision>, StageError> {
        let now = self.clock.now_ms();
        let mut out = Vec::with_capacity(claims.len());
        let transient = |e: crate::config_cache::CacheError| StageError::Transient(e.to_string());
        let members = self
            .config
            .members_of(
                claims
                    .iter()
                    .map(|c| (c.tenant_id(), c.submitted.claim.member_id.as_str())),
            )
            .await
            .map_err(transient)?;
        for claim in claims {
            let settings = self
                .config
                .settings(claim.tenant_id())
                .await
                .map_err(transient)?;
            let key = (
                claim.tenant_id().to_owned(),
                claim.submitted.claim.member_id.as_str().to_owned(),
            );
            out.push(process(
                claim,
                &settings,
                members.get(&key).map(|m| &**m),
                now,
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use schemas::rulebook::RuleAction;

    use super::*;
    use crate::model::{ClaimSubmitted, FraudReason, FraudScore};
    use crate::rules::{ContractFacts, Evaluation, RuleHit, TraceEntry};

    fn claim(amount: i64) -> ClaimInProcess {
        let mut c = ClaimInProcess::new(ClaimSubmitted {
            tenant_id: schemas::TenantId::parse("acme").unwrap(),
            claim: serde_json::from_value(serde_json::json!({
                "claim_id": "CLM-1", "member_id": "M-1", "provider_id": "P-1", "claim_amount": amount, "service_date": "2026-01-01",
                "lines": [{"procedure_code": "99213", "units": 1, "amount": amount}]
            }))
            .unwrap(),
            rulebook_id: "rb".into(),
            rulebook_version: 4,
            received_at_ms: 0,
        });
        // The contract caps the line 100 below the bill.
        c.contract = Some(ContractFacts {
            contract_id: "CTR-1".into(),
            fee_schedule: [("99213".to_owned(), amount - 100)].into(),
        });
        c.rules = Some(Evaluation {
            approved_amount: amount - 100,
            capped_amount: amount - 100,
            ..Default::default()
        });
        c.fraud = Some(FraudScore {
            fraud_score: 0.1,
            model_version: "fraud-v1".into(),
            reasons: vec![],
        });
        c
    }

    fn hit(id: &str) -> RuleHit {
        RuleHit {
            rule_id: id.into(),
            reason_code: format!("R_{id}").into(),
            description: "".into(),
            carc: None,
            rarc: None,
        }
    }

    fn kinds(d: &Decision) -> Vec<&str> {
        d.events.iter().map(|e| e.event.as_str()).collect()
    }

    #[test]
    fn a_clean_claim_is_adjudicated_with_its_computed_amount() {
        let d = process(&claim(1000), &TenantSettings::default(), None, 0);
        assert_eq!(
            (d.outcome, d.status, d.approved_amount),
            (Outcome::Adjudicated, ClaimStatus::Completed, 900)
        );
        assert_eq!(kinds(&d), ["claim.completed"]);
        assert_eq!(d.events[0].value()["outcome"], "ADJUDICATED");
        assert_eq!(d.events[0].value()["status"], "completed");
        assert_eq!(d.events[0].value()["audit_id"], d.audit_id.as_str());
        assert_eq!(d.rulebook_version, 4);
        assert!(d.task_id.is_none());
        let line = d.lines[0].adjudication.as_ref().unwrap();
        assert_eq!((line.allowed_amount, line.approved_amount), (900, 900));
        assert_eq!(line.adjustments[0].carc, "45");
        assert_eq!(
            d.events[0].value()["lines"][0]["adjudication"]["approved_amount"],
            900
        );
    }

    #[test]
    fn every_line_of_a_blocked_or_declined_claim_is_denied_with_its_code() {
        let mut c = claim(1000);
        c.rules.as_mut().unwrap().blocks.push(hit("b"));
        let d = process(&c, &TenantSettings::default(), None, 0);
        let line = d.lines[0].adjudication.as_ref().unwrap();
        assert_eq!(
            (line.approved_amount, line.adjustments[0].amount),
            (0, 1000)
        );
        assert_eq!(line.adjustments[0].carc, "A1");
        c.rules.as_mut().unwrap().blocks.clear();
        c.rules.as_mut().unwrap().declines.push(hit("d"));
        let d = process(&c, &TenantSettings::default(), None, 0);
        assert_eq!(
            d.lines[0].adjudication.as_ref().unwrap().adjustments[0].carc,
            "96"
        );
    }

    #[test]
    fn a_rules_carc_and_rarc_go_on_the_adjustments_it_causes() {
        let with_codes = |id: &str, carc: &str| RuleHit {
            carc: Some(carc.into()),
            rarc: Some("N130".into()),
            ..hit(id)
        };
        let adjustment = |d: &Decision| {
            d.lines[0]
                .adjudication
                .as_ref()
                .unwrap()
                .adjustments
                .clone()
        };
        let mut c = claim(1000);
        c.rules
            .as_mut()
            .unwrap()
            .declines
            .push(with_codes("d", "B7"));
        let a = adjustment(&process(&c, &TenantSettings::default(), None, 0));
        assert_eq!(
            (a[0].carc.as_str(), a[0].rarc.as_deref()),
            ("B7", Some("N130"))
        );
        let mut c = claim(1000);
        c.rules.as_mut().unwrap().blocks.push(with_codes("b", "B5"));
        let a = adjustment(&process(&c, &TenantSettings::default(), None, 0));
        assert_eq!(a[0].carc, "B5");
        let mut c = claim(1000);
        let ev = c.rules.as_mut().unwrap();
        ev.adjusts.push(with_codes("a", "253"));
        ev.approved_amount = 500;
        let a = adjustment(&process(&c, &TenantSettings::default(), None, 0));
        let cut = a
            .iter()
            .find(|x| x.carc == "253")
            .expect("the cap's cut carries the rule's CARC");
        assert_eq!((cut.amount, cut.rarc.as_deref()), (400, Some("N130")));
    }

    #[test]
    fn an_adjust_rule_sets_the_total_from_the_last_line_and_the_lines_still_balance() {
        let mut c = claim(1000);
        let ev = c.rules.as_mut().unwrap();
        ev.adjusts.push(hit("a"));
        ev.approved_amount = 950; // above the fee schedule's 900: part 1 lets it stand
        let d = process(&c, &TenantSettings::default(), None, 0);
        assert_eq!(d.approved_amount, 950);
        let line = d.lines[0].adjudication.as_ref().unwrap();
        assert_eq!(line.approved_amount + line.adjusted_total(), 1000);
        c.rules.as_mut().unwrap().approved_amount = 300;
        assert_eq!(
            process(&c, &TenantSettings::default(), None, 0).approved_amount,
            300
        );
    }

    #[test]
    fn the_audit_record_traces_every_rule_in_order_with_what_the_receipt_shows() {
        let entry = |id: &str, matched: bool, error: bool| TraceEntry {
            rule_id: id.into(),
            action: RuleAction::Flag,
            matched,
            detail: if error {
                "when failed".into()
            } else {
                "when evaluated to false".into()
            },
            error,
        };
        let mut c = claim(1000);
        c.rules.as_mut().unwrap().trace = vec![
            entry("quiet-1", false, false),
            entry("fired", true, false),
            entry("quiet-2", false, false),
            entry("broken", false, true),
        ];
        let d = process(&c, &TenantSettings::default(), None, 0);
        let details: serde_json::Value = serde_json::from_str(&d.audit_entry().details).unwrap();
        assert_eq!(details["rules_evaluated"], 4);
        let traced: Vec<&str> = details["trace"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["rule_id"].as_str().unwrap())
            .collect();
        assert_eq!(traced, ["quiet-1", "fired", "quiet-2", "broken"]);
        // A rule that did not match is written short.
        assert_eq!(
            details["trace"][0],
            serde_json::json!({"rule_id": "quiet-1", "action": "flag", "matched": false})
        );
        assert_eq!(details["rulebook_version"], 4);
        assert_eq!(details["rulebook_id"], "rb");
        assert_eq!(details["eligibility"], "unlisted");
        assert_eq!(details["lines"], serde_json::to_value(&d.lines).unwrap());
    }

    #[test]
    fn block_beats_decline_beats_flag() {
        let mut c = claim(1000);
        let ev = c.rules.as_mut().unwrap();
        ev.blocks.push(hit("b"));
        ev.declines.push(hit("d"));
        ev.flags.push(hit("f"));
        let d = process(&c, &TenantSettings::default(), None, 0);
        assert_eq!((d.outcome, d.approved_amount), (Outcome::Blocked, 0));
        assert_eq!(kinds(&d), ["claim.blocked", "claim.completed"]);
        assert_eq!(d.events[0].value()["rule_id"], "b");
        assert_eq!(d.events[0].value()["reason_code"], "R_b");
        c.rules.as_mut().unwrap().blocks.clear();
        let d = process(&c, &TenantSettings::default(), None, 0);
        assert_eq!((d.outcome, d.approved_amount), (Outcome::Declined, 0));
        let _ = RuleAction::Block;
    }

    #[test]
    fn a_flag_a_rule_error_or_a_high_score_sends_the_claim_to_review() {
        let mut flagged = claim(1000);
        flagged.rules.as_mut().unwrap().flags.push(hit("f"));
        let mut errored = claim(1000);
        errored.rules.as_mut().unwrap().errors.push(hit("e"));
        let mut risky = claim(1000);
        risky.fraud = Some(FraudScore {
            fraud_score: 0.85,
            model_version: "fraud-v1".into(),
            reasons: vec![FraudReason {
                code: "NEAR_DUPLICATE".into(),
                contribution: 0.85,
                detail: "same as CLM-0".into(),
            }],
        });
        for c in [flagged, errored, risky] {
            let d = process(&c, &TenantSettings::default(), None, 0);
            assert_eq!(
                (d.outcome, d.status),
                (Outcome::Flagged, ClaimStatus::PendingReview)
            );
            assert_eq!(
                kinds(&d),
                ["claim.flagged", "workflow.task.created", "claim.completed"]
            );
            assert!(d.task_id.is_some());
            assert_eq!(
                d.events[1].value()["task_id"],
                d.task_id.as_deref().unwrap()
            );
        }
    }

    #[test]
    fn the_threshold_and_auto_approval_come_from_the_tenant() {
        let mut c = claim(1000);
        c.fraud.as_mut().unwrap().fraud_score = 0.5;
        let lenient = process(&c, &TenantSettings::default(), None, 0);
        assert_eq!(lenient.outcome, Outcome::Adjudicated);
        let strict = TenantSettings {
            fraud_flag_threshold: 0.4,
            ..Default::default()
        };
        assert_eq!(process(&c, &strict, None, 0).outcome, Outcome::Flagged);
        let auto = TenantSettings {
            fraud_flag_threshold: 0.4,
            auto_approve_below: Some(5000),
            ..Default::default()
        };
        let d = process(&c, &auto, None, 0);
        assert_eq!(d.outcome, Outcome::Adjudicated);
        assert!(d.reasons.iter().any(|r| r.code == "AUTO_APPROVED"));
    }

    #[test]
    fn a_rejected_claim_is_declined_with_the_validation_reason() {
        let mut c = claim(1000);
        c.rejection = Some(Reason {
            source: "validation".into(),
            code: "PROVIDER_NOT_CONTRACTED".into(),
            rule_id: None,
            message: "x".into(),
            carc: None,
        });
        let d = process(&c, &TenantSettings::default(), None, 0);
        assert_eq!((d.outcome, d.approved_amount), (Outcome::Declined, 0));
        assert_eq!(d.reasons[0].code, "PROVIDER_NOT_CONTRACTED");
    }

    #[test]
    fn ids_are_the_same_every_time_a_claim_is_decided() {
        let a = process(&claim(1000), &TenantSettings::default(), None, 0);
        let b = process(&claim(1000), &TenantSettings::default(), None, 99_000);
        assert_eq!(a.audit_id, b.audit_id);
        assert_eq!(a.events[0].id, b.events[0].id);
        assert_ne!(a.events[0].timestamp, b.events[0].timestamp);
    }
}
