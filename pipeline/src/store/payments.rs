//! Payment runs: the payable claims not paid yet, and the run's payments written with
//! the claims they pay in one transaction. `payment_claims` is keyed by the claim alone,
//! so the store itself refuses to pay a claim twice.

use schemas::payment::PaymentView;

use super::{Store, StoreError};
use crate::clock::ms_to_rfc3339;

/// A claim a run may pay.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PayableClaim {
    pub claim_id: String,
    pub provider_id: String,
    pub approved_amount: i64,
}

/// A payment to write.
#[derive(Debug, Clone)]
pub struct NewPayment {
    pub payment_id: String,
    pub provider_id: String,
    pub amount: i64,
    pub trace_number: String,
    /// (claim id, amount paid for it).
    pub claims: Vec<(String, i64)>,
}

#[derive(sqlx::FromRow)]
struct PaymentRow {
    payment_id: String,
    run_id: String,
    provider_id: String,
    amount: i64,
    trace_number: String,
    issued_at: i64,
}

impl Store {
    /// The tenant's claims with a final payable outcome (`ADJUDICATED`, or `APPROVED` by
    /// an officer), decided before `before_ms`, neither superseded nor paid, by provider
    /// and claim id. Read inside the run's transaction, so that on SQLite no other run
    /// can slip in between the read and the write.
    pub async fn payable_claims_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        tenant_id: &str,
        before_ms: i64,
    ) -> Result<Vec<PayableClaim>, StoreError> {
        Ok(sqlx::query_as::<_, PayableClaim>(
            "SELECT c.claim_id, c.provider_id, COALESCE(c.approved_amount, 0) AS approved_amount \
             FROM claims c WHERE c.tenant_id = $1 AND c.status = 'completed' \
             AND c.outcome IN ('ADJUDICATED', 'APPROVED') AND c.superseded_by IS NULL \
             AND c.updated_at < $2 AND NOT EXISTS (SELECT 1 FROM payment_claims p \
             WHERE p.tenant_id = c.tenant_id AND p.claim_id = c.claim_id) \
             ORDER BY c.provider_id, c.claim_id",
        )
        .bind(tenant_id)
        .bind(before_ms)
        .fetch_all(&mut **tx)
        .await?)
    }

    pub async fn insert_payment_run_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        tenant_id: &str,
        run_id: &str,
        through: &str,
        created_by: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO payment_runs (tenant_id, run_id, through, created_by, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(tenant_id)
        .bind(run_id)
        .bind(through)
        .bind(created_by)
        .bind(now)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// A payment and its claims. A claim paid already fails the statement (its key is
    /// taken), and with it the run's transaction.
    pub async fn insert_payment_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        tenant_id: &str,
        run_id: &str,
        p: &NewPayment,
        now: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO payments (tenant_id, payment_id, run_id, provider_id, amount, \
             trace_number, issued_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(tenant_id)
        .bind(&p.payment_id)
        .bind(run_id)
        .bind(&p.provider_id)
        .bind(p.amount)
        .bind(&p.trace_number)
        .bind(now)
        .execute(&mut **tx)
        .await?;
        for (claim_id, amount) in &p.claims {
            sqlx::query(
                "INSERT INTO payment_claims (tenant_id, claim_id, payment_id, amount) \
                 VALUES ($1, $2, $3, $4)",
            )
            .bind(tenant_id)
            .bind(claim_id)
            .bind(&p.payment_id)
            .bind(*amount)
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }

    /// One of the tenant's payments with the ids of the claims it pays.
    pub async fn payment(
        &self,
        tenant_id: &str,
        payment_id: &str,
    ) -> Result<Option<PaymentView>, StoreError> {
        let Some(row) = sqlx::query_as::<_, PaymentRow>(
            "SELECT payment_id, run_id, provider_id, amount, trace_number, issued_at \
             FROM payments WHERE tenant_id = $1 AND payment_id = $2",
        )
        .bind(tenant_id)
        .bind(payment_id)
        .fetch_optional(self.reader())
        .await?
        else {
            return Ok(None);
        };
        let claims: Vec<String> = sqlx::query_scalar(
            "SELECT claim_id FROM payment_claims WHERE tenant_id = $1 AND payment_id = $2 \
             ORDER BY claim_id",
        )
        .bind(tenant_id)
        .bind(payment_id)
        .fetch_all(self.reader())
        .await?;
        Ok(Some(PaymentView {
            payment_id: row.payment_id,
            run_id: row.run_id,
            provider_id: row.provider_id,
            amount: row.amount,
            claims,
            trace_number: row.trace_number,
            issued_at: ms_to_rfc3339(row.issued_at),
        }))
    }
}
