//! Endpoint health (contract part 2: Replay and delivery control): a subscription's
//! deliveries over the last hour, its run of failures since its last success, and
//! disabling it when that run has lasted a day.

use schemas::webhook::WebhookStats;

use super::audit::AuditEntry;
use super::{Store, StoreError};
use crate::clock::ms_to_rfc3339;

pub const STATS_WINDOW_MS: i64 = 3_600_000;

/// Failed attempts since a subscription's last success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailingStreak {
    pub failures: i64,
    /// The first of them; `None` without failures.
    pub since: Option<i64>,
}

/// A subscription the service disabled.
#[derive(Debug, Clone)]
pub struct Disabled {
    pub tenant_id: String,
    pub url: String,
    pub at: i64,
}

impl Store {
    /// The subscription's current streak of failed attempts (since its last success,
    /// or since it was last enabled again), as recorded with the attempts.
    pub async fn failing_streak(&self, webhook_id: &str) -> Result<FailingStreak, StoreError> {
        let row: Option<(i64, Option<i64>)> = sqlx::query_as(
            "SELECT streak_failures, streak_since FROM webhooks WHERE webhook_id = $1",
        )
        .bind(webhook_id)
        .fetch_optional(self.reader())
        .await?;
        let (failures, since) = row.unwrap_or((0, None));
        Ok(FailingStreak { failures, since })
    }

    /// Disables an enabled subscription with `reason`, with its audit record, inside
    /// the caller's transaction (which also carries the `webhook.disabled` event);
    /// `None` when it is gone or disabled already.
    pub async fn disable_webhook_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        webhook_id: &str,
        reason: &str,
        now: i64,
    ) -> Result<Option<Disabled>, StoreError> {
        let row: Option<(String, String)> = sqlx::query_as(
            "UPDATE webhooks SET enabled = 0, disabled_reason = $1, disabled_at = $2, updated_at = $2 \
             WHERE webhook_id = $3 AND enabled = 1 RETURNING tenant_id, url",
        )
        .bind(reason)
        .bind(now)
        .bind(webhook_id)
        .fetch_optional(&mut **tx)
        .await?;
        let Some((tenant_id, url)) = row else {
            return Ok(None);
        };
        let entry = AuditEntry::new(
            &tenant_id,
            "system",
            "webhook.disabled",
            ("webhook", webhook_id),
            serde_json::json!({ "reason": reason }),
        );
        self.append_audit_in(tx, &[entry]).await?;
        Ok(Some(Disabled {
            tenant_id,
            url,
            at: now,
        }))
    }

    /// The subscription's deliveries over the hour before `now`; `None` when the tenant
    /// has no such subscription.
    pub async fn webhook_stats(
        &self,
        tenant_id: &str,
        webhook_id: &str,
        now: i64,
    ) -> Result<Option<WebhookStats>, StoreError> {
        let disabled: Option<(Option<i64>,)> = sqlx::query_as(
            "SELECT disabled_at FROM webhooks WHERE tenant_id = $1 AND webhook_id = $2",
        )
        .bind(tenant_id)
        .bind(webhook_id)
        .fetch_optional(self.reader())
        .await?;
        let Some((disabled_at,)) = disabled else {
            return Ok(None);
        };
        let from = now - STATS_WINDOW_MS;
        let (attempts, succeeded): (i64, Option<i64>) = sqlx::query_as(
            "SELECT COUNT(*), SUM(CASE WHEN error IS NULL THEN 1 ELSE 0 END) FROM webhook_attempts \
             WHERE webhook_id = $1 AND at > $2 AND at <= $3",
        )
        .bind(webhook_id)
        .bind(from)
        .bind(now)
        .fetch_one(self.reader())
        .await?;
        let percentile = |q: f64| {
            let offset = ((attempts - 1) as f64 * q).floor() as i64;
            async move {
                if attempts == 0 {
                    return Ok::<i64, StoreError>(0);
                }
                Ok(sqlx::query_scalar(
                    "SELECT duration_ms FROM webhook_attempts WHERE webhook_id = $1 AND at > $2 \
                     AND at <= $3 ORDER BY duration_ms LIMIT 1 OFFSET $4",
                )
                .bind(webhook_id)
                .bind(from)
                .bind(now)
                .bind(offset)
                .fetch_one(self.reader())
                .await?)
            }
        };
        let (p50_ms, p99_ms) = (percentile(0.5).await?, percentile(0.99).await?);
        let streak = self.failing_streak(webhook_id).await?;
        let succeeded = succeeded.unwrap_or(0);
        Ok(Some(WebhookStats {
            window_s: STATS_WINDOW_MS / 1000,
            attempts,
            succeeded,
            failed: attempts - succeeded,
            p50_ms,
            p99_ms,
            consecutive_failures: streak.failures,
            disabled_at: disabled_at.map(ms_to_rfc3339),
        }))
    }
}
