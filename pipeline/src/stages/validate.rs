//! Stage 1, validate: input `claims.intake`. Checks the claim again as intake does
//! (claims produced straight onto Kafka arrive here unchecked) and attaches the
//! contracted provider and contract as of the day of intake. A claim that fails is not
//! dropped: it goes on with a `rejection`, and decide declines it with that reason.

use schemas::claim::Reason;
use schemas::Date;

use super::runner::{decode_all, encode, Outputs, Stage, StageError};
use crate::bus::{Record, TopicSpec};
use crate::config_cache::ConfigCache;
use crate::model::ClaimInProcess;
use crate::model::ClaimSubmitted;
use crate::rules::{ContractFacts, ProviderFacts};
use crate::store::Contracted;
use crate::topics::Topics;

/// What validating one claim needs to know.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The provider's contract covering the day of intake, if any.
    pub contracted: Option<Contracted>,
    /// The day of intake.
    pub day: Date,
}

/// The pure core.
pub fn process(cmd: ClaimSubmitted, facts: &Facts) -> ClaimInProcess {
    let mut out = ClaimInProcess::new(cmd);
    if let Err(e) = out.submitted.claim.validate(facts.day) {
        out.rejection = Some(Reason {
            source: "validation".into(),
            code: "VALIDATION_ERROR".into(),
            rule_id: None,
            message: format!("{}: {}", e.field, e.message),
            carc: None,
        });
        return out;
    }
    match &facts.contracted {
        None => {
            out.rejection = Some(Reason {
                source: "validation".into(),
                code: "PROVIDER_NOT_CONTRACTED".into(),
                rule_id: None,
                message: "the provider was not under an active contract on the day of intake"
                    .into(),
                carc: None,
            });
        }
        Some(c) => {
            out.provider = Some(ProviderFacts {
                provider_id: c.provider.provider_id.clone(),
                name: c.provider.name.clone(),
                npi: c.provider.npi.clone(),
                specialty: c.provider.specialty.clone(),
            });
            out.contract = Some(ContractFacts {
                contract_id: c.contract.contract_id.clone(),
                fee_schedule: c.contract.fee_schedule.clone(),
            });
        }
    }
    out
}

/// The stage on the bus.
#[derive(Debug, Clone)]
pub struct Validate {
    pub topics: Topics,
    pub config: ConfigCache,
}

impl Stage for Validate {
    fn name(&self) -> &'static str {
        "validate"
    }

    fn input(&self) -> TopicSpec {
        self.topics.intake.clone()
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let mut out = Vec::with_capacity(batch.len());
        let cmds = decode_all(self.name(), batch, &self.topics.dead_letter, &mut out);
        for next in self.step(cmds).await? {
            out.push(encode(&self.topics.validated, next.key(), &next));
        }
        Ok(out)
    }
}

impl Validate {
    /// The stage's work on decoded commands, one claim out per command in order: the
    /// stage's own batch and the fused chain's (see [`super::chain`]).
    pub async fn step(&self, cmds: Vec<ClaimSubmitted>) -> Result<Vec<ClaimInProcess>, StageError> {
        let mut out = Vec::with_capacity(cmds.len());
        for cmd in cmds {
            let day = Date::from_days_since_epoch(cmd.received_at_ms.div_euclid(86_400_000));
            let contracted = self
                .config
                .contracted(&cmd.tenant_id, cmd.claim.provider_id.as_str(), day)
                .await
                .map_err(|e| StageError::Transient(e.to_string()))?
                .map(|c| (*c).clone());
            out.push(process(cmd, &Facts { contracted, day }));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use schemas::claim::ClaimSubmission;
    use schemas::provider::{Contract, ContractStatus, Provider};

    use super::*;

    fn cmd(amount: i64) -> ClaimSubmitted {
        ClaimSubmitted {
            tenant_id: schemas::TenantId::parse("acme").unwrap(),
            claim: serde_json::from_value::<ClaimSubmission>(serde_json::json!({
                "claim_id": "CLM-1", "member_id": "M-1", "provider_id": "P-1",
                "claim_amount": amount, "service_date": "2026-01-01"
            }))
            .unwrap(),
            rulebook_id: "rb_1".into(),
            rulebook_version: 3,
            received_at_ms: 0,
        }
    }

    fn contracted() -> Contracted {
        Contracted {
            provider: Provider {
                provider_id: "P-1".into(),
                name: "Clinic".into(),
                npi: None,
                specialty: Some("cardiology".into()),
                created_at: String::new(),
            },
            contract: Contract {
                contract_id: "ctr_1".into(),
                provider_id: "P-1".into(),
                status: ContractStatus::Active,
                effective_from: "2020-01-01".into(),
                effective_to: None,
                fee_schedule: BTreeMap::from([("99213".into(), 100)]),
                created_at: String::new(),
                updated_at: String::new(),
            },
        }
    }

    fn day() -> Date {
        Date::parse("2026-02-01").unwrap()
    }

    #[test]
    fn a_valid_contracted_claim_carries_its_provider_and_contract() {
        let out = process(
            cmd(100),
            &Facts {
                contracted: Some(contracted()),
                day: day(),
            },
        );
        assert_eq!(out.rejection, None);
        assert_eq!(
            out.provider.unwrap().specialty.as_deref(),
            Some("cardiology")
        );
        assert_eq!(out.contract.unwrap().fee_schedule["99213"], 100);
    }

    #[test]
    fn an_uncontracted_provider_is_a_rejection_not_a_drop() {
        let out = process(
            cmd(100),
            &Facts {
                contracted: None,
                day: day(),
            },
        );
        assert_eq!(out.rejection.unwrap().code, "PROVIDER_NOT_CONTRACTED");
        assert_eq!(out.submitted.claim.claim_id.as_str(), "CLM-1");
    }

    #[test]
    fn an_invalid_claim_is_rejected_with_its_field() {
        let out = process(
            cmd(0),
            &Facts {
                contracted: Some(contracted()),
                day: day(),
            },
        );
        let r = out.rejection.unwrap();
        assert_eq!(r.code, "VALIDATION_ERROR");
        assert!(r.message.starts_with("claim_amount"), "{}", r.message);
    }
}
