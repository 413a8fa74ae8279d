//! Writing decisions: the claim's snapshot, the decision's audit record and a review
//! task, in one transaction per batch. Each write is idempotent: the snapshot moves only
//! to a higher `version`, the audit record and the task are keyed by ids derived from the
//! claim, so a redelivered decision changes nothing.

use super::{Store, StoreError};
use crate::stages::decide::Decision;

impl Store {
    pub async fn write_decisions(&self, decisions: &[Decision]) -> Result<(), StoreError> {
        if decisions.is_empty() {
            return Ok(());
        }
        let mut tx = self.writer().begin().await?;
        for d in decisions {
            let reasons = serde_json::to_string(&d.reasons).unwrap_or_else(|_| "[]".into());
            let fraud = d.fraud.as_ref().and_then(|f| serde_json::to_string(f).ok());
            sqlx::query(
                "UPDATE claims SET status = $1, outcome = $2, approved_amount = $3, fraud_score = $4, fraud = $5, \
                 audit_id = $6, reasons = $7, task_id = $8, updated_at = $9, version = $10 \
                 WHERE tenant_id = $11 AND claim_id = $12 AND version < $10",
            )
            .bind(d.status.as_str())
            .bind(d.outcome.as_str())
            .bind(d.approved_amount)
            .bind(d.fraud.as_ref().map(|f| f.fraud_score))
            .bind(fraud)
            .bind(&d.audit_id)
            .bind(&reasons)
            .bind(d.task_id.as_deref())
            .bind(d.decided_at_ms)
            .bind(d.version)
            .bind(&d.tenant_id)
            .bind(&d.claim_id)
            .execute(&mut *tx)
            .await?;
            let details = serde_json::json!({
                "outcome": d.outcome, "status": d.status, "approved_amount": d.approved_amount,
                "fraud_score": d.fraud.as_ref().map(|f| f.fraud_score), "rulebook_version": d.rulebook_version,
                "reasons": d.reasons, "trace": d.trace,
            });
            sqlx::query(
                "INSERT INTO audit_records (audit_id, tenant_id, at, actor, action, entity_type, entity_id, details) \
                 VALUES ($1, $2, $3, 'pipeline', 'claim.decided', 'claim', $4, $5) ON CONFLICT (audit_id) DO NOTHING",
            )
            .bind(&d.audit_id)
            .bind(&d.tenant_id)
            .bind(d.decided_at_ms)
            .bind(&d.claim_id)
            .bind(details.to_string())
            .execute(&mut *tx)
            .await?;
            if let Some(task_id) = &d.task_id {
                sqlx::query(
                    "INSERT INTO review_tasks (task_id, tenant_id, claim_id, status, priority, reasons, created_at) \
                     VALUES ($1, $2, $3, 'open', $4, $5, $6) ON CONFLICT DO NOTHING",
                )
                .bind(task_id)
                .bind(&d.tenant_id)
                .bind(&d.claim_id)
                .bind(d.priority)
                .bind(&reasons)
                .bind(d.decided_at_ms)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// The fraud analysis stored with a claim, as JSON.
    pub async fn claim_fraud(
        &self,
        tenant_id: &str,
        claim_id: &str,
    ) -> Result<Option<Option<String>>, StoreError> {
        Ok(sqlx::query_scalar::<_, Option<String>>(
            "SELECT fraud FROM claims WHERE tenant_id = $1 AND claim_id = $2",
        )
        .bind(tenant_id)
        .bind(claim_id)
        .fetch_optional(self.reader())
        .await?)
    }
}

impl Store {
    /// Decision records per claim of a tenant: for checks that nothing was doubled.
    pub async fn audit_counts(
        &self,
        tenant_id: &str,
    ) -> Result<std::collections::HashMap<String, i64>, StoreError> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT entity_id, COUNT(*) FROM audit_records WHERE tenant_id = $1 AND action = 'claim.decided' GROUP BY entity_id",
        )
        .bind(tenant_id)
        .fetch_all(self.reader())
        .await?;
        Ok(rows.into_iter().collect())
    }
}
