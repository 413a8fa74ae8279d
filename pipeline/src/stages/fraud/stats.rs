//! A provider's running amount statistics, kept in parts (one per input partition) so
//! that each part has one writer, and merged for a score.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Running amount statistics of one provider (Welford).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderStats {
    pub count: u64,
    pub mean: f64,
    pub m2: f64,
    /// The last input (partition → offset) applied, to recognise redelivery.
    pub applied: BTreeMap<u32, i64>,
}

impl ProviderStats {
    pub(super) fn add(&mut self, x: f64) {
        self.count += 1;
        let d = x - self.mean;
        self.mean += d / self.count as f64;
        self.m2 += d * (x - self.mean);
    }

    /// The statistics without `x`, which was added last.
    pub(super) fn without(&self, x: f64) -> ProviderStats {
        let mut s = self.clone();
        if s.count <= 1 {
            return ProviderStats {
                applied: s.applied,
                ..Default::default()
            };
        }
        let mean_prev = (s.mean * s.count as f64 - x) / (s.count - 1) as f64;
        s.m2 -= (x - mean_prev) * (x - s.mean);
        s.mean = mean_prev;
        s.count -= 1;
        s.m2 = s.m2.max(0.0);
        s
    }

    /// The statistics of both sets of claims together (Chan et al.'s parallel update).
    pub(super) fn merged(&self, other: &ProviderStats) -> ProviderStats {
        if other.count == 0 || self.count == 0 {
            let s = if other.count == 0 { self } else { other };
            return ProviderStats {
                count: s.count,
                mean: s.mean,
                m2: s.m2,
                applied: BTreeMap::new(),
            };
        }
        let (na, nb) = (self.count as f64, other.count as f64);
        let n = na + nb;
        let delta = other.mean - self.mean;
        ProviderStats {
            count: self.count + other.count,
            mean: self.mean + delta * nb / n,
            m2: self.m2 + other.m2 + delta * delta * na * nb / n,
            applied: BTreeMap::new(),
        }
    }

    pub(super) fn std_dev(&self) -> f64 {
        if self.count < 2 {
            0.0
        } else {
            (self.m2 / (self.count - 1) as f64).sqrt()
        }
    }
}

/// The part of a provider's statistics read from a state entry written before they
/// were kept per partition: kept as one more part, and never written again.
pub(super) const LEGACY_PART: u32 = u32::MAX;
/// The parts the fused chain keeps (see [`super::chain`]): its input is the intake
/// topic, keyed by claim, so its parts are one per intake partition, numbered from here
/// so that they never meet the stage's own parts (partitions number at most 1,024).
/// Each claim is counted in one part whichever way it ran, and a score merges them all.
pub const FUSED_PARTS: u32 = 1 << 20;

/// The state topic's key of one part of a provider's statistics. (Client ids never
/// hold `#`.)
pub fn part_key(provider: &str, partition: u32) -> String {
    format!("{provider}#{partition}")
}

/// The provider and partition a state key names; a key without a partition is a legacy
/// entry of the whole provider.
pub fn parse_part_key(key: &str) -> (&str, u32) {
    key.rsplit_once('#')
        .and_then(|(provider, p)| Some((provider, p.parse().ok()?)))
        .unwrap_or((key, LEGACY_PART))
}
