//! Domain events: what happened to a claim or an upload, as the events topic carries
//! them and webhooks deliver them. An event's id is derived from its subject and kind,
//! so the same event produced twice (a redelivered record) has the same id.

use schemas::TenantId;
use serde::{Deserialize, Serialize};

pub use schemas::webhook::EventKind;

use super::ids::derived_id;

/// A domain event. `event` is an [`EventKind`]'s wire name; kept as text on the record
/// so that a reader of an older or newer release still decodes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DomainEvent {
    pub id: String,
    pub event: String,
    pub tenant_id: TenantId,
    pub timestamp: String,
    pub data: serde_json::Value,
}

impl DomainEvent {
    /// The event `kind` of `subject` (a claim's or an upload's id) in `tenant_id`, with
    /// its derived id.
    pub fn new(
        kind: EventKind,
        tenant_id: &TenantId,
        subject: &str,
        timestamp: String,
        data: serde_json::Value,
    ) -> Self {
        Self {
            id: derived_id("evt", tenant_id, subject, kind.as_str()),
            event: kind.as_str().to_owned(),
            tenant_id: tenant_id.clone(),
            timestamp,
            data,
        }
    }

    pub fn kind(&self) -> Option<EventKind> {
        EventKind::parse(&self.event)
    }
}
