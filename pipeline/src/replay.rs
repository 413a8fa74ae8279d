//! Webhook replay (`POST /webhooks/{webhook_id}/replay`): every event of the tenant in a
//! window, of the kinds asked and subscribed, read back from the events topic and
//! delivered again to one subscription in the order they happened. Each is signed as
//! any delivery, with its own event id, and sent with `X-Service-Replay: true`.
//!
//! The replay is a lane of deliveries of its own (see `enqueue_replay`): one at a time,
//! each after the one before ended, so the receiver sees them in order and the
//! subscription never has more than one replayed delivery in flight. Live deliveries of
//! the same subscription go on beside it, and other subscriptions' are not touched: the
//! sender's per-subscription slots keep them apart.

use schemas::webhook::Webhook;
use schemas::TenantId;

use crate::bus::Bus;
use crate::clock::parse_rfc3339_ms;
use crate::model::DomainEvent;
use crate::stages::webhooks::process;
use crate::store::{Store, StoreError, Subscription};
use crate::topics::Topics;

/// What to replay: events with `since <= timestamp < until` of `kinds`.
#[derive(Debug, Clone)]
pub struct Window {
    pub since_ms: i64,
    pub until_ms: Option<i64>,
    pub kinds: Vec<String>,
}

/// The events of `tenant_id` in `window`, in the order they happened (their time, then
/// the topic's order). The topic is read a page at a time: only the matches are held.
pub async fn events(
    bus: &Bus,
    topics: &Topics,
    tenant_id: &TenantId,
    window: &Window,
) -> Result<Vec<DomainEvent>, StoreError> {
    const PAGE: i64 = 4000;
    let into_store = crate::intake::into_store;
    let mut found: Vec<(i64, (u32, i64), DomainEvent)> = Vec::new();
    let extent = bus.extent(&topics.events).await.map_err(into_store)?;
    let mut pages = bus.pages(&topics.events, extent, PAGE);
    while let Some(page) = pages.next().await.map_err(into_store)? {
        for r in &page {
            // A record that does not decode was parked by the webhooks stage already.
            let Ok(e) = serde_json::from_slice::<DomainEvent>(&r.value) else {
                continue;
            };
            if &e.tenant_id != tenant_id || !window.kinds.contains(&e.event) {
                continue;
            }
            let Some(at) = parse_rfc3339_ms(&e.timestamp) else {
                continue;
            };
            if at >= window.since_ms && window.until_ms.is_none_or(|u| at < u) {
                found.push((at, (r.partition, r.offset), e));
            }
        }
    }
    found.sort_by_key(|(at, i, _)| (*at, *i));
    Ok(found.into_iter().map(|(_, _, e)| e).collect())
}

/// Queues the replay of `window` to `webhook`; answers its job id and how many events
/// it delivers.
pub async fn start(
    store: &Store,
    bus: &Bus,
    topics: &Topics,
    tenant_id: &TenantId,
    webhook: &Webhook,
    window: &Window,
) -> Result<(String, usize), StoreError> {
    let events = events(bus, topics, tenant_id, window).await?;
    let subscription = Subscription {
        webhook_id: webhook.webhook_id.clone(),
        events: window.kinds.clone(),
        thin: webhook.payload == schemas::webhook::Payload::Thin,
    };
    let job_id = format!("rpl_{}", uuid::Uuid::now_v7().simple());
    let deliveries: Vec<_> = events
        .iter()
        .flat_map(|e| process(e, std::slice::from_ref(&subscription)))
        .map(|mut d| {
            // A delivery of its own: the event's first delivery keeps its log.
            d.delivery_id = format!("dlv_{}", uuid::Uuid::now_v7().simple());
            d
        })
        .collect();
    if !deliveries.is_empty() {
        store
            .enqueue_replay(&job_id, &deliveries, crate::clock::now_ms())
            .await?;
    }
    Ok((job_id, deliveries.len()))
}
