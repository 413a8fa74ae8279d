//! A counted claim as a member's year keeps it: one allocation holding the claim's id,
//! its place and its usage, the numbers as variable-length integers.
//!
//! A year keeps every claim counted in it for the whole year, so at a million claims
//! the accumulators were the service's largest memory: a `BTreeMap<String, Counted>`
//! entry cost some 230 bytes (half-full nodes under ascending ids, and separate
//! allocations for the id, the visits and each procedure code). Packed, a claim with one
//! procedure code is about 32 bytes plus its slot in the set. The encoding is written
//! here rather than taken from a serialisation crate because it is these few lines and
//! the hash set needs the id readable in place, without decoding the rest.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

use super::usage::{Counted, Usage, Visits};

/// `[len][id]` then `seq`, `deductible`, `out_of_pocket`, `paid`, the number of visit
/// codes, and `[len][code][n]` per code. Lengths and `seq` are LEB128, amounts and
/// counts zigzag LEB128. Equal and hashed by the id alone, so that a set of them is
/// looked up by the id's bytes.
#[derive(Debug, Clone)]
pub(super) struct Packed(Box<[u8]>);

impl Packed {
    pub(super) fn new(claim_id: &str, counted: &Counted) -> Self {
        let u = &counted.usage;
        let mut b = Vec::with_capacity(claim_id.len() + 24);
        put_bytes(&mut b, claim_id.as_bytes());
        put_u(&mut b, counted.seq);
        put_i(&mut b, u.deductible);
        put_i(&mut b, u.out_of_pocket);
        put_i(&mut b, u.paid);
        put_u(&mut b, u.visits.iter().count() as u64);
        for (code, n) in u.visits.iter() {
            put_bytes(&mut b, code.as_bytes());
            put_i(&mut b, n);
        }
        Self(b.into_boxed_slice())
    }

    fn id(&self) -> &[u8] {
        Reader::new(&self.0).bytes()
    }

    pub(super) fn seq(&self) -> u64 {
        let mut r = Reader::new(&self.0);
        r.bytes();
        r.u()
    }

    pub(super) fn counted(&self) -> Counted {
        let mut r = Reader::new(&self.0);
        r.bytes();
        let seq = r.u();
        let (deductible, out_of_pocket, paid) = (r.i(), r.i(), r.i());
        let mut visits = Visits::default();
        for _ in 0..r.u() {
            // Written from a `&str` by `new`: always UTF-8.
            let code = String::from_utf8_lossy(r.bytes()).into_owned();
            visits.add(&code, r.i());
        }
        Counted {
            seq,
            usage: Usage {
                deductible,
                out_of_pocket,
                paid,
                visits,
            },
        }
    }
}

impl PartialEq for Packed {
    fn eq(&self, other: &Self) -> bool {
        self.id() == other.id()
    }
}

impl Eq for Packed {}

impl Hash for Packed {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id().hash(state);
    }
}

impl Borrow<[u8]> for Packed {
    fn borrow(&self) -> &[u8] {
        self.id()
    }
}

fn put_u(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

fn put_i(b: &mut Vec<u8>, v: i64) {
    put_u(b, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_bytes(b: &mut Vec<u8>, bytes: &[u8]) {
    put_u(b, bytes.len() as u64);
    b.extend_from_slice(bytes);
}

/// Reads back what the `put_` functions wrote, in the same order.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn new(b: &'a [u8]) -> Self {
        Self(b)
    }

    fn u(&mut self) -> u64 {
        let mut v = 0u64;
        let mut shift = 0;
        while let Some((&byte, rest)) = self.0.split_first() {
            self.0 = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                break;
            }
            shift += 7;
        }
        v
    }

    fn i(&mut self) -> i64 {
        let z = self.u();
        ((z >> 1) as i64) ^ -((z & 1) as i64)
    }

    fn bytes(&mut self) -> &'a [u8] {
        let len = self.u() as usize;
        let (bytes, rest) = self.0.split_at(len.min(self.0.len()));
        self.0 = rest;
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_counted_claim_reads_back_as_written(
            id in "[A-Za-z0-9-]{1,80}",
            seq in any::<u64>(),
            deductible in any::<i64>(),
            out_of_pocket in any::<i64>(),
            paid in any::<i64>(),
            visits in proptest::collection::btree_map("[A-Z0-9]{1,7}", any::<i64>().prop_filter("non-zero", |n| *n != 0), 0..4),
        ) {
            let counted = Counted {
                seq,
                usage: Usage { deductible, out_of_pocket, paid, visits: Visits::from(visits) },
            };
            let packed = Packed::new(&id, &counted);
            prop_assert_eq!(packed.id(), id.as_bytes());
            prop_assert_eq!(packed.seq(), seq);
            prop_assert_eq!(packed.counted(), counted);
        }
    }
}
