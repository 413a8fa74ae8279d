//! The values one evaluation reads, prepared once per claim and handed to CEL through a
//! variable resolver. CEL resolves `claim.claim_amount` by first asking for the whole
//! dotted name; answering it here with a ready integer spares building the `claim` map
//! and hashing into it on every access, which dominated evaluation time. Only the names
//! the rulebook uses are prepared.

use std::sync::Arc;

use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::Value;

use super::input::EvalInput;

#[derive(Debug)]
pub struct Facts {
    entries: Vec<(String, Box<dyn Val>)>,
}

impl Facts {
    /// Prepares `names` (as collected by the analysis) from `input`.
    pub fn prepare(input: &EvalInput, names: &[String]) -> Result<Self, cel::SerializationError> {
        let mut entries = Vec::with_capacity(names.len());
        for name in names {
            if let Some(value) = value_of(input, name)? {
                if let Ok(val) = Box::<dyn Val>::try_from(value) {
                    entries.push((name.clone(), val));
                }
            }
        }
        Ok(Self { entries })
    }
}

impl VariableResolver for Facts {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        self.entries
            .iter()
            .find(|(name, _)| name == variable)
            .map(|(_, v)| CowVal::Borrowed(v.as_ref()))
    }
}

fn string(s: &str) -> Value {
    Value::String(Arc::new(s.to_owned()))
}

fn optional(s: &Option<String>) -> Value {
    s.as_deref().map(string).unwrap_or(Value::Null)
}

fn value_of(input: &EvalInput, name: &str) -> Result<Option<Value>, cel::SerializationError> {
    let (c, p, k, m) = (
        &input.claim,
        &input.provider,
        &input.contract,
        &input.member_history,
    );
    Ok(Some(match name {
        "claim" => cel::to_value(c)?,
        "provider" => cel::to_value(p)?,
        "contract" => cel::to_value(k)?,
        "member_history" => cel::to_value(m)?,
        "claim.claim_id" => string(&c.claim_id),
        "claim.member_id" => string(&c.member_id),
        "claim.provider_id" => string(&c.provider_id),
        "claim.claim_amount" => Value::Int(c.claim_amount),
        "claim.service_date" => string(&c.service_date),
        "claim.lines" => cel::to_value(&c.lines)?,
        "claim.diagnosis_codes" => cel::to_value(&c.diagnosis_codes)?,
        "claim.metadata" => cel::to_value(&c.metadata)?,
        "provider.provider_id" => string(&p.provider_id),
        "provider.name" => string(&p.name),
        "provider.npi" => optional(&p.npi),
        "provider.specialty" => optional(&p.specialty),
        "contract.contract_id" => string(&k.contract_id),
        "contract.fee_schedule" => cel::to_value(&k.fee_schedule)?,
        "member_history.claims_last_24h" => Value::Int(m.claims_last_24h),
        "member_history.amount_last_30d" => Value::Int(m.amount_last_30d),
        // `null` for a member not on the roster: `member.age` then fails, as CEL's
        // field of null does, and the rule reports the error.
        "member" => cel::to_value(&input.member)?,
        "member.age" | "member.sex" | "member.plan_id" => {
            let Some(member) = &input.member else {
                return Ok(None);
            };
            match name {
                "member.age" => Value::Int(member.age),
                "member.sex" => string(&member.sex),
                _ => string(&member.plan_id),
            }
        }
        "line" => cel::to_value(&input.line)?,
        "line.line_no"
        | "line.procedure_code"
        | "line.units"
        | "line.amount"
        | "line.modifiers" => {
            let Some(line) = &input.line else {
                return Ok(None);
            };
            match name {
                "line.line_no" => Value::Int(line.line_no),
                "line.procedure_code" => string(&line.procedure_code),
                "line.units" => Value::Int(line.units),
                "line.amount" => Value::Int(line.amount),
                _ => cel::to_value(&line.modifiers)?,
            }
        }
        _ => return Ok(None),
    }))
}
