//! Endpoint health: after each batch of recorded attempts, a subscription whose
//! attempts have all failed for 24 hours, at least 20 of them, is disabled and a
//! `webhook.disabled` event goes out (to the tenant's other subscriptions that name it).
//! Senders keep trying a failing endpoint until then, on each delivery's schedule;
//! afterwards its deliveries wait, pending, until it is enabled again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use schemas::TenantId;

use crate::bus::{Bus, Message, TopicSpec};
use crate::clock::{ms_to_rfc3339, Clock};
use crate::model::{DomainEvent, EventKind};
use crate::store::{AttemptOutcome, Store, StoreError};

/// How long a subscription's attempts must all have failed before it is disabled.
pub const FAILING_FOR: Duration = Duration::from_secs(24 * 3600);
/// And how many failures that must be at least: a day of a rare event is not a day of
/// evidence.
pub const MIN_FAILURES: i64 = 20;
/// A subscription's streak is looked at most this often: the look is two indexed reads.
const CHECK_EVERY: Duration = Duration::from_secs(1);

pub const REASON: &str = "every delivery failed for 24 hours (at least 20 attempts)";

/// Whether a streak of failures disables its subscription at `now`.
pub fn disables(failures: i64, since: Option<i64>, now: i64) -> bool {
    failures >= MIN_FAILURES && since.is_some_and(|s| now - s >= FAILING_FOR.as_millis() as i64)
}

#[derive(Debug, Clone)]
pub struct Health {
    pub store: Store,
    pub bus: Bus,
    pub events: TopicSpec,
    pub clock: Clock,
    checked: HashMap<String, Instant>,
}

impl Health {
    pub fn new(store: Store, bus: Bus, events: TopicSpec, clock: Clock) -> Self {
        Self {
            store,
            bus,
            events,
            clock,
            checked: HashMap::new(),
        }
    }

    /// Looks at the subscriptions that failed in `outcomes`; disables the ones whose
    /// failures have lasted a day.
    pub async fn after(&mut self, outcomes: &[AttemptOutcome]) -> Result<(), StoreError> {
        let mut failing: Vec<&str> = outcomes
            .iter()
            .filter(|o| o.error.is_some())
            .map(|o| o.webhook_id.as_str())
            .collect();
        failing.sort_unstable();
        failing.dedup();
        for webhook_id in failing {
            if self
                .checked
                .get(webhook_id)
                .is_some_and(|t| t.elapsed() < CHECK_EVERY)
            {
                continue;
            }
            self.checked.insert(webhook_id.to_owned(), Instant::now());
            let streak = self.store.failing_streak(webhook_id).await?;
            let now = self.clock.now_ms();
            if disables(streak.failures, streak.since, now) {
                self.disable(webhook_id, now).await?;
            }
        }
        // Forget the quiet ones, so the map stays as small as the failing set.
        self.checked.retain(|_, t| t.elapsed() < CHECK_EVERY * 60);
        Ok(())
    }

    async fn disable(&self, webhook_id: &str, now: i64) -> Result<(), StoreError> {
        let mut tx = self.store.begin_write().await?;
        let Some(d) = self
            .store
            .disable_webhook_in(&mut tx, webhook_id, REASON, now)
            .await?
        else {
            return Ok(());
        };
        let tenant_id = TenantId::parse(&d.tenant_id)
            .map_err(|e| StoreError::Corrupt(format!("webhook {webhook_id}: tenant id: {e}")))?;
        let event = DomainEvent::new(
            EventKind::WebhookDisabled,
            &tenant_id,
            webhook_id,
            ms_to_rfc3339(d.at),
            serde_json::json!({
                "webhook_id": webhook_id,
                "url": d.url,
                "reason": REASON,
                "disabled_at": ms_to_rfc3339(d.at),
            }),
        );
        let message = Message {
            key: format!("{}/{webhook_id}", d.tenant_id),
            value: serde_json::to_vec(&event).map_err(|e| StoreError::Config(e.to_string()))?,
        };
        self.bus
            .append_in(&mut tx, &self.events, &[message])
            .await
            .map_err(crate::intake::into_store)?;
        tx.commit().await?;
        self.bus.wake(&self.events.name);
        tracing::warn!(%webhook_id, tenant_id = %d.tenant_id, "A webhook subscription failed every delivery for a day; disabled.");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_of_at_least_twenty_failures_disables() {
        let day = FAILING_FOR.as_millis() as i64;
        assert!(disables(20, Some(0), day));
        assert!(!disables(19, Some(0), day), "too few");
        assert!(!disables(500, Some(1), day), "not a day yet");
        assert!(!disables(0, None, day));
    }
}
