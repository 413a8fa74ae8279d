//! Ids derived from a claim (UUIDv5 of its tenant, its id and what the id is for), so
//! that a redelivered claim yields the same audit id, task id and event ids, and
//! receivers can drop the repeat.

/// A stable id for `what` of a claim.
pub fn derived_id(prefix: &str, tenant_id: &str, claim_id: &str, what: &str) -> String {
    format!(
        "{prefix}_{}",
        name_hash(&format!("{tenant_id}/{claim_id}/{what}")).simple()
    )
}

/// A stable id for `what` of a claim that sorts by `at_ms` (a time fixed for the claim,
/// such as its receipt): 12 hex digits of the time, then 20 of the name's hash; as
/// long as a [`derived_id`]. For the ids that key the store's busiest tables (audit
/// records, review tasks): a random id lands each insert on a different page of the
/// table's index, so a batch rewrote about one page per row; ids in time order fill the
/// index's last pages.
pub fn ordered_id(prefix: &str, at_ms: i64, tenant_id: &str, claim_id: &str, what: &str) -> String {
    ordered_name_id(prefix, at_ms, &format!("{tenant_id}/{claim_id}/{what}"))
}

/// A stable id for `name` that sorts by `at_ms`, as [`ordered_id`] makes for a claim.
pub fn ordered_name_id(prefix: &str, at_ms: i64, name: &str) -> String {
    let mut buf = uuid::Uuid::encode_buffer();
    let hash = name_hash(name).simple().encode_lower(&mut buf);
    let at = (at_ms.max(0) as u64) & 0xffff_ffff_ffff;
    format!("{prefix}_{at:012x}{}", &hash[..20])
}

fn name_hash(name: &str) -> uuid::Uuid {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, name.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_ids_are_stable_and_sort_by_their_time() {
        let a = ordered_id("aud", 1_700_000_000_000, "t1", "CLM-9", "intake");
        assert_eq!(
            a,
            ordered_id("aud", 1_700_000_000_000, "t1", "CLM-9", "intake")
        );
        assert_eq!(a.len(), derived_id("aud", "t1", "CLM-9", "intake").len());
        assert_ne!(
            a,
            ordered_id("aud", 1_700_000_000_000, "t1", "CLM-9", "decision-1")
        );
        assert_ne!(
            a,
            ordered_id("aud", 1_700_000_000_000, "t2", "CLM-9", "intake")
        );
        // A later claim's id sorts after, whatever its name.
        assert!(a < ordered_id("aud", 1_700_000_000_001, "t1", "CLM-1", "intake"));
        assert!(ordered_id("tsk", 255, "t", "c", "review").starts_with("tsk_0000000000ff"));
    }
}
