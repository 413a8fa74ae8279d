//! Providers and their contracts (contract: Providers and contracts).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::date::Date;
use crate::id::ClientId;

/// `POST /providers`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateProvider {
    #[schema(example = "PRV-001")]
    pub provider_id: ClientId,
    /// 1-200 characters.
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    /// National Provider Identifier: 10 digits with a valid check digit.
    pub npi: Option<String>,
    pub specialty: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Provider {
    pub provider_id: String,
    pub name: String,
    pub npi: Option<String>,
    pub specialty: Option<String>,
    pub created_at: String,
}

/// The status of a contract. `terminated` is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ContractStatus {
    Active,
    Suspended,
    Terminated,
}

impl ContractStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ContractStatus::Active => "active",
            ContractStatus::Suspended => "suspended",
            ContractStatus::Terminated => "terminated",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(Self::Active),
            "suspended" => Some(Self::Suspended),
            "terminated" => Some(Self::Terminated),
            _ => None,
        }
    }
}

/// `POST /providers/{provider_id}/contracts`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateContract {
    #[schema(value_type = String, format = Date)]
    pub effective_from: Date,
    #[schema(value_type = Option<String>, format = Date)]
    pub effective_to: Option<Date>,
    /// Maximum amount (minor units) per unit of each procedure code.
    #[serde(default)]
    pub fee_schedule: BTreeMap<String, i64>,
}

/// `PATCH /providers/{provider_id}/contracts/{contract_id}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchContract {
    pub status: ContractStatus,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Contract {
    pub contract_id: String,
    pub provider_id: String,
    pub status: ContractStatus,
    pub effective_from: String,
    pub effective_to: Option<String>,
    pub fee_schedule: BTreeMap<String, i64>,
    pub created_at: String,
    pub updated_at: String,
}

/// Whether `npi` is a National Provider Identifier: ten digits whose last is the Luhn
/// check digit over the prefix 80840 and the first nine.
pub fn is_valid_npi(npi: &str) -> bool {
    if npi.len() != 10 || !npi.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let digits: Vec<u32> = "80840"
        .bytes()
        .chain(npi.bytes())
        .map(|b| u32::from(b - b'0'))
        .collect();
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 {
                    x - 9
                } else {
                    x
                }
            } else {
                d
            }
        })
        .sum();
    sum % 10 == 0
}

#[cfg(test)]
mod tests {
    use super::is_valid_npi;

    #[test]
    fn checks_the_npi_check_digit() {
        assert!(is_valid_npi("1234567893")); // the CMS example
        assert!(!is_valid_npi("1234567890"));
        assert!(!is_valid_npi("123456789"));
        assert!(!is_valid_npi("12345678a3"));
    }
}
