//! What travels on the bus.

/// A record to publish: its key decides its partition, so one key's records stay in
/// order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub key: String,
    pub value: Vec<u8>,
}

/// A record as read back, with its place in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub topic: String,
    pub partition: u32,
    pub offset: i64,
    pub key: String,
    pub value: Vec<u8>,
    pub timestamp_ms: i64,
}

/// The partition of `key`: FNV-1a, stable across processes, builds and machines.
pub fn partition_for(key: &str, partitions: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % u64::from(partitions.max(1))) as u32
}

#[cfg(test)]
mod tests {
    use super::partition_for;

    #[test]
    fn a_key_always_lands_in_the_same_partition() {
        assert_eq!(
            partition_for("acme/CLM-1", 8),
            partition_for("acme/CLM-1", 8)
        );
        assert!(partition_for("anything", 8) < 8);
        assert_eq!(partition_for("x", 1), 0);
        // Keys spread over the partitions.
        let used: std::collections::HashSet<u32> = (0..200)
            .map(|i| partition_for(&format!("k{i}"), 8))
            .collect();
        assert_eq!(used.len(), 8);
    }
}
