//! Accepting or refusing a received upload. Either way the row and its record (the
//! command on the uploads topic, or the `upload.failed` event) are written in one
//! transaction: a 202 means both are durable, and a refusal is announced exactly once.

use schemas::upload::UploadReceived;

use crate::bus::{Bus, Message, TopicSpec};
use crate::intake::into_store;
use crate::model::claim_key;
use crate::model::DomainEvent;
use crate::store::uploads::insert_upload_in;
use crate::store::{NewUpload, Store, StoreError};

/// Records the upload (`pending`) and its command on `topic`.
pub async fn accept(
    store: &Store,
    bus: &Bus,
    topic: &TopicSpec,
    upload: &NewUpload,
    command: &UploadReceived,
) -> Result<(), StoreError> {
    write(store, bus, topic, upload, command).await
}

/// Records the refused upload (`failed`) and its `upload.failed` event on `events`.
pub async fn refuse(
    store: &Store,
    bus: &Bus,
    events: &TopicSpec,
    upload: &NewUpload,
    event: &DomainEvent,
) -> Result<(), StoreError> {
    write(store, bus, events, upload, event).await
}

/// The row and its record, keyed like the claim's records, in one transaction.
async fn write(
    store: &Store,
    bus: &Bus,
    topic: &TopicSpec,
    upload: &NewUpload,
    record: &impl serde::Serialize,
) -> Result<(), StoreError> {
    let message = Message {
        key: claim_key(&upload.tenant_id, &upload.claim_id),
        value: serde_json::to_vec(record).map_err(|e| StoreError::Config(e.to_string()))?,
    };
    let mut tx = store.writer().begin().await?;
    insert_upload_in(&mut tx, upload).await?;
    bus.append_in(&mut tx, topic, std::slice::from_ref(&message))
        .await
        .map_err(into_store)?;
    tx.commit().await?;
    bus.wake(&topic.name);
    Ok(())
}
