//! Decided claims with the facts of their decision, oldest first: what a backtest runs
//! and a reprocess decides again. Read a page at a time, so that a backtest over a
//! million claims holds one page.

use schemas::claim::ClaimSubmission;
use schemas::TenantId;

use super::error::parsed;
use super::{ClaimStanding, Store, StoreError};
use crate::model::{ClaimSubmitted, DecidedClaim, DecisionFacts, FraudScore};

/// Which decided claims: received in `[since, until)`, after `after` (the last
/// `(received_at, claim_id)` of the previous page).
#[derive(Debug, Clone, Default)]
pub struct DecidedWindow {
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub after: Option<(i64, String)>,
}

#[derive(sqlx::FromRow)]
struct Row {
    claim_id: String,
    submission: String,
    rulebook_id: String,
    rulebook_version: i64,
    received_at: i64,
    fraud: Option<String>,
    fraud_score: Option<f64>,
    facts: String,
}

impl Row {
    fn into_claim(self, tenant_id: &TenantId) -> Result<DecidedClaim, StoreError> {
        let id = &self.claim_id;
        let claim: ClaimSubmission = parsed(serde_json::from_str(&self.submission), || {
            format!("claim {id}: submission")
        })?;
        let facts: DecisionFacts = parsed(serde_json::from_str(&self.facts), || {
            format!("claim {id}: facts")
        })?;
        let fraud = match (&self.fraud, self.fraud_score) {
            (Some(f), _) => Some(parsed(serde_json::from_str::<FraudScore>(f), || {
                format!("claim {id}: fraud")
            })?),
            (None, Some(fraud_score)) => Some(FraudScore {
                fraud_score,
                model_version: String::new(),
                reasons: Vec::new(),
            }),
            (None, None) => None,
        };
        Ok(DecidedClaim {
            submitted: ClaimSubmitted {
                tenant_id: tenant_id.clone(),
                claim,
                rulebook_id: self.rulebook_id,
                rulebook_version: self.rulebook_version,
                received_at_ms: self.received_at,
            },
            fraud,
            facts,
        })
    }
}

impl Store {
    /// Up to `limit` of the tenant's decided claims in `window`, oldest first, for a
    /// backtest: with their fraud score alone, whose reasons a backtest does not read
    /// (parsing them would be a third of the page's work). Claims decided before their
    /// decisions kept their facts are not among them.
    pub async fn decided_claims(
        &self,
        tenant_id: &TenantId,
        window: &DecidedWindow,
        limit: i64,
    ) -> Result<Vec<DecidedClaim>, StoreError> {
        let (after_at, after_id) = window
            .after
            .as_ref()
            .map_or((i64::MIN, ""), |(at, id)| (*at, id.as_str()));
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT claim_id, submission, rulebook_id, rulebook_version, received_at, \
             NULL AS fraud, fraud_score, facts \
             FROM claims WHERE tenant_id = $1 AND facts IS NOT NULL \
             AND received_at >= $2 AND received_at < $3 \
             AND (received_at > $4 OR (received_at = $4 AND claim_id > $5)) \
             ORDER BY received_at, claim_id LIMIT $6",
        )
        .bind(tenant_id.as_str())
        .bind(window.since_ms.unwrap_or(i64::MIN))
        .bind(window.until_ms.unwrap_or(i64::MAX))
        .bind(after_at)
        .bind(after_id)
        .bind(limit)
        .fetch_all(self.reader())
        .await?;
        rows.into_iter().map(|r| r.into_claim(tenant_id)).collect()
    }

    /// One claim for a reprocess, in one read: its standing, and the claim with the
    /// facts of its decision (none when its decision kept none); none when the claim
    /// does not exist.
    pub async fn decided_claim(
        &self,
        tenant_id: &TenantId,
        claim_id: &str,
    ) -> Result<Option<(ClaimStanding, Option<DecidedClaim>)>, StoreError> {
        #[derive(sqlx::FromRow)]
        struct WithStanding {
            #[sqlx(flatten)]
            standing: ClaimStanding,
            claim_id: String,
            submission: String,
            rulebook_id: String,
            rulebook_version: i64,
            received_at: i64,
            fraud: Option<String>,
            fraud_score: Option<f64>,
            facts: Option<String>,
        }
        let row: Option<WithStanding> = sqlx::query_as(
            "SELECT status, version, audit_id, claim_id, submission, rulebook_id, rulebook_version, \
             received_at, fraud, fraud_score, facts FROM claims WHERE tenant_id = $1 AND claim_id = $2",
        )
        .bind(tenant_id.as_str())
        .bind(claim_id)
        .fetch_optional(self.reader())
        .await?;
        row.map(|r| {
            let claim = match r.facts {
                None => None,
                Some(facts) => Some(
                    Row {
                        claim_id: r.claim_id,
                        submission: r.submission,
                        rulebook_id: r.rulebook_id,
                        rulebook_version: r.rulebook_version,
                        received_at: r.received_at,
                        fraud: r.fraud,
                        fraud_score: r.fraud_score,
                        facts,
                    }
                    .into_claim(tenant_id)?,
                ),
            };
            Ok((r.standing, claim))
        })
        .transpose()
    }
}
