//! Supporting documents: where their files live ([`objects`]), the check made while
//! one is received ([`screen`]), and accepting or refusing one ([`intake`]). The scan
//! and OCR stages take them from the uploads topic.

pub mod intake;
pub mod objects;
pub mod ocr;
pub mod scan;
pub mod screen;

pub use objects::ObjectStore;
pub use screen::{Screen, Screened};

use schemas::TenantId;

use crate::model::{DomainEvent, EventKind};

/// `upload.failed` (contract: Events): `error_code` is the error's code, `reason` one of
/// `virus_detected` and `processing_error`.
pub fn failed_event(
    tenant_id: &TenantId,
    upload_id: &str,
    claim_id: &str,
    reason: FailureReason,
    message: &str,
    timestamp: String,
) -> DomainEvent {
    DomainEvent::new(
        EventKind::UploadFailed,
        tenant_id,
        upload_id,
        timestamp,
        serde_json::json!({
            "upload_id": upload_id,
            "claim_id": claim_id,
            "status": "failed",
            "error_code": reason.error_code(),
            "reason": reason.as_str(),
            "message": message,
        }),
    )
}

/// Why an upload failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReason {
    VirusDetected,
    ProcessingError,
}

impl FailureReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::VirusDetected => "virus_detected",
            FailureReason::ProcessingError => "processing_error",
        }
    }

    pub fn error_code(self) -> &'static str {
        match self {
            FailureReason::VirusDetected => "UPLOAD_VIRUS_DETECTED",
            FailureReason::ProcessingError => "UPLOAD_PROCESSING_ERROR",
        }
    }
}

/// What the scan and OCR stages need to know.
#[derive(Debug, Clone)]
pub struct UploadSettings {
    pub objects: ObjectStore,
    /// `None`: no `clamd`; the screen on receipt is then the only scan (the service logs
    /// a warning at start).
    pub clamd: Option<scan::ClamdAddress>,
    pub ocr: ocr::OcrLimits,
}

/// `upload.completed` (contract: Events).
pub fn completed_event(u: &schemas::upload::UploadView, tenant_id: &TenantId) -> DomainEvent {
    DomainEvent::new(
        EventKind::UploadCompleted,
        tenant_id,
        &u.upload_id,
        u.updated_at.clone(),
        serde_json::json!({
            "upload_id": u.upload_id,
            "claim_id": u.claim_id,
            "status": u.status,
            "content_type": u.content_type,
            "size_bytes": u.size_bytes,
            "sha256": u.sha256,
            "pages": u.ocr.as_ref().map(|o| o.pages).unwrap_or(0),
        }),
    )
}

/// `upload.failed` for an upload whose row says it failed.
pub fn failed_event_of(u: &schemas::upload::UploadView, tenant_id: &TenantId) -> DomainEvent {
    let reason = match u.failure.as_ref().map(|f| f.code.as_str()) {
        Some("virus_detected") => FailureReason::VirusDetected,
        _ => FailureReason::ProcessingError,
    };
    let message = u.failure.as_ref().map(|f| f.message.as_str()).unwrap_or("");
    failed_event(
        tenant_id,
        &u.upload_id,
        &u.claim_id,
        reason,
        message,
        u.updated_at.clone(),
    )
}
