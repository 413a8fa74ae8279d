//! The fraud stage's whole state: every provider's statistics by part and every
//! member's remembered claims.

use std::collections::{BTreeMap, HashMap};

use super::members::MemberState;
use super::stats::ProviderStats;

/// The stage's whole state.
#[derive(Debug, Clone, Default)]
pub struct FraudState {
    /// Per provider (`tenant/provider`), its statistics per input partition.
    pub providers: HashMap<String, BTreeMap<u32, ProviderStats>>,
    pub members: HashMap<String, MemberState>,
}

impl FraudState {
    /// A provider's statistics over all its parts.
    pub fn provider(&self, key: &str) -> ProviderStats {
        self.providers
            .get(key)
            .into_iter()
            .flat_map(|parts| parts.values())
            .fold(ProviderStats::default(), |all, part| all.merged(part))
    }
}
