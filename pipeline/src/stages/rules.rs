//! Stage 2, rules: input `claims.validated`. Evaluates the claim with the rulebook
//! recorded at intake (compiled once per rulebook and kept), against the provider, the
//! contract, the member's history and, for a rulebook that reads `member`, the member
//! on the roster. A rejected claim passes through untouched.

use std::sync::Arc;

use super::runner::{decode_all, encode, Outputs, Stage, StageError};
use crate::bus::{Record, TopicSpec};
use crate::config_cache::{ConfigCache, MemberPlan};
use crate::model::ClaimInProcess;
use crate::rules::{
    ClaimFacts, CompiledRulebook, EvalInput, LineFacts, MemberFacts, MemberHistory, RulebookCache,
    Tracing,
};
use crate::store::Store;
use crate::topics::Topics;

/// The pure core: `rulebook` is the one recorded at intake; `member` the claim's member
/// on the roster, when the rulebook reads it.
pub fn process(
    claim: ClaimInProcess,
    rulebook: &CompiledRulebook,
    history: MemberHistory,
    member: Option<&MemberPlan>,
) -> ClaimInProcess {
    let mut member = member.map(|m| member_facts(m, claim.submitted.claim.service_date));
    evaluate(claim, rulebook, history, &mut member, Tracing::Full)
}

/// [`process`] with the member as a rule sees it: also a claim decided again on the
/// facts kept with it (see [`crate::model::DecisionFacts`]), with the trace `tracing`
/// keeps.
pub fn evaluate(
    mut claim: ClaimInProcess,
    rulebook: &CompiledRulebook,
    history: MemberHistory,
    member: &mut Option<MemberFacts>,
    tracing: Tracing,
) -> ClaimInProcess {
    if claim.rejection.is_some() {
        return claim;
    }
    // What the claim carries is lent to the rules' input and taken back after: copying
    // the provider, the contract's fee schedule, the member and the claim's lists and
    // lines' codes was a tenth of deciding a claim again.
    let (had_provider, had_contract) = (claim.provider.is_some(), claim.contract.is_some());
    let s = &mut claim.submitted.claim;
    let input = EvalInput {
        claim: ClaimFacts {
            claim_id: s.claim_id.as_str().to_owned(),
            member_id: s.member_id.as_str().to_owned(),
            provider_id: s.provider_id.as_str().to_owned(),
            claim_amount: s.claim_amount,
            service_date: s.service_date.to_string(),
            lines: s
                .lines
                .iter_mut()
                .enumerate()
                .map(|(i, l)| LineFacts {
                    line_no: i as i64 + 1,
                    procedure_code: std::mem::take(&mut l.procedure_code),
                    units: l.units,
                    amount: l.amount,
                    modifiers: std::mem::take(&mut l.modifiers),
                })
                .collect(),
            diagnosis_codes: std::mem::take(&mut s.diagnosis_codes),
            metadata: std::mem::take(&mut s.metadata),
        },
        provider: claim.provider.take().unwrap_or_default(),
        contract: claim.contract.take().unwrap_or_default(),
        member_history: history,
        member: member.take(),
        line: None,
    };
    let evaluation = rulebook.evaluate_traced(&input, tracing);
    let EvalInput {
        claim: facts,
        provider,
        contract,
        member: lent,
        ..
    } = input;
    *member = lent;
    let s = &mut claim.submitted.claim;
    s.diagnosis_codes = facts.diagnosis_codes;
    s.metadata = facts.metadata;
    for (line, lent) in s.lines.iter_mut().zip(facts.lines) {
        line.procedure_code = lent.procedure_code;
        line.modifiers = lent.modifiers;
    }
    claim.provider = had_provider.then_some(provider);
    claim.contract = had_contract.then_some(contract);
    claim.rules = Some(evaluation);
    claim.member_history = Some(history);
    claim
}

/// The member as a rule sees it on `service_date`.
pub fn member_facts(m: &MemberPlan, service_date: schemas::Date) -> MemberFacts {
    MemberFacts {
        age: m.member.date_of_birth.years_until(service_date),
        sex: m.member.sex.as_str().to_owned(),
        plan_id: m.member.plan_id.clone(),
    }
}

#[derive(Debug, Clone)]
pub struct Rules {
    pub topics: Topics,
    pub store: Store,
    pub config: ConfigCache,
    pub compiled: RulebookCache,
}

impl Rules {
    async fn rulebook(
        &self,
        tenant_id: &str,
        rulebook_id: &str,
    ) -> Result<Arc<CompiledRulebook>, StageError> {
        // A rulebook never changes once created, so a compiled one is good forever.
        if let Some(hit) = self.compiled.get(tenant_id, rulebook_id) {
            return Ok(hit);
        }
        let rb = self
            .store
            .rulebook(tenant_id, rulebook_id)
            .await?
            .ok_or_else(|| StageError::Poison(format!("rulebook {rulebook_id} not found")))?;
        self.compiled
            .get_or_compile(tenant_id, &rb.rulebook_id, &rb.rules)
            .map_err(|e| {
                StageError::Poison(format!("rulebook {rulebook_id} does not compile: {e}"))
            })
    }
}

impl Stage for Rules {
    fn name(&self) -> &'static str {
        "rules"
    }

    fn input(&self) -> TopicSpec {
        self.topics.validated.clone()
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let mut out = Vec::with_capacity(batch.len());
        let claims = decode_all(self.name(), batch, &self.topics.dead_letter, &mut out);
        for next in self.step(claims).await? {
            out.push(encode(&self.topics.evaluated, next.key(), &next));
        }
        Ok(out)
    }
}

impl Rules {
    /// The stage's work on decoded claims, one out per claim in order: the stage's own
    /// batch and the fused chain's (see [`super::chain`]).
    pub async fn step(
        &self,
        claims: Vec<ClaimInProcess>,
    ) -> Result<Vec<ClaimInProcess>, StageError> {
        // The whole batch's member histories in one read.
        let wanted: Vec<(&str, &str, i64)> = claims
            .iter()
            .filter(|c| c.rejection.is_none())
            .map(|c| {
                let cmd = &c.submitted;
                (
                    cmd.tenant_id.as_str(),
                    cmd.claim.member_id.as_str(),
                    cmd.received_at_ms,
                )
            })
            .collect();
        let mut histories = self.store.member_histories(&wanted).await?.into_iter();
        let mut books = Vec::with_capacity(claims.len());
        for claim in &claims {
            books.push(match claim.rejection {
                Some(_) => None,
                None => {
                    let cmd = &claim.submitted;
                    Some(self.rulebook(&cmd.tenant_id, &cmd.rulebook_id).await?)
                }
            });
        }
        // The members, in one read, of the claims whose rulebook reads `member`.
        let members = self
            .config
            .members_of(
                claims
                    .iter()
                    .zip(&books)
                    .filter(|(_, b)| b.as_ref().is_some_and(|b| b.reads("member")))
                    .map(|(c, _)| (c.tenant_id(), c.submitted.claim.member_id.as_str())),
            )
            .await
            .map_err(|e| StageError::Transient(e.to_string()))?;
        let mut out = Vec::with_capacity(claims.len());
        for (claim, book) in claims.into_iter().zip(books) {
            let next = match book {
                None => claim,
                Some(rulebook) => {
                    let history = histories.next().unwrap_or_default();
                    let key = (
                        claim.tenant_id().to_owned(),
                        claim.submitted.claim.member_id.as_str().to_owned(),
                    );
                    let member = members.get(&key).cloned();
                    process(claim, &rulebook, history, member.as_deref())
                }
            };
            out.push(next);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use schemas::rulebook::{Rule, RuleAction};

    use super::*;
    use crate::model::ClaimSubmitted;
    use crate::rules::compile;

    fn claim() -> ClaimInProcess {
        let mut c = ClaimInProcess::new(ClaimSubmitted {
            tenant_id: schemas::TenantId::parse("acme").unwrap(),
            claim: serde_json::from_value(serde_json::json!({
                "claim_id": "CLM-1", "member_id": "M-1", "provider_id": "P-1", "claim_amount": 900, "service_date": "2026-01-01"
            }))
            .unwrap(),
            rulebook_id: "rb".into(),
            rulebook_version: 1,
            received_at_ms: 0,
        });
        c.provider = Some(crate::rules::ProviderFacts {
            provider_id: "P-1".into(),
            ..Default::default()
        });
        c.contract = Some(Default::default());
        c
    }

    fn book() -> CompiledRulebook {
        compile(&[Rule {
            rule_id: "freq".into(),
            description: String::new(),
            when: "member_history.claims_last_24h >= 2 && claim.claim_amount > 500".into(),
            action: RuleAction::Flag,
            reason_code: "FREQUENT".into(),
            approved_amount: None,
            carc: None,
            rarc: None,
        }])
        .unwrap()
    }

    #[test]
    fn the_claim_is_evaluated_with_the_members_history() {
        let busy = MemberHistory {
            claims_last_24h: 3,
            amount_last_30d: 0,
        };
        let out = process(claim(), &book(), busy, None);
        assert_eq!(out.rules.as_ref().unwrap().flags.len(), 1);
        assert_eq!(out.member_history, Some(busy));
        let quiet = process(claim(), &book(), MemberHistory::default(), None);
        assert!(quiet.rules.unwrap().flags.is_empty());
    }

    #[test]
    fn a_rejected_claim_passes_through() {
        let mut c = claim();
        c.rejection = Some(schemas::claim::Reason {
            source: "validation".into(),
            code: "X".into(),
            rule_id: None,
            message: String::new(),
            carc: None,
        });
        assert!(process(c, &book(), MemberHistory::default(), None)
            .rules
            .is_none());
    }

    /// What the claim and its member lend the rules' input comes back to them whole:
    /// the decision after the rules prices the lines by their codes.
    #[test]
    fn the_claim_and_its_member_come_back_from_the_rules_as_they_went_in() {
        let mut c = claim();
        c.submitted.claim = serde_json::from_value(serde_json::json!({
            "claim_id": "CLM-1", "member_id": "M-1", "provider_id": "P-1", "claim_amount": 900,
            "service_date": "2026-01-01", "diagnosis_codes": ["Z00"], "metadata": {"channel": "edi"},
            "lines": [
                {"procedure_code": "99213", "units": 1, "amount": 400, "modifiers": ["GT"]},
                {"procedure_code": "80053", "units": 2, "amount": 500}
            ]
        }))
        .unwrap();
        let before = c.submitted.claim.clone();
        let book = compile(&[Rule {
            rule_id: "all".into(),
            description: String::new(),
            when: "claim.lines.exists(l, l.procedure_code == '99213' && 'GT' in l.modifiers) \
                   && 'Z00' in claim.diagnosis_codes && member.sex == 'F'"
                .into(),
            action: RuleAction::Flag,
            reason_code: "SEEN".into(),
            approved_amount: None,
            carc: None,
            rarc: None,
        }])
        .unwrap();
        let member = MemberFacts {
            age: 40,
            sex: "F".into(),
            plan_id: "PPO".into(),
        };
        let mut lent = Some(member.clone());
        let out = evaluate(c, &book, MemberHistory::default(), &mut lent, Tracing::Full);
        assert_eq!(out.rules.unwrap().flags.len(), 1, "the rule saw it all");
        assert_eq!(out.submitted.claim, before);
        assert_eq!(lent, Some(member));
    }
}
