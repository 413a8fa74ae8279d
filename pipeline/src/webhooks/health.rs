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

/// `webhook.disabled` of a subscription disabled at `at`. Its id names the time too: a
/// subscription enabled again can be disabled again, and a receiver that drops an event
/// id it has seen (the `webhook-id` header is the event's id, as Standard Webhooks
/// libraries expect) would otherwise drop the second one. The store disables a
/// subscription once per time (the row says when), so the event is made once.
pub fn disabled_event(tenant_id: &TenantId, webhook_id: &str, url: &str, at: i64) -> DomainEvent {
    let at_text = ms_to_rfc3339(at);
    DomainEvent::occurrence(
        EventKind::WebhookDisabled,
        tenant_id,
        webhook_id,
        Some(&at.to_string()),
        at_text.clone(),
        serde_json::json!({
            "webhook_id": webhook_id,
            "url": url,
            "reason": REASON,
            "disabled_at": at_text,
        }),
    )
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
        let event = disabled_event(&tenant_id, webhook_id, &d.url, d.at);
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

    #[test]
    fn each_disabling_of_a_subscription_is_an_event_of_its_own() {
        let acme = TenantId::parse("acme").unwrap();
        let first = disabled_event(&acme, "wh_1", "https://example.com/h", 1_000);
        let again = disabled_event(&acme, "wh_1", "https://example.com/h", 1_000);
        let later = disabled_event(&acme, "wh_1", "https://example.com/h", 90_000_000);
        let other = disabled_event(&acme, "wh_2", "https://example.com/h", 1_000);
        assert_eq!(first, again, "made again, the same event");
        assert_ne!(first.id, later.id, "disabled again later: another event");
        assert_ne!(first.id, other.id);
        assert_eq!(later.event, "webhook.disabled");
        assert_eq!(later.value()["disabled_at"], later.timestamp.as_str());
    }
}
