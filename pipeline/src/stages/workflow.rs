//! Stage 7, workflow: input `claims.workflow`. Applies an officer's decision to the
//! claim: a later decision (the claim's version + 1: 2, or 3 after a reprocess) for
//! the snapshot writer, and the events
//! `claim.approved` then `claim.completed` (`APPROVED`), or `claim.declined` then
//! `claim.completed` (`DECLINED`). The task itself was marked done when the officer
//! decided. Ids derive from the claim, so a redelivered decision changes nothing.
//!
//! An approval of a claim whose member is on a plan carries the claim's pricing and
//! the officer's amount: the snapshot stage applies the plan against the member's year
//! as it stands at approval, then the officer's amount, and counts the claim.

use schemas::adjudication::carc;
use schemas::claim::{ClaimStatus, ClaimView, Outcome};
use schemas::workflow::TaskAction;

use super::runner::{decode, encode, Outputs, Stage, StageError};
use crate::adjudication::{adjudicate_views, approved_total, settle, Denial, Pricing, Verdict};
use crate::bus::{Record, TopicSpec};
use crate::clock::ms_to_rfc3339;
use crate::model::{derived_id, Decision, DomainEvent, EventKind, FraudScore, Json, Kept};
use crate::store::Store;
use crate::topics::Topics;
use crate::workflow::OfficerDecision;

/// The pure core: the claim's final decision after review, as its version `version`.
/// `None` for an action that does not decide (release), which the API never
/// publishes. `pricing` is the claim's, for a member on a plan.
pub fn process(
    cmd: &OfficerDecision,
    claim: &ClaimView,
    fraud: Option<FraudScore>,
    pricing: Option<Pricing>,
    version: i64,
) -> Option<Decision> {
    let (t, c) = (&cmd.tenant_id, cmd.claim_id.as_str());
    let outcome = match cmd.action {
        TaskAction::Approve => Outcome::Approved,
        TaskAction::Decline => Outcome::Declined,
        TaskAction::Release => return None,
    };
    let status = ClaimStatus::Completed;
    let mut lines = claim.lines.clone();
    match outcome {
        Outcome::Approved => settle(
            &mut lines,
            cmd.approved_amount.unwrap_or_else(|| {
                claim
                    .approved_amount
                    .unwrap_or(claim.submission.claim_amount)
            }),
        ),
        // An officer's decline: every line denied whole.
        _ => adjudicate_views(
            &mut lines,
            &Default::default(),
            &[],
            &Verdict::Deny(Denial {
                carc: carc::NON_COVERED.to_owned(),
                rarc: None,
            }),
        ),
    }
    let approved_amount = approved_total(&lines);
    let audit_id = officer_audit_id(t, c);
    let timestamp = ms_to_rfc3339(cmd.decided_at_ms);
    let event = |kind: EventKind, data: Json| DomainEvent {
        // Distinct from the automatic decision's events of the same kind.
        id: derived_id("evt", t, c, &format!("review/{kind}")),
        event: kind.as_str().to_owned(),
        tenant_id: t.clone(),
        timestamp: timestamp.clone(),
        data,
    };
    let first = match outcome {
        Outcome::Approved => event(
            EventKind::ClaimApproved,
            Json::of(&serde_json::json!({
                "claim_id": c, "status": status, "outcome": outcome, "approved_amount": approved_amount,
                "officer": cmd.officer, "audit_id": audit_id,
            })),
        ),
        _ => event(
            EventKind::ClaimDeclined,
            Json::of(&serde_json::json!({
                "claim_id": c, "provider_id": claim.submission.provider_id.as_str(), "status": status,
                "outcome": outcome,
                "reason": cmd.note.clone().unwrap_or_else(|| "declined by a claims officer".into()),
                "officer": cmd.officer, "audit_id": audit_id,
            })),
        ),
    };
    let mut decision = Decision {
        tenant_id: t.clone(),
        claim_id: c.to_owned(),
        member_id: claim.submission.member_id.to_string(),
        version,
        status,
        outcome,
        approved_amount,
        fraud,
        reasons: claim.reasons.clone(),
        rulebook_id: String::new(),
        rulebook_version: claim.rulebook_version,
        audit_id,
        task_id: Some(cmd.task_id.clone()),
        priority: 0,
        decided_at_ms: cmd.decided_at_ms,
        trace: Default::default(),
        events: vec![first],
        lines,
        eligibility: None,
        reviews: claim.audit_id.clone(),
        officer: Some(cmd.officer.clone()),
        officer_amount: pricing
            .as_ref()
            .and(cmd.approved_amount)
            .filter(|_| outcome == Outcome::Approved),
        pricing: pricing
            .filter(|_| outcome == Outcome::Approved)
            .map(Kept::from),
        replaces_claim_id: None,
        facts: None,
        counted: None,
        counted_seq: 0,
        written: false,
        lines_json: None,
    };
    let completed = decision.completed_data(true);
    decision
        .events
        .push(event(EventKind::ClaimCompleted, completed));
    Some(decision)
}

/// The audit id of the officer's decision on a claim: a claim has one review task, so
/// at most one officer's decision.
fn officer_audit_id(tenant_id: &str, claim_id: &str) -> String {
    derived_id("aud", tenant_id, claim_id, "decision-2")
}

#[derive(Debug, Clone)]
pub struct Workflow {
    pub topics: Topics,
    pub store: Store,
}

impl Stage for Workflow {
    fn name(&self) -> &'static str {
        "workflow"
    }

    fn input(&self) -> TopicSpec {
        self.topics.workflow.clone()
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let mut out = Vec::new();
        for r in batch {
            let Some(cmd) =
                decode::<OfficerDecision>(self.name(), r, &self.topics.dead_letter, &mut out)
            else {
                continue;
            };
            // Review is rare next to intake: a read per decision is cheap enough.
            let Some(claim) = self.store.claim(&cmd.tenant_id, &cmd.claim_id).await? else {
                tracing::error!(claim_id = %cmd.claim_id, "An officer decided on a claim that does not exist.");
                continue;
            };
            let fraud = self
                .store
                .claim_fraud(&cmd.tenant_id, &cmd.claim_id)
                .await?
                .flatten()
                .and_then(|f| serde_json::from_str::<FraudScore>(&f).ok());
            let pricing = self
                .store
                .claim_pricing(&cmd.tenant_id, &cmd.claim_id)
                .await?;
            // The officer's decision follows whichever decision the claim holds; one
            // that holds it already (a redelivery) is not made again.
            let Some(standing) = self
                .store
                .claim_standing(&cmd.tenant_id, &cmd.claim_id)
                .await?
            else {
                continue;
            };
            if standing.audit_id.as_deref()
                == Some(&officer_audit_id(&cmd.tenant_id, &cmd.claim_id))
            {
                continue;
            }
            let Some(d) = process(&cmd, &claim, fraud, pricing, standing.version + 1) else {
                continue;
            };
            out.push(encode(&self.topics.decided, d.key(), &d));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim() -> ClaimView {
        serde_json::from_value(serde_json::json!({
            "claim_id": "CLM-1", "member_id": "M-1", "provider_id": "P-1", "claim_amount": 900,
            "service_date": "2026-01-02", "diagnosis_codes": [], "metadata": {},
            "lines": [{"line_no": 1, "procedure_code": null, "units": 1, "amount": 900, "modifiers": [],
                "adjudication": {"status": "adjusted", "allowed_amount": 800, "approved_amount": 800,
                    "member_responsibility": {"deductible": 0, "coinsurance": 0, "copay": 0},
                    "adjustments": [{"group": "CO", "carc": "45", "amount": 100}]}}],
            "status": "pending_review", "outcome": "FLAGGED",
            "approved_amount": 800, "fraud_score": 0.9, "audit_id": "aud_1", "rulebook_version": 3,
            "reasons": [{"source": "fraud", "code": "ROUND_AMOUNT", "message": "round"}],
            "task_id": "tsk_1", "received_at": "2026-01-02T00:00:00Z", "updated_at": "2026-01-02T00:00:00Z"
        }))
        .unwrap()
    }

    fn cmd(action: TaskAction, amount: Option<i64>) -> OfficerDecision {
        OfficerDecision {
            tenant_id: schemas::TenantId::parse("t1").unwrap(),
            claim_id: "CLM-1".into(),
            task_id: "tsk_1".into(),
            officer: "usr_1".into(),
            action,
            approved_amount: amount,
            note: Some("documents check out".into()),
            decided_at_ms: 1_767_225_600_000,
        }
    }

    #[test]
    fn approval_pays_the_officers_amount_and_announces_approved_then_completed() {
        let d = process(
            &cmd(TaskAction::Approve, Some(700)),
            &claim(),
            None,
            None,
            2,
        )
        .unwrap();
        assert_eq!(
            (d.version, d.outcome, d.status),
            (2, Outcome::Approved, ClaimStatus::Completed)
        );
        assert_eq!(d.approved_amount, 700);
        let kinds: Vec<&str> = d.events.iter().map(|e| e.event.as_str()).collect();
        assert_eq!(kinds, ["claim.approved", "claim.completed"]);
        assert_eq!(d.events[0].value()["officer"], "usr_1");
        assert_eq!(d.events[1].value()["outcome"], "APPROVED");
        assert_eq!(d.events[1].value()["approved_amount"], 700);
        assert_eq!(d.officer.as_deref(), Some("usr_1"));
        assert_eq!(d.audit_entry().action, "claim.approved");
    }

    #[test]
    fn the_officers_amount_is_spread_over_the_lines_which_still_balance() {
        for (amount, fee_cut, officer_cut) in
            [(700, 100, 100), (850, 50, 0), (900, 0, 0), (5000, 0, 0)]
        {
            let d = process(
                &cmd(TaskAction::Approve, Some(amount)),
                &claim(),
                None,
                None,
                2,
            )
            .unwrap();
            let line = d.lines[0].adjudication.as_ref().unwrap();
            assert_eq!(d.approved_amount, amount.min(900));
            assert_eq!(line.approved_amount, d.approved_amount);
            assert_eq!(line.approved_amount + line.adjusted_total(), 900);
            let cuts: Vec<i64> = line.adjustments.iter().map(|a| a.amount).collect();
            let want: Vec<i64> = [fee_cut, officer_cut]
                .into_iter()
                .filter(|c| *c > 0)
                .collect();
            assert_eq!(cuts, want, "officer's amount {amount}");
        }
        let declined = process(&cmd(TaskAction::Decline, None), &claim(), None, None, 2).unwrap();
        let line = declined.lines[0].adjudication.as_ref().unwrap();
        assert_eq!(
            (line.approved_amount, line.adjustments[0].carc.as_str()),
            (0, "96")
        );
    }

    #[test]
    fn approval_without_an_amount_pays_what_processing_approved() {
        let d = process(&cmd(TaskAction::Approve, None), &claim(), None, None, 2).unwrap();
        assert_eq!(d.approved_amount, 800);
    }

    #[test]
    fn a_decline_names_the_provider_and_pays_nothing() {
        let d = process(&cmd(TaskAction::Decline, None), &claim(), None, None, 2).unwrap();
        assert_eq!((d.outcome, d.approved_amount), (Outcome::Declined, 0));
        assert_eq!(d.events[0].event, "claim.declined");
        assert_eq!(d.events[0].value()["provider_id"], "P-1");
        assert_eq!(d.events[0].value()["reason"], "documents check out");
        assert_eq!(d.events[1].value()["outcome"], "DECLINED");
        assert_eq!(d.audit_entry().action, "claim.declined");
    }

    #[test]
    fn ids_are_stable_and_distinct_from_the_automatic_decision() {
        let a = process(&cmd(TaskAction::Approve, None), &claim(), None, None, 2).unwrap();
        let b = process(&cmd(TaskAction::Approve, None), &claim(), None, None, 2).unwrap();
        assert_eq!(a, b);
        assert_ne!(a.audit_id, derived_id("aud", "t1", "CLM-1", "decision-1"));
        assert_ne!(
            a.events[1].id,
            derived_id("evt", "t1", "CLM-1", "claim.completed")
        );
    }

    #[test]
    fn release_decides_nothing() {
        assert!(process(&cmd(TaskAction::Release, None), &claim(), None, None, 2).is_none());
    }
}
