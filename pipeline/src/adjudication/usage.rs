//! What a member has used of their benefits in a calendar year, and what each claim
//! added to it. The year keeps every counted claim's own usage, so that a claim seen
//! again (redelivery, a restart) is never counted twice, and a voided or replaced claim
//! is taken out exactly.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::packed::CountedClaims;

/// Amounts in minor units; visits are paid lines per procedure code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub deductible: i64,
    pub out_of_pocket: i64,
    pub paid: i64,
    #[serde(default, skip_serializing_if = "Visits::is_empty")]
    pub visits: Visits,
}

/// Paid lines per procedure code, none at zero; a map on the wire.
///
/// A year keeps one per counted claim, which has a code or two: as a sorted vector it
/// is one small allocation, where a `BTreeMap` node is some 400 bytes whatever it
/// holds, which was most of the accumulators' memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Visits(Vec<(String, i64)>);

/// Read straight into the vector, as a map reads: in code order, the last of a code
/// given twice, none at zero. (Read through a `BTreeMap`, each claim's visits cost a
/// map node allocated and freed again, on every decision and backtest read.)
impl<'de> Deserialize<'de> for Visits {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Codes;
        impl<'de> serde::de::Visitor<'de> for Codes {
            type Value = Visits;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of procedure codes to visits")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Visits, A::Error> {
                let mut read: Vec<(String, i64)> =
                    Vec::with_capacity(map.size_hint().unwrap_or(0).min(16));
                while let Some(entry) = map.next_entry()? {
                    read.push(entry);
                }
                // Stable: a code given twice keeps its order, and the later one stands.
                read.sort_by(|a, b| a.0.cmp(&b.0));
                let mut visits: Vec<(String, i64)> = Vec::with_capacity(read.len());
                for (code, n) in read {
                    match visits.last_mut() {
                        Some(last) if last.0 == code => last.1 = n,
                        _ => visits.push((code, n)),
                    }
                }
                visits.retain(|(_, n)| *n != 0);
                Ok(Visits(visits))
            }
        }
        d.deserialize_map(Codes)
    }
}

impl Serialize for Visits {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl Visits {
    /// One visit of `code`.
    pub fn one(code: &str) -> Self {
        Self(vec![(code.to_owned(), 1)])
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, code: &str) -> i64 {
        match self.0.binary_search_by(|(c, _)| c.as_str().cmp(code)) {
            Ok(i) => self.0[i].1,
            Err(_) => 0,
        }
    }

    /// Adds `n` visits of `code`; a code whose count comes to zero leaves.
    pub fn add(&mut self, code: &str, n: i64) {
        match self.0.binary_search_by(|(c, _)| c.as_str().cmp(code)) {
            Ok(i) => {
                self.0[i].1 += n;
                if self.0[i].1 == 0 {
                    self.0.remove(i);
                }
            }
            Err(i) if n != 0 => self.0.insert(i, (code.to_owned(), n)),
            Err(_) => {}
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.0.iter().map(|(c, n)| (c.as_str(), *n))
    }
}

impl From<BTreeMap<String, i64>> for Visits {
    fn from(map: BTreeMap<String, i64>) -> Self {
        Self(map.into_iter().filter(|(_, n)| *n != 0).collect())
    }
}

impl From<Visits> for BTreeMap<String, i64> {
    fn from(v: Visits) -> Self {
        v.0.into_iter().collect()
    }
}

impl Usage {
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }

    pub fn visits(&self, code: &str) -> i64 {
        self.visits.get(code)
    }

    pub fn add(&mut self, other: &Usage) {
        self.combine(other, 1);
    }

    pub fn subtract(&mut self, other: &Usage) {
        self.combine(other, -1);
    }

    fn combine(&mut self, other: &Usage, sign: i64) {
        self.deductible += sign * other.deductible;
        self.out_of_pocket += sign * other.out_of_pocket;
        self.paid += sign * other.paid;
        for (code, n) in other.visits.iter() {
            self.visits.add(code, sign * n);
        }
    }
}

/// A claim counted in a member's year: its place in the member's order and its usage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counted {
    pub seq: u64,
    pub usage: Usage,
}

/// A member's calendar year: the totals and the claims counted in them.
#[derive(Debug, Clone, Default)]
pub struct MemberYear {
    /// The sum of `claims`, kept so that reading it costs nothing.
    pub totals: Usage,
    /// Each counted claim, found by its id (see [`CountedClaims`] for why packed).
    claims: CountedClaims,
    /// The place the next counted claim takes.
    pub next: u64,
}

impl MemberYear {
    /// Counts `claim_id`'s usage. A claim counted already keeps its first usage: the
    /// answer is false and nothing changes.
    pub fn count(&mut self, claim_id: &str, usage: Usage) -> bool {
        if self.claims.contains(claim_id) {
            return false;
        }
        let seq = self.next;
        self.restore(claim_id, Counted { seq, usage });
        true
    }

    /// Takes in a claim as its state record has it (restoring from the state topic).
    pub fn restore(&mut self, claim_id: &str, counted: Counted) {
        self.next = self.next.max(counted.seq + 1);
        self.totals.add(&counted.usage);
        if let Some(old) = self.claims.insert(claim_id, &counted) {
            self.totals.subtract(&old.usage);
        }
    }

    /// Takes `claim_id`'s usage out again (a void or a replacement): what it had added,
    /// or none when it was not counted.
    pub fn reverse(&mut self, claim_id: &str) -> Option<Usage> {
        self.take(claim_id).map(|c| c.usage)
    }

    /// [`Self::reverse`], answering the claim's count as it was.
    pub fn take(&mut self, claim_id: &str) -> Option<Counted> {
        let counted = self.claims.remove(claim_id)?;
        self.totals.subtract(&counted.usage);
        Some(counted)
    }

    pub fn counted(&self, claim_id: &str) -> Option<Counted> {
        self.claims.get(claim_id)
    }

    /// The year as `claim_id` finds it: the claims counted before it, or all of them
    /// for a claim not counted yet. A claim seen again (a redelivery) is adjudicated
    /// against the same year as the first time, so it is decided the same way.
    pub fn before(&self, claim_id: &str) -> Usage {
        let Some(own) = self.claims.seq(claim_id) else {
            return self.totals.clone();
        };
        let mut year = Usage::default();
        for c in self.claims.iter().filter(|c| c.seq < own) {
            year.add(&c.usage);
        }
        year
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Visits read as the map they are on the wire reads: sorted, the later of a code
    /// given twice, none at zero.
    #[test]
    fn visits_read_as_their_map_reads() {
        for text in [
            r#"{}"#,
            r#"{"99213": 2, "11111": 1}"#,
            r#"{"B": 1, "A": 0, "B": 3, "C": -1, "A": 4}"#,
            r#"{"X": 0}"#,
        ] {
            let direct: Visits = serde_json::from_str(text).unwrap();
            let map: BTreeMap<String, i64> = serde_json::from_str(text).unwrap();
            assert_eq!(direct, Visits::from(map), "{text}");
        }
    }

    fn usage(deductible: i64, paid: i64, code: &str) -> Usage {
        Usage {
            deductible,
            out_of_pocket: deductible,
            paid,
            visits: Visits::one(code),
        }
    }

    #[test]
    fn a_claim_counts_once_and_reverses_exactly() {
        let mut year = MemberYear::default();
        assert!(year.count("C1", usage(300, 0, "99213")));
        assert!(year.count("C2", usage(200, 160, "99213")));
        assert!(!year.count("C1", usage(999, 999, "x")));
        assert_eq!(year.totals.deductible, 500);
        assert_eq!(year.totals.visits("99213"), 2);
        assert_eq!(year.before("C2"), usage(300, 0, "99213"));
        assert_eq!(year.before("C1"), Usage::default());
        assert_eq!(year.before("C3"), year.totals);
        assert_eq!(year.reverse("C1"), Some(usage(300, 0, "99213")));
        assert_eq!(year.reverse("C1"), None);
        assert_eq!(year.totals, usage(200, 160, "99213"));
        year.reverse("C2");
        assert!(year.totals.is_empty());
    }
}
