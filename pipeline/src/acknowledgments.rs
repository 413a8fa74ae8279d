//! X12 intake's acknowledgments: the 999 and 277CA of an interchange taken, kept as a
//! row for `GET /x12/batches/…` and published on `claims.x12-acks` in one transaction.

use schemas::TenantId;

use crate::bus::{Bus, Message};
use crate::clock::{ms_to_rfc3339, now_ms};
use crate::store::{Store, StoreError, X12Batch};
use crate::topics::Topics;

/// A value of `claims.x12-acks` (`schemas/avro/x12-ack.avsc`).
#[derive(serde::Serialize)]
struct AckRecord<'a> {
    tenant_id: &'a TenantId,
    batch_id: &'a str,
    version: &'a str,
    accepted: i64,
    rejected: i64,
    ack_999: &'a str,
    ack_277ca: &'a str,
    created_at: String,
}

pub async fn record(
    store: &Store,
    bus: &Bus,
    topics: &Topics,
    tenant_id: &TenantId,
    batch: &X12Batch<'_>,
) -> Result<(), StoreError> {
    let now = now_ms();
    let record = AckRecord {
        tenant_id,
        batch_id: batch.batch_id,
        version: batch.version,
        accepted: batch.accepted,
        rejected: batch.rejected,
        ack_999: batch.ack_999,
        ack_277ca: batch.ack_277ca,
        created_at: ms_to_rfc3339(now),
    };
    let message = Message {
        key: format!("{tenant_id}/{}", batch.batch_id),
        value: serde_json::to_vec(&record).map_err(|e| StoreError::Config(e.to_string()))?,
    };
    let mut tx = store.begin_write().await?;
    store
        .insert_x12_batch_in(&mut tx, tenant_id, batch, now)
        .await?;
    bus.append_in(&mut tx, &topics.x12_acks, &[message])
        .await
        .map_err(crate::intake::into_store)?;
    tx.commit().await?;
    bus.wake(&topics.x12_acks.name);
    Ok(())
}
