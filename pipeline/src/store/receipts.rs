//! Decision receipts: a claim's decision explained, read from its audit record alone
//! (and, for an officer's decision, from the record of the automatic decision it
//! reviewed), so that a receipt reads the same after a restart, a replay or a rebuild.

use schemas::adjudication::LineView;
use schemas::claim::{Outcome, Reason};
use schemas::receipt::{
    DecisionReceipt, EligibilityStatus, FraudReasonView, ReceiptFraud, RuleOutcome,
};
use serde::Deserialize;

use super::audit::AuditRecord;
use super::{Store, StoreError};
use crate::clock::ms_to_rfc3339;
use crate::model::FraudScore;
use crate::rules::TraceEntry;

/// A decision's audit details as the store writes them (see `DecisionDetails`), with
/// what older records lack defaulted.
#[derive(Debug, Deserialize)]
struct Recorded {
    approved_amount: i64,
    #[serde(default)]
    eligibility: Option<EligibilityStatus>,
    #[serde(default)]
    fraud: Option<FraudScore>,
    #[serde(default)]
    lines: Vec<LineView>,
    outcome: Outcome,
    #[serde(default)]
    reasons: Vec<Reason>,
    #[serde(default)]
    reviews: Option<String>,
    #[serde(default)]
    rulebook_id: Option<String>,
    rulebook_version: i64,
    #[serde(default)]
    trace: Vec<TraceEntry>,
}

/// What [`Store::decision_receipt`] finds.
#[derive(Debug)]
pub enum ReceiptLookup {
    NoClaim,
    /// The claim is not decided yet.
    Undecided,
    Found(Box<DecisionReceipt>),
}

impl Store {
    pub async fn decision_receipt(
        &self,
        tenant_id: &str,
        claim_id: &str,
    ) -> Result<ReceiptLookup, StoreError> {
        let audit_id: Option<(Option<String>,)> =
            sqlx::query_as("SELECT audit_id FROM claims WHERE tenant_id = $1 AND claim_id = $2")
                .bind(tenant_id)
                .bind(claim_id)
                .fetch_optional(self.reader())
                .await?;
        let Some((audit_id,)) = audit_id else {
            return Ok(ReceiptLookup::NoClaim);
        };
        let Some(audit_id) = audit_id else {
            return Ok(ReceiptLookup::Undecided);
        };
        let Some(record) = self.audit_record(tenant_id, &audit_id).await? else {
            return Ok(ReceiptLookup::Undecided);
        };
        let own = recorded(&record)?;
        let reviewed = match &own.reviews {
            Some(id) => match self.audit_record(tenant_id, id).await? {
                Some(r) => Some(recorded(&r)?),
                None => None,
            },
            None => None,
        };
        Ok(ReceiptLookup::Found(Box::new(receipt(
            claim_id, &record, own, reviewed,
        ))))
    }
}

fn recorded(record: &AuditRecord) -> Result<Recorded, StoreError> {
    serde_json::from_str(&record.details).map_err(|e| {
        StoreError::Corrupt(format!(
            "audit record {} is not a decision's: {e}",
            record.audit_id
        ))
    })
}

/// The receipt of the decision `record` holds. The rules, the fraud score and the
/// eligibility are the automatic decision's (`reviewed`, for an officer's decision):
/// an officer decides the outcome and the amount, not how the rules read the claim.
fn receipt(
    claim_id: &str,
    record: &AuditRecord,
    own: Recorded,
    reviewed: Option<Recorded>,
) -> DecisionReceipt {
    let officer = (record.actor != "pipeline").then(|| record.actor.clone());
    let (rulebook_id, trace, fraud, eligibility) = match reviewed {
        Some(r) => (r.rulebook_id, r.trace, own.fraud.or(r.fraud), r.eligibility),
        None => (own.rulebook_id, own.trace, own.fraud, own.eligibility),
    };
    DecisionReceipt {
        claim_id: claim_id.to_owned(),
        outcome: own.outcome,
        approved_amount: own.approved_amount,
        rulebook_id,
        rulebook_version: own.rulebook_version,
        rules: trace.into_iter().map(rule_outcome).collect(),
        fraud: fraud.map(|f| ReceiptFraud {
            score: f.fraud_score,
            model_version: f.model_version,
            reasons: f
                .reasons
                .into_iter()
                .map(|r| FraudReasonView {
                    code: r.code,
                    contribution: r.contribution,
                    detail: r.detail,
                })
                .collect(),
        }),
        eligibility,
        reasons: own.reasons,
        lines: own.lines,
        officer,
        decided_at: ms_to_rfc3339(record.at),
        audit_id: record.audit_id.clone(),
    }
}

fn rule_outcome(t: TraceEntry) -> RuleOutcome {
    let detail = t.detail.into_owned();
    let (value, error) = if t.error {
        (None, Some(detail))
    } else {
        (Some(detail), None)
    };
    RuleOutcome {
        rule_id: t.rule_id.to_string(),
        action: t.action,
        matched: t.matched,
        value,
        error,
    }
}
