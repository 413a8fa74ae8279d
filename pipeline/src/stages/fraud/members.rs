//! A member's remembered claims: what the near-duplicate and frequency features read,
//! and how the history is written to and rebuilt from `state.fraud-members`.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::model::ClaimInProcess;

/// Fingerprints kept per member: enough for days of a busy member's claims.
pub const MEMBER_MEMORY: usize = 200;

/// One remembered claim of a member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Seen {
    pub claim_id: String,
    pub fingerprint: String,
}

/// One remembered claim as the stage holds it in memory: its id, and its fingerprint
/// as a 64-bit hash. A process holds [`MEMBER_MEMORY`] of these for every member, a
/// million at 5,000 busy members; the fingerprint's text (provider, date, codes) and a
/// `String` per field took about 100 bytes each, this form 40. Two different
/// fingerprints of one member's last claims sharing a hash is a chance of about one in
/// 10^14 per claim, and would read as a near-duplicate, which sends the claim to review,
/// not to payment.
#[derive(Debug, Clone, PartialEq)]
pub struct Recent {
    pub claim_id: Box<str>,
    pub fingerprint: u64,
}

impl Recent {
    pub fn of(seen: &Seen) -> Recent {
        Recent {
            claim_id: seen.claim_id.as_str().into(),
            fingerprint: fingerprint_hash(&seen.fingerprint),
        }
    }
}

/// The in-memory form of a fingerprint. `DefaultHasher::new()` hashes alike in every
/// process of a build; it is never written anywhere.
pub(super) fn fingerprint_hash(fingerprint: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    fingerprint.hash(&mut h);
    h.finish()
}

/// A member's remembered claims.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberState {
    /// Oldest first, at most [`MEMBER_MEMORY`].
    pub recent: VecDeque<Recent>,
    /// The position the member's next claim takes: its claims counted from 0.
    pub next: u64,
}

impl MemberState {
    /// Takes in a claim the member had not remembered: its record for the state topic.
    pub(super) fn remember(&mut self, member: String, seen: Seen) -> Remembered {
        if self.recent.len() == MEMBER_MEMORY {
            self.recent.pop_front();
        } else if self.recent.len() == self.recent.capacity() {
            // Doubling as a push would, but never past MEMBER_MEMORY: a busy member's
            // ring would otherwise hold room for 256.
            let len = self.recent.len();
            self.recent
                .reserve_exact(len.max(4).min(MEMBER_MEMORY - len));
        }
        self.recent.push_back(Recent::of(&seen));
        let position = self.next;
        self.next += 1;
        Remembered {
            member,
            position,
            seen,
        }
    }

    /// The state from a member's records on the state topic: the whole-history record
    /// written before version 2, if any, and the positioned ones, in any order. Ordering
    /// by position (not by slot) keeps this right should [`MEMBER_MEMORY`] ever change.
    pub fn rebuild(whole: Vec<Seen>, mut positioned: Vec<(u64, Seen)>) -> MemberState {
        positioned.sort_unstable_by_key(|(p, _)| *p);
        let next = positioned.last().map_or(whole.len() as u64, |(p, _)| p + 1);
        let old = (whole.len() + positioned.len()).saturating_sub(MEMBER_MEMORY);
        let recent = whole
            .iter()
            .chain(positioned.iter().map(|(_, seen)| seen))
            .skip(old)
            .map(Recent::of)
            .collect();
        MemberState { recent, next }
    }
}

/// A claim a member's history took in, as written to `state.fraud-members`: one record
/// per claim under the key `tenant/member#slot`, the slot its position modulo
/// [`MEMBER_MEMORY`], so that compaction keeps exactly the member's last claims.
#[derive(Debug, Clone, PartialEq)]
pub struct Remembered {
    /// `tenant/member`.
    pub member: String,
    pub position: u64,
    pub seen: Seen,
}

impl Remembered {
    pub fn key(&self) -> String {
        format!("{}#{}", self.member, self.position % MEMBER_MEMORY as u64)
    }

    pub fn record(&self) -> MemberRecord {
        MemberRecord {
            recent: vec![self.seen.clone()],
            position: Some(self.position),
        }
    }
}

/// A value of `state.fraud-members` (`member-state.avsc`): one claim at its position,
/// or, written before version 2 under the key `tenant/member`, the member's whole
/// history with no position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberRecord {
    pub recent: Vec<Seen>,
    #[serde(default)]
    pub position: Option<u64>,
}

/// Same member, provider, service date and procedure codes.
pub(super) fn fingerprint(c: &ClaimInProcess) -> String {
    let s = &c.submitted.claim;
    let mut codes: Vec<&str> = s.lines.iter().map(|l| l.procedure_code.as_str()).collect();
    codes.sort_unstable();
    format!("{}|{}|{}", s.provider_id, s.service_date, codes.join(","))
}

/// Every member's state from the latest record of each key of `state.fraud-members`.
pub fn members_from(
    records: impl IntoIterator<Item = (String, MemberRecord)>,
) -> HashMap<String, MemberState> {
    /// A member's records: the whole history of version 1, the claims of version 2.
    #[derive(Default)]
    struct Records {
        whole: Vec<Seen>,
        positioned: Vec<(u64, Seen)>,
    }
    let mut members: HashMap<String, Records> = HashMap::new();
    for (key, record) in records {
        match record.position {
            Some(p) => {
                // A slot key: the member is all before its last `#`.
                let member = key.rsplit_once('#').map_or(&*key, |(m, _)| m);
                let entry = members.entry(member.to_owned()).or_default();
                entry
                    .positioned
                    .extend(record.recent.into_iter().map(|seen| (p, seen)));
            }
            None => members.entry(key).or_default().whole = record.recent,
        }
    }
    members
        .into_iter()
        .map(|(k, r)| (k, MemberState::rebuild(r.whole, r.positioned)))
        .collect()
}
