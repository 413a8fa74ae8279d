//! Claims (contract: Claims): what a payer submits, the command that carries it on the
//! intake topic, and the claim as reads show it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::adjudication::LineView;
use crate::date::Date;
use crate::id::ClientId;

/// Bounds on a claim's parts, so that every later step works on bounded data.
pub const MAX_LINES: usize = 1000;
pub const MAX_DIAGNOSIS_CODES: usize = 50;
pub const MAX_METADATA_BYTES: usize = 16 * 1024;
pub const MAX_AMOUNT: i64 = 1_000_000_000_000;
pub const MAX_MODIFIERS: usize = 4;

/// One service line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimLine {
    #[schema(min_length = 1, max_length = 32)]
    pub procedure_code: String,
    #[schema(minimum = 1, maximum = 10000)]
    pub units: i64,
    /// Minor units; the lines' amounts add up to `claim_amount`.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    pub amount: i64,
    /// Up to 4 procedure modifiers of two letters or digits (`25`, `QW`).
    #[serde(default)]
    #[schema(max_items = 4)]
    pub modifiers: Vec<String>,
}

/// What a submission is to the claims before it (contract part 2: Corrected and
/// voided claims; X12's claim frequency codes 1, 7 and 8).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Frequency {
    /// A new claim.
    #[default]
    Original,
    /// Replaces `replaces_claim_id`, which is reversed; this one is adjudicated anew.
    Replacement,
    /// Voids `replaces_claim_id`: only its reversal.
    Void,
}

impl Frequency {
    pub fn is_original(&self) -> bool {
        *self == Frequency::Original
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Frequency::Original => "original",
            Frequency::Replacement => "replacement",
            Frequency::Void => "void",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Original, Self::Replacement, Self::Void]
            .into_iter()
            .find(|f| f.as_str() == s)
    }
}

/// `POST /claims/intake`, and each item of `POST /claims/batch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimSubmission {
    pub claim_id: ClientId,
    pub member_id: ClientId,
    pub provider_id: ClientId,
    /// Minor units, from 1 to 1,000,000,000,000 (ten billion in major units).
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    pub claim_amount: i64,
    /// YYYY-MM-DD, not in the future.
    #[schema(value_type = String, format = Date)]
    pub service_date: Date,
    /// At most 1,000 lines.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub lines: Vec<ClaimLine>,
    /// At most 50 codes of 1-16 characters.
    #[serde(default)]
    #[schema(max_items = 50)]
    pub diagnosis_codes: Vec<String>,
    /// The client's own fields, at most 16 KiB as JSON.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// `original` by default.
    #[serde(default, skip_serializing_if = "Frequency::is_original")]
    pub frequency: Frequency,
    /// For a replacement or a void: the claim it replaces, of the same member,
    /// `completed`, and not replaced or voided already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces_claim_id: Option<ClientId>,
}

/// A field that failed validation, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError::new(field, message)
}

/// An amount in minor units: positive, and at most [`MAX_AMOUNT`] (ten billion in major
/// units), which keeps every sum the service forms far from overflowing.
fn check_amount(field: &str, amount: i64) -> Result<(), FieldError> {
    if amount <= 0 {
        return Err(bad(field, "must be a positive amount in minor units"));
    }
    if amount > MAX_AMOUNT {
        return Err(bad(
            field,
            format!("must be at most {MAX_AMOUNT} (minor units)"),
        ));
    }
    Ok(())
}

impl ClaimSubmission {
    /// The checks that need no store: ranges, sums, sizes, dates against `today`.
    pub fn validate(&self, today: Date) -> Result<(), FieldError> {
        check_amount("claim_amount", self.claim_amount)?;
        match (self.frequency, &self.replaces_claim_id) {
            (Frequency::Original, Some(_)) => {
                return Err(bad(
                    "replaces_claim_id",
                    "only a replacement or a void names a claim it replaces",
                ))
            }
            (Frequency::Replacement | Frequency::Void, None) => {
                return Err(bad(
                    "replaces_claim_id",
                    "a replacement or a void names the claim it replaces",
                ))
            }
            (_, Some(r)) if r == &self.claim_id => {
                return Err(bad("replaces_claim_id", "a claim cannot replace itself"))
            }
            _ => {}
        }
        if self.service_date > today {
            return Err(bad("service_date", "must not be in the future"));
        }
        if self.lines.len() > MAX_LINES {
            return Err(bad("lines", format!("at most {MAX_LINES} lines")));
        }
        let mut sum: i64 = 0;
        for (i, l) in self.lines.iter().enumerate() {
            if l.procedure_code.is_empty() || l.procedure_code.len() > 32 {
                return Err(bad(
                    format!("lines[{i}].procedure_code"),
                    "must be 1-32 characters",
                ));
            }
            if !(1..=10_000).contains(&l.units) {
                return Err(bad(format!("lines[{i}].units"), "must be from 1 to 10000"));
            }
            check_amount(&format!("lines[{i}].amount"), l.amount)?;
            if l.modifiers.len() > MAX_MODIFIERS {
                return Err(bad(
                    format!("lines[{i}].modifiers"),
                    format!("at most {MAX_MODIFIERS} modifiers"),
                ));
            }
            for (j, m) in l.modifiers.iter().enumerate() {
                if m.len() != 2 || !m.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    return Err(bad(
                        format!("lines[{i}].modifiers[{j}]"),
                        "must be two letters or digits",
                    ));
                }
            }
            sum = sum.saturating_add(l.amount);
        }
        if !self.lines.is_empty() && sum != self.claim_amount {
            return Err(bad(
                "lines",
                format!(
                    "line amounts add up to {sum}, not to claim_amount {}",
                    self.claim_amount
                ),
            ));
        }
        if self.diagnosis_codes.len() > MAX_DIAGNOSIS_CODES {
            return Err(bad(
                "diagnosis_codes",
                format!("at most {MAX_DIAGNOSIS_CODES} codes"),
            ));
        }
        for (i, d) in self.diagnosis_codes.iter().enumerate() {
            if d.is_empty() || d.len() > 16 {
                return Err(bad(
                    format!("diagnosis_codes[{i}]"),
                    "must be 1-16 characters",
                ));
            }
        }
        let metadata_len = serde_json::to_vec(&self.metadata)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if metadata_len > MAX_METADATA_BYTES {
            return Err(bad(
                "metadata",
                format!("must be at most {MAX_METADATA_BYTES} bytes as JSON"),
            ));
        }
        Ok(())
    }
}

/// Where a claim is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClaimStatus {
    Received,
    Processing,
    PendingReview,
    Completed,
}

impl ClaimStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimStatus::Received => "received",
            ClaimStatus::Processing => "processing",
            ClaimStatus::PendingReview => "pending_review",
            ClaimStatus::Completed => "completed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "received" => Some(Self::Received),
            "processing" => Some(Self::Processing),
            "pending_review" => Some(Self::PendingReview),
            "completed" => Some(Self::Completed),
            _ => None,
        }
    }
}

/// The decision (contract: Claims; outcome values upper case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Outcome {
    Adjudicated,
    Approved,
    Declined,
    Flagged,
    Blocked,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Adjudicated => "ADJUDICATED",
            Outcome::Approved => "APPROVED",
            Outcome::Declined => "DECLINED",
            Outcome::Flagged => "FLAGGED",
            Outcome::Blocked => "BLOCKED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ADJUDICATED" => Some(Self::Adjudicated),
            "APPROVED" => Some(Self::Approved),
            "DECLINED" => Some(Self::Declined),
            "FLAGGED" => Some(Self::Flagged),
            "BLOCKED" => Some(Self::Blocked),
            _ => None,
        }
    }
}

/// Why a claim was decided as it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Reason {
    /// `rule`, `fraud`, `validation` or `eligibility`.
    pub source: String,
    pub code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    pub message: String,
    /// The CARC the claim's lines are denied with, for a reason that denies them
    /// (eligibility: `27` not covered, `31` unknown member).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carc: Option<String>,
}

/// `202` answer of intake.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Accepted {
    pub claim_id: String,
    /// Always `received`.
    pub status: ClaimStatus,
    pub received_at: String,
}

/// A claim's submitted fields besides its lines, as reads show them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClaimHeader {
    pub claim_id: ClientId,
    pub member_id: ClientId,
    pub provider_id: ClientId,
    pub claim_amount: i64,
    #[schema(value_type = String, format = Date)]
    pub service_date: Date,
    #[serde(default)]
    pub diagnosis_codes: Vec<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub frequency: Frequency,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces_claim_id: Option<ClientId>,
}

impl ClaimSubmission {
    /// The claim's service lines, numbered from 1 and not yet adjudicated. Every claim
    /// has lines (contract part 2): one submitted without them has one line of its
    /// whole amount, without a procedure code.
    pub fn service_lines(&self) -> Vec<LineView> {
        if self.lines.is_empty() {
            return vec![LineView {
                line_no: 1,
                procedure_code: None,
                units: 1,
                amount: self.claim_amount,
                modifiers: Vec::new(),
                adjudication: None,
            }];
        }
        self.lines
            .iter()
            .enumerate()
            .map(|(i, l)| LineView {
                line_no: i as i64 + 1,
                procedure_code: Some(l.procedure_code.clone()),
                units: l.units,
                amount: l.amount,
                modifiers: l.modifiers.clone(),
                adjudication: None,
            })
            .collect()
    }

    pub fn header(self) -> ClaimHeader {
        ClaimHeader {
            claim_id: self.claim_id,
            member_id: self.member_id,
            provider_id: self.provider_id,
            claim_amount: self.claim_amount,
            service_date: self.service_date,
            diagnosis_codes: self.diagnosis_codes,
            metadata: self.metadata,
            frequency: self.frequency,
            replaces_claim_id: self.replaces_claim_id,
        }
    }
}

/// The claim as `GET /claims/{claim_id}` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClaimView {
    #[serde(flatten)]
    pub submission: ClaimHeader,
    /// Every claim has lines; each carries its adjudication once the claim is decided.
    pub lines: Vec<LineView>,
    pub status: ClaimStatus,
    pub outcome: Option<Outcome>,
    pub approved_amount: Option<i64>,
    pub fraud_score: Option<f64>,
    pub audit_id: Option<String>,
    pub rulebook_version: i64,
    pub reasons: Vec<Reason>,
    pub task_id: Option<String>,
    pub received_at: String,
    pub updated_at: String,
    /// The replacement or void that replaced this claim, once one was accepted.
    #[serde(default)]
    pub superseded_by: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim() -> ClaimSubmission {
        serde_json::from_value(serde_json::json!({
            "claim_id": "CLM-1", "member_id": "M-1", "provider_id": "P-1", "claim_amount": 300,
            "service_date": "2026-01-02",
            "lines": [{"procedure_code": "99213", "units": 1, "amount": 100}, {"procedure_code": "80053", "units": 2, "amount": 200}]
        }))
        .unwrap()
    }

    fn today() -> Date {
        Date::parse("2026-06-01").unwrap()
    }

    #[test]
    fn a_well_formed_claim_passes() {
        assert_eq!(claim().validate(today()), Ok(()));
    }

    #[test]
    fn each_rule_names_its_field() {
        let field = |c: ClaimSubmission| c.validate(today()).unwrap_err().field;
        assert_eq!(
            field(ClaimSubmission {
                claim_amount: 0,
                ..claim()
            }),
            "claim_amount"
        );
        assert_eq!(
            field(ClaimSubmission {
                service_date: Date::parse("2026-06-02").unwrap(),
                ..claim()
            }),
            "service_date"
        );
        assert_eq!(
            field(ClaimSubmission {
                claim_amount: 301,
                ..claim()
            }),
            "lines"
        );
        let mut c = claim();
        c.lines[1].amount = -5;
        assert_eq!(field(c), "lines[1].amount");
        let mut c = claim();
        c.lines[0].units = 0;
        assert_eq!(field(c), "lines[0].units");
        let mut c = claim();
        c.lines[1].modifiers = vec!["25".into(), "Q".into()];
        assert_eq!(field(c), "lines[1].modifiers[1]");
        let mut c = claim();
        c.lines[1].modifiers = vec!["25".into(); 5];
        assert_eq!(field(c), "lines[1].modifiers");
        let mut c = claim();
        c.diagnosis_codes = vec!["".into()];
        assert_eq!(field(c), "diagnosis_codes[0]");
        let mut c = claim();
        c.metadata.insert(
            "big".into(),
            serde_json::json!("x".repeat(MAX_METADATA_BYTES)),
        );
        assert_eq!(field(c), "metadata");
    }

    #[test]
    fn a_claim_without_lines_needs_no_sum() {
        let c = ClaimSubmission {
            lines: vec![],
            claim_amount: 5,
            ..claim()
        };
        assert_eq!(c.validate(today()), Ok(()));
    }

    #[test]
    fn statuses_and_outcomes_use_the_contract_spelling() {
        assert_eq!(
            serde_json::to_string(&ClaimStatus::PendingReview).unwrap(),
            "\"pending_review\""
        );
        assert_eq!(
            serde_json::to_string(&Outcome::Adjudicated).unwrap(),
            "\"ADJUDICATED\""
        );
    }
}
