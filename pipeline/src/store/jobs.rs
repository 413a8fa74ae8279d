//! Bulk jobs (`POST /claims/reprocess`): the job, its items, and their progress. An
//! item is settled (`done` or `failed`) in the transaction that queues its claim's new
//! decision, and only while still `pending`: a job resumed after a crash, or raced by a
//! second runner, redoes nothing that was queued.

use schemas::job::{JobState, JobView};
use schemas::TenantId;

use super::audit::AuditEntry;
use super::error::parsed;
use super::{placeholders, Store, StoreError};
use crate::clock::now_ms;

/// A job a runner has to work on.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RunningJob {
    pub tenant_id: String,
    pub job_id: String,
    pub rulebook_id: String,
    pub rulebook_version: i64,
}

/// How an item ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemEnd {
    Done,
    Failed(String),
}

/// The claim state a reprocess checks before deciding a claim again.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ClaimStanding {
    pub status: String,
    pub version: i64,
    pub audit_id: Option<String>,
}

#[derive(sqlx::FromRow)]
struct JobRow {
    job_id: String,
    state: String,
    total: i64,
    done: i64,
    failed: i64,
}

impl Store {
    /// Creates a reprocess job over the tenant's claims pending review, with its items
    /// and its audit record, in one transaction; answers how many claims it covers.
    pub async fn create_reprocess_job(
        &self,
        tenant_id: &TenantId,
        job_id: &str,
        rulebook: (&str, i64),
        created_by: &str,
    ) -> Result<i64, StoreError> {
        let mut tx = self.begin_write().await?;
        let items = sqlx::query(
            "INSERT INTO job_items (job_id, claim_id, state) \
             SELECT $1, claim_id, 'pending' FROM claims \
             WHERE tenant_id = $2 AND status = 'pending_review'",
        )
        .bind(job_id)
        .bind(tenant_id.as_str())
        .execute(&mut *tx)
        .await?
        .rows_affected() as i64;
        sqlx::query(
            "INSERT INTO jobs (tenant_id, job_id, kind, state, rulebook_id, rulebook_version, \
             total, created_by, created_at) VALUES ($1, $2, 'reprocess', $3, $4, $5, $6, $7, $8)",
        )
        .bind(tenant_id.as_str())
        .bind(job_id)
        .bind(if items == 0 { "done" } else { "running" })
        .bind(rulebook.0)
        .bind(rulebook.1)
        .bind(items)
        .bind(created_by)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        let entry = AuditEntry::new(
            tenant_id,
            created_by,
            "claims.reprocess_started",
            ("job", job_id),
            serde_json::json!({"rulebook_id": rulebook.0, "rulebook_version": rulebook.1,
                               "status": "pending_review", "claims": items}),
        );
        self.append_audit_in(&mut tx, &[entry]).await?;
        tx.commit().await?;
        Ok(items)
    }

    /// The tenant's job with its progress.
    pub async fn job(&self, tenant_id: &str, job_id: &str) -> Result<Option<JobView>, StoreError> {
        let row: Option<JobRow> = sqlx::query_as(
            "SELECT j.job_id, j.state, j.total, \
             (SELECT COUNT(*) FROM job_items i WHERE i.job_id = j.job_id AND i.state = 'done') AS done, \
             (SELECT COUNT(*) FROM job_items i WHERE i.job_id = j.job_id AND i.state = 'failed') AS failed \
             FROM jobs j WHERE j.tenant_id = $1 AND j.job_id = $2",
        )
        .bind(tenant_id)
        .bind(job_id)
        .fetch_optional(self.reader())
        .await?;
        row.map(|r| {
            Ok(JobView {
                state: parsed(JobState::parse(&r.state).ok_or(&r.state), || {
                    format!("job {}: state", r.job_id)
                })?,
                job_id: r.job_id,
                total: r.total,
                done: r.done,
                failed: r.failed,
            })
        })
        .transpose()
    }

    /// Every tenant's running jobs, oldest first.
    pub async fn running_jobs(&self) -> Result<Vec<RunningJob>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT tenant_id, job_id, rulebook_id, rulebook_version FROM jobs \
             WHERE state = 'running' ORDER BY created_at, job_id",
        )
        .fetch_all(self.reader())
        .await?)
    }

    /// Up to `limit` of the job's items still pending.
    pub async fn pending_items(&self, job_id: &str, limit: i64) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT claim_id FROM job_items WHERE job_id = $1 AND state = 'pending' \
             ORDER BY claim_id LIMIT $2",
        )
        .bind(job_id)
        .bind(limit)
        .fetch_all(self.reader())
        .await?)
    }

    /// Settles items inside the caller's transaction, each only while pending: false
    /// when any was settled already (by a runner racing this one), and the caller
    /// rolls back.
    pub async fn settle_items_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        job_id: &str,
        items: &[(String, ItemEnd)],
    ) -> Result<bool, StoreError> {
        let mut settled = 0;
        let done: Vec<&str> = items
            .iter()
            .filter(|(_, e)| *e == ItemEnd::Done)
            .map(|(c, _)| c.as_str())
            .collect();
        for chunk in done.chunks(500) {
            // Every placeholder from `placeholders`: SQLite numbers a bare `?` after a
            // literal `$1` from 1.
            let sql = format!(
                "UPDATE job_items SET state = 'done' WHERE job_id = {} AND state = 'pending' \
                 AND claim_id IN ({})",
                placeholders(self.backend(), 1, 1),
                placeholders(self.backend(), 2, chunk.len())
            );
            let mut q = sqlx::query(&sql).bind(job_id);
            for c in chunk {
                q = q.bind(*c);
            }
            settled += q.execute(&mut **tx).await?.rows_affected();
        }
        for (claim_id, end) in items {
            let ItemEnd::Failed(reason) = end else {
                continue;
            };
            settled += sqlx::query(
                "UPDATE job_items SET state = 'failed', reason = $1 \
                 WHERE job_id = $2 AND claim_id = $3 AND state = 'pending'",
            )
            .bind(reason)
            .bind(job_id)
            .bind(claim_id)
            .execute(&mut **tx)
            .await?
            .rows_affected();
        }
        Ok(settled == items.len() as u64)
    }

    /// Ends a job whose items are all settled.
    pub async fn finish_job(&self, job_id: &str, state: JobState) -> Result<(), StoreError> {
        sqlx::query("UPDATE jobs SET state = $1, finished_at = $2 WHERE job_id = $3")
            .bind(state.as_str())
            .bind(now_ms())
            .bind(job_id)
            .execute(&self.write)
            .await?;
        Ok(())
    }

    /// The claim's status, version and decision's audit id.
    pub async fn claim_standing(
        &self,
        tenant_id: &str,
        claim_id: &str,
    ) -> Result<Option<ClaimStanding>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT status, version, audit_id FROM claims WHERE tenant_id = $1 AND claim_id = $2",
        )
        .bind(tenant_id)
        .bind(claim_id)
        .fetch_optional(self.reader())
        .await?)
    }
}
