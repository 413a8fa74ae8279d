//! Stage 6, webhooks: input `claims.events`. Fans each event out to the tenant's enabled
//! subscriptions of its kind as queued deliveries, and hands them to the sender of its
//! process already claimed (or, when it has no room, wakes it to claim them). Delivery ids
//! derive from the subscription and the event, so a redelivered event queues nothing
//! new. The attempts themselves are the sender's (`crate::webhooks`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio::sync::Notify;

use super::passed::Passed;
use super::runner::{by_topic, decode_all, handle_then_publish, Outputs, Stage, StageError};
use crate::bus::{Consumer, Record, TopicSpec};
use crate::clock::parse_rfc3339_ms;
use crate::model::{ordered_name_id, DomainEvent, Json};
use crate::store::{DueDelivery, DueEndpoint, NewDelivery, Store, StoreError, Subscription};
use crate::topics::Topics;
use crate::webhooks::signing::{unsigned_body, Envelope};
use crate::webhooks::{Handoff, Reserved};

/// The delivery of `event` to `webhook_id`: the same on every redelivery of the event's
/// record. It sorts by the event's time ([`ordered_name_id`]): deliveries and their
/// attempts are keyed by it, and a random id put each insert on a page of its own in
/// both tables' keys, so every batch rewrote a page per delivery there, more of them the
/// larger the tables grew. The delivery id is the only key that keeps an event queued
/// once, so an event must keep its time: a claim decided again later (on Kafka, by a
/// decide stage that crashed before its commit) is held by the store only if its time
/// is the first decision's, and its events are published only then
/// (`Store::write_decisions`; docs/decisions.md, "Webhooks").
pub fn delivery_id(webhook_id: &str, event: &DomainEvent) -> String {
    let at = parse_rfc3339_ms(&event.timestamp).unwrap_or(0);
    ordered_name_id("dlv", at, &format!("{webhook_id}/{}", event.id))
}

/// The pure core: the deliveries of one event, each with the body its subscription
/// takes (the event whole, or thin).
pub fn process(event: &DomainEvent, subscriptions: &[Subscription]) -> Vec<NewDelivery> {
    let matching: Vec<&Subscription> = subscriptions
        .iter()
        .filter(|s| s.events.contains(&event.event))
        .collect();
    if matching.is_empty() {
        return Vec::new();
    }
    let body = |data: &serde_json::value::RawValue| {
        String::from_utf8(unsigned_body(&Envelope {
            id: &event.id,
            event: &event.event,
            timestamp: &event.timestamp,
            data,
        }))
        .unwrap_or_default()
    };
    let full = matching
        .iter()
        .any(|s| !s.thin)
        .then(|| body(event.data.raw()));
    let thin = matching
        .iter()
        .any(|s| s.thin)
        .then(|| body(Json::of(&thin_data(&event.value())).raw()));
    matching
        .into_iter()
        .map(|s| NewDelivery {
            delivery_id: delivery_id(&s.webhook_id, event),
            tenant_id: event.tenant_id.to_string(),
            webhook_id: s.webhook_id.clone(),
            event_id: event.id.clone(),
            event: event.event.clone(),
            payload: if s.thin { thin.clone() } else { full.clone() }.unwrap_or_default(),
            leased_until: None,
        })
        .collect()
}

/// An event's data as a thin delivery carries it (contract part 2): its ids (members
/// named `…_id`), `status` and `outcome`; nothing that tells amounts, reasons or lines.
pub fn thin_data(data: &serde_json::Value) -> serde_json::Value {
    match data {
        serde_json::Value::Object(members) => serde_json::Value::Object(
            members
                .iter()
                .filter(|(k, _)| k.ends_with("_id") || *k == "status" || *k == "outcome")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        _ => serde_json::Value::Object(Default::default()),
    }
}

#[derive(Debug, Clone)]
pub struct Dispatch {
    pub topics: Topics,
    pub deliveries: Deliveries,
    /// Progress over batches whose deliveries were all queued already (by the fused
    /// chain, with the events), not committed yet.
    pub passed: Passed,
}

impl Stage for Dispatch {
    fn name(&self) -> &'static str {
        "webhooks"
    }

    fn input(&self) -> TopicSpec {
        self.topics.events.clone()
    }

    /// On the embedded log the deliveries are queued in the transaction that commits
    /// the batch's offsets: one turn on the store's one writer per batch, not two; and
    /// none for a batch whose deliveries the fused chain queued with the events.
    async fn handle_and_commit(
        &mut self,
        batch: &[Record],
        consumer: &mut Consumer,
    ) -> Result<(), StageError> {
        let Consumer::Embedded(embedded) = &mut *consumer else {
            return handle_then_publish(self, batch, consumer).await;
        };
        let started = std::time::Instant::now();
        let (out, mut fanned) = self.fan_out(batch).await?;
        let before = self
            .deliveries
            .store
            .queued_already(&fanned.deliveries)
            .await?;
        fanned
            .deliveries
            .retain(|d| !before.contains(&d.delivery_id));
        if out.is_empty() && fanned.deliveries.is_empty() && self.passed.defer(batch) {
            return Ok(());
        }
        let handled = started.elapsed();
        let (writer, outputs, done) = (embedded.writer(), by_topic(out), self.passed.with(batch));
        let mut tx = writer.begin().await?;
        let queued = self.deliveries.queue_in(&mut tx, fanned).await?;
        writer.publish_in(&mut tx, &outputs, &done).await?;
        writer.finish(tx, &outputs).await?;
        tracing::debug!(stage = self.name(), records = batch.len(), ?handled, committed = ?started.elapsed() - handled, "Batch done.");
        queued.hand_over();
        Ok(())
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let (out, fanned) = self.fan_out(batch).await?;
        let mut tx = self.deliveries.store.begin_write().await?;
        let queued = self.deliveries.queue_in(&mut tx, fanned).await?;
        tx.commit().await.map_err(StoreError::from)?;
        queued.hand_over();
        Ok(out)
    }
}

impl Dispatch {
    /// The deliveries of a batch's events, and its dead letters.
    async fn fan_out(&self, batch: &[Record]) -> Result<(Outputs, FannedOut), StageError> {
        let mut out = Vec::new();
        let events: Vec<DomainEvent> =
            decode_all(self.name(), batch, &self.topics.dead_letter, &mut out);
        let fanned = self.deliveries.fan_out(events.iter()).await?;
        Ok((out, fanned))
    }
}

/// Queues the deliveries of events and hands them to the sender of this process: the
/// webhook stage's work, and the fused chain's for the events it publishes itself, in
/// the transaction that publishes them.
#[derive(Debug, Clone)]
pub struct Deliveries {
    pub store: Store,
    /// The sender of this process, to which deliveries go already claimed.
    pub handoff: Handoff,
    /// Wakes the sender when deliveries are queued for it to claim.
    pub queued: Arc<Notify>,
}

/// Events' deliveries, with where each goes.
#[derive(Debug, Default)]
pub struct FannedOut {
    pub deliveries: Vec<NewDelivery>,
    endpoints: HashMap<String, Arc<DueEndpoint>>,
}

impl Deliveries {
    /// The deliveries of `events` to their tenants' enabled subscriptions, read when
    /// called: a new or changed subscription applies to the next batch of events.
    pub async fn fan_out<'a>(
        &self,
        events: impl Iterator<Item = &'a DomainEvent>,
    ) -> Result<FannedOut, StoreError> {
        let mut subscriptions: HashMap<&str, Vec<Subscription>> = HashMap::new();
        let mut fanned = FannedOut::default();
        for e in events {
            if !subscriptions.contains_key(e.tenant_id.as_str()) {
                let subs = self.store.subscriptions(&e.tenant_id).await?;
                let subs = subs
                    .into_iter()
                    .map(|(s, endpoint)| {
                        fanned.endpoints.insert(s.webhook_id.clone(), endpoint);
                        s
                    })
                    .collect();
                subscriptions.insert(&e.tenant_id, subs);
            }
            fanned
                .deliveries
                .extend(process(e, &subscriptions[e.tenant_id.as_str()]));
        }
        Ok(fanned)
    }

    /// Queues `fanned` in `tx`: those the sender has room for written with its lease,
    /// the others due, for it to claim. Hand them over once `tx` commits.
    pub async fn queue_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        mut fanned: FannedOut,
    ) -> Result<Queued, StoreError> {
        let mut wants: HashMap<&str, usize> = HashMap::new();
        for d in &fanned.deliveries {
            *wants.entry(d.webhook_id.as_str()).or_default() += 1;
        }
        let mut reserved = self.handoff.reserve(wants);
        for d in &mut fanned.deliveries {
            if reserved.take(&d.webhook_id) {
                d.leased_until = Some(reserved.lease_until);
            }
        }
        let written = self
            .store
            .enqueue_deliveries_in(tx, &fanned.deliveries)
            .await?;
        Ok(Queued {
            fanned,
            reserved,
            written,
            wake: self.queued.clone(),
        })
    }
}

/// Deliveries queued in a transaction, to hand over once it commits (dropped unhanded,
/// their room at the sender is let go).
#[derive(Debug)]
#[must_use]
pub struct Queued {
    fanned: FannedOut,
    reserved: Reserved,
    /// The deliveries written now (not queued before by a redelivered event).
    written: HashSet<String>,
    wake: Arc<Notify>,
}

impl Queued {
    /// Those written with the sender's lease start their attempts; if any were written
    /// due, the sender is woken to claim them.
    pub fn hand_over(self) {
        let Queued {
            fanned,
            mut reserved,
            written,
            wake,
        } = self;
        let mut due = false;
        for d in fanned.deliveries {
            if !written.contains(&d.delivery_id) {
                continue;
            }
            let Some(lease_until) = d.leased_until else {
                due = true;
                continue;
            };
            let Some(endpoint) = fanned.endpoints.get(&d.webhook_id) else {
                continue;
            };
            reserved.start(DueDelivery {
                delivery_id: d.delivery_id,
                event_id: d.event_id,
                event: d.event,
                payload: d.payload,
                attempts: 0,
                failures: 0,
                lease_until,
                endpoint: endpoint.clone(),
                replay: false,
            });
        }
        if due {
            wake.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str) -> DomainEvent {
        DomainEvent {
            id: "evt_1".into(),
            event: kind.into(),
            tenant_id: schemas::TenantId::parse("acme").unwrap(),
            timestamp: "2026-01-01T00:00:00.000Z".into(),
            data: crate::model::Json::of(&serde_json::json!({"claim_id": "CLM-1"})),
        }
    }

    fn sub(id: &str, kinds: &[&str]) -> Subscription {
        Subscription {
            webhook_id: id.into(),
            events: kinds.iter().map(|k| (*k).to_owned()).collect(),
            thin: false,
        }
    }

    #[test]
    fn a_thin_subscription_gets_the_ids_status_and_outcome_only() {
        let mut e = event("claim.completed");
        e.data = crate::model::Json::of(&serde_json::json!({
            "claim_id": "CLM-1", "audit_id": "aud_1", "status": "completed", "outcome": "ADJUDICATED",
            "approved_amount": 900, "fraud_score": 0.1, "lines": [{"line_no": 1}],
        }));
        let mut thin = sub("wh_thin", &["claim.completed"]);
        thin.thin = true;
        let out = process(&e, &[sub("wh_full", &["claim.completed"]), thin]);
        let full: serde_json::Value = serde_json::from_str(&out[0].payload).unwrap();
        let thin: serde_json::Value = serde_json::from_str(&out[1].payload).unwrap();
        assert_eq!(full["data"], e.value());
        assert_eq!(
            thin["data"],
            serde_json::json!({"claim_id": "CLM-1", "audit_id": "aud_1", "status": "completed", "outcome": "ADJUDICATED"})
        );
        assert_eq!(
            (thin["id"].clone(), thin["event"].clone()),
            (full["id"].clone(), full["event"].clone())
        );
    }

    #[test]
    fn an_event_goes_to_the_subscriptions_of_its_kind_only() {
        let subs = [
            sub("wh_a", &["claim.completed"]),
            sub("wh_b", &["claim.flagged", "claim.completed"]),
            sub("wh_c", &["claim.blocked"]),
        ];
        let out = process(&event("claim.completed"), &subs);
        assert_eq!(
            out.iter()
                .map(|d| d.webhook_id.as_str())
                .collect::<Vec<_>>(),
            ["wh_a", "wh_b"]
        );
        assert!(process(&event("upload.failed"), &subs).is_empty());
        let body: serde_json::Value = serde_json::from_str(&out[0].payload).unwrap();
        assert_eq!(body["id"], "evt_1");
        assert_eq!(body["data"]["claim_id"], "CLM-1");
        assert!(
            body.get("tenant_id").is_none(),
            "the tenant is not in the body"
        );
    }

    #[test]
    fn delivery_ids_are_stable_per_subscription_and_event_and_sort_by_its_time() {
        let at = |id: &str, timestamp: &str| DomainEvent {
            id: id.into(),
            timestamp: timestamp.into(),
            ..event("claim.completed")
        };
        let (one, two) = (
            at("evt_1", "2026-12-05T10:00:00.000Z"),
            at("evt_2", "2026-12-05T10:00:00.000Z"),
        );
        assert_eq!(delivery_id("wh_a", &one), delivery_id("wh_a", &one));
        assert_ne!(delivery_id("wh_a", &one), delivery_id("wh_b", &one));
        assert_ne!(delivery_id("wh_a", &one), delivery_id("wh_a", &two));
        // A later event's delivery sorts after, whatever its ids: inserts fill the last
        // pages of the deliveries' keys.
        let ids: Vec<String> = (0..20)
            .map(|i| {
                let e = at(
                    &format!("evt_{}", 20 - i),
                    &format!("2026-12-05T10:00:00.{i:03}Z"),
                );
                delivery_id(&format!("wh_{}", i % 3), &e)
            })
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, ids, "in the order of their events' times");
        assert!(ids
            .iter()
            .all(|id| id.starts_with("dlv_") && id.len() == 36));
    }
}
