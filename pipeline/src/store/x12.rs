//! X12 intake's own rows: the acknowledgments of each interchange taken, and the
//! billing providers' NPIs resolved to the tenant's providers.

use std::collections::HashMap;

use super::{Store, StoreError};

/// One interchange taken, with its acknowledgments.
#[derive(Debug, Clone)]
pub struct X12Batch<'a> {
    pub batch_id: &'a str,
    pub version: &'a str,
    pub accepted: i64,
    pub rejected: i64,
    pub ack_999: &'a str,
    pub ack_277ca: &'a str,
}

/// Which acknowledgment of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum X12Ack {
    Implementation999,
    ClaimStatus277Ca,
}

impl Store {
    /// The tenant's provider of each NPI in `npis` that one has. Two providers with one
    /// NPI (a group billing under its members' ids is the usual cause) resolve to the
    /// first by id, so that the same interchange always maps the same way.
    pub async fn providers_by_npi(
        &self,
        tenant_id: &str,
        npis: &[&str],
    ) -> Result<HashMap<String, String>, StoreError> {
        let mut out = HashMap::with_capacity(npis.len());
        for npi in npis {
            let id: Option<String> = sqlx::query_scalar(
                "SELECT provider_id FROM providers WHERE tenant_id = $1 AND npi = $2 \
                 ORDER BY provider_id LIMIT 1",
            )
            .bind(tenant_id)
            .bind(*npi)
            .fetch_optional(self.reader())
            .await?;
            if let Some(id) = id {
                out.insert((*npi).to_owned(), id);
            }
        }
        Ok(out)
    }

    /// The batch's row, inside the caller's transaction (which also carries its record).
    pub async fn insert_x12_batch_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        tenant_id: &str,
        b: &X12Batch<'_>,
        now: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO x12_batches (tenant_id, batch_id, version, accepted, rejected, \
             ack_999, ack_277ca, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(tenant_id)
        .bind(b.batch_id)
        .bind(b.version)
        .bind(b.accepted)
        .bind(b.rejected)
        .bind(b.ack_999)
        .bind(b.ack_277ca)
        .bind(now)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// An acknowledgment of one of the tenant's batches; `None` when the tenant has no
    /// such batch.
    pub async fn x12_ack(
        &self,
        tenant_id: &str,
        batch_id: &str,
        which: X12Ack,
    ) -> Result<Option<String>, StoreError> {
        let sql = match which {
            X12Ack::Implementation999 => {
                "SELECT ack_999 FROM x12_batches WHERE tenant_id = $1 AND batch_id = $2"
            }
            X12Ack::ClaimStatus277Ca => {
                "SELECT ack_277ca FROM x12_batches WHERE tenant_id = $1 AND batch_id = $2"
            }
        };
        Ok(sqlx::query_scalar(sql)
            .bind(tenant_id)
            .bind(batch_id)
            .fetch_optional(self.reader())
            .await?)
    }
}
