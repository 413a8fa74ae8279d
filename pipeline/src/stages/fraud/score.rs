//! The pure core: a claim's score from the features, and the state it moves.

use super::members::{fingerprint, fingerprint_hash, Remembered, Seen};
use super::state::FraudState;
use super::stats::ProviderStats;
use super::MODEL_VERSION;
use crate::model::{ClaimInProcess, FraudReason, FraudScore};

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
    let fp_hash = fingerprint_hash(&fp);

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
    let earlier = member.position(&claim_id).unwrap_or(member.len());
    if let Some((dup, _)) = member
        .remembered()
        .take(earlier)
        .find(|(_, fingerprint)| *fingerprint == fp_hash)
    {
        reasons.push(FraudReason {
            code: "NEAR_DUPLICATE".into(),
            contribution: 0.7,
            detail: format!("claim {dup} has the same member, provider, service date and codes"),
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
    let remembered = member.position(&claim_id).is_none().then(|| {
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
