//! Domain events: what happened to a claim or an upload, as the events topic carries
//! them and webhooks deliver them. An event's id is derived from its subject and kind,
//! so the same event produced twice (a redelivered record) has the same id.

use schemas::TenantId;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

pub use schemas::webhook::EventKind;

use super::ids::derived_id;

thread_local! {
    /// Whether decisions read on this thread pass their events over: see
    /// [`reading_without_events`].
    static WITHOUT_EVENTS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `read`, in which every decision read has no events: their text is passed over,
/// not built. For a reader that publishes none, `claims replay`: a decision's events
/// are about a third of its record on `claims.decided`, and building them was a third
/// of what reading the record cost it.
pub fn reading_without_events<R>(read: impl FnOnce() -> R) -> R {
    super::with_flag(&WITHOUT_EVENTS, read)
}

/// For `#[serde(deserialize_with = "event::deserialize_events")]` on a decision's
/// events: read as usual, except inside [`reading_without_events`].
pub fn deserialize_events<'de, D>(d: D) -> Result<Vec<DomainEvent>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    if WITHOUT_EVENTS.with(|w| w.get()) {
        serde::de::IgnoredAny::deserialize(d)?;
        return Ok(Vec::new());
    }
    Vec::deserialize(d)
}

/// A domain event. `event` is an [`EventKind`]'s wire name; kept as text on the record
/// so that a reader of an older or newer release still decodes it.
///
/// `data` is kept as the JSON it was written as: the pipeline only carries it (to the
/// topic, the store, a webhook's body), and a `claim.completed` with a claim's lines
/// built as a tree of maps, then written, read back and written again per hop, was a
/// good part of what deciding a claim cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DomainEvent {
    pub id: String,
    pub event: String,
    pub tenant_id: TenantId,
    pub timestamp: String,
    pub data: Json,
}

/// JSON kept as the text it was written as.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Json(Box<RawValue>);

impl Json {
    /// `data` written as JSON: plain data always serialises.
    pub fn of(data: &impl Serialize) -> Self {
        Self(serde_json::value::to_raw_value(data).unwrap_or_else(|_| {
            RawValue::from_string("null".into()).unwrap_or_else(|_| unreachable!("null is JSON"))
        }))
    }

    pub fn raw(&self) -> &RawValue {
        &self.0
    }

    pub fn get(&self) -> &str {
        self.0.get()
    }
}

impl PartialEq for Json {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl DomainEvent {
    /// The event `kind` of `subject` (a claim's or an upload's id) in `tenant_id`, with
    /// its derived id.
    pub fn new(
        kind: EventKind,
        tenant_id: &TenantId,
        subject: &str,
        timestamp: String,
        data: impl Serialize,
    ) -> Self {
        Self::occurrence(kind, tenant_id, subject, None, timestamp, data)
    }

    /// [`Self::new`] for a kind that can happen to its subject more than once (a claim
    /// decided again by a job, a subscription disabled again): `tag` names the
    /// occurrence, and the id derives from it too, so that each occurrence is an event
    /// of its own and the same occurrence produced twice keeps one id. No tag is the
    /// first and only occurrence, with the id [`Self::new`] gives.
    pub fn occurrence(
        kind: EventKind,
        tenant_id: &TenantId,
        subject: &str,
        tag: Option<&str>,
        timestamp: String,
        data: impl Serialize,
    ) -> Self {
        let what = match tag {
            None => std::borrow::Cow::Borrowed(kind.as_str()),
            Some(tag) => std::borrow::Cow::Owned(format!("{tag}/{}", kind.as_str())),
        };
        Self {
            id: derived_id("evt", tenant_id, subject, &what),
            event: kind.as_str().to_owned(),
            tenant_id: tenant_id.clone(),
            timestamp,
            data: Json::of(&data),
        }
    }

    /// The data as a JSON value, to read members of it.
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_str(self.data.get()).unwrap_or_default()
    }

    pub fn kind(&self) -> Option<EventKind> {
        EventKind::parse(&self.event)
    }
}
