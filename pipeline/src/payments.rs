//! Payment runs (`POST /payments/runs`): every payable claim decided up to a day and not
//! paid yet, one payment per provider, written with its claims, its `payment.issued`
//! event and the run's audit record in one transaction. A crash before the commit pays
//! nothing and the run can be made again; after it, the claims are paid and the store's
//! key on each paid claim keeps any later run from paying it again.

use std::collections::BTreeMap;

use schemas::payment::{PaymentRunView, PaymentView};
use schemas::{Date, TenantId};

use crate::bus::{Bus, Message};
use crate::clock::{ms_to_rfc3339, now_ms};
use crate::model::{DomainEvent, EventKind};
use crate::store::{AuditEntry, NewPayment, Store, StoreError};
use crate::topics::Topics;

const DAY_MS: i64 = 86_400_000;

/// A value of `claims.payments` (`schemas/avro/payment.avsc`).
#[derive(serde::Serialize)]
struct PaymentRecord<'a> {
    tenant_id: &'a TenantId,
    #[serde(flatten)]
    payment: &'a PaymentView,
}

/// Pays what is payable through `through`; answers the run with a payment per provider
/// (none when nothing is payable).
pub async fn run(
    store: &Store,
    bus: &Bus,
    topics: &Topics,
    tenant_id: &TenantId,
    through: Date,
    created_by: &str,
) -> Result<PaymentRunView, StoreError> {
    let run_id = format!("run_{}", uuid::Uuid::now_v7().simple());
    let before = (through.days_since_epoch() + 1) * DAY_MS;
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    let payable = store.payable_claims_in(&mut tx, tenant_id, before).await?;
    let mut by_provider: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    for c in payable {
        by_provider
            .entry(c.provider_id)
            .or_default()
            .push((c.claim_id, c.approved_amount));
    }
    store
        .insert_payment_run_in(
            &mut tx,
            tenant_id,
            &run_id,
            &through.to_string(),
            created_by,
            now,
        )
        .await?;
    let mut payments = Vec::with_capacity(by_provider.len());
    let mut messages = Vec::with_capacity(by_provider.len());
    let mut records = Vec::with_capacity(by_provider.len());
    for (provider_id, claims) in by_provider {
        let id = uuid::Uuid::now_v7();
        let p = NewPayment {
            payment_id: format!("pay_{}", id.simple()),
            // Digits only, as the check and EFT numbers providers reconcile by are.
            trace_number: format!("{:020}", id.as_u128() % 10u128.pow(20)),
            amount: claims.iter().map(|c| c.1).sum(),
            provider_id,
            claims,
        };
        store
            .insert_payment_in(&mut tx, tenant_id, &run_id, &p, now)
            .await?;
        let view = PaymentView {
            payment_id: p.payment_id.clone(),
            run_id: run_id.clone(),
            provider_id: p.provider_id.clone(),
            amount: p.amount,
            claims: p.claims.iter().map(|c| c.0.clone()).collect(),
            trace_number: p.trace_number.clone(),
            issued_at: ms_to_rfc3339(now),
        };
        let event = DomainEvent::new(
            EventKind::PaymentIssued,
            tenant_id,
            &view.payment_id,
            view.issued_at.clone(),
            &view,
        );
        let key = format!("{tenant_id}/{}", view.payment_id);
        messages.push(Message {
            key: key.clone(),
            value: serde_json::to_vec(&event).map_err(|e| StoreError::Config(e.to_string()))?,
        });
        let record = PaymentRecord {
            tenant_id,
            payment: &view,
        };
        records.push(Message {
            key,
            value: serde_json::to_vec(&record).map_err(|e| StoreError::Config(e.to_string()))?,
        });
        payments.push(view);
    }
    let entry = AuditEntry::new(
        tenant_id,
        created_by,
        "payment.run",
        ("payment_run", &run_id),
        serde_json::json!({
            "through": through,
            "payments": payments.iter().map(|p| &p.payment_id).collect::<Vec<_>>(),
            "amount": payments.iter().map(|p| p.amount).sum::<i64>(),
        }),
    );
    store.append_audit_in(&mut tx, &[entry]).await?;
    bus.append_in(&mut tx, &topics.events, &messages)
        .await
        .map_err(crate::intake::into_store)?;
    bus.append_in(&mut tx, &topics.payments, &records)
        .await
        .map_err(crate::intake::into_store)?;
    tx.commit().await?;
    bus.wake(&topics.events.name);
    bus.wake(&topics.payments.name);
    Ok(PaymentRunView {
        run_id,
        through,
        payments,
    })
}
