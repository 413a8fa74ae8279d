use std::collections::BTreeMap;

use super::stats::LEGACY_PART;
use super::*;
use crate::model::ClaimSubmitted;
use crate::model::FraudScore;
use crate::rules::MemberHistory;

fn claim(id: &str, member: &str, amount: i64, codes: &[&str]) -> ClaimInProcess {
    let lines: Vec<serde_json::Value> = codes
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let share = if i == 0 {
                amount - (codes.len() as i64 - 1)
            } else {
                1
            };
            serde_json::json!({"procedure_code": c, "units": 1, "amount": share})
        })
        .collect();
    let mut c = ClaimInProcess::new(ClaimSubmitted {
        tenant_id: schemas::TenantId::parse("acme").unwrap(),
        claim: serde_json::from_value(serde_json::json!({
            "claim_id": id, "member_id": member, "provider_id": "P-1", "claim_amount": amount,
            "service_date": "2026-01-01", "lines": lines
        }))
        .unwrap(),
        rulebook_id: "rb".into(),
        rulebook_version: 1,
        received_at_ms: 0,
    });
    c.member_history = Some(MemberHistory::default());
    c
}

fn codes(s: &FraudScore) -> Vec<&str> {
    s.reasons.iter().map(|r| r.code.as_str()).collect()
}

#[test]
fn an_ordinary_claim_scores_zero() {
    let mut st = FraudState::default();
    let (c, _, _) = process(claim("C1", "M1", 12_345, &["99213"]), (0, 0), &mut st);
    let f = c.fraud.unwrap();
    assert_eq!(f.fraud_score, 0.0);
    assert!(f.reasons.is_empty());
    assert_eq!(f.model_version, MODEL_VERSION);
}

#[test]
fn an_outlier_amount_against_the_providers_history_is_explained() {
    let mut st = FraudState::default();
    for (i, a) in [10_100, 9_900, 10_050, 9_950, 10_000, 10_020]
        .iter()
        .enumerate()
    {
        process(
            claim(&format!("C{i}"), &format!("M{i}"), *a + 1, &["99213"]),
            (0, i as i64),
            &mut st,
        );
    }
    let (c, _, _) = process(claim("BIG", "MX", 90_001, &["99213"]), (0, 10), &mut st);
    let f = c.fraud.unwrap();
    assert_eq!(codes(&f), ["AMOUNT_OUTLIER"]);
    assert!(
        f.fraud_score > 0.5 && f.fraud_score <= 1.0,
        "{}",
        f.fraud_score
    );
}

#[test]
fn frequency_near_duplicates_and_round_amounts_add_up_by_noisy_or() {
    let mut st = FraudState::default();
    process(
        claim("C1", "M1", 20_000, &["99213", "80053"]),
        (0, 0),
        &mut st,
    );
    let mut again = claim("C2", "M1", 20_000, &["80053", "99213"]);
    again.member_history = Some(MemberHistory {
        claims_last_24h: 5,
        amount_last_30d: 0,
    });
    let (c, _, _) = process(again, (0, 1), &mut st);
    let f = c.fraud.unwrap();
    assert_eq!(
        codes(&f),
        ["MEMBER_FREQUENCY", "NEAR_DUPLICATE", "ROUND_AMOUNT"]
    );
    let expected = 1.0 - (1.0 - 0.2) * (1.0 - 0.7) * (1.0 - 0.1);
    assert!(
        (f.fraud_score - expected).abs() < 1e-4,
        "{} vs {expected}",
        f.fraud_score
    );
}

#[test]
fn a_redelivered_claim_is_scored_the_same_and_counted_once() {
    let mut st = FraudState::default();
    for i in 0..6 {
        process(
            claim(
                &format!("C{i}"),
                &format!("M{i}"),
                10_000 + i * 37 + 1,
                &["99213"],
            ),
            (1, i),
            &mut st,
        );
    }
    let (first, p, m) = process(claim("X", "MX", 55_001, &["99213"]), (1, 6), &mut st);
    assert_eq!((p.len(), m.is_some()), (1, true));
    let count = st.provider("acme/P-1").count;
    let (again, p2, m2) = process(claim("X", "MX", 55_001, &["99213"]), (1, 6), &mut st);
    assert_eq!(first.fraud, again.fraud, "same score on redelivery");
    assert_eq!(st.provider("acme/P-1").count, count, "counted once");
    assert!(p2.is_empty() && m2.is_none());
    assert!(
        !codes(again.fraud.as_ref().unwrap()).contains(&"NEAR_DUPLICATE"),
        "not a duplicate of itself"
    );
}

#[test]
fn a_providers_parts_from_several_partitions_score_as_one_history() {
    let amounts = [10_100, 9_900, 10_050, 9_950, 10_000, 10_020];
    let mut st = FraudState::default();
    let mut written = Vec::new();
    for (i, a) in amounts.iter().enumerate() {
        let c = claim(&format!("C{i}"), &format!("M{i}"), *a + 1, &["99213"]);
        let (_, p, _) = process(c, ((i % 2) as u32, i as i64), &mut st);
        written.extend(p);
    }
    // Each claim changed only its own partition's part.
    assert_eq!(
        written,
        (0..6)
            .map(|i| ("acme/P-1".to_owned(), i % 2))
            .collect::<Vec<_>>()
    );
    // Merged, the parts are the statistics of all six claims.
    let all = st.provider("acme/P-1");
    let xs: Vec<f64> = amounts.iter().map(|a| (*a + 1) as f64).collect();
    let mean = xs.iter().sum::<f64>() / 6.0;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 5.0;
    assert_eq!(all.count, 6);
    assert!((all.mean - mean).abs() < 1e-9, "{} vs {mean}", all.mean);
    assert!((all.std_dev() - var.sqrt()).abs() < 1e-9);
    // Neither part alone has the five claims an outlier needs; together they do.
    let (c, _, _) = process(claim("BIG", "MX", 90_001, &["99213"]), (1, 10), &mut st);
    assert_eq!(codes(c.fraud.as_ref().unwrap()), ["AMOUNT_OUTLIER"]);
}

#[test]
fn state_keys_name_the_provider_and_the_partition_of_its_part() {
    assert_eq!(part_key("acme/P-1", 3), "acme/P-1#3");
    assert_eq!(parse_part_key("acme/P-1#3"), ("acme/P-1", 3));
    assert_eq!(parse_part_key("acme/P-1"), ("acme/P-1", LEGACY_PART));
}

#[test]
fn a_claim_redelivered_after_its_near_duplicate_is_not_called_a_duplicate_of_it() {
    let mut st = FraudState::default();
    let (first, _, _) = process(claim("A", "M1", 12_345, &["99213"]), (0, 0), &mut st);
    let (later, _, _) = process(claim("B", "M1", 12_345, &["99213"]), (0, 1), &mut st);
    assert_eq!(codes(later.fraud.as_ref().unwrap()), ["NEAR_DUPLICATE"]);
    let (again, _, _) = process(claim("A", "M1", 12_345, &["99213"]), (0, 0), &mut st);
    assert_eq!(first.fraud, again.fraud, "scored as the first time");
}

/// What compaction leaves of a member's records: the latest of each key.
fn compacted(written: &[Remembered]) -> Vec<(String, MemberRecord)> {
    let mut latest = BTreeMap::new();
    for m in written {
        latest.insert(m.key(), m.record());
    }
    latest.into_iter().collect()
}

#[test]
fn a_members_history_is_written_a_claim_at_a_time_and_rebuilds_from_what_compaction_keeps() {
    let mut st = FraudState::default();
    let mut written = Vec::new();
    let n = MEMBER_MEMORY * 2 + 37;
    for i in 0..n {
        let member = if i % 3 == 0 { "M2" } else { "M1" };
        let c = claim(&format!("C{i}"), member, 1_000 + i as i64, &["99213"]);
        let (_, _, m) = process(c, (0, i as i64), &mut st);
        written.push(m.expect("a new claim is remembered"));
    }
    // One record per claim, holding that claim alone.
    assert!(written.iter().all(|m| m.record().recent.len() == 1));
    assert_eq!(written[0].key(), "acme/M2#0");
    // The topic keeps at most MEMBER_MEMORY keys per member.
    let kept = compacted(&written);
    assert_eq!(kept.len(), MEMBER_MEMORY + (n / 3 + 1));
    let rebuilt = members_from(kept);
    assert_eq!(rebuilt, st.members);
    let m1 = &rebuilt["acme/M1"];
    assert_eq!(m1.len(), MEMBER_MEMORY);
    let last = format!("C{}", n - 1);
    assert_eq!(m1.remembered().last().map(|(id, _)| id), Some(&*last));
    assert_eq!(m1.next, (n - n / 3 - 1) as u64);
}

#[test]
fn a_whole_history_written_before_version_2_comes_before_the_claims_after_it() {
    let seen = |id: &str| Seen {
        claim_id: id.into(),
        fingerprint: "P-1|2026-01-01|99213".into(),
    };
    let whole = MemberRecord {
        recent: vec![seen("OLD-1"), seen("OLD-2")],
        position: None,
    };
    let mut members = members_from([("acme/M1".to_owned(), whole.clone())]);
    assert_eq!(members["acme/M1"].next, 2);
    let mut st = FraudState {
        members: members.clone(),
        ..Default::default()
    };
    // The old history still finds near-duplicates.
    let (c, _, m) = process(claim("NEW", "M1", 12_345, &["99213"]), (0, 9), &mut st);
    assert_eq!(codes(c.fraud.as_ref().unwrap()), ["NEAR_DUPLICATE"]);
    let m = m.unwrap();
    assert_eq!((m.key(), m.position), ("acme/M1#2".to_owned(), 2));
    members = members_from([(m.key(), m.record()), ("acme/M1".to_owned(), whole)]);
    assert_eq!(members, st.members);
    let ids: Vec<&str> = members["acme/M1"].remembered().map(|(id, _)| id).collect();
    assert_eq!(ids, ["OLD-1", "OLD-2", "NEW"]);
}

proptest::proptest! {
    /// A member remembers exactly its last [`MEMBER_MEMORY`] claims, in order, whatever
    /// the lengths of their ids (some past 127 bytes, whose length takes two bytes).
    #[test]
    fn a_member_remembers_its_last_claims_whatever_their_ids(
        lengths in proptest::collection::vec(0..300usize, 1..(MEMBER_MEMORY * 2 + 50)),
    ) {
        let mut member = MemberState::default();
        let mut ids = Vec::new();
        for (i, len) in lengths.into_iter().enumerate() {
            let id = format!("{i}-{}", "x".repeat(len));
            let fingerprint = format!("P-1|2026-01-01|{}", i % 7);
            member.remember("acme/M1".into(), Seen { claim_id: id.clone(), fingerprint: fingerprint.clone() });
            ids.push((id, members::fingerprint_hash(&fingerprint)));
        }
        let kept = &ids[ids.len().saturating_sub(MEMBER_MEMORY)..];
        let remembered: Vec<(String, u64)> =
            member.remembered().map(|(id, fp)| (id.to_owned(), fp)).collect();
        proptest::prop_assert_eq!(&remembered, kept);
        proptest::prop_assert_eq!(member.next, ids.len() as u64);
        for (at, (id, _)) in kept.iter().enumerate() {
            proptest::prop_assert_eq!(member.position(id), Some(at));
        }
    }
}
