//! A decided claim as FHIR R4 (contract part 2, Standard formats): a `ClaimResponse`,
//! or an `ExplanationOfBenefit`, with each line's adjudication in FHIR's categories and
//! every adjustment as its X12 group and CARC.
//!
//! Typed structs of exactly these two resources rather than a FHIR model crate: the
//! crates that cover R4 generate every resource of the standard (hundreds of thousands
//! of lines that would double the workspace's build) to write two. Python's
//! `fhir.resources` validates what this writes, in the API suite.

use serde::Serialize;

use crate::adjudication::{Group, LineAdjudication, LineStatus};
use crate::claim::{ClaimView, Outcome};

const ADJUDICATION: &str = "http://terminology.hl7.org/CodeSystem/adjudication";
const CLAIM_TYPE: &str = "http://terminology.hl7.org/CodeSystem/claim-type";
const CARC: &str = "https://x12.org/codes/claim-adjustment-reason-codes";
const RARC: &str = "https://x12.org/codes/remittance-advice-remark-codes";
const GROUP: &str = "https://x12.org/codes/claim-adjustment-group-codes";
const CPT: &str = "http://www.ama-assn.org/go/cpt";
const ICD10: &str = "http://hl7.org/fhir/sid/icd-10-cm";
/// Identifier systems of this service's own ids.
const CLAIM_ID: &str = "urn:claims-service:claim";
const MEMBER_ID: &str = "urn:claims-service:member";
const PROVIDER_ID: &str = "urn:claims-service:provider";
const TENANT_ID: &str = "urn:claims-service:tenant";

#[derive(Debug, Clone, Serialize)]
pub struct Coding {
    pub system: &'static str,
    pub code: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct CodeableConcept {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub coding: Vec<Coding>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

fn concept(system: &'static str, code: &str) -> CodeableConcept {
    CodeableConcept {
        coding: vec![Coding {
            system,
            code: code.to_owned(),
        }],
        text: None,
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Identifier {
    pub system: &'static str,
    pub value: String,
}

/// A reference by business identifier: the service has no FHIR server for the
/// patient, provider or insurer to be read from.
#[derive(Debug, Clone, Serialize)]
pub struct Reference {
    pub identifier: Identifier,
}

fn by_id(system: &'static str, value: &str) -> Reference {
    Reference {
        identifier: Identifier {
            system,
            value: value.to_owned(),
        },
    }
}

/// FHIR money: a decimal in the currency's major units.
#[derive(Debug, Clone, Serialize)]
pub struct Money {
    pub value: serde_json::Number,
    pub currency: &'static str,
}

fn money(cents: i64) -> Money {
    // Exact: the JSON number is written from the decimal text, not from a float.
    let text = format!(
        "{}{}.{:02}",
        if cents < 0 { "-" } else { "" },
        cents.unsigned_abs() / 100,
        cents.unsigned_abs() % 100
    );
    Money {
        value: text.parse().unwrap_or_else(|_| serde_json::Number::from(0)),
        currency: "USD",
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Adjudication {
    pub category: CodeableConcept,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<CodeableConcept>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount: Option<Money>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Total {
    pub category: CodeableConcept,
    pub amount: Money,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessNote {
    pub number: i64,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseItem {
    pub item_sequence: i64,
    pub adjudication: Vec<Adjudication>,
}

/// What a `ClaimResponse` and an `ExplanationOfBenefit` of one claim say alike.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Common {
    pub resource_type: &'static str,
    pub identifier: Vec<Identifier>,
    pub status: &'static str,
    #[serde(rename = "type")]
    pub kind: CodeableConcept,
    #[serde(rename = "use")]
    pub use_: &'static str,
    pub patient: Reference,
    pub created: String,
    pub insurer: Reference,
    pub outcome: &'static str,
    pub disposition: String,
    pub total: Vec<Total>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub process_note: Vec<ProcessNote>,
}

/// `ClaimResponse` (R4).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimResponse {
    #[serde(flatten)]
    pub common: Common,
    pub requestor: Reference,
    pub request: Reference,
    pub item: Vec<ResponseItem>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnosis {
    pub sequence: i64,
    pub diagnosis_codeable_concept: CodeableConcept,
}

#[derive(Debug, Clone, Serialize)]
pub struct Insurance {
    pub focal: bool,
    pub coverage: Reference,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EobItem {
    pub sequence: i64,
    pub product_or_service: CodeableConcept,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub modifier: Vec<CodeableConcept>,
    pub serviced_date: String,
    pub quantity: Quantity,
    pub net: Money,
    pub adjudication: Vec<Adjudication>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Quantity {
    pub value: i64,
}

/// `ExplanationOfBenefit` (R4).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExplanationOfBenefit {
    #[serde(flatten)]
    pub common: Common,
    pub provider: Reference,
    pub claim: Reference,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diagnosis: Vec<Diagnosis>,
    pub insurance: Vec<Insurance>,
    pub item: Vec<EobItem>,
}

fn category(code: &str) -> CodeableConcept {
    concept(ADJUDICATION, code)
}

fn group_code(g: Group) -> &'static str {
    match g {
        Group::CO => "CO",
        Group::PR => "PR",
        Group::OA => "OA",
        Group::PI => "PI",
    }
}

/// A line's adjudication in FHIR's categories (submitted, eligible, deductible, copay,
/// benefit), then each adjustment: its group as category, its CARC (and RARC) as
/// reason.
fn adjudications(amount: i64, a: &LineAdjudication) -> Vec<Adjudication> {
    let amt = |code: &str, cents: i64| Adjudication {
        category: category(code),
        reason: None,
        amount: Some(money(cents)),
    };
    let mut out = vec![
        amt("submitted", amount),
        amt("eligible", a.allowed_amount),
        amt("deductible", a.member_responsibility.deductible),
        amt("copay", a.member_responsibility.copay),
        amt("benefit", a.approved_amount),
    ];
    for adj in &a.adjustments {
        let mut reason = concept(CARC, &adj.carc);
        if let Some(r) = &adj.rarc {
            reason.coding.push(Coding {
                system: RARC,
                code: r.clone(),
            });
        }
        out.push(Adjudication {
            category: concept(GROUP, group_code(adj.group)),
            reason: Some(reason),
            amount: Some(money(adj.amount)),
        });
    }
    out
}

/// FHIR's outcome of a decided claim: `complete` when every line is paid in whole or in
/// part, `partial` when some lines are denied or the claim waits for an officer, and
/// `error` when the claim is declined or blocked (every line denied).
pub fn outcome(c: &ClaimView) -> &'static str {
    let denied = |l: &&crate::adjudication::LineView| {
        l.adjudication
            .as_ref()
            .is_some_and(|a| a.status == LineStatus::Denied)
    };
    match c.outcome {
        Some(Outcome::Declined | Outcome::Blocked) => "error",
        Some(Outcome::Flagged) | None => "partial",
        Some(Outcome::Adjudicated | Outcome::Approved) => {
            if c.lines.iter().any(|l| denied(&l)) {
                "partial"
            } else {
                "complete"
            }
        }
    }
}

fn disposition(c: &ClaimView) -> String {
    let outcome = c.outcome.map_or("PENDING", Outcome::as_str);
    match c.reasons.first() {
        Some(r) => format!("{outcome}: {}", r.message),
        None => outcome.to_owned(),
    }
}

fn notes(c: &ClaimView) -> Vec<ProcessNote> {
    c.reasons
        .iter()
        .enumerate()
        .map(|(i, r)| ProcessNote {
            number: i as i64 + 1,
            kind: "display",
            text: format!("{} {}: {}", r.source, r.code, r.message),
        })
        .collect()
}

fn totals(c: &ClaimView) -> Vec<Total> {
    vec![
        Total {
            category: category("submitted"),
            amount: money(c.submission.claim_amount),
        },
        Total {
            category: category("benefit"),
            amount: money(c.approved_amount.unwrap_or(0)),
        },
    ]
}

/// The fields both resources share; `created` is when the claim was decided.
fn common(resource_type: &'static str, tenant_id: &str, c: &ClaimView) -> Common {
    let s = &c.submission;
    Common {
        resource_type,
        identifier: vec![Identifier {
            system: CLAIM_ID,
            value: s.claim_id.as_str().to_owned(),
        }],
        status: "active",
        kind: concept(CLAIM_TYPE, "professional"),
        use_: "claim",
        patient: by_id(MEMBER_ID, s.member_id.as_str()),
        created: c.updated_at.clone(),
        insurer: by_id(TENANT_ID, tenant_id),
        outcome: outcome(c),
        disposition: disposition(c),
        total: totals(c),
        process_note: notes(c),
    }
}

/// The claim as a `ClaimResponse`; `created` is when it was decided (RFC 3339).
pub fn claim_response(tenant_id: &str, c: &ClaimView) -> ClaimResponse {
    let s = &c.submission;
    ClaimResponse {
        common: common("ClaimResponse", tenant_id, c),
        requestor: by_id(PROVIDER_ID, s.provider_id.as_str()),
        request: by_id(CLAIM_ID, s.claim_id.as_str()),
        item: c
            .lines
            .iter()
            .filter_map(|l| {
                Some(ResponseItem {
                    item_sequence: l.line_no,
                    adjudication: adjudications(l.amount, l.adjudication.as_ref()?),
                })
            })
            .collect(),
    }
}

/// The claim as an `ExplanationOfBenefit`.
pub fn explanation_of_benefit(tenant_id: &str, c: &ClaimView) -> ExplanationOfBenefit {
    let s = &c.submission;
    ExplanationOfBenefit {
        common: common("ExplanationOfBenefit", tenant_id, c),
        provider: by_id(PROVIDER_ID, s.provider_id.as_str()),
        claim: by_id(CLAIM_ID, s.claim_id.as_str()),
        diagnosis: s
            .diagnosis_codes
            .iter()
            .enumerate()
            .map(|(i, d)| Diagnosis {
                sequence: i as i64 + 1,
                diagnosis_codeable_concept: concept(ICD10, d),
            })
            .collect(),
        insurance: vec![Insurance {
            focal: true,
            coverage: by_id(MEMBER_ID, s.member_id.as_str()),
        }],
        item: c
            .lines
            .iter()
            .map(|l| EobItem {
                sequence: l.line_no,
                product_or_service: match &l.procedure_code {
                    Some(code) => concept(CPT, code),
                    None => CodeableConcept {
                        coding: Vec::new(),
                        text: Some("the claim as a whole".into()),
                    },
                },
                modifier: l.modifiers.iter().map(|m| concept(CPT, m)).collect(),
                serviced_date: s.service_date.to_string(),
                quantity: Quantity { value: l.units },
                net: money(l.amount),
                adjudication: l
                    .adjudication
                    .as_ref()
                    .map(|a| adjudications(l.amount, a))
                    .unwrap_or_default(),
            })
            .collect(),
    }
}
