//! How the embedded log stores a record's value: as published, or compressed.
//!
//! A decision on `claims.decided` is a few KiB of JSON (its rules' trace, its facts,
//! its lines and events) and was the largest thing the embedded default stored per
//! claim: at a million claims 5.3 of the 17 KB each claim took in the database. Every
//! byte stored is written twice (into the write-ahead log, then by the checkpoint into
//! the database file), so it is bytes the service's one writer spends its turn on. As
//! an LZ4 block such a record takes about 2.7 times less room; the small records of
//! the other topics (a claim's command, an event: a few hundred bytes) gain a tenth at
//! most, so a value is compressed only from [`COMPRESS_FROM`] bytes and kept so only
//! when that saves at least an eighth. Kafka does the same for its topics with the
//! producer's batch compression (`compression.type=lz4`), which consumers undo
//! unasked; here only the log's own reads see the stored form.
//!
//! LZ4 rather than zstd, which packs these records about a third tighter: `lz4_flex`
//! is pure Rust and fast both ways, where zstd brings a C library to build, for
//! 0.5 KB more per claim.

use std::borrow::Cow;

/// Values shorter than this are stored as published.
pub const COMPRESS_FROM: usize = 1024;

/// The `codec` column of `bus_records`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// The value as published.
    Plain = 0,
    /// An LZ4 block with the value's length in front (`lz4_flex::compress_prepend_size`).
    Lz4 = 1,
}

/// `value` as stored, with its codec.
pub fn stored(value: &[u8]) -> (Codec, Cow<'_, [u8]>) {
    match packed(value) {
        Some(packed) => (Codec::Lz4, Cow::Owned(packed)),
        None => (Codec::Plain, Cow::Borrowed(value)),
    }
}

/// `value` as an LZ4 block, when it is stored so; none when it is stored as published.
pub fn packed(value: &[u8]) -> Option<Vec<u8>> {
    if value.len() >= COMPRESS_FROM {
        let packed = lz4_flex::compress_prepend_size(value);
        if packed.len() <= value.len() - value.len() / 8 {
            return Some(packed);
        }
    }
    None
}

/// What [`packed`] made of each of some values, ahead of the transaction that appends
/// them: packing runs while SQLite's one writer waits otherwise.
pub type Packed = Vec<Option<Vec<u8>>>;

/// Each value of `values` packed ahead (see [`Packed`]).
pub fn pack_all<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Packed {
    values.into_iter().map(packed).collect()
}

/// The value as published, from its stored form. A stored value that does not unpack
/// (a damaged database) is handed on as it is, as a record that does not decode is:
/// the stage that reads it parks it on its dead-letter topic with the reason, rather
/// than have every poll of the partition fail on it.
pub fn published(codec: i64, stored: Vec<u8>) -> Vec<u8> {
    if codec != Codec::Lz4 as i64 {
        return stored;
    }
    match lz4_flex::decompress_size_prepended(&stored) {
        Ok(value) => value,
        Err(e) => {
            tracing::error!(error = %e, "A record of the embedded log does not unpack.");
            stored
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_compressible_value_is_stored_packed_and_read_back_whole() {
        let value = br#"{"rule_id":"r1","action":"flag","matched":false},"#.repeat(40);
        let (codec, packed) = stored(&value);
        assert_eq!(codec, Codec::Lz4);
        assert!(packed.len() < value.len() / 4, "{} bytes", packed.len());
        assert_eq!(published(codec as i64, packed.into_owned()), value);
    }

    #[test]
    fn small_and_incompressible_values_are_stored_as_published() {
        let small = br#"{"claim_id":"C-1"}"#.to_vec();
        assert_eq!(stored(&small), (Codec::Plain, Cow::Borrowed(&small[..])));
        // Bytes of a xorshift sequence: LZ4 finds nothing to shorten.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 56) as u8
            })
            .collect();
        assert_eq!(stored(&noise).0, Codec::Plain);
        assert_eq!(published(0, noise.clone()), noise);
    }

    #[test]
    fn a_damaged_packed_value_is_handed_on_as_stored() {
        let damaged = vec![0xff, 0xff, 0xff, 0x7f, 1, 2, 3];
        assert_eq!(published(Codec::Lz4 as i64, damaged.clone()), damaged);
    }
}
