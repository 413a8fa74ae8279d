//! Supporting documents: where their files live ([`objects`]), the check made while
//! one is received ([`screen`]), and accepting or refusing one ([`intake`]). The scan
//! and OCR stages take them from the uploads topic.

pub mod intake;
pub mod objects;
pub mod screen;

pub use objects::ObjectStore;
pub use screen::{Screen, Screened};

use crate::stages::decide::{derived_id, DomainEvent};

/// `upload.failed` (contract: Events): `error_code` is the error's code, `reason` one of
/// `virus_detected` and `processing_error`.
pub fn failed_event(
    tenant_id: &str,
    upload_id: &str,
    claim_id: &str,
    reason: FailureReason,
    message: &str,
    timestamp: String,
) -> DomainEvent {
    DomainEvent {
        id: derived_id("evt", tenant_id, upload_id, "upload.failed"),
        event: "upload.failed".into(),
        tenant_id: tenant_id.into(),
        timestamp,
        data: serde_json::json!({
            "upload_id": upload_id,
            "claim_id": claim_id,
            "status": "failed",
            "error_code": reason.error_code(),
            "reason": reason.as_str(),
            "message": message,
        }),
    }
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
