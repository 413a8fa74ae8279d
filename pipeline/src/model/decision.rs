//! The decision on one claim: the automatic one (version 1) or an officer's (a later
//! version), with the events it causes. The snapshot writer stores it; the store makes
//! its audit record.

use schemas::adjudication::LineView;
use schemas::claim::{ClaimStatus, Outcome, Reason};
use schemas::receipt::EligibilityStatus;
use schemas::TenantId;
use serde::{Deserialize, Serialize};

use serde_json::value::RawValue;

use super::event::{DomainEvent, EventKind, Json};
use crate::adjudication::{Pricing, Usage};
use crate::model::{member_key, DecisionFacts, FraudScore, Kept, Trace};

/// The decision on one claim, as the snapshot writer stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub tenant_id: TenantId,
    pub claim_id: String,
    /// The claim's member: decisions are keyed by member, so that the stage that keeps
    /// the members' accumulators takes a member's decisions in order.
    #[serde(default)]
    pub member_id: String,
    /// 1 for the automatic decision; an officer's decision is a later version.
    pub version: i64,
    pub status: ClaimStatus,
    pub outcome: Outcome,
    pub approved_amount: i64,
    pub fraud: Option<FraudScore>,
    pub reasons: Vec<Reason>,
    /// The rulebook the automatic decision evaluated; empty on an officer's decision,
    /// whose receipt reads it from the decision it [`reviews`](Self::reviews).
    #[serde(default)]
    pub rulebook_id: String,
    pub rulebook_version: i64,
    pub audit_id: String,
    pub task_id: Option<String>,
    pub priority: i64,
    pub decided_at_ms: i64,
    pub trace: Trace,
    #[serde(deserialize_with = "super::event::deserialize_events")]
    pub events: Vec<DomainEvent>,
    /// The claim's lines with their adjudication; their approved amounts add up to
    /// `approved_amount`. Empty in decisions written before lines were adjudicated.
    #[serde(default)]
    pub lines: Vec<LineView>,
    /// The member's eligibility as the automatic decision found it; none for a claim
    /// declined before it was checked, and on an officer's decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligibility: Option<EligibilityStatus>,
    /// On an officer's decision: the audit id of the automatic decision it reviewed,
    /// which holds the rules' trace and the eligibility the receipt shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviews: Option<String>,
    /// The officer (user id) whose review made this decision; none for the automatic one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub officer: Option<String>,
    /// For a member on a plan, what the member's year is applied to (see
    /// [`Pricing`]): the lines above are final once the snapshot stage applied it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<Kept<Pricing>>,
    /// The amount an officer approved, when they named one: it applies after the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub officer_amount: Option<i64>,
    /// For the decision on a replacement or a void: the claim it replaces, which the
    /// snapshot stage takes out of the member's year first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces_claim_id: Option<String>,
    /// On the automatic decision: what it was decided with besides the claim, kept
    /// with the claim for backtests and reprocessing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<Kept<Box<DecisionFacts>>>,
    /// Set by the snapshot stage when the decision counts in the member's year: the
    /// year and the claim's usage, for the store's copy of the accumulators. On the
    /// topic only in a decision the fused chain wrote already (see [`Self::written`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted: Option<(i32, Usage)>,
    /// With `counted`: the claim's place in the member's year (its `seq`), kept with the
    /// store's copy, from which a restart restores the years. Not on the topic: a
    /// rebuild counts the written decisions again, in the same order.
    #[serde(skip)]
    pub counted_seq: u64,
    /// Read from `claims.decided`: the decision is one the fused chain wrote to the store
    /// itself, benefits applied, and put on the topic as the record of it (see
    /// [`WRITTEN_PREFIX`]). The snapshot stage passes it by; `claims replay` writes it
    /// as it is. Never serialised by the decision itself: [`Written`] adds it.
    #[serde(default, skip_serializing)]
    pub written: bool,
    /// `lines` as JSON once they are final, written once for `claim.completed` and the
    /// store's copy of the claim.
    #[serde(skip)]
    pub lines_json: Option<Json>,
}

/// How a [`Written`] decision's record begins on `claims.decided`: the snapshot stage
/// recognises one without decoding it.
pub const WRITTEN_PREFIX: &[u8] = b"{\"written\":true,";

/// A decision the fused chain wrote to the store, as its record on `claims.decided`
/// (which starts with [`WRITTEN_PREFIX`]): the decision's members, as the decision
/// serialises them, after `"written":true`.
#[derive(Debug)]
pub struct Written<'a> {
    decision: &'a Decision,
    parts: Option<WrittenParts<'a>>,
}

/// The JSON of a decision's larger members as the store has just written them (its
/// reasons, fraud analysis, trace, lines, pricing and facts), which its [`Written`]
/// record takes as they are: serialising them a second time for the record was a
/// sixteenth of the embedded pipeline's CPU. Each must be the text of the decision's
/// member as it is now.
#[derive(Debug, Clone, Copy)]
pub struct WrittenParts<'a> {
    pub fraud: Option<&'a RawValue>,
    pub reasons: &'a RawValue,
    pub trace: &'a RawValue,
    /// None when the record writes the decision's own (a decision without lines).
    pub lines: Option<&'a RawValue>,
    /// None when the record writes the decision's own.
    pub pricing: Option<&'a RawValue>,
    pub facts: Option<&'a RawValue>,
}

impl<'a> Written<'a> {
    pub fn new(decision: &'a Decision) -> Self {
        Self {
            decision,
            parts: None,
        }
    }

    /// The record, with the members in `parts` written as they are.
    pub fn with(decision: &'a Decision, parts: WrittenParts<'a>) -> Self {
        Self {
            decision,
            parts: Some(parts),
        }
    }
}

/// A member of a [`Written`] record: the text made of it already, or the value.
enum Member<'a, T> {
    Text(&'a RawValue),
    Value(&'a T),
}

/// `text` when there is one, else `value`.
fn text_or<'a, T>(text: Option<&'a RawValue>, value: &'a T) -> Member<'a, T> {
    text.map_or(Member::Value(value), Member::Text)
}

impl<T: Serialize> Serialize for Member<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Text(t) => t.serialize(s),
            Self::Value(v) => v.serialize(s),
        }
    }
}

impl<'a> Serialize for Written<'a> {
    /// The map that `"written":true` and the decision flattened would make: the
    /// decision's members in their order, those it skips skipped.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // Every member named, so that one added to `Decision` cannot be left off the
        // record without this failing to build.
        let Decision {
            tenant_id,
            claim_id,
            member_id,
            version,
            status,
            outcome,
            approved_amount,
            fraud,
            reasons,
            rulebook_id,
            rulebook_version,
            audit_id,
            task_id,
            priority,
            decided_at_ms,
            trace,
            events,
            lines,
            eligibility,
            reviews,
            officer,
            pricing,
            officer_amount,
            replaces_claim_id,
            facts,
            counted,
            counted_seq: _,
            written: _,
            lines_json: _,
        } = self.decision;
        let parts = self.parts.as_ref();
        let fraud = text_or(parts.and_then(|p| p.fraud), fraud);
        let reasons = text_or(parts.map(|p| p.reasons), reasons);
        let trace = text_or(parts.map(|p| p.trace), trace);
        let lines = text_or(parts.and_then(|p| p.lines), lines);
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("written", &true)?;
        m.serialize_entry("tenant_id", tenant_id)?;
        m.serialize_entry("claim_id", claim_id)?;
        m.serialize_entry("member_id", member_id)?;
        m.serialize_entry("version", version)?;
        m.serialize_entry("status", status)?;
        m.serialize_entry("outcome", outcome)?;
        m.serialize_entry("approved_amount", approved_amount)?;
        m.serialize_entry("fraud", &fraud)?;
        m.serialize_entry("reasons", &reasons)?;
        m.serialize_entry("rulebook_id", rulebook_id)?;
        m.serialize_entry("rulebook_version", rulebook_version)?;
        m.serialize_entry("audit_id", audit_id)?;
        m.serialize_entry("task_id", task_id)?;
        m.serialize_entry("priority", priority)?;
        m.serialize_entry("decided_at_ms", decided_at_ms)?;
        m.serialize_entry("trace", &trace)?;
        m.serialize_entry("events", events)?;
        m.serialize_entry("lines", &lines)?;
        if let Some(v) = eligibility {
            m.serialize_entry("eligibility", v)?;
        }
        if let Some(v) = reviews {
            m.serialize_entry("reviews", v)?;
        }
        if let Some(v) = officer {
            m.serialize_entry("officer", v)?;
        }
        if let Some(v) = pricing {
            match parts.and_then(|p| p.pricing) {
                Some(text) => m.serialize_entry("pricing", text)?,
                None => m.serialize_entry("pricing", v)?,
            }
        }
        if let Some(v) = officer_amount {
            m.serialize_entry("officer_amount", v)?;
        }
        if let Some(v) = replaces_claim_id {
            m.serialize_entry("replaces_claim_id", v)?;
        }
        if let Some(v) = facts {
            match parts.and_then(|p| p.facts) {
                Some(text) => m.serialize_entry("facts", text)?,
                None => m.serialize_entry("facts", v)?,
            }
        }
        if let Some(v) = counted {
            m.serialize_entry("counted", v)?;
        }
        m.end()
    }
}

impl Decision {
    /// The bus key: the member's.
    pub fn key(&self) -> String {
        member_key(&self.tenant_id, &self.member_id)
    }

    /// Whether the decision is a final payable outcome: one that moves the member's
    /// accumulators.
    pub fn is_payable(&self) -> bool {
        matches!(
            self.outcome,
            schemas::claim::Outcome::Adjudicated | schemas::claim::Outcome::Approved
        )
    }

    /// Replaces the lines' adjudication, and with it the approved amount, in the
    /// decision and in the events that tell them.
    pub fn set_lines(&mut self, lines: Vec<LineView>) {
        self.approved_amount = crate::adjudication::approved_total(&lines);
        self.lines = lines;
        self.lines_json = None;
        if self.events.is_empty() {
            return;
        }
        let completed = self.completed_data(true);
        for e in &mut self.events {
            match e.kind() {
                Some(EventKind::ClaimCompleted) => e.data = completed.clone(),
                Some(EventKind::ClaimApproved) => {
                    let mut data = e.value();
                    data["approved_amount"] = self.approved_amount.into();
                    e.data = Json::of(&data);
                }
                _ => {}
            }
        }
    }

    /// `claim.completed`'s data as this decision tells it; with `lines` none (null)
    /// while a priced claim's lines wait for its member's year (see [`Pricing`]).
    pub fn completed_data(&mut self, lines: bool) -> Json {
        let told = if lines {
            Some(
                self.lines_json
                    .get_or_insert_with(|| Json::of(&self.lines))
                    .raw(),
            )
        } else {
            None
        };
        Json::of(&Completed {
            approved_amount: self.approved_amount,
            audit_id: &self.audit_id,
            claim_id: &self.claim_id,
            fraud_score: self.fraud.as_ref().map_or(0.0, |f| f.fraud_score),
            lines: told,
            outcome: self.outcome,
            status: self.status,
        })
    }
}

/// The data of `claim.completed` (contract: Events). Its members come in the order of
/// their names, as the other events' data (JSON maps) has them.
#[derive(Serialize)]
struct Completed<'a> {
    approved_amount: i64,
    audit_id: &'a str,
    claim_id: &'a str,
    fraud_score: f64,
    lines: Option<&'a RawValue>,
    outcome: Outcome,
    status: ClaimStatus,
}

#[cfg(test)]
impl Decision {
    /// A tenant `acme` decision on `claim_id` of `member_id`, `version`, adjudicated at
    /// 100 and otherwise empty: for tests to change what they look at.
    pub fn sample(claim_id: &str, member_id: &str, version: i64) -> Self {
        Self {
            tenant_id: TenantId::parse("acme").unwrap_or_else(|e| panic!("{e}")),
            claim_id: claim_id.into(),
            member_id: member_id.into(),
            version,
            status: ClaimStatus::Completed,
            outcome: Outcome::Adjudicated,
            approved_amount: 100,
            fraud: None,
            reasons: Vec::new(),
            rulebook_id: "rb".into(),
            rulebook_version: 1,
            audit_id: format!("aud_{claim_id}"),
            task_id: None,
            priority: 0,
            decided_at_ms: 0,
            trace: Trace::default(),
            events: Vec::new(),
            lines: Vec::new(),
            eligibility: None,
            reviews: None,
            officer: None,
            pricing: None,
            officer_amount: None,
            replaces_claim_id: None,
            facts: None,
            counted: None,
            counted_seq: 0,
            written: false,
            lines_json: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::reading_without_events;

    /// `claims replay` reads a decision's events past; every other reader gets them,
    /// and so does the same thread once the replay's read is over, even a failed one.
    #[test]
    fn a_decision_read_without_events_has_none_and_is_otherwise_the_same() {
        let mut d = Decision::sample("C-1", "M-1", 1);
        d.events = vec![DomainEvent::new(
            EventKind::ClaimCompleted,
            &d.tenant_id,
            "C-1",
            "2026-01-01T00:00:00Z".into(),
            serde_json::json!({"claim_id": "C-1", "lines": [{"line_no": 1}]}),
        )];
        let text = serde_json::to_string(&d).unwrap_or_else(|e| panic!("{e}"));
        let read = |text: &str| -> Decision {
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"))
        };
        let without = reading_without_events(|| read(&text));
        assert!(without.events.is_empty());
        assert_eq!(
            Decision {
                events: d.events.clone(),
                ..without
            },
            d
        );
        assert_eq!(read(&text), d, "outside the scope, events are read");
        let failed = reading_without_events(|| serde_json::from_str::<Decision>("{"));
        assert!(failed.is_err());
        assert_eq!(read(&text).events, d.events);
    }
}
