//! Claim snapshots: reads for the API. Rows are written by intake (`received`) and by
//! the pipeline's snapshot writer.

use schemas::claim::{ClaimStatus, ClaimSubmission, ClaimView, Outcome, Reason};

use super::error::parsed;
use super::{placeholders, values_list, Store, StoreError};
use crate::clock::ms_to_rfc3339;

#[derive(sqlx::FromRow)]
struct ClaimRow {
    claim_id: String,
    submission: String,
    rulebook_version: i64,
    status: String,
    outcome: Option<String>,
    approved_amount: Option<i64>,
    fraud_score: Option<f64>,
    audit_id: Option<String>,
    reasons: String,
    task_id: Option<String>,
    received_at: i64,
    updated_at: i64,
    lines: Option<String>,
    superseded_by: Option<String>,
}

impl ClaimRow {
    fn into_view(self) -> Result<ClaimView, StoreError> {
        let id = &self.claim_id;
        let submission: ClaimSubmission = parsed(serde_json::from_str(&self.submission), || {
            format!("claim {id}: submission")
        })?;
        let status = parsed(ClaimStatus::parse(&self.status).ok_or(&self.status), || {
            format!("claim {id}: status")
        })?;
        let outcome = match self.outcome.as_deref() {
            Some(o) => Some(parsed(Outcome::parse(o).ok_or(o), || {
                format!("claim {id}: outcome")
            })?),
            None => None,
        };
        let reasons = parsed(serde_json::from_str::<Vec<Reason>>(&self.reasons), || {
            format!("claim {id}: reasons")
        })?;
        let lines = match &self.lines {
            Some(lines) => parsed(serde_json::from_str(lines), || format!("claim {id}: lines"))?,
            None => submission.service_lines(),
        };
        Ok(ClaimView {
            submission: submission.header(),
            lines,
            status,
            outcome,
            approved_amount: self.approved_amount,
            fraud_score: self.fraud_score,
            audit_id: self.audit_id,
            rulebook_version: self.rulebook_version,
            reasons,
            task_id: self.task_id,
            received_at: ms_to_rfc3339(self.received_at),
            updated_at: ms_to_rfc3339(self.updated_at),
            superseded_by: self.superseded_by,
        })
    }
}

/// Claims per history query: 3 bound values each, well under SQLite's 32,766.
const MEMBERS_PER_QUERY: usize = 2000;

const COLUMNS: &str =
    "claim_id, submission, rulebook_version, status, outcome, approved_amount, fraud_score, \
                       audit_id, reasons, task_id, received_at, updated_at, lines, superseded_by";

/// Filters of `GET /claims`; absent ones match everything.
#[derive(Debug, Clone, Default)]
pub struct ClaimFilter {
    pub status: Option<ClaimStatus>,
    pub outcome: Option<Outcome>,
    pub provider_id: Option<String>,
    pub received_after_ms: Option<i64>,
}

impl Store {
    pub async fn claim(
        &self,
        tenant_id: &str,
        claim_id: &str,
    ) -> Result<Option<ClaimView>, StoreError> {
        let row = sqlx::query_as::<_, ClaimRow>(&format!(
            "SELECT {COLUMNS} FROM claims WHERE tenant_id = $1 AND claim_id = $2"
        ))
        .bind(tenant_id)
        .bind(claim_id)
        .fetch_optional(self.reader())
        .await?;
        row.map(ClaimRow::into_view).transpose()
    }

    /// When a claim was received and its submission as stored (JSON): how a redelivered
    /// Kafka submission recognises the claim it created itself.
    pub async fn claim_receipt(
        &self,
        tenant_id: &str,
        claim_id: &str,
    ) -> Result<Option<(i64, String)>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT received_at, submission FROM claims WHERE tenant_id = $1 AND claim_id = $2",
        )
        .bind(tenant_id)
        .bind(claim_id)
        .fetch_optional(self.writer())
        .await?)
    }

    /// Every claim of a tenant with its `received_at`, oldest first, read page by page:
    /// for operators' checks and benchmarks, not for the API.
    pub async fn all_claims(&self, tenant_id: &str) -> Result<Vec<(i64, ClaimView)>, StoreError> {
        let mut all: Vec<(i64, ClaimView)> = Vec::new();
        loop {
            let after = all
                .last()
                .map(|(at, v)| (*at, v.submission.claim_id.as_str().to_owned()));
            let page = self
                .claims(tenant_id, &ClaimFilter::default(), after, 1000)
                .await?;
            if page.is_empty() {
                return Ok(all);
            }
            all.extend(page);
        }
    }

    /// Claims oldest first by (received_at, claim_id), after the cursor `after`.
    pub async fn claims(
        &self,
        tenant_id: &str,
        filter: &ClaimFilter,
        after: Option<(i64, String)>,
        limit: i64,
    ) -> Result<Vec<(i64, ClaimView)>, StoreError> {
        let (after_at, after_id) = after.unwrap_or((i64::MIN, String::new()));
        let rows = sqlx::query_as::<_, ClaimRow>(&format!(
            "SELECT {COLUMNS} FROM claims WHERE tenant_id = $1 \
             AND ($2 = '' OR status = $2) AND ($3 = '' OR outcome = $3) AND ($4 = '' OR provider_id = $4) \
             AND received_at > $5 AND (received_at > $6 OR (received_at = $6 AND claim_id > $7)) \
             ORDER BY received_at, claim_id LIMIT $8"
        ))
        .bind(tenant_id)
        .bind(filter.status.map(ClaimStatus::as_str).unwrap_or(""))
        .bind(filter.outcome.map(Outcome::as_str).unwrap_or(""))
        .bind(filter.provider_id.as_deref().unwrap_or(""))
        .bind(filter.received_after_ms.unwrap_or(i64::MIN))
        .bind(after_at)
        .bind(after_id)
        .bind(limit)
        .fetch_all(self.reader())
        .await?;
        rows.into_iter()
            .map(|r| {
                let at = r.received_at;
                r.into_view().map(|v| (at, v))
            })
            .collect()
    }
}

impl Store {
    /// The history of every member named in `wanted` (tenant, member, at), each as of
    /// its own `at`: its claims received in the 24 hours and its amount in the 30 days
    /// before it (the claim being processed excluded). The store counts and sums, one
    /// query per tenant and chunk, so a stage reads a whole batch's histories at once
    /// and receives a row per claim rather than every claim of the window.
    pub async fn member_histories(
        &self,
        wanted: &[(&str, &str, i64)],
    ) -> Result<Vec<crate::rules::MemberHistory>, StoreError> {
        const DAY: i64 = 86_400_000;
        let mut out = vec![crate::rules::MemberHistory::default(); wanted.len()];
        let mut by_tenant: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
        for (i, (tenant, _, _)) in wanted.iter().enumerate() {
            by_tenant.entry(tenant).or_default().push(i);
        }
        for (tenant, indices) in by_tenant {
            for chunk in indices.chunks(MEMBERS_PER_QUERY) {
                let sql = format!(
                    "WITH v (idx, member_id, at) AS (VALUES {}) \
                     SELECT v.idx, COUNT(CASE WHEN c.received_at >= v.at - {DAY} THEN 1 END), \
                     CAST(COALESCE(SUM(c.claim_amount), 0) AS BIGINT) \
                     FROM v JOIN claims c ON c.tenant_id = {} AND c.member_id = v.member_id \
                     AND c.received_at >= v.at - {} AND c.received_at < v.at GROUP BY v.idx",
                    values_list(self.backend(), chunk.len(), 3),
                    placeholders(self.backend(), chunk.len() * 3 + 1, 1),
                    30 * DAY,
                );
                let mut q = sqlx::query_as::<_, (i64, i64, i64)>(&sql);
                for i in chunk {
                    let (_, member, at) = wanted[*i];
                    q = q.bind(*i as i64).bind(member).bind(at);
                }
                for (i, recent, amount) in q.bind(tenant).fetch_all(self.reader()).await? {
                    if let Some(h) = usize::try_from(i).ok().and_then(|i| out.get_mut(i)) {
                        h.claims_last_24h = recent;
                        h.amount_last_30d = amount;
                    }
                }
            }
        }
        Ok(out)
    }
}
