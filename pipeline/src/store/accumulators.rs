//! The queryable copy of the members' accumulators (written with the decisions, see
//! `decisions`), and a claim's pricing for an officer's approval.

use crate::adjudication::{Pricing, Usage};

use super::{Store, StoreError};

impl Store {
    /// What a member used of their benefits in `year`: the sum of the claims counted.
    pub async fn member_accumulators(
        &self,
        tenant_id: &str,
        member_id: &str,
        year: i32,
    ) -> Result<Usage, StoreError> {
        let rows: Vec<(String, i64, i64, i64, String)> = sqlx::query_as(
            "SELECT claim_id, deductible, out_of_pocket, paid, visits FROM member_accumulators \
             WHERE tenant_id = $1 AND member_id = $2 AND year = $3",
        )
        .bind(tenant_id)
        .bind(member_id)
        .bind(i64::from(year))
        .fetch_all(self.reader())
        .await?;
        let mut total = Usage::default();
        for (claim_id, deductible, out_of_pocket, paid, visits) in rows {
            let visits = serde_json::from_str(&visits).map_err(|e| {
                StoreError::Corrupt(format!("the visits counted for claim {claim_id}: {e}"))
            })?;
            total.add(&Usage {
                deductible,
                out_of_pocket,
                paid,
                visits,
            });
        }
        Ok(total)
    }

    /// The pricing the decide stage fixed for a claim, if its member is on a plan.
    pub async fn claim_pricing(
        &self,
        tenant_id: &str,
        claim_id: &str,
    ) -> Result<Option<Pricing>, StoreError> {
        let text: Option<Option<String>> =
            sqlx::query_scalar("SELECT pricing FROM claims WHERE tenant_id = $1 AND claim_id = $2")
                .bind(tenant_id)
                .bind(claim_id)
                .fetch_optional(self.reader())
                .await?;
        text.flatten()
            .map(|t| {
                serde_json::from_str(&t).map_err(|e| {
                    StoreError::Corrupt(format!("the pricing of claim {claim_id}: {e}"))
                })
            })
            .transpose()
    }
}
