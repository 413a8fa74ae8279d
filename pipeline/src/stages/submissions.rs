//! Stage 0, submissions: input `claims.submissions`, where a payer produces claims
//! straight onto Kafka instead of calling `POST /claims/intake`. Each record goes
//! through exactly the checks of REST intake (the body, an active rulebook, the
//! provider's contract today, the claim id unused), and is then accepted as intake
//! accepts a claim: its row and its command on `claims.intake`, in one store
//! transaction. A refused record is announced on `claims.rejects` with the error body
//! REST intake would have answered.
//!
//! The record: key `tenant_id/claim_id` (any key is accepted; the stage keys what it
//! writes itself), value `{"tenant_id": "…", "claim": {…}}` with the claim as
//! `POST /claims/intake` takes it, as JSON or as Avro (`schemas/avro/submission.avsc`,
//! single-object encoded or, with a schema registry, in its wire format; decoded by the
//! bus). The tenant comes from the record, so producing to
//! this topic is a privilege the broker's ACLs grant, as a token grants REST intake.
//!
//! Redelivery: the claim's `received_at` is the record's timestamp, so a record
//! accepted before a crash finds its own claim (same submission, same time) and is not
//! refused as a duplicate of itself.

use schemas::avro;
use schemas::claim::ClaimSubmission;
use schemas::Date;
use schemas::TenantId;
use serde::{Deserialize, Serialize};

use super::runner::{encode, Outputs, Stage, StageError};
use crate::bus::{Bus, Record, TopicSpec};
use crate::config_cache::ActiveRulebook;
use crate::config_cache::ConfigCache;
use crate::intake::{self, Admitted};
use crate::model::{claim_key, ClaimSubmitted};
use crate::store::{Store, Unreplaceable};
use crate::topics::Topics;

/// Who the audit log names as having received a claim from Kafka.
pub const ACTOR: &str = "kafka:claims.submissions";

/// A record's value.
#[derive(Debug, Clone, Deserialize)]
struct Envelope {
    tenant_id: String,
    claim: serde_json::Value,
}

/// The error body of a refusal, as REST intake answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectError {
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// Where a refused record was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    pub topic: String,
    pub partition: u32,
    pub offset: i64,
}

impl Source {
    fn of(r: &Record) -> Self {
        Self {
            topic: r.topic.clone(),
            partition: r.partition,
            offset: r.offset,
        }
    }
}

/// A record on `claims.rejects`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejected {
    pub tenant_id: Option<String>,
    pub claim_id: Option<String>,
    pub error: RejectError,
    pub source: Source,
}

fn refusal(code: &str, message: impl Into<String>, field: Option<&str>) -> RejectError {
    RejectError {
        code: code.into(),
        message: message.into(),
        field: field.map(str::to_owned),
    }
}

/// The record parsed: its tenant and claim, or why it cannot be read.
pub fn parse(value: &[u8]) -> Result<(TenantId, ClaimSubmission), (Option<String>, RejectError)> {
    // The bus has already read an Avro value of a known version of the topic's schema
    // (or, with a registry, of a schema that resolves to it) into JSON; one still in
    // Avro was written with a schema this service cannot read.
    if value.starts_with(&avro::MAGIC) || crate::bus::registry::framed(value).is_some() {
        return Err((
            None,
            refusal(
                "BAD_REQUEST",
                format!(
                    "the record is Avro written with a schema this service does not know; \
                     write it with schemas/avro/{}.avsc, or as JSON",
                    avro::SUBMISSION.name
                ),
                None,
            ),
        ));
    }
    let envelope: Envelope = serde_json::from_slice(value).map_err(|e| {
        (
            None,
            refusal(
                "BAD_REQUEST",
                format!("the record is not {{\"tenant_id\", \"claim\"}} JSON: {e}"),
                None,
            ),
        )
    })?;
    let tenant_id = TenantId::parse(envelope.tenant_id.clone()).map_err(|e| {
        (
            Some(envelope.tenant_id.clone()),
            refusal(
                "VALIDATION_ERROR",
                format!("tenant_id {e}"),
                Some("tenant_id"),
            ),
        )
    })?;
    let claim = serde_json::from_value(envelope.claim).map_err(|e| {
        (
            Some(envelope.tenant_id.clone()),
            refusal("BAD_REQUEST", format!("the claim is malformed: {e}"), None),
        )
    })?;
    Ok((tenant_id, claim))
}

/// The pure core: REST intake's checks of one claim, in its order, given the tenant's
/// active rulebook, whether the provider is contracted `today`, and for a replacement
/// or a void why the claim it names cannot be replaced, if it cannot.
pub fn process(
    tenant_id: &TenantId,
    claim: ClaimSubmission,
    rulebook: Option<&ActiveRulebook>,
    contracted: bool,
    unreplaceable: Option<Unreplaceable>,
    today: Date,
    received_at_ms: i64,
) -> Result<ClaimSubmitted, RejectError> {
    claim
        .validate(today)
        .map_err(|e| refusal("VALIDATION_ERROR", e.message, Some(&e.field)))?;
    let Some(rb) = rulebook else {
        return Err(refusal(
            "RULEBOOK_NOT_ACTIVE",
            "the tenant has no active rulebook; publish one first",
            None,
        ));
    };
    if !contracted {
        return Err(refusal(
            "PROVIDER_NOT_CONTRACTED",
            "the provider is not under an active contract with the tenant today",
            Some("provider_id"),
        ));
    }
    if let Some(why) = unreplaceable {
        return Err(not_replaceable(why));
    }
    Ok(ClaimSubmitted {
        tenant_id: tenant_id.clone(),
        claim,
        rulebook_id: rb.rulebook_id.clone(),
        rulebook_version: rb.version,
        received_at_ms,
    })
}

fn not_replaceable(why: Unreplaceable) -> RejectError {
    let code = match why {
        Unreplaceable::Missing => "CLAIM_NOT_FOUND",
        _ => "CONFLICT",
    };
    refusal(code, why.message(), Some("replaces_claim_id"))
}

fn duplicate() -> RejectError {
    refusal(
        "CLAIM_DUPLICATE",
        "a claim with this claim_id already exists for the tenant",
        Some("claim_id"),
    )
}

/// The stage on the bus.
#[derive(Debug, Clone)]
pub struct Submissions {
    pub topics: Topics,
    pub config: ConfigCache,
    pub store: Store,
    pub bus: Bus,
}

impl Submissions {
    /// Checks one record: its command, or its refusal.
    async fn examine(&self, r: &Record) -> Result<Result<ClaimSubmitted, Rejected>, StageError> {
        let source = Source::of(r);
        let (tenant_id, claim) = match parse(&r.value) {
            Ok(parsed) => parsed,
            Err((tenant_id, error)) => {
                return Ok(Err(Rejected {
                    tenant_id,
                    claim_id: None,
                    error,
                    source,
                }))
            }
        };
        let transient = |e: crate::config_cache::CacheError| StageError::Transient(e.to_string());
        let today = Date::from_days_since_epoch(r.timestamp_ms.div_euclid(86_400_000));
        let rulebook = self
            .config
            .active_rulebook(&tenant_id)
            .await
            .map_err(transient)?;
        let contracted = self
            .config
            .contracted(&tenant_id, claim.provider_id.as_str(), today)
            .await
            .map_err(transient)?
            .is_some();
        let unreplaceable = match &claim.replaces_claim_id {
            Some(replaced) => self
                .store
                .replaceable(&tenant_id, replaced.as_str(), claim.member_id.as_str())
                .await?
                .err(),
            None => None,
        };
        let claim_id = claim.claim_id.as_str().to_owned();
        Ok(process(
            &tenant_id,
            claim,
            rulebook.as_ref(),
            contracted,
            unreplaceable,
            today,
            r.timestamp_ms,
        )
        .map_err(|error| Rejected {
            tenant_id: Some(tenant_id.to_string()),
            claim_id: Some(claim_id),
            error,
            source,
        }))
    }
}

impl Stage for Submissions {
    fn name(&self) -> &'static str {
        "submissions"
    }

    fn input(&self) -> TopicSpec {
        self.topics.submissions.clone()
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let mut out = Vec::new();
        let mut commands = Vec::new();
        let mut sources = Vec::new();
        for r in batch {
            match self.examine(r).await? {
                Ok(cmd) => {
                    // One claim id twice in a batch: the second is a duplicate, as the
                    // second of two REST submissions would be.
                    if commands.iter().any(|c: &ClaimSubmitted| {
                        c.tenant_id == cmd.tenant_id && c.claim.claim_id == cmd.claim.claim_id
                    }) {
                        out.push(reject(&self.topics, r, Some(&cmd), duplicate()));
                    } else {
                        commands.push(cmd);
                        sources.push(r);
                    }
                }
                Err(rejected) => out.push(encode(&self.topics.rejects, r.key.clone(), &rejected)),
            }
        }
        let fresh = intake::accept(
            &self.store,
            &self.bus,
            &self.topics.intake,
            &commands,
            ACTOR,
        )
        .await?;
        for ((cmd, r), admitted) in commands.iter().zip(sources).zip(fresh) {
            match admitted {
                Admitted::New => continue,
                Admitted::NotReplaceable => {
                    let why = not_replaceable(Unreplaceable::Superseded);
                    out.push(reject(&self.topics, r, Some(cmd), why));
                    continue;
                }
                Admitted::Duplicate => {}
            }
            // Taken already: by this very record before a crash (same submission, same
            // time), or by another claim.
            let mine = self
                .store
                .claim_receipt(&cmd.tenant_id, cmd.claim.claim_id.as_str())
                .await?
                .is_some_and(|(at, submission)| {
                    at == cmd.received_at_ms
                        && serde_json::to_string(&cmd.claim).is_ok_and(|s| s == submission)
                });
            if !mine {
                out.push(reject(&self.topics, r, Some(cmd), duplicate()));
            }
        }
        Ok(out)
    }
}

fn reject(
    topics: &Topics,
    r: &Record,
    cmd: Option<&ClaimSubmitted>,
    error: RejectError,
) -> (TopicSpec, crate::bus::Message) {
    let rejected = Rejected {
        tenant_id: cmd.map(|c| c.tenant_id.to_string()),
        claim_id: cmd.map(|c| c.claim.claim_id.as_str().to_owned()),
        error,
        source: Source::of(r),
    };
    let key = cmd.map_or_else(
        || r.key.clone(),
        |c| claim_key(&c.tenant_id, c.claim.claim_id.as_str()),
    );
    encode(&topics.rejects, key, &rejected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(provider: &str) -> serde_json::Value {
        serde_json::json!({
            "claim_id": "CLM-1", "member_id": "M-1", "provider_id": provider,
            "claim_amount": 100, "service_date": "2026-01-01"
        })
    }

    #[test]
    fn a_record_that_is_not_an_envelope_is_a_bad_request() {
        let (tenant, e) = parse(b"not json").unwrap_err();
        assert_eq!((tenant, e.code.as_str()), (None, "BAD_REQUEST"));
        let body = serde_json::json!({"tenant_id": "acme", "claim": {"claim_id": "X"}});
        let (tenant, e) = parse(body.to_string().as_bytes()).unwrap_err();
        assert_eq!(tenant.as_deref(), Some("acme"));
        assert_eq!(e.code, "BAD_REQUEST");
        assert!(e.message.contains("member_id"), "{}", e.message);
    }

    #[test]
    fn checks_run_in_rest_intakes_order() {
        let today = Date::from_days_since_epoch(20_600);
        let body = serde_json::json!({"tenant_id": "acme", "claim": claim("P-1")});
        let (tenant, c) = parse(body.to_string().as_bytes()).unwrap();
        // No rulebook comes before the contract.
        let e = process(&tenant, c.clone(), None, false, None, today, 0).unwrap_err();
        assert_eq!(e.code, "RULEBOOK_NOT_ACTIVE");
        // A replacement of a claim that does not exist, once the rest is fine.
        let rb = ActiveRulebook {
            rulebook_id: "rb".into(),
            version: 1,
        };
        let missing = Some(Unreplaceable::Missing);
        let e = process(&tenant, c.clone(), Some(&rb), true, missing, today, 0).unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.field.as_deref()),
            ("CLAIM_NOT_FOUND", Some("replaces_claim_id"))
        );
        let taken = Some(Unreplaceable::Superseded);
        let e = process(&tenant, c.clone(), Some(&rb), true, taken, today, 0).unwrap_err();
        assert_eq!(e.code, "CONFLICT");
        // A claim that fails validation is refused with its field, whatever else.
        let mut bad = c.clone();
        bad.claim_amount = -5;
        let e = process(&tenant, bad, None, true, None, today, 0).unwrap_err();
        assert_eq!(e.code, "VALIDATION_ERROR");
        assert_eq!(e.field.as_deref(), Some("claim_amount"));
    }
}
