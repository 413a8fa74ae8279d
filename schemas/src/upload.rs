//! Supporting documents (contract: Uploads): the view of an upload, the command the
//! front end puts on the uploads topic, and the statuses between them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where an upload is in its life: `pending` on receipt, `scanning` while `clamd` looks
/// at it, `extracting` during OCR, then `completed` or `failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum UploadStatus {
    Pending,
    Scanning,
    Extracting,
    Completed,
    Failed,
}

impl UploadStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            UploadStatus::Pending => "pending",
            UploadStatus::Scanning => "scanning",
            UploadStatus::Extracting => "extracting",
            UploadStatus::Completed => "completed",
            UploadStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => UploadStatus::Pending,
            "scanning" => UploadStatus::Scanning,
            "extracting" => UploadStatus::Extracting,
            "completed" => UploadStatus::Completed,
            "failed" => UploadStatus::Failed,
            _ => return None,
        })
    }
}

/// The virus scan's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pending,
    Clean,
    Infected,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pending => "pending",
            Verdict::Clean => "clean",
            Verdict::Infected => "infected",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Verdict::Pending,
            "clean" => Verdict::Clean,
            "infected" => Verdict::Infected,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ScanView {
    pub verdict: Verdict,
    /// The signature that matched, when infected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OcrView {
    pub pages: i64,
    /// The first characters of the text found.
    pub excerpt: String,
    pub text_chars: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FailureView {
    /// `virus_detected` or `processing_error`.
    pub code: String,
    pub message: String,
}

/// `GET /uploads/{upload_id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UploadView {
    pub upload_id: String,
    pub claim_id: String,
    pub status: UploadStatus,
    pub filename: String,
    pub content_type: String,
    pub size_bytes: i64,
    /// Lowercase hex.
    pub sha256: String,
    pub scan: ScanView,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocr: Option<OcrView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureView>,
    pub created_at: String,
    pub updated_at: String,
}

/// The 202 of `POST /claims/{claim_id}/uploads`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UploadAccepted {
    pub upload_id: String,
    pub claim_id: String,
    /// `pending`
    pub status: UploadStatus,
    pub size_bytes: i64,
    pub sha256: String,
    pub content_type: String,
}

/// The record on the uploads topic: a stored file waiting to be scanned and read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UploadReceived {
    pub tenant_id: crate::TenantId,
    pub upload_id: String,
    pub claim_id: String,
    /// Where the object store keeps the file.
    pub object_key: String,
    pub content_type: String,
    pub size_bytes: i64,
    pub sha256: String,
}
