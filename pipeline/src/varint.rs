//! Variable-length integers (LEB128, zigzag for signed ones) and length-prefixed bytes,
//! for the state the stages pack in memory: the members' years
//! (`adjudication::packed`) and the fraud stage's remembered ids
//! (`stages::fraud::members`). Written here rather than taken from a crate: it is these
//! few lines, and both need a value's bytes readable in place.

pub fn put_u(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

pub fn put_i(b: &mut Vec<u8>, v: i64) {
    put_u(b, ((v << 1) ^ (v >> 63)) as u64);
}

/// `bytes` after their length.
pub fn put_bytes(b: &mut Vec<u8>, bytes: &[u8]) {
    put_u(b, bytes.len() as u64);
    b.extend_from_slice(bytes);
}

/// How many bytes [`put_bytes`] writes for `len` bytes.
pub fn bytes_len(len: usize) -> usize {
    let prefix = (u64::BITS - (len as u64 | 1).leading_zeros()).div_ceil(7) as usize;
    prefix + len
}

/// Reads back what the `put_` functions wrote, in the same order.
#[derive(Debug)]
pub struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Self(b)
    }

    /// Whether everything has been read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many bytes are left to read.
    pub fn rest(&self) -> usize {
        self.0.len()
    }

    pub fn u(&mut self) -> u64 {
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

    pub fn i(&mut self) -> i64 {
        let z = self.u();
        ((z >> 1) as i64) ^ -((z & 1) as i64)
    }

    pub fn bytes(&mut self) -> &'a [u8] {
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
        /// Numbers and bytes read back as written, and [`bytes_len`] is what was written.
        #[test]
        fn values_read_back_as_written(u in any::<u64>(), i in any::<i64>(), bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut b = Vec::new();
            put_u(&mut b, u);
            put_i(&mut b, i);
            let before = b.len();
            put_bytes(&mut b, &bytes);
            prop_assert_eq!(b.len() - before, bytes_len(bytes.len()));
            let mut r = Reader::new(&b);
            prop_assert_eq!(r.u(), u);
            prop_assert_eq!(r.i(), i);
            prop_assert_eq!(r.bytes(), &bytes[..]);
            prop_assert!(r.is_empty());
        }
    }
}
