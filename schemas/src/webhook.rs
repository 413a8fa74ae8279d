//! Webhook subscriptions and their delivery log (spec: Webhook subscription, Events;
//! contract: Webhooks).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Every event kind the service emits (spec: Events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    ClaimCompleted,
    ClaimFlagged,
    ClaimBlocked,
    ClaimApproved,
    ClaimDeclined,
    UploadCompleted,
    UploadFailed,
    WorkflowTaskCreated,
    /// Contract part 2: a claim replaced by a corrected one, or voided.
    ClaimReplaced,
    ClaimVoided,
    /// Contract part 2: a payment run paid a provider.
    PaymentIssued,
    /// Contract part 2: a subscription disabled after a day of failed deliveries.
    WebhookDisabled,
}

impl EventKind {
    pub const ALL: [EventKind; 12] = [
        EventKind::ClaimCompleted,
        EventKind::ClaimFlagged,
        EventKind::ClaimBlocked,
        EventKind::ClaimApproved,
        EventKind::ClaimDeclined,
        EventKind::UploadCompleted,
        EventKind::UploadFailed,
        EventKind::WorkflowTaskCreated,
        EventKind::ClaimReplaced,
        EventKind::ClaimVoided,
        EventKind::PaymentIssued,
        EventKind::WebhookDisabled,
    ];

    /// The kind's name on the wire (`claim.completed`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::ClaimCompleted => "claim.completed",
            EventKind::ClaimFlagged => "claim.flagged",
            EventKind::ClaimBlocked => "claim.blocked",
            EventKind::ClaimApproved => "claim.approved",
            EventKind::ClaimDeclined => "claim.declined",
            EventKind::UploadCompleted => "upload.completed",
            EventKind::UploadFailed => "upload.failed",
            EventKind::WorkflowTaskCreated => "workflow.task.created",
            EventKind::ClaimReplaced => "claim.replaced",
            EventKind::ClaimVoided => "claim.voided",
            EventKind::PaymentIssued => "payment.issued",
            EventKind::WebhookDisabled => "webhook.disabled",
        }
    }

    pub fn parse(kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == kind)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every event kind's wire name, in the spec's order.
pub const EVENT_KINDS: [&str; 12] = {
    let mut names = [""; 12];
    let mut i = 0;
    while i < EventKind::ALL.len() {
        names[i] = EventKind::ALL[i].as_str();
        i += 1;
    }
    names
};

/// Whether `kind` is one of [`EVENT_KINDS`].
pub fn is_event_kind(kind: &str) -> bool {
    EventKind::parse(kind).is_some()
}

/// `POST /webhooks`. Its `Debug` leaves the secret out.
#[derive(Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhook {
    /// The receiver: an absolute http(s) URL.
    pub url: String,
    /// Event kinds to deliver, from the spec's Events table.
    #[schema(min_items = 1)]
    pub events: Vec<String>,
    /// Shared secret that keys both signatures (1-1024 characters); stored, never
    /// returned.
    #[schema(min_length = 1, max_length = 1024)]
    pub secret: String,
    /// Deliveries are made only while enabled; default true.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// `full` (default): each delivery carries the event's whole `data`; `thin`: only
    /// its ids, `status` and `outcome`, for a receiver that reads the rest over the API.
    #[serde(default)]
    pub payload: Payload,
}

fn enabled_by_default() -> bool {
    true
}

/// What a subscription's deliveries carry of each event's `data`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Payload {
    #[default]
    Full,
    Thin,
}

impl Payload {
    pub fn as_str(self) -> &'static str {
        match self {
            Payload::Full => "full",
            Payload::Thin => "thin",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "full" => Some(Payload::Full),
            "thin" => Some(Payload::Thin),
            _ => None,
        }
    }
}

/// `PATCH /webhooks/{webhook_id}`: the fields present are changed. Its `Debug` leaves
/// the secret out.
#[derive(Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchWebhook {
    pub url: Option<String>,
    #[schema(min_items = 1)]
    pub events: Option<Vec<String>>,
    #[schema(min_length = 1, max_length = 1024)]
    pub secret: Option<String>,
    pub enabled: Option<bool>,
    pub payload: Option<Payload>,
}

impl std::fmt::Debug for CreateWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateWebhook")
            .field("url", &self.url)
            .field("events", &self.events)
            .field("enabled", &self.enabled)
            .field("payload", &self.payload)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for PatchWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PatchWebhook")
            .field("url", &self.url)
            .field("events", &self.events)
            .field("enabled", &self.enabled)
            .field("payload", &self.payload)
            .finish_non_exhaustive()
    }
}

/// A subscription as the API returns it: never its secret.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct Webhook {
    pub webhook_id: String,
    pub url: String,
    pub events: Vec<String>,
    pub enabled: bool,
    pub payload: Payload,
    pub created_at: String,
    pub updated_at: String,
    /// Why the service disabled it, when it did (a day of failed deliveries); cleared
    /// when it is enabled again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<String>,
}

/// `POST /webhooks/{webhook_id}/replay`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// RFC 3339: events at or after this time.
    pub since: String,
    /// RFC 3339: events before this time; now when absent.
    #[serde(default)]
    pub until: Option<String>,
    /// Only these kinds (of the subscription's); all of its kinds when absent.
    #[serde(default)]
    pub events: Option<Vec<String>>,
}

/// A replay queued: its job (`GET /jobs/{job_id}`) and how many events it delivers.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReplayAccepted {
    pub job_id: String,
    pub events: usize,
}

/// `GET /webhooks/{webhook_id}/stats`: the subscription's deliveries over the last hour.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct WebhookStats {
    /// 3600.
    pub window_s: i64,
    pub attempts: i64,
    pub succeeded: i64,
    pub failed: i64,
    /// Of the window's attempts, answered or timed out; 0 without attempts.
    pub p50_ms: i64,
    pub p99_ms: i64,
    /// Failed attempts since the last success, whatever the window.
    pub consecutive_failures: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<String>,
}

/// One attempt to deliver one event to one subscription.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct DeliveryAttempt {
    /// The delivery (one event to one subscription), also sent as `X-Service-Delivery`.
    pub delivery_id: String,
    /// The event's id: the same on every attempt and redelivery.
    pub event_id: String,
    pub event: String,
    /// Numbered from 1 within the delivery.
    pub attempt: i64,
    /// The receiver's status, absent when it did not answer.
    pub status_code: Option<i64>,
    /// Why the attempt failed, absent on success.
    pub error: Option<String>,
    pub duration_ms: i64,
    pub at: String,
    /// When the next attempt is due; absent when none is scheduled (delivered, or
    /// failed after the last retry).
    pub next_attempt_at: Option<String>,
}
