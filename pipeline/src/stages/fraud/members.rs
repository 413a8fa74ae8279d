//! A member's remembered claims: what the near-duplicate and frequency features read,
//! and how the history is written to and rebuilt from `state.fraud-members`.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::model::ClaimInProcess;
use crate::varint::{bytes_len, put_bytes, Reader};

/// Fingerprints kept per member: enough for days of a busy member's claims.
pub const MEMBER_MEMORY: usize = 200;

/// One remembered claim of a member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Seen {
    pub claim_id: String,
    pub fingerprint: String,
}

/// The in-memory form of a fingerprint. `DefaultHasher::new()` hashes alike in every
/// process of a build; it is never written anywhere.
pub(super) fn fingerprint_hash(fingerprint: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    fingerprint.hash(&mut h);
    h.finish()
}

/// A member's remembered claims, oldest first, at most [`MEMBER_MEMORY`]: each one's
/// fingerprint as a 64-bit hash, and its id.
///
/// A process holds [`MEMBER_MEMORY`] of these for every member, a million at 5,000 busy
/// members. The fingerprint's text (provider, date, codes) and a `String` per field took
/// about 100 bytes a claim; a hash and a boxed id 43 (the box an allocation of its own);
/// a hash and the id's bytes in one buffer per member about 21. Two different
/// fingerprints of one member's last claims sharing a hash is a chance of about one in
/// 10^14 per claim, and would read as a near-duplicate, which sends the claim to review,
/// not to payment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberState {
    fingerprints: VecDeque<u64>,
    /// The ids in the same order, each as its length (LEB128) and its bytes.
    ids: Vec<u8>,
    /// The position the member's next claim takes: its claims counted from 0.
    pub next: u64,
}

impl MemberState {
    /// How many claims are remembered.
    pub fn len(&self) -> usize {
        self.fingerprints.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fingerprints.is_empty()
    }

    /// The remembered claims' ids and fingerprint hashes, oldest first.
    pub fn remembered(&self) -> impl Iterator<Item = (&str, u64)> {
        Ids(Reader::new(&self.ids)).zip(self.fingerprints.iter().copied())
    }

    /// Where `claim_id` stands among the remembered claims, if it is one.
    pub fn position(&self, claim_id: &str) -> Option<usize> {
        Ids(Reader::new(&self.ids)).position(|id| id == claim_id)
    }

    /// Takes in a claim the member had not remembered: its record for the state topic.
    pub(super) fn remember(&mut self, member: String, seen: Seen) -> Remembered {
        self.push(&seen.claim_id, fingerprint_hash(&seen.fingerprint));
        let position = self.next;
        self.next += 1;
        Remembered {
            member,
            position,
            seen,
        }
    }

    /// Remembers one more claim, forgetting the oldest when [`MEMBER_MEMORY`] are.
    fn push(&mut self, claim_id: &str, fingerprint: u64) {
        if self.fingerprints.len() == MEMBER_MEMORY {
            self.fingerprints.pop_front();
            let oldest = Ids(Reader::new(&self.ids))
                .next()
                .map_or(0, |id| bytes_len(id.len()));
            self.ids.drain(..oldest);
        } else if self.fingerprints.len() == self.fingerprints.capacity() {
            // Doubling as a push would, but never past MEMBER_MEMORY: a busy member's
            // ring would otherwise hold room for 256.
            let len = self.fingerprints.len();
            self.fingerprints
                .reserve_exact(len.max(4).min(MEMBER_MEMORY - len));
        }
        self.fingerprints.push_back(fingerprint);
        let needed = bytes_len(claim_id.len());
        if self.ids.capacity() - self.ids.len() < needed {
            // An eighth more at a time rather than double: a full member's ids take
            // about the same room from one claim to the next.
            self.ids.reserve_exact(needed.max(self.ids.len() / 8));
        }
        put_bytes(&mut self.ids, claim_id.as_bytes());
    }

    /// The state from a member's records on the state topic: the whole-history record
    /// written before version 2, if any, and the positioned ones, in any order. Ordering
    /// by position (not by slot) keeps this right should [`MEMBER_MEMORY`] ever change.
    pub fn rebuild(whole: Vec<Seen>, mut positioned: Vec<(u64, Seen)>) -> MemberState {
        positioned.sort_unstable_by_key(|(p, _)| *p);
        let next = positioned.last().map_or(whole.len() as u64, |(p, _)| p + 1);
        let old = (whole.len() + positioned.len()).saturating_sub(MEMBER_MEMORY);
        let mut state = MemberState::default();
        for seen in whole
            .iter()
            .chain(positioned.iter().map(|(_, seen)| seen))
            .skip(old)
        {
            state.push(&seen.claim_id, fingerprint_hash(&seen.fingerprint));
        }
        state.next = next;
        state
    }
}

/// Reads the ids of [`MemberState::ids`] in order.
struct Ids<'a>(Reader<'a>);

impl<'a> Iterator for Ids<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.0.is_empty() {
            return None;
        }
        // Written from a `&str` by `push`, whole: always UTF-8.
        Some(std::str::from_utf8(self.0.bytes()).unwrap_or_default())
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
