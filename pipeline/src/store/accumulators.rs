//! The store's copy of the members' accumulators (written with the decisions, see
//! `decisions`): what the API reads and what the snapshot stage restores the years
//! from. And a claim's pricing for an officer's approval.

use crate::adjudication::{Counted, Pricing, Usage};

use super::{Store, StoreError};

/// A claim counted in a member's year, as the store's copy keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct CountedClaim {
    pub tenant_id: String,
    pub member_id: String,
    pub year: i32,
    pub claim_id: String,
    pub counted: Counted,
}

/// Rows read per query by [`Store::counted_claims`]: a restart's memory holds a page
/// of rows besides the years, however many claims were counted.
const COUNTED_PAGE: i64 = 5000;

const COUNTED_COLUMNS: &str = "SELECT tenant_id, member_id, CAST(year AS BIGINT), claim_id, \
     deductible, out_of_pocket, paid, visits, seq FROM member_accumulators";

type CountedRow = (String, String, i64, String, i64, i64, i64, String, i64);

impl Store {
    /// Every claim counted in a member's year, handed to `each` in key order: what the
    /// snapshot stage restores the years from. Read a page at a time, by key.
    pub async fn counted_claims(
        &self,
        mut each: impl FnMut(CountedClaim),
    ) -> Result<u64, StoreError> {
        // Before every key: tenant ids are never empty.
        let mut after = (String::new(), String::new(), i64::MIN, String::new());
        let sql = format!(
            "{COUNTED_COLUMNS} WHERE (tenant_id, member_id, year, claim_id) > ($1, $2, $3, $4) \
             ORDER BY tenant_id, member_id, year, claim_id LIMIT $5"
        );
        let mut read = 0;
        loop {
            let (tenant, member, year, claim) = &after;
            let rows: Vec<CountedRow> = sqlx::query_as(&sql)
                .bind(tenant)
                .bind(member)
                .bind(*year)
                .bind(claim)
                .bind(COUNTED_PAGE)
                .fetch_all(self.reader())
                .await?;
            let full = rows.len() as i64 == COUNTED_PAGE;
            if let Some((t, m, y, c, ..)) = rows.last() {
                after = (t.clone(), m.clone(), *y, c.clone());
            }
            for row in rows {
                each(counted_claim(row)?);
                read += 1;
            }
            if !full {
                return Ok(read);
            }
        }
    }

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

fn counted_claim(row: CountedRow) -> Result<CountedClaim, StoreError> {
    let (tenant_id, member_id, year, claim_id, deductible, out_of_pocket, paid, visits, seq) = row;
    let corrupt = |what: &str| {
        StoreError::Corrupt(format!(
            "the count of claim {claim_id} in {tenant_id}/{member_id}/{year}: {what}"
        ))
    };
    let visits = serde_json::from_str(&visits).map_err(|e| corrupt(&format!("visits: {e}")))?;
    let year = i32::try_from(year).map_err(|_| corrupt("the year is out of range"))?;
    let seq = u64::try_from(seq).map_err(|_| corrupt("a negative seq"))?;
    Ok(CountedClaim {
        counted: Counted {
            seq,
            usage: Usage {
                deductible,
                out_of_pocket,
                paid,
                visits,
            },
        },
        tenant_id,
        member_id,
        year,
        claim_id,
    })
}
