//! Benefit plans (contract part 2: Plans and members): what a plan pays and what its
//! members pay themselves, per member and calendar year.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::claim::{FieldError, MAX_AMOUNT};
use crate::id::ClientId;

/// Procedure codes a plan names (copays, visit limits), like a claim line's.
pub const MAX_PLAN_CODES: usize = 1000;
/// More visits than anyone has in a year; bounds the counters.
pub const MAX_VISITS: i64 = 10_000;

/// A plan's benefits. Amounts are minor units.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Benefits {
    /// Paid by the member before the plan shares costs; per member per calendar year.
    #[schema(minimum = 0, maximum = 1_000_000_000_000_i64)]
    pub deductible: i64,
    /// The member's share, in whole percent, of what is allowed after the deductible.
    #[schema(minimum = 0, maximum = 100)]
    pub coinsurance_pct: i64,
    /// The most a member pays in a calendar year (copays, deductible and coinsurance);
    /// after it the plan pays the whole allowed amount.
    #[schema(minimum = 0, maximum = 1_000_000_000_000_i64)]
    pub out_of_pocket_max: i64,
    /// The most the plan pays for a member in a calendar year; none means no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1_000_000_000_000_i64)]
    pub annual_max: Option<i64>,
    /// A fixed amount the member pays per line of each procedure code.
    #[serde(default)]
    pub copays: BTreeMap<String, i64>,
    /// Lines of each procedure code the plan pays per member per calendar year.
    #[serde(default)]
    pub visit_limits: BTreeMap<String, i64>,
}

impl Benefits {
    pub fn validate(&self) -> Result<(), FieldError> {
        amount("benefits.deductible", self.deductible)?;
        amount("benefits.out_of_pocket_max", self.out_of_pocket_max)?;
        if let Some(max) = self.annual_max {
            amount("benefits.annual_max", max)?;
        }
        if !(0..=100).contains(&self.coinsurance_pct) {
            return Err(FieldError::new(
                "benefits.coinsurance_pct",
                "must be a whole percent from 0 to 100",
            ));
        }
        codes("benefits.copays", &self.copays, MAX_AMOUNT)?;
        codes("benefits.visit_limits", &self.visit_limits, MAX_VISITS)
    }
}

fn amount(field: &str, v: i64) -> Result<(), FieldError> {
    if !(0..=MAX_AMOUNT).contains(&v) {
        return Err(FieldError::new(
            field,
            format!("must be from 0 to {MAX_AMOUNT} (minor units)"),
        ));
    }
    Ok(())
}

fn codes(field: &str, map: &BTreeMap<String, i64>, max: i64) -> Result<(), FieldError> {
    if map.len() > MAX_PLAN_CODES {
        return Err(FieldError::new(
            field,
            format!("at most {MAX_PLAN_CODES} procedure codes"),
        ));
    }
    for (code, v) in map {
        if code.is_empty() || code.len() > 32 {
            return Err(FieldError::new(
                format!("{field}.{code}"),
                "procedure codes are 1-32 characters",
            ));
        }
        if !(0..=max).contains(v) {
            return Err(FieldError::new(
                format!("{field}.{code}"),
                format!("must be from 0 to {max}"),
            ));
        }
    }
    Ok(())
}

/// `POST /plans`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePlan {
    pub plan_id: ClientId,
    /// 1-200 characters.
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    pub benefits: Benefits,
}

impl CreatePlan {
    pub fn validate(&self) -> Result<(), FieldError> {
        name(&self.name)?;
        self.benefits.validate()
    }
}

/// `PATCH /plans/{plan_id}`: the fields given replace the plan's; `benefits` whole.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchPlan {
    #[schema(min_length = 1, max_length = 200)]
    pub name: Option<String>,
    pub benefits: Option<Benefits>,
}

impl PatchPlan {
    pub fn validate(&self) -> Result<(), FieldError> {
        if let Some(n) = &self.name {
            name(n)?;
        }
        if let Some(b) = &self.benefits {
            b.validate()?;
        }
        if self.name.is_none() && self.benefits.is_none() {
            return Err(FieldError::new("body", "name or benefits is required"));
        }
        Ok(())
    }
}

fn name(n: &str) -> Result<(), FieldError> {
    if n.trim().is_empty() || n.chars().count() > 200 {
        return Err(FieldError::new("name", "must be 1-200 characters"));
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Plan {
    pub plan_id: String,
    pub name: String,
    pub benefits: Benefits,
    pub created_at: String,
    pub updated_at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn benefits() -> Benefits {
        serde_json::from_value(serde_json::json!({
            "deductible": 50000, "coinsurance_pct": 20, "out_of_pocket_max": 300000,
            "copays": {"99213": 2500}, "visit_limits": {"97110": 20}
        }))
        .unwrap()
    }

    #[test]
    fn well_formed_benefits_pass_and_each_bound_names_its_field() {
        assert_eq!(benefits().validate(), Ok(()));
        let field = |b: Benefits| b.validate().unwrap_err().field;
        assert_eq!(
            field(Benefits {
                coinsurance_pct: 101,
                ..benefits()
            }),
            "benefits.coinsurance_pct"
        );
        assert_eq!(
            field(Benefits {
                deductible: -1,
                ..benefits()
            }),
            "benefits.deductible"
        );
        let mut b = benefits();
        b.copays.insert("99214".into(), -5);
        assert_eq!(field(b), "benefits.copays.99214");
        let mut b = benefits();
        b.visit_limits.insert(String::new(), 3);
        assert_eq!(field(b), "benefits.visit_limits.");
    }

    #[test]
    fn unknown_benefit_fields_are_refused() {
        let r: Result<Benefits, _> = serde_json::from_value(serde_json::json!({
            "deductible": 0, "coinsurance_pct": 0, "out_of_pocket_max": 0, "copay": {}
        }));
        assert!(r.is_err());
    }
}
