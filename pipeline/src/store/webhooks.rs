//! Webhook subscriptions and deliveries. A delivery is one event for one subscription;
//! its row holds the durable retry schedule (`next_attempt_at`), so a restart neither
//! loses a pending attempt nor makes it early. A sender claims due deliveries by moving
//! their `next_attempt_at` past the attempt's time-out (a lease): a sender that dies
//! mid-attempt leaves them to be tried again once the lease runs out.

use std::collections::HashSet;
use std::sync::Arc;

use schemas::webhook::{DeliveryAttempt, Payload, Webhook};

use super::audit::AuditEntry;
use super::error::parsed;
use super::{placeholders, values_list, Store, StoreError};
use crate::clock::{ms_to_rfc3339, now_ms};

#[derive(sqlx::FromRow)]
struct WebhookRow {
    webhook_id: String,
    url: String,
    events: String,
    enabled: i64,
    payload: String,
    created_at: i64,
    updated_at: i64,
    disabled_reason: Option<String>,
    disabled_at: Option<i64>,
}

impl TryFrom<WebhookRow> for Webhook {
    type Error = StoreError;

    fn try_from(r: WebhookRow) -> Result<Self, StoreError> {
        let id = &r.webhook_id;
        Ok(Webhook {
            events: parsed(serde_json::from_str(&r.events), || {
                format!("webhook {id}: events")
            })?,
            payload: parsed(Payload::parse(&r.payload).ok_or(&r.payload), || {
                format!("webhook {id}: payload")
            })?,
            webhook_id: r.webhook_id,
            url: r.url,
            enabled: r.enabled != 0,
            created_at: ms_to_rfc3339(r.created_at),
            updated_at: ms_to_rfc3339(r.updated_at),
            disabled_reason: r.disabled_reason,
            disabled_at: r.disabled_at.map(ms_to_rfc3339),
        })
    }
}

const COLUMNS: &str =
    "webhook_id, url, events, enabled, payload, created_at, updated_at, disabled_reason, disabled_at";

#[derive(sqlx::FromRow)]
struct WithSecret {
    #[sqlx(flatten)]
    row: WebhookRow,
    secret: String,
}

/// A subscription's fields for writing.
#[derive(Debug, Clone)]
pub struct WebhookFields<'a> {
    pub url: &'a str,
    pub events: &'a [String],
    pub secret: &'a str,
    pub enabled: bool,
    pub payload: Payload,
}

/// What the dispatcher needs of an enabled subscription.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub webhook_id: String,
    pub events: Vec<String>,
    /// Its deliveries carry thin data (see `schemas::webhook::Payload`).
    pub thin: bool,
}

/// What asking for a redelivery came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redelivery {
    Scheduled,
    NotFound,
    /// The delivery's body is gone (older than the tenant's retention).
    Purged,
}

/// A new delivery.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    pub delivery_id: String,
    pub tenant_id: String,
    pub webhook_id: String,
    pub event_id: String,
    pub event: String,
    /// The unsigned body.
    pub payload: String,
    /// Written already claimed, with this lease, by the webhook stage that hands it to
    /// its sender (`crate::webhooks::Handoff`); due at once when `None`.
    pub leased_until: Option<i64>,
}

/// An enabled subscription with deliveries due: where and with what to sign.
#[derive(Clone, sqlx::FromRow)]
pub struct DueEndpoint {
    pub webhook_id: String,
    pub url: String,
    pub secret: String,
}

impl std::fmt::Debug for DueEndpoint {
    // The secret never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DueEndpoint")
            .field("webhook_id", &self.webhook_id)
            .finish_non_exhaustive()
    }
}

/// Endpoints claimed from per statement: each adds a sub-select and three parameters.
const ENDPOINTS_PER_CLAIM: usize = 50;

#[derive(sqlx::FromRow)]
struct ClaimedRow {
    delivery_id: String,
    webhook_id: String,
    event_id: String,
    event: String,
    payload: String,
    attempts: i64,
    failures: i64,
    replay: i64,
}

/// A delivery claimed for an attempt.
#[derive(Debug, Clone)]
pub struct DueDelivery {
    pub delivery_id: String,
    pub event_id: String,
    pub event: String,
    pub payload: String,
    /// Attempts made so far; this one is `attempts + 1`.
    pub attempts: i64,
    /// Failures in the current schedule.
    pub failures: i64,
    /// When this sender's claim on the delivery runs out (Unix ms).
    pub lease_until: i64,
    pub endpoint: Arc<DueEndpoint>,
    /// Part of a replay: sent with `X-Service-Replay: true`, and its end lets the
    /// replay's next delivery go.
    pub replay: bool,
}

/// How an attempt ended.
#[derive(Debug, Clone)]
pub struct AttemptOutcome {
    pub delivery_id: String,
    /// The subscription, for its health.
    pub webhook_id: String,
    /// Of a replay: its end releases the replay's next delivery.
    pub replay: bool,
    pub attempt: i64,
    pub status_code: Option<i64>,
    pub error: Option<String>,
    pub duration_ms: i64,
    pub at: i64,
    /// Set when another attempt is scheduled; `None` with `error` means failed for good.
    pub next_attempt_at: Option<i64>,
    /// Failures in the schedule after this attempt.
    pub failures: i64,
}

/// How a batch of attempts moves a subscription's streak of failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Streak {
    /// The batch has a success: the streak is the failures after the last one.
    Restart { failures: i64, since: Option<i64> },
    /// Failures only: they add to the streak.
    Extend { failures: i64, since: i64 },
}

/// Each subscription's move of its streak, from a batch of outcomes in any order.
/// The bounds of the delivery-duration buckets, in milliseconds, and the columns that
/// count the attempts within each (`0028_webhook_metrics.sql`).
pub const LATENCY_BUCKETS_MS: [i64; 8] = [50, 100, 250, 500, 1000, 2500, 5000, 10000];
const LATENCY_COLUMNS: [&str; 8] = [
    "attempts_le_50ms",
    "attempts_le_100ms",
    "attempts_le_250ms",
    "attempts_le_500ms",
    "attempts_le_1s",
    "attempts_le_2500ms",
    "attempts_le_5s",
    "attempts_le_10s",
];

/// A subscription's delivery attempts, counted since it was made: for `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttemptTotals {
    pub succeeded: i64,
    pub failed: i64,
    pub ms_sum: i64,
    /// Attempts that took at most each of [`LATENCY_BUCKETS_MS`].
    pub le: [i64; 8],
}

impl AttemptTotals {
    pub fn add(&mut self, other: &AttemptTotals) {
        self.succeeded += other.succeeded;
        self.failed += other.failed;
        self.ms_sum += other.ms_sum;
        for (a, b) in self.le.iter_mut().zip(other.le) {
            *a += b;
        }
    }
}

/// Per subscription, in the order of [`streaks`] (by id), what a batch adds to its
/// totals.
fn totals(outcomes: &[AttemptOutcome]) -> Vec<(&str, AttemptTotals)> {
    let mut by_webhook: std::collections::BTreeMap<&str, AttemptTotals> = Default::default();
    for o in outcomes {
        let t = by_webhook.entry(&o.webhook_id).or_default();
        match o.error {
            None => t.succeeded += 1,
            Some(_) => t.failed += 1,
        }
        t.ms_sum += o.duration_ms;
        for (le, bound) in t.le.iter_mut().zip(LATENCY_BUCKETS_MS) {
            *le += i64::from(o.duration_ms <= bound);
        }
    }
    by_webhook.into_iter().collect()
}

fn streaks(outcomes: &[AttemptOutcome]) -> Vec<(&str, Streak)> {
    let mut by_webhook: std::collections::BTreeMap<&str, Vec<&AttemptOutcome>> =
        std::collections::BTreeMap::new();
    for o in outcomes {
        by_webhook.entry(&o.webhook_id).or_default().push(o);
    }
    by_webhook
        .into_iter()
        .map(|(webhook_id, mut os)| {
            os.sort_by_key(|o| o.at);
            let last_success = os.iter().rposition(|o| o.error.is_none());
            let after = &os[last_success.map_or(0, |i| i + 1)..];
            let (failures, since) = (after.len() as i64, after.first().map(|o| o.at));
            let streak = match (last_success, since) {
                (None, Some(since)) => Streak::Extend { failures, since },
                _ => Streak::Restart { failures, since },
            };
            (webhook_id, streak)
        })
        .collect()
}

#[derive(sqlx::FromRow)]
struct AttemptRow {
    delivery_id: String,
    event_id: String,
    event: String,
    attempt: i64,
    status_code: Option<i64>,
    error: Option<String>,
    duration_ms: i64,
    at: i64,
    next_attempt_at: Option<i64>,
}

impl From<AttemptRow> for DeliveryAttempt {
    fn from(r: AttemptRow) -> Self {
        DeliveryAttempt {
            delivery_id: r.delivery_id,
            event_id: r.event_id,
            event: r.event,
            attempt: r.attempt,
            status_code: r.status_code,
            error: r.error,
            duration_ms: r.duration_ms,
            at: ms_to_rfc3339(r.at),
            next_attempt_at: r.next_attempt_at.map(ms_to_rfc3339),
        }
    }
}

/// The audit record of a subscription change: never its secret, only that it is set.
fn audit_entry(
    tenant_id: &str,
    actor: &str,
    action: &str,
    webhook_id: &str,
    w: Option<&WebhookFields<'_>>,
) -> AuditEntry {
    let details = w.map_or(
        serde_json::json!({}),
        |w| serde_json::json!({ "url": w.url, "events": w.events, "enabled": w.enabled, "payload": w.payload }),
    );
    AuditEntry::new(tenant_id, actor, action, ("webhook", webhook_id), details)
}

/// Rows per multi-row statement.
const ROWS_PER_STATEMENT: usize = 500;

impl Store {
    pub async fn create_webhook(
        &self,
        tenant_id: &str,
        webhook_id: &str,
        w: WebhookFields<'_>,
        actor: &str,
    ) -> Result<Webhook, StoreError> {
        let now = now_ms();
        let events =
            serde_json::to_string(w.events).map_err(|e| StoreError::Config(e.to_string()))?;
        let entry = audit_entry(tenant_id, actor, "webhook.created", webhook_id, Some(&w));
        let change = sqlx::query(
            "INSERT INTO webhooks (webhook_id, tenant_id, url, events, secret, enabled, payload, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
        )
        .bind(webhook_id)
        .bind(tenant_id)
        .bind(w.url)
        .bind(&events)
        .bind(w.secret)
        .bind(i64::from(w.enabled))
        .bind(w.payload.as_str())
        .bind(now);
        self.audited(change, entry).await?;
        Ok(Webhook {
            webhook_id: webhook_id.to_owned(),
            url: w.url.to_owned(),
            events: w.events.to_vec(),
            enabled: w.enabled,
            payload: w.payload,
            created_at: ms_to_rfc3339(now),
            updated_at: ms_to_rfc3339(now),
            disabled_reason: None,
            disabled_at: None,
        })
    }

    pub async fn webhook(
        &self,
        tenant_id: &str,
        webhook_id: &str,
    ) -> Result<Option<Webhook>, StoreError> {
        let row = sqlx::query_as::<_, WebhookRow>(&format!(
            "SELECT {COLUMNS} FROM webhooks WHERE tenant_id = $1 AND webhook_id = $2"
        ))
        .bind(tenant_id)
        .bind(webhook_id)
        .fetch_optional(self.writer())
        .await?;
        row.map(Webhook::try_from).transpose()
    }

    /// The tenant's subscriptions, ordered by id (ids are time-ordered).
    pub async fn webhooks(
        &self,
        tenant_id: &str,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Webhook>, StoreError> {
        let rows = sqlx::query_as::<_, WebhookRow>(&format!(
            "SELECT {COLUMNS} FROM webhooks WHERE tenant_id = $1 AND webhook_id > $2 ORDER BY webhook_id LIMIT $3"
        ))
        .bind(tenant_id)
        .bind(after.unwrap_or(""))
        .bind(limit)
        .fetch_all(self.reader())
        .await?;
        rows.into_iter().map(Webhook::try_from).collect()
    }

    /// Replaces a subscription's fields; `None` when it does not exist in this tenant.
    /// Replaces a subscription's fields. Enabling a disabled one clears why it was
    /// disabled and its streak of failures, which starts anew.
    pub async fn update_webhook(
        &self,
        tenant_id: &str,
        webhook_id: &str,
        w: WebhookFields<'_>,
        actor: &str,
    ) -> Result<Option<Webhook>, StoreError> {
        let events =
            serde_json::to_string(w.events).map_err(|e| StoreError::Config(e.to_string()))?;
        let entry = audit_entry(tenant_id, actor, "webhook.changed", webhook_id, Some(&w));
        let mut tx = self.writer().begin().await?;
        let row = sqlx::query_as::<_, WebhookRow>(&format!(
            "UPDATE webhooks SET url = $1, events = $2, secret = $3, enabled = $4, payload = $5, \
             updated_at = $6, \
             streak_failures = CASE WHEN $4 = 1 AND enabled = 0 THEN 0 ELSE streak_failures END, \
             streak_since = CASE WHEN $4 = 1 AND enabled = 0 THEN NULL ELSE streak_since END, \
             disabled_reason = CASE WHEN $4 = 1 THEN NULL ELSE disabled_reason END, \
             disabled_at = CASE WHEN $4 = 1 THEN NULL ELSE disabled_at END \
             WHERE tenant_id = $7 AND webhook_id = $8 RETURNING {COLUMNS}"
        ))
        .bind(w.url)
        .bind(&events)
        .bind(w.secret)
        .bind(i64::from(w.enabled))
        .bind(w.payload.as_str())
        .bind(now_ms())
        .bind(tenant_id)
        .bind(webhook_id)
        .fetch_optional(&mut *tx)
        .await?;
        if row.is_some() {
            self.append_audit_in(&mut tx, &[entry]).await?;
        }
        tx.commit().await?;
        row.map(Webhook::try_from).transpose()
    }

    /// A subscription with its stored secret, for a PATCH that may keep it.
    pub async fn webhook_with_secret(
        &self,
        tenant_id: &str,
        webhook_id: &str,
    ) -> Result<Option<(Webhook, String)>, StoreError> {
        let row = sqlx::query_as::<_, WithSecret>(&format!(
            "SELECT {COLUMNS}, secret FROM webhooks WHERE tenant_id = $1 AND webhook_id = $2"
        ))
        .bind(tenant_id)
        .bind(webhook_id)
        .fetch_optional(self.writer())
        .await?;
        row.map(|r| Ok((Webhook::try_from(r.row)?, r.secret)))
            .transpose()
    }

    /// Deletes a subscription and cancels its pending deliveries; `false` when it does
    /// not exist in this tenant. Its delivery log goes with it.
    pub async fn delete_webhook(
        &self,
        tenant_id: &str,
        webhook_id: &str,
        actor: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self.writer().begin().await?;
        let gone = sqlx::query("DELETE FROM webhooks WHERE tenant_id = $1 AND webhook_id = $2")
            .bind(tenant_id)
            .bind(webhook_id)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            == 1;
        if gone {
            for table in ["webhook_deliveries", "webhook_attempts"] {
                sqlx::query(&format!(
                    "DELETE FROM {table} WHERE tenant_id = $1 AND webhook_id = $2"
                ))
                .bind(tenant_id)
                .bind(webhook_id)
                .execute(&mut *tx)
                .await?;
            }
            let entry = audit_entry(tenant_id, actor, "webhook.deleted", webhook_id, None);
            self.append_audit_in(&mut tx, &[entry]).await?;
        }
        tx.commit().await?;
        Ok(gone)
    }

    /// The enabled subscriptions of a tenant, each with where and how its deliveries
    /// are sent.
    pub async fn subscriptions(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<(Subscription, Arc<DueEndpoint>)>, StoreError> {
        let rows: Vec<(String, String, String, String, String)> = sqlx::query_as(
            "SELECT webhook_id, events, payload, url, secret FROM webhooks WHERE tenant_id = $1 AND enabled = 1",
        )
        .bind(tenant_id)
        .fetch_all(self.reader())
        .await?;
        rows.into_iter()
            .map(|(webhook_id, events, payload, url, secret)| {
                let subscription = Subscription {
                    events: parsed(serde_json::from_str(&events), || {
                        format!("webhook {webhook_id}: events")
                    })?,
                    thin: parsed(Payload::parse(&payload).ok_or(&payload), || {
                        format!("webhook {webhook_id}: payload")
                    })? == Payload::Thin,
                    webhook_id: webhook_id.clone(),
                };
                let endpoint = DueEndpoint {
                    webhook_id,
                    url,
                    secret,
                };
                Ok((subscription, Arc::new(endpoint)))
            })
            .collect()
    }

    /// Which of `deliveries` are queued already: read without the writer, so that a
    /// batch of events whose deliveries were queued with them costs it nothing.
    pub async fn queued_already(
        &self,
        deliveries: &[NewDelivery],
    ) -> Result<HashSet<String>, StoreError> {
        let mut found = HashSet::new();
        for chunk in deliveries.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "SELECT delivery_id FROM webhook_deliveries WHERE delivery_id IN ({})",
                placeholders(self.backend(), 1, chunk.len())
            );
            let mut q = sqlx::query_scalar::<_, String>(&sql);
            for d in chunk {
                q = q.bind(&d.delivery_id);
            }
            found.extend(q.fetch_all(self.reader()).await?);
        }
        Ok(found)
    }

    /// Queues deliveries of enabled subscriptions, due at once or leased to the sender
    /// of this process, inside `tx` with the caller's other writes; a delivery queued
    /// before is left as it is, so a redelivered event never queues twice. Answers the
    /// ids of the deliveries queued now.
    pub async fn enqueue_deliveries_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        deliveries: &[NewDelivery],
    ) -> Result<HashSet<String>, StoreError> {
        let now = now_ms();
        let mut queued = HashSet::with_capacity(deliveries.len());
        for chunk in deliveries.chunks(ROWS_PER_STATEMENT) {
            // Only for a subscription enabled as the row is written: one deleted or
            // disabled since its subscriptions were read (before the writer was taken)
            // gets nothing more.
            let sql = format!(
                "INSERT INTO webhook_deliveries (delivery_id, tenant_id, webhook_id, event_id, event, payload, \
                 state, attempts, failures, next_attempt_at, created_at) \
                 SELECT v.column1, v.column2, v.column3, v.column4, v.column5, v.column6, v.column7, v.column8, \
                 v.column9, v.column10, v.column11 FROM (VALUES {}) AS v \
                 JOIN webhooks w ON w.webhook_id = v.column3 AND w.tenant_id = v.column2 AND w.enabled = 1 \
                 WHERE true ON CONFLICT DO NOTHING RETURNING delivery_id",
                values_list(self.backend(), chunk.len(), 11)
            );
            let mut q = sqlx::query_scalar::<_, String>(&sql);
            for d in chunk {
                q = q
                    .bind(&d.delivery_id)
                    .bind(&d.tenant_id)
                    .bind(&d.webhook_id)
                    .bind(&d.event_id)
                    .bind(&d.event)
                    .bind(&d.payload)
                    .bind("pending")
                    .bind(0i64)
                    .bind(0i64)
                    .bind(d.leased_until.unwrap_or(now))
                    .bind(now);
            }
            queued.extend(q.fetch_all(&mut **tx).await?);
        }
        Ok(queued)
    }

    /// Queues a replay: `deliveries` in the order their events happened, as one lane
    /// (`job_id`) of which only the first is due; each of the others waits, `held`,
    /// until the one before it ends.
    pub async fn enqueue_replay(
        &self,
        job_id: &str,
        deliveries: &[NewDelivery],
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.writer().begin().await?;
        for (n, chunk) in deliveries.chunks(ROWS_PER_STATEMENT).enumerate() {
            let sql = format!(
                "INSERT INTO webhook_deliveries (delivery_id, tenant_id, webhook_id, event_id, event, payload, \
                 state, attempts, failures, next_attempt_at, created_at, replay_job, replay_seq) VALUES {}",
                values_list(self.backend(), chunk.len(), 13)
            );
            let mut q = sqlx::query(&sql);
            for (i, d) in chunk.iter().enumerate() {
                let seq = (n * ROWS_PER_STATEMENT + i) as i64;
                q = q
                    .bind(&d.delivery_id)
                    .bind(&d.tenant_id)
                    .bind(&d.webhook_id)
                    .bind(&d.event_id)
                    .bind(&d.event)
                    .bind(&d.payload)
                    .bind(if seq == 0 { "pending" } else { "held" })
                    .bind(0i64)
                    .bind(0i64)
                    .bind(now)
                    .bind(now)
                    .bind(job_id)
                    .bind(seq);
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A replay's progress as a job: its deliveries delivered and failed, and whether
    /// any is still to go; `None` when the tenant has no replay of that id.
    pub async fn replay_job(
        &self,
        tenant_id: &str,
        job_id: &str,
    ) -> Result<Option<schemas::job::JobView>, StoreError> {
        let (total, done, failed): (i64, Option<i64>, Option<i64>) = sqlx::query_as(
            "SELECT COUNT(*), SUM(CASE WHEN state = 'delivered' THEN 1 ELSE 0 END), \
             SUM(CASE WHEN state = 'failed' THEN 1 ELSE 0 END) FROM webhook_deliveries \
             WHERE replay_job = $1 AND tenant_id = $2",
        )
        .bind(job_id)
        .bind(tenant_id)
        .fetch_one(self.reader())
        .await?;
        if total == 0 {
            return Ok(None);
        }
        let (done, failed) = (done.unwrap_or(0), failed.unwrap_or(0));
        Ok(Some(schemas::job::JobView {
            job_id: job_id.to_owned(),
            state: if done + failed == total {
                schemas::job::JobState::Done
            } else {
                schemas::job::JobState::Running
            },
            total,
            done,
            failed,
        }))
    }

    /// Enabled subscriptions with a delivery due at `now`: where the sender looks for
    /// work. One index seek per subscription (`webhook_deliveries_by_webhook`), so a
    /// long backlog of one endpoint costs nothing here.
    pub async fn due_endpoints(&self, now: i64) -> Result<Vec<DueEndpoint>, StoreError> {
        let sql = format!(
            "SELECT w.webhook_id, w.url, w.secret FROM webhooks w WHERE w.enabled = 1 AND EXISTS \
             (SELECT 1 FROM webhook_deliveries d WHERE d.webhook_id = w.webhook_id AND d.state = 'pending' \
             AND d.next_attempt_at <= {}) ORDER BY w.webhook_id",
            placeholders(self.backend(), 1, 1)
        );
        Ok(sqlx::query_as::<_, DueEndpoint>(&sql)
            .bind(now)
            .fetch_all(self.reader())
            .await?)
    }

    /// Claims up to `want` due deliveries of each endpoint, oldest due first, by moving
    /// their `next_attempt_at` to `lease_until`, in one statement per
    /// [`ENDPOINTS_PER_CLAIM`] endpoints. The outer condition is checked again on each
    /// row, so of two senders (two processes) racing for a delivery only one gets it.
    pub async fn claim_deliveries(
        &self,
        now: i64,
        lease_until: i64,
        wants: &[(Arc<DueEndpoint>, usize)],
    ) -> Result<Vec<DueDelivery>, StoreError> {
        let by_id: std::collections::HashMap<&str, &Arc<DueEndpoint>> = wants
            .iter()
            .map(|(e, _)| (e.webhook_id.as_str(), e))
            .collect();
        let mut claimed = Vec::new();
        for chunk in wants.chunks(ENDPOINTS_PER_CLAIM) {
            let b = self.backend();
            let arms: Vec<String> = (0..chunk.len())
                .map(|i| {
                    let p = 3 + 3 * i;
                    format!(
                        "SELECT delivery_id FROM (SELECT delivery_id FROM webhook_deliveries WHERE webhook_id = {} \
                         AND state = 'pending' AND next_attempt_at <= {} ORDER BY next_attempt_at LIMIT {}) AS a{i}",
                        placeholders(b, p, 1),
                        placeholders(b, p + 1, 1),
                        placeholders(b, p + 2, 1),
                    )
                })
                .collect();
            // `state || ''` and `+ 0` keep SQLite's planner off the (state, due) index:
            // with it, it walked every due delivery of the backlog and tested each
            // against the list, instead of looking the listed ids up by key.
            let sql = format!(
                "UPDATE webhook_deliveries SET next_attempt_at = {} WHERE state || '' = 'pending' \
                 AND next_attempt_at + 0 <= {} AND delivery_id IN ({}) RETURNING delivery_id, webhook_id, event_id, event, payload, attempts, failures, \
                 CASE WHEN replay_job IS NULL THEN 0 ELSE 1 END AS replay",
                placeholders(b, 1, 1),
                placeholders(b, 2, 1),
                arms.join(" UNION ALL ")
            );
            let mut q = sqlx::query_as::<_, ClaimedRow>(&sql)
                .bind(lease_until)
                .bind(now);
            for (endpoint, want) in chunk {
                q = q.bind(&endpoint.webhook_id).bind(now).bind(*want as i64);
            }
            for row in q.fetch_all(self.writer()).await? {
                if let Some(endpoint) = by_id.get(row.webhook_id.as_str()) {
                    claimed.push(DueDelivery {
                        delivery_id: row.delivery_id,
                        event_id: row.event_id,
                        event: row.event,
                        payload: row.payload,
                        attempts: row.attempts,
                        failures: row.failures,
                        lease_until,
                        endpoint: (*endpoint).clone(),
                        replay: row.replay != 0,
                    });
                }
            }
        }
        Ok(claimed)
    }

    /// The earliest time a pending delivery is due, to sleep until then.
    pub async fn next_delivery_due(&self) -> Result<Option<i64>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT MIN(next_attempt_at) FROM webhook_deliveries WHERE state = 'pending'",
        )
        .fetch_one(self.reader())
        .await?)
    }

    /// Records attempts and moves their deliveries on: delivered, scheduled again, or
    /// failed. A delivery cancelled meanwhile (subscription deleted) stays gone.
    pub async fn record_attempts(&self, outcomes: &[AttemptOutcome]) -> Result<(), StoreError> {
        if outcomes.is_empty() {
            return Ok(());
        }
        let asked = std::time::Instant::now();
        let mut tx = self.writer().begin().await?;
        let taken = std::time::Instant::now();
        for chunk in outcomes.chunks(ROWS_PER_STATEMENT) {
            // The attempt log: tenant and subscription come from the delivery row.
            let sql = format!(
                "INSERT INTO webhook_attempts (delivery_id, attempt, tenant_id, webhook_id, status_code, error, \
                 duration_ms, at, next_attempt_at) \
                 SELECT v.column1, v.column2, d.tenant_id, d.webhook_id, v.column3, v.column4, v.column5, v.column6, v.column7 \
                 FROM (VALUES {}) AS v JOIN webhook_deliveries d ON d.delivery_id = v.column1 WHERE true \
                 ON CONFLICT DO NOTHING",
                values_list(self.backend(), chunk.len(), 7)
            );
            let mut q = sqlx::query(&sql);
            for o in chunk {
                q = q
                    .bind(&o.delivery_id)
                    .bind(o.attempt)
                    .bind(o.status_code)
                    .bind(o.error.as_deref())
                    .bind(o.duration_ms)
                    .bind(o.at)
                    .bind(o.next_attempt_at);
            }
            q.execute(&mut *tx).await?;
            let sql = format!(
                "UPDATE webhook_deliveries SET state = v.column2, attempts = v.column3, failures = v.column4, \
                 next_attempt_at = v.column5 FROM (VALUES {}) AS v \
                 WHERE webhook_deliveries.delivery_id = v.column1 AND webhook_deliveries.state = 'pending'",
                values_list(self.backend(), chunk.len(), 5)
            );
            let mut q = sqlx::query(&sql);
            for o in chunk {
                let state = match (&o.error, o.next_attempt_at) {
                    (None, _) => "delivered",
                    (Some(_), Some(_)) => "pending",
                    (Some(_), None) => "failed",
                };
                q = q
                    .bind(&o.delivery_id)
                    .bind(state)
                    .bind(o.attempt)
                    .bind(o.failures)
                    .bind(o.next_attempt_at);
            }
            q.execute(&mut *tx).await?;
        }
        // A replay's delivery that ended lets the replay's next one go.
        for o in outcomes.iter().filter(|o| o.replay) {
            if o.error.is_some() && o.next_attempt_at.is_some() {
                continue;
            }
            sqlx::query(
                "UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = $1 \
                 WHERE state = 'held' \
                 AND replay_job = (SELECT replay_job FROM webhook_deliveries WHERE delivery_id = $2) \
                 AND replay_seq = (SELECT replay_seq + 1 FROM webhook_deliveries WHERE delivery_id = $2)",
            )
            .bind(o.at)
            .bind(&o.delivery_id)
            .execute(&mut *tx)
            .await?;
        }
        let mut totals = totals(outcomes).into_iter();
        for (webhook_id, streak) in streaks(outcomes) {
            let t = totals.next().map(|(_, t)| t).unwrap_or_default();
            sqlx::query(&format!(
                "UPDATE webhooks SET attempts_succeeded = attempts_succeeded + $1, \
                 attempts_failed = attempts_failed + $2, attempts_ms_sum = attempts_ms_sum + $3, {} \
                 WHERE webhook_id = $12",
                LATENCY_COLUMNS
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("{c} = {c} + ${}", i + 4))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .bind(t.succeeded)
            .bind(t.failed)
            .bind(t.ms_sum)
            .bind(t.le[0])
            .bind(t.le[1])
            .bind(t.le[2])
            .bind(t.le[3])
            .bind(t.le[4])
            .bind(t.le[5])
            .bind(t.le[6])
            .bind(t.le[7])
            .bind(webhook_id)
            .execute(&mut *tx)
            .await?;
            let q = match streak {
                // A success ends the streak; the failures after it start the next.
                Streak::Restart { failures, since } => sqlx::query(
                    "UPDATE webhooks SET streak_failures = $1, streak_since = $2 WHERE webhook_id = $3",
                )
                .bind(failures)
                .bind(since),
                Streak::Extend { failures, since } => sqlx::query(
                    "UPDATE webhooks SET streak_failures = streak_failures + $1, \
                     streak_since = COALESCE(streak_since, $2) WHERE webhook_id = $3",
                )
                .bind(failures)
                .bind(since),
            };
            q.bind(webhook_id).execute(&mut *tx).await?;
        }
        let written = std::time::Instant::now();
        tx.commit().await?;
        tracing::debug!(n = outcomes.len(), waited = ?(taken - asked), writing = ?(written - taken), syncing = ?written.elapsed(), "Attempts written.");
        Ok(())
    }

    /// Every subscription's attempt totals with its tenant, those with attempts only.
    pub async fn attempt_totals(&self) -> Result<Vec<(String, String, AttemptTotals)>, StoreError> {
        let sql = format!(
            "SELECT tenant_id, webhook_id, attempts_succeeded, attempts_failed, attempts_ms_sum, {} \
             FROM webhooks WHERE attempts_succeeded + attempts_failed > 0 ORDER BY tenant_id, webhook_id",
            LATENCY_COLUMNS.join(", ")
        );
        let rows = sqlx::query(&sql).fetch_all(self.reader()).await?;
        rows.iter()
            .map(|r| {
                use sqlx::Row;
                let mut le = [0i64; 8];
                for (i, v) in le.iter_mut().enumerate() {
                    *v = r.try_get(5 + i)?;
                }
                Ok((
                    r.try_get(0)?,
                    r.try_get(1)?,
                    AttemptTotals {
                        succeeded: r.try_get(2)?,
                        failed: r.try_get(3)?,
                        ms_sum: r.try_get(4)?,
                        le,
                    },
                ))
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// The attempt log of a subscription, newest first. The cursor is the last
    /// attempt's `(at, delivery_id, attempt)`.
    pub async fn delivery_attempts(
        &self,
        tenant_id: &str,
        webhook_id: &str,
        before: Option<(i64, String, i64)>,
        limit: i64,
    ) -> Result<Vec<(DeliveryAttempt, (i64, String, i64))>, StoreError> {
        let (at, id, n) = before.unwrap_or((i64::MAX, String::new(), 0));
        let rows = sqlx::query_as::<_, AttemptRow>(
            "SELECT a.delivery_id, d.event_id, d.event, a.attempt, a.status_code, a.error, a.duration_ms, a.at, \
             a.next_attempt_at FROM webhook_attempts a JOIN webhook_deliveries d ON d.delivery_id = a.delivery_id \
             WHERE a.tenant_id = $1 AND a.webhook_id = $2 \
             AND (a.at < $3 OR (a.at = $3 AND (a.delivery_id > $4 OR (a.delivery_id = $4 AND a.attempt < $5)))) \
             ORDER BY a.at DESC, a.delivery_id, a.attempt DESC LIMIT $6",
        )
        .bind(tenant_id)
        .bind(webhook_id)
        .bind(at)
        .bind(&id)
        .bind(n)
        .bind(limit)
        .fetch_all(self.reader())
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let key = (r.at, r.delivery_id.clone(), r.attempt);
                (DeliveryAttempt::from(r), key)
            })
            .collect())
    }

    /// Schedules a delivery of this subscription again, at once, with a fresh retry
    /// schedule, unless its body was purged (see [`Self::purge_delivery_bodies`]).
    pub async fn redeliver(
        &self,
        tenant_id: &str,
        webhook_id: &str,
        delivery_id: &str,
    ) -> Result<Redelivery, StoreError> {
        let scheduled = sqlx::query(
            "UPDATE webhook_deliveries SET state = 'pending', failures = 0, next_attempt_at = $1 \
             WHERE tenant_id = $2 AND webhook_id = $3 AND delivery_id = $4 AND payload <> ''",
        )
        .bind(now_ms())
        .bind(tenant_id)
        .bind(webhook_id)
        .bind(delivery_id)
        .execute(self.writer())
        .await?
        .rows_affected()
            == 1;
        if scheduled {
            return Ok(Redelivery::Scheduled);
        }
        let exists: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM webhook_deliveries WHERE tenant_id = $1 AND webhook_id = $2 AND delivery_id = $3",
        )
        .bind(tenant_id)
        .bind(webhook_id)
        .bind(delivery_id)
        .fetch_optional(self.writer())
        .await?;
        Ok(match exists {
            Some(_) => Redelivery::Purged,
            None => Redelivery::NotFound,
        })
    }

    /// Drops the bodies of the tenant's finished deliveries created before
    /// `before_ms` (delivery-log retention); their rows and their attempts' rows stay,
    /// and a delivery still being retried keeps its body. Answers how many lost it.
    pub async fn purge_delivery_bodies(
        &self,
        tenant_id: &str,
        before_ms: i64,
    ) -> Result<u64, StoreError> {
        Ok(sqlx::query(
            "UPDATE webhook_deliveries SET payload = '' \
             WHERE tenant_id = $1 AND created_at < $2 AND state <> 'pending' AND payload <> ''",
        )
        .bind(tenant_id)
        .bind(before_ms)
        .execute(self.writer())
        .await?
        .rows_affected())
    }

    /// Every tenant's id, for upkeep that goes tenant by tenant.
    pub async fn tenant_ids(&self) -> Result<Vec<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT tenant_id FROM tenants ORDER BY tenant_id")
                .fetch_all(self.reader())
                .await?,
        )
    }
}

#[cfg(test)]
mod streak_tests {
    use super::*;

    fn outcome(webhook_id: &str, at: i64, ok: bool) -> AttemptOutcome {
        AttemptOutcome {
            delivery_id: format!("dlv_{at}"),
            webhook_id: webhook_id.into(),
            replay: false,
            attempt: 1,
            status_code: Some(if ok { 200 } else { 500 }),
            error: (!ok).then(|| "the receiver answered 500".into()),
            duration_ms: 1,
            at,
            next_attempt_at: None,
            failures: 0,
        }
    }

    #[test]
    fn a_success_restarts_the_streak_and_failures_alone_extend_it() {
        let batch = [
            outcome("wh_a", 30, false),
            outcome("wh_a", 10, false),
            outcome("wh_a", 20, true),
            outcome("wh_b", 7, false),
            outcome("wh_b", 5, false),
            outcome("wh_c", 9, true),
        ];
        assert_eq!(
            streaks(&batch),
            [
                (
                    "wh_a",
                    Streak::Restart {
                        failures: 1,
                        since: Some(30)
                    }
                ),
                (
                    "wh_b",
                    Streak::Extend {
                        failures: 2,
                        since: 5
                    }
                ),
                (
                    "wh_c",
                    Streak::Restart {
                        failures: 0,
                        since: None
                    }
                ),
            ]
        );
    }
}
