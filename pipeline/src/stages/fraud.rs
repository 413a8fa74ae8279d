//! Stage 3, fraud: input `claims.evaluated`. An explainable score in [0, 1] from named
//! features, each with a reason code and its contribution; the features combine as a
//! noisy-or, `1 − Π(1 − cᵢ)`, so each reads as "this much risk on its own".
//!
//! | code | feature |
//! |---|---|
//! | `AMOUNT_OUTLIER` | the amount against the provider's running mean and deviation (z-score over 2, once the provider has 5 claims) |
//! | `MEMBER_FREQUENCY` | the member's claims in the last 24 h (3 or more) |
//! | `NEAR_DUPLICATE` | an earlier claim with the same member, provider, service date and codes |
//! | `ROUND_AMOUNT` | an amount that is a whole multiple of 100.00 |
//!
//! State (per provider: count, mean, M2 by Welford; per member: recent claim
//! fingerprints) is kept in memory and written to compacted state topics with every
//! batch, so it is rebuilt from them on restart and when partitions move. A member's
//! history is written a claim at a time, each under a slot key of its own (see
//! [`Remembered`]), not rewritten whole with every claim: a busy member's record would
//! otherwise grow to its whole remembered history, written again for each new claim.
//!
//! Partitions: the input is keyed by member (`ClaimInProcess::member_key`), so a
//! member's claims all reach the one process that holds their partition, and its state
//! has a single writer. A provider's claims come from every partition, so its
//! statistics are kept in parts, one per input partition (state key
//! `tenant/provider#partition`), each written only by the partition's holder; a score
//! uses all parts (merged by Chan's parallel update). While several processes share the
//! stage, the parts of partitions held elsewhere are as of the last rebalance: a running
//! mean and deviation over many claims moves little in that time, and nothing that must
//! be exact (a member's history) is shared.
//!
//! State entries remember which claims they include, so a redelivered claim is counted
//! once and scored as before: its own contribution is taken out before scoring, and it
//! is compared only with the claims its member had before it. (The provider's statistics
//! may still include later claims of its batch; a redelivered claim decided differently
//! loses to its first decision, see `Store::write_decisions`.)

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::runner::{decode, encode, Outputs, Stage, StageError};
use crate::bus::{Bus, Record, TopicSpec};
use crate::model::{ClaimInProcess, FraudReason, FraudScore};
use crate::topics::Topics;

pub const MODEL_VERSION: &str = "fraud-v1";
/// Fingerprints kept per member: enough for days of a busy member's claims.
const MEMBER_MEMORY: usize = 200;

/// Running amount statistics of one provider (Welford).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderStats {
    pub count: u64,
    pub mean: f64,
    pub m2: f64,
    /// The last input (partition → offset) applied, to recognise redelivery.
    pub applied: BTreeMap<u32, i64>,
}

impl ProviderStats {
    fn add(&mut self, x: f64) {
        self.count += 1;
        let d = x - self.mean;
        self.mean += d / self.count as f64;
        self.m2 += d * (x - self.mean);
    }

    /// The statistics without `x`, which was added last.
    fn without(&self, x: f64) -> ProviderStats {
        let mut s = self.clone();
        if s.count <= 1 {
            return ProviderStats {
                applied: s.applied,
                ..Default::default()
            };
        }
        let mean_prev = (s.mean * s.count as f64 - x) / (s.count - 1) as f64;
        s.m2 -= (x - mean_prev) * (x - s.mean);
        s.mean = mean_prev;
        s.count -= 1;
        s.m2 = s.m2.max(0.0);
        s
    }

    /// The statistics of both sets of claims together (Chan et al.'s parallel update).
    fn merged(&self, other: &ProviderStats) -> ProviderStats {
        if other.count == 0 || self.count == 0 {
            let s = if other.count == 0 { self } else { other };
            return ProviderStats {
                count: s.count,
                mean: s.mean,
                m2: s.m2,
                applied: BTreeMap::new(),
            };
        }
        let (na, nb) = (self.count as f64, other.count as f64);
        let n = na + nb;
        let delta = other.mean - self.mean;
        ProviderStats {
            count: self.count + other.count,
            mean: self.mean + delta * nb / n,
            m2: self.m2 + other.m2 + delta * delta * na * nb / n,
            applied: BTreeMap::new(),
        }
    }

    fn std_dev(&self) -> f64 {
        if self.count < 2 {
            0.0
        } else {
            (self.m2 / (self.count - 1) as f64).sqrt()
        }
    }
}

/// One remembered claim of a member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Seen {
    pub claim_id: String,
    pub fingerprint: String,
}

/// A member's remembered claims.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberState {
    /// Oldest first, at most [`MEMBER_MEMORY`].
    pub recent: Vec<Seen>,
    /// The position the member's next claim takes: its claims counted from 0.
    pub next: u64,
}

impl MemberState {
    /// Takes in a claim the member had not remembered: its record for the state topic.
    fn remember(&mut self, member: String, seen: Seen) -> Remembered {
        self.recent.push(seen.clone());
        if self.recent.len() > MEMBER_MEMORY {
            self.recent.remove(0);
        }
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
        let mut recent = whole;
        recent.extend(positioned.into_iter().map(|(_, seen)| seen));
        let old = recent.len().saturating_sub(MEMBER_MEMORY);
        recent.drain(..old);
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

/// The part of a provider's statistics read from a state entry written before they
/// were kept per partition: kept as one more part, and never written again.
const LEGACY_PART: u32 = u32::MAX;
/// The parts the fused chain keeps (see [`super::chain`]): its input is the intake
/// topic, keyed by claim, so its parts are one per intake partition, numbered from here
/// so that they never meet the stage's own parts (partitions number at most 1,024).
/// Each claim is counted in one part whichever way it ran, and a score merges them all.
pub const FUSED_PARTS: u32 = 1 << 20;

/// The stage's whole state.
#[derive(Debug, Clone, Default)]
pub struct FraudState {
    /// Per provider (`tenant/provider`), its statistics per input partition.
    pub providers: HashMap<String, BTreeMap<u32, ProviderStats>>,
    pub members: HashMap<String, MemberState>,
}

impl FraudState {
    /// A provider's statistics over all its parts.
    pub fn provider(&self, key: &str) -> ProviderStats {
        self.providers
            .get(key)
            .into_iter()
            .flat_map(|parts| parts.values())
            .fold(ProviderStats::default(), |all, part| all.merged(part))
    }
}

/// The state topic's key of one part of a provider's statistics. (Client ids never
/// hold `#`.)
pub fn part_key(provider: &str, partition: u32) -> String {
    format!("{provider}#{partition}")
}

/// The provider and partition a state key names; a key without a partition is a legacy
/// entry of the whole provider.
pub fn parse_part_key(key: &str) -> (&str, u32) {
    key.rsplit_once('#')
        .and_then(|(provider, p)| Some((provider, p.parse().ok()?)))
        .unwrap_or((key, LEGACY_PART))
}

/// Same member, provider, service date and procedure codes.
fn fingerprint(c: &ClaimInProcess) -> String {
    let s = &c.submitted.claim;
    let mut codes: Vec<&str> = s.lines.iter().map(|l| l.procedure_code.as_str()).collect();
    codes.sort_unstable();
    format!("{}|{}|{}", s.provider_id, s.service_date, codes.join(","))
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// The pure core: scores the claim at input position `at` and updates `state`.
/// Answers the claim with its score, and the state entries it changed: provider parts
/// (provider, partition) and the claim as its member's history took it in.
pub fn process(
    mut claim: ClaimInProcess,
    at: (u32, i64),
    state: &mut FraudState,
) -> (ClaimInProcess, Vec<(String, u32)>, Option<Remembered>) {
    let tenant = claim.tenant_id().to_owned();
    let s = &claim.submitted.claim;
    let claim_id = s.claim_id.as_str().to_owned();
    let amount = s.claim_amount as f64;
    let provider_key = format!("{tenant}/{}", s.provider_id);
    let member_key = format!("{tenant}/{}", s.member_id);
    let fp = fingerprint(&claim);

    let parts = state.providers.entry(provider_key.clone()).or_default();
    let redelivered = parts
        .get(&at.0)
        .and_then(|part| part.applied.get(&at.0))
        .is_some_and(|o| *o >= at.1);
    // A redelivered claim was the last one its partition's part took in.
    let before = parts
        .iter()
        .fold(ProviderStats::default(), |all, (p, part)| {
            if redelivered && *p == at.0 {
                all.merged(&part.without(amount))
            } else {
                all.merged(part)
            }
        });
    let member = state.members.entry(member_key.clone()).or_default();

    let mut reasons = Vec::new();
    if before.count >= 5 && before.std_dev() > 0.0 {
        let z = (amount - before.mean) / before.std_dev();
        if z > 2.0 {
            let c = ((z - 2.0) / 4.0).clamp(0.0, 1.0) * 0.6;
            reasons.push(FraudReason {
                code: "AMOUNT_OUTLIER".into(),
                contribution: round4(c),
                detail: format!(
                    "amount {} is {z:.1} standard deviations above the provider's mean {:.0}",
                    s.claim_amount, before.mean
                ),
            });
        }
    }
    let recent = claim.member_history.map(|h| h.claims_last_24h).unwrap_or(0);
    if recent >= 3 {
        let c = (recent as f64 / 10.0).min(1.0) * 0.4;
        reasons.push(FraudReason {
            code: "MEMBER_FREQUENCY".into(),
            contribution: round4(c),
            detail: format!("the member filed {recent} claims in the last 24 hours"),
        });
    }
    // Only the claims remembered before this one: a claim redelivered after later claims
    // of its batch were scored is not a duplicate of those, just as it was not the first
    // time (a different score could decide it differently).
    let earlier = member
        .recent
        .iter()
        .position(|seen| seen.claim_id == claim_id)
        .unwrap_or(member.recent.len());
    if let Some(dup) = member.recent[..earlier]
        .iter()
        .find(|seen| seen.fingerprint == fp)
    {
        reasons.push(FraudReason {
            code: "NEAR_DUPLICATE".into(),
            contribution: 0.7,
            detail: format!(
                "claim {} has the same member, provider, service date and codes",
                dup.claim_id
            ),
        });
    }
    if s.claim_amount >= 10_000 && s.claim_amount % 10_000 == 0 {
        reasons.push(FraudReason {
            code: "ROUND_AMOUNT".into(),
            contribution: 0.1,
            detail: format!("the amount {} is a round figure", s.claim_amount),
        });
    }
    let score = 1.0
        - reasons
            .iter()
            .map(|r| 1.0 - r.contribution)
            .product::<f64>();

    let mut changed_providers = Vec::new();
    if !redelivered {
        let part = state
            .providers
            .entry(provider_key.clone())
            .or_default()
            .entry(at.0)
            .or_default();
        part.add(amount);
        part.applied.insert(at.0, at.1);
        changed_providers.push((provider_key, at.0));
    }
    let member = state.members.entry(member_key.clone()).or_default();
    let remembered = (!member.recent.iter().any(|seen| seen.claim_id == claim_id)).then(|| {
        member.remember(
            member_key,
            Seen {
                claim_id,
                fingerprint: fp,
            },
        )
    });
    claim.fraud = Some(FraudScore {
        fraud_score: round4(score.clamp(0.0, 1.0)),
        model_version: MODEL_VERSION.into(),
        reasons,
    });
    (claim, changed_providers, remembered)
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

#[derive(Debug)]
pub struct Fraud {
    pub topics: Topics,
    pub state: FraudState,
}

impl Fraud {
    /// Rebuilds the state from the compacted state topics.
    pub async fn restore(topics: Topics, bus: &Bus) -> Result<Self, StageError> {
        let state = Self::load(&topics, bus).await?;
        Ok(Self { topics, state })
    }

    /// The latest record of each key of the state topics.
    async fn load(topics: &Topics, bus: &Bus) -> Result<FraudState, StageError> {
        let mut state = FraudState::default();
        for r in bus.scan(&topics.fraud_providers).await? {
            if let Ok(v) = serde_json::from_slice(&r.value) {
                let (provider, partition) = parse_part_key(&r.key);
                state
                    .providers
                    .entry(provider.to_owned())
                    .or_default()
                    .insert(partition, v);
            }
        }
        state.members = members_from(
            bus.scan(&topics.fraud_members)
                .await?
                .into_iter()
                .filter_map(|r| Some((r.key, serde_json::from_slice(&r.value).ok()?))),
        );
        tracing::info!(
            providers = state.providers.len(),
            members = state.members.len(),
            "Fraud state restored."
        );
        Ok(state)
    }
}

impl Stage for Fraud {
    fn name(&self) -> &'static str {
        "fraud"
    }

    fn input(&self) -> TopicSpec {
        self.topics.evaluated.clone()
    }

    /// The process that had the partitions wrote its state changes to the state topics,
    /// and after them only what it acknowledged: rebuilding from them takes its work in.
    async fn reassigned(&mut self, bus: &Bus) -> Result<(), StageError> {
        self.state = Self::load(&self.topics, bus).await?;
        Ok(())
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let mut out = Vec::with_capacity(batch.len() * 2);
        let claims: Vec<(ClaimInProcess, (u32, i64))> = batch
            .iter()
            .filter_map(|r| {
                decode(self.name(), r, &self.topics.dead_letter, &mut out)
                    .map(|c| (c, (r.partition, r.offset)))
            })
            .collect();
        let scored = self.step(claims, &mut out);
        for c in scored {
            out.push(encode(&self.topics.scored, c.key(), &c));
        }
        Ok(out)
    }
}

impl Fraud {
    /// Scores decoded claims, each at its input position, one out per claim in order,
    /// and adds the state entries the batch changed to `out`: the stage's own batch and
    /// the fused chain's (see [`super::chain`]).
    pub fn step(
        &mut self,
        claims: Vec<(ClaimInProcess, (u32, i64))>,
        out: &mut Outputs,
    ) -> Vec<ClaimInProcess> {
        let mut providers = Vec::new();
        let mut members = Vec::new();
        let mut scored = Vec::with_capacity(claims.len());
        for (claim, at) in claims {
            if claim.rejection.is_some() {
                scored.push(claim);
                continue;
            }
            let (claim, p, m) = process(claim, at, &mut self.state);
            providers.extend(p);
            members.extend(m);
            scored.push(claim);
        }
        // The state entries go into `out` before the caller adds the claims: on Kafka an
        // output published without its state change could be followed by a crash that
        // loses the change.
        providers.sort();
        providers.dedup();
        for (k, p) in providers {
            out.push(encode(
                &self.topics.fraud_providers,
                part_key(&k, p),
                &self.state.providers[&k][&p],
            ));
        }
        // In order: two claims of a member more than MEMBER_MEMORY apart in one batch
        // share a slot, and the later must be the one compaction keeps.
        for m in members {
            out.push(encode(&self.topics.fraud_members, m.key(), &m.record()));
        }
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ClaimSubmitted;
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
            tenant_id: "acme".into(),
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
        assert_eq!(m1.recent.len(), MEMBER_MEMORY);
        assert_eq!(m1.recent.last().unwrap().claim_id, format!("C{}", n - 1));
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
        let ids: Vec<&str> = members["acme/M1"]
            .recent
            .iter()
            .map(|s| s.claim_id.as_str())
            .collect();
        assert_eq!(ids, ["OLD-1", "OLD-2", "NEW"]);
    }
}
