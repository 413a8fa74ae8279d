//! The claims counted in a member's year, packed one after another in one buffer, the
//! numbers as variable-length integers, and found by their ids through an index of
//! offsets.
//!
//! A year keeps every claim counted in it for the whole year, so at a million claims
//! the accumulators are the service's largest state: a `BTreeMap<String, Counted>`
//! entry cost some 230 bytes (half-full nodes under ascending ids, and separate
//! allocations for the id, the visits and each procedure code), a hash set of one boxed
//! buffer per claim 76. Here a claim with one procedure code is about 31 bytes in the
//! buffer and a 4-byte slot in the index, some 40 with the room each keeps free. The
//! encoding is written here rather than taken from a serialisation crate because it is
//! these few lines and the index needs an entry's id readable in place, without
//! decoding the rest.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

use super::usage::{Counted, Usage, Visits};
use crate::varint::{put_bytes, put_i, put_u, Reader};

/// Each entry is `[len][id]`, then `seq`, `deductible`, `out_of_pocket`, `paid`, the
/// number of visit codes, and `[len][code][n]` per code. Lengths and `seq` are LEB128,
/// amounts and counts zigzag LEB128.
#[derive(Debug, Clone, Default)]
pub(super) struct CountedClaims {
    bytes: Vec<u8>,
    /// Each entry's offset in `bytes`, hashed by its id. (A year's buffer past 4 GiB
    /// would be some hundred million claims of one member.)
    index: HashTable<u32>,
    /// Keyed afresh for each year, so that ids chosen to collide cannot be.
    hasher: RandomState,
}

impl CountedClaims {
    #[cfg(test)]
    fn len(&self) -> usize {
        self.index.len()
    }

    fn find(&self, claim_id: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(claim_id.as_bytes());
        self.index
            .find(hash, |&at| self.id_at(at as usize) == claim_id.as_bytes())
            .map(|&at| at as usize)
    }

    fn id_at(&self, at: usize) -> &[u8] {
        Reader::new(&self.bytes[at..]).bytes()
    }

    pub(super) fn contains(&self, claim_id: &str) -> bool {
        self.find(claim_id).is_some()
    }

    pub(super) fn get(&self, claim_id: &str) -> Option<Counted> {
        self.find(claim_id)
            .map(|at| read_entry(&mut Reader::new(&self.bytes[at..])).1)
    }

    pub(super) fn seq(&self, claim_id: &str) -> Option<u64> {
        self.find(claim_id).map(|at| {
            let mut r = Reader::new(&self.bytes[at..]);
            r.bytes();
            r.u()
        })
    }

    /// Every counted claim, in the order they were put in.
    pub(super) fn iter(&self) -> impl Iterator<Item = Counted> + '_ {
        let mut r = Reader::new(&self.bytes);
        std::iter::from_fn(move || (!r.is_empty()).then(|| read_entry(&mut r).1))
    }

    /// Puts `claim_id` in, answering what it replaced.
    pub(super) fn insert(&mut self, claim_id: &str, counted: &Counted) -> Option<Counted> {
        let old = self.remove(claim_id);
        let at = self.bytes.len();
        let mut entry = Vec::with_capacity(claim_id.len() + 24);
        put_entry(&mut entry, claim_id, counted);
        if self.bytes.capacity() - at < entry.len() {
            // An eighth more at a time rather than double: a year grows a claim at a
            // time all year, and doubling would leave a third of it free on average.
            self.bytes.reserve_exact(entry.len().max(at / 8));
        }
        self.bytes.extend_from_slice(&entry);
        let at = u32::try_from(at).expect("a member's year under 4 GiB");
        let hasher = &self.hasher;
        let bytes = &self.bytes;
        self.index
            .insert_unique(hasher.hash_one(claim_id.as_bytes()), at, |&at| {
                hasher.hash_one(Reader::new(&bytes[at as usize..]).bytes())
            });
        old
    }

    /// Takes `claim_id` out. Rare (a void or a replacement), so the entries after it
    /// move down and their offsets are mended in one pass.
    pub(super) fn remove(&mut self, claim_id: &str) -> Option<Counted> {
        let hash = self.hasher.hash_one(claim_id.as_bytes());
        let bytes = &self.bytes;
        let at = self
            .index
            .find_entry(hash, |&at| {
                Reader::new(&bytes[at as usize..]).bytes() == claim_id.as_bytes()
            })
            .ok()?
            .remove()
            .0 as usize;
        let mut r = Reader::new(&self.bytes[at..]);
        let (_, counted) = read_entry(&mut r);
        let len = self.bytes.len() - at - r.rest();
        self.bytes.drain(at..at + len);
        for offset in self.index.iter_mut() {
            if *offset as usize > at {
                *offset -= len as u32;
            }
        }
        Some(counted)
    }
}

fn put_entry(b: &mut Vec<u8>, claim_id: &str, counted: &Counted) {
    let u = &counted.usage;
    put_bytes(b, claim_id.as_bytes());
    put_u(b, counted.seq);
    put_i(b, u.deductible);
    put_i(b, u.out_of_pocket);
    put_i(b, u.paid);
    put_u(b, u.visits.iter().count() as u64);
    for (code, n) in u.visits.iter() {
        put_bytes(b, code.as_bytes());
        put_i(b, n);
    }
}

/// One entry as `put_entry` wrote it: the id and the count.
fn read_entry<'a>(r: &mut Reader<'a>) -> (&'a [u8], Counted) {
    let id = r.bytes();
    let seq = r.u();
    let (deductible, out_of_pocket, paid) = (r.i(), r.i(), r.i());
    let mut visits = Visits::default();
    for _ in 0..r.u() {
        // Written from a `&str` by `put_entry`: always UTF-8.
        let code = String::from_utf8_lossy(r.bytes()).into_owned();
        visits.add(&code, r.i());
    }
    let usage = Usage {
        deductible,
        out_of_pocket,
        paid,
        visits,
    };
    (id, Counted { seq, usage })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use proptest::prelude::*;

    fn counted() -> impl Strategy<Value = Counted> {
        (
            any::<u64>(),
            any::<i64>(),
            any::<i64>(),
            any::<i64>(),
            proptest::collection::btree_map(
                "[A-Z0-9]{1,7}",
                any::<i64>().prop_filter("non-zero", |n| *n != 0),
                0..4,
            ),
        )
            .prop_map(|(seq, deductible, out_of_pocket, paid, visits)| Counted {
                seq,
                usage: Usage {
                    deductible,
                    out_of_pocket,
                    paid,
                    visits: Visits::from(visits),
                },
            })
    }

    proptest! {
        /// Claims put in and taken out in any order read back as a map of them would:
        /// each found by its id with its count whole, the ones after a removed claim
        /// included.
        #[test]
        fn counted_claims_read_back_as_a_map_would(
            ops in proptest::collection::vec(
                (any::<bool>(), 0..40usize, proptest::collection::vec(any::<u8>(), 0..3), counted()),
                1..200,
            ),
        ) {
            let mut claims = CountedClaims::default();
            let mut model: HashMap<String, Counted> = HashMap::new();
            for (put, n, tail, c) in ops {
                // Ids of varied lengths, some past 127 bytes (a two-byte length).
                let id = format!("C{n}-{}", "x".repeat(usize::from(tail.first().copied().unwrap_or(0)) % 140 * usize::from(n % 3 == 0)));
                if put {
                    prop_assert_eq!(claims.insert(&id, &c), model.insert(id.clone(), c));
                } else {
                    prop_assert_eq!(claims.remove(&id), model.remove(&id));
                }
                prop_assert_eq!(claims.len(), model.len());
                for (id, c) in &model {
                    prop_assert!(claims.contains(id));
                    prop_assert_eq!(claims.get(id), Some(c.clone()));
                    prop_assert_eq!(claims.seq(id), Some(c.seq));
                }
                let mut all: Vec<u64> = claims.iter().map(|c| c.seq).collect();
                let mut expected: Vec<u64> = model.values().map(|c| c.seq).collect();
                all.sort_unstable();
                expected.sort_unstable();
                prop_assert_eq!(all, expected);
            }
        }
    }
}
