//! Members (contract part 2: Plans and members): who a claim is for, their plan and the
//! periods they are covered, and what they have used of their benefits this year.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::claim::FieldError;
use crate::date::Date;
use crate::id::ClientId;

/// Coverage periods per member: enough for decades of re-enrolments.
pub const MAX_COVERAGE_PERIODS: usize = 100;
/// Members per `POST /members/import`.
pub const MAX_IMPORT: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum Sex {
    F,
    M,
    U,
}

impl Sex {
    pub fn as_str(self) -> &'static str {
        match self {
            Sex::F => "F",
            Sex::M => "M",
            Sex::U => "U",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "F" => Some(Sex::F),
            "M" => Some(Sex::M),
            "U" => Some(Sex::U),
            _ => None,
        }
    }
}

/// A period of coverage, both ends included; open-ended without `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Coverage {
    #[schema(value_type = String, format = Date)]
    pub from: Date,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = Date)]
    pub to: Option<Date>,
}

impl Coverage {
    pub fn covers(&self, day: Date) -> bool {
        self.from <= day && self.to.is_none_or(|to| day <= to)
    }
}

/// `POST /members`, and each item of `POST /members/import`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMember {
    pub member_id: ClientId,
    #[schema(value_type = String, format = Date)]
    pub date_of_birth: Date,
    pub sex: Sex,
    pub plan_id: ClientId,
    /// At most 100 periods.
    #[schema(max_items = 100)]
    pub coverage: Vec<Coverage>,
}

impl NewMember {
    /// The checks that need no store (that the plan exists is the store's to say).
    pub fn validate(&self, today: Date) -> Result<(), FieldError> {
        if self.date_of_birth > today {
            return Err(FieldError::new(
                "date_of_birth",
                "must not be in the future",
            ));
        }
        validate_coverage(&self.coverage)
    }
}

pub fn validate_coverage(coverage: &[Coverage]) -> Result<(), FieldError> {
    if coverage.len() > MAX_COVERAGE_PERIODS {
        return Err(FieldError::new(
            "coverage",
            format!("at most {MAX_COVERAGE_PERIODS} periods"),
        ));
    }
    for (i, c) in coverage.iter().enumerate() {
        if c.to.is_some_and(|to| to < c.from) {
            return Err(FieldError::new(
                format!("coverage[{i}].to"),
                "must not be before from",
            ));
        }
    }
    Ok(())
}

/// `PATCH /members/{member_id}`: the fields given replace the member's.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchMember {
    pub plan_id: Option<ClientId>,
    #[schema(max_items = 100)]
    pub coverage: Option<Vec<Coverage>>,
}

impl PatchMember {
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.plan_id.is_none() && self.coverage.is_none() {
            return Err(FieldError::new("body", "plan_id or coverage is required"));
        }
        self.coverage.as_deref().map_or(Ok(()), validate_coverage)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Member {
    pub member_id: String,
    #[schema(value_type = String, format = Date)]
    pub date_of_birth: Date,
    pub sex: Sex,
    pub plan_id: String,
    pub coverage: Vec<Coverage>,
    pub created_at: String,
    pub updated_at: String,
}

impl Member {
    pub fn covered_on(&self, day: Date) -> bool {
        self.coverage.iter().any(|c| c.covers(day))
    }
}

/// `GET /members/{member_id}/accumulators?year=`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Accumulators {
    pub member_id: String,
    pub year: i32,
    pub deductible_met: i64,
    pub out_of_pocket_met: i64,
    /// What the plan paid for the member this year.
    pub paid: i64,
    /// Paid lines per procedure code.
    pub visits: BTreeMap<String, i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> Date {
        Date::parse(s).unwrap()
    }

    #[test]
    fn coverage_includes_both_ends_and_may_be_open() {
        let closed = Coverage {
            from: day("2026-01-01"),
            to: Some(day("2026-06-30")),
        };
        assert!(closed.covers(day("2026-01-01")) && closed.covers(day("2026-06-30")));
        assert!(!closed.covers(day("2025-12-31")) && !closed.covers(day("2026-07-01")));
        let open = Coverage {
            from: day("2026-01-01"),
            to: None,
        };
        assert!(open.covers(day("2099-01-01")));
    }

    #[test]
    fn a_period_that_ends_before_it_starts_names_its_field() {
        let m: NewMember = serde_json::from_value(serde_json::json!({
            "member_id": "MBR-1", "date_of_birth": "1980-02-03", "sex": "F", "plan_id": "PPO",
            "coverage": [{"from": "2026-01-01"}, {"from": "2026-05-01", "to": "2026-04-01"}]
        }))
        .unwrap();
        assert_eq!(
            m.validate(day("2026-11-25")).unwrap_err().field,
            "coverage[1].to"
        );
    }
}
