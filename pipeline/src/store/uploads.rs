//! Uploads: one row per supporting document, its status, scan verdict and extraction.

use schemas::upload::{FailureView, OcrView, ScanView, UploadStatus, UploadView, Verdict};
use serde::{Deserialize, Serialize};

use super::{Store, StoreError};
use crate::clock::ms_to_rfc3339;

/// A new upload's row.
#[derive(Debug, Clone)]
pub struct NewUpload {
    pub tenant_id: String,
    pub upload_id: String,
    pub claim_id: String,
    pub status: UploadStatus,
    pub filename: String,
    pub content_type: String,
    pub size_bytes: i64,
    pub sha256: String,
    pub object_key: Option<String>,
    pub verdict: Verdict,
    pub signature: Option<String>,
    pub failure: Option<FailureView>,
    pub at_ms: i64,
}

/// What OCR found, kept whole in the row; the view shows a summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Extraction {
    pub pages: i64,
    pub text: String,
    /// Money amounts found in the text, in cents.
    pub amounts: Vec<i64>,
    /// Dates found in the text, `YYYY-MM-DD`.
    pub dates: Vec<String>,
}

/// Characters of text in an excerpt.
pub const EXCERPT_CHARS: usize = 200;

impl Extraction {
    pub fn view(&self) -> OcrView {
        OcrView {
            pages: self.pages,
            excerpt: self.text.chars().take(EXCERPT_CHARS).collect(),
            text_chars: self.text.chars().count() as i64,
        }
    }
}

#[derive(sqlx::FromRow)]
struct UploadRow {
    upload_id: String,
    claim_id: String,
    status: String,
    filename: String,
    content_type: String,
    size_bytes: i64,
    sha256: String,
    scan_verdict: String,
    scan_signature: Option<String>,
    ocr: Option<String>,
    failure_code: Option<String>,
    failure_message: Option<String>,
    created_at: i64,
    updated_at: i64,
}

const COLUMNS: &str = "upload_id, claim_id, status, filename, content_type, size_bytes, sha256, \
    scan_verdict, scan_signature, ocr, failure_code, failure_message, created_at, updated_at";

impl UploadRow {
    fn into_view(self) -> Result<UploadView, StoreError> {
        let corrupt = |what: &str| StoreError::Config(format!("upload row with a bad {what}"));
        let ocr = match self.ocr {
            Some(json) => Some(
                serde_json::from_str::<Extraction>(&json)
                    .map_err(|_| corrupt("ocr"))?
                    .view(),
            ),
            None => None,
        };
        Ok(UploadView {
            upload_id: self.upload_id,
            claim_id: self.claim_id,
            status: UploadStatus::parse(&self.status).ok_or_else(|| corrupt("status"))?,
            filename: self.filename,
            content_type: self.content_type,
            size_bytes: self.size_bytes,
            sha256: self.sha256,
            scan: ScanView {
                verdict: Verdict::parse(&self.scan_verdict).ok_or_else(|| corrupt("verdict"))?,
                signature: self.scan_signature,
            },
            ocr,
            failure: match (self.failure_code, self.failure_message) {
                (Some(code), message) => Some(FailureView {
                    code,
                    message: message.unwrap_or_default(),
                }),
                _ => None,
            },
            created_at: ms_to_rfc3339(self.created_at),
            updated_at: ms_to_rfc3339(self.updated_at),
        })
    }
}

/// Inserts `u` in `tx`.
pub(crate) async fn insert_upload_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    u: &NewUpload,
) -> Result<(), StoreError> {
    sqlx::query(&format!(
        "INSERT INTO uploads (tenant_id, {COLUMNS}, object_key) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL, $11, $12, $13, $14, $15)"
    ))
    .bind(&u.tenant_id)
    .bind(&u.upload_id)
    .bind(&u.claim_id)
    .bind(u.status.as_str())
    .bind(&u.filename)
    .bind(&u.content_type)
    .bind(u.size_bytes)
    .bind(&u.sha256)
    .bind(u.verdict.as_str())
    .bind(u.signature.clone())
    .bind(u.failure.as_ref().map(|f| f.code.clone()))
    .bind(u.failure.as_ref().map(|f| f.message.clone()))
    .bind(u.at_ms)
    .bind(u.at_ms)
    .bind(u.object_key.clone())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

impl Store {
    pub async fn upload(
        &self,
        tenant_id: &str,
        upload_id: &str,
    ) -> Result<Option<UploadView>, StoreError> {
        sqlx::query_as::<_, UploadRow>(&format!(
            "SELECT {COLUMNS} FROM uploads WHERE tenant_id = $1 AND upload_id = $2"
        ))
        .bind(tenant_id)
        .bind(upload_id)
        .fetch_optional(self.reader())
        .await?
        .map(UploadRow::into_view)
        .transpose()
    }

    /// A claim's uploads, oldest first.
    pub async fn uploads_of_claim(
        &self,
        tenant_id: &str,
        claim_id: &str,
    ) -> Result<Vec<UploadView>, StoreError> {
        sqlx::query_as::<_, UploadRow>(&format!(
            "SELECT {COLUMNS} FROM uploads WHERE tenant_id = $1 AND claim_id = $2 \
             ORDER BY created_at, upload_id"
        ))
        .bind(tenant_id)
        .bind(claim_id)
        .fetch_all(self.reader())
        .await?
        .into_iter()
        .map(UploadRow::into_view)
        .collect()
    }
}

/// A change of an upload's state; `None` leaves a field as it is.
#[derive(Debug, Clone)]
pub struct UploadChange {
    pub status: UploadStatus,
    pub verdict: Option<Verdict>,
    pub signature: Option<String>,
    pub extraction: Option<Extraction>,
    pub failure: Option<FailureView>,
    pub at_ms: i64,
}

impl Store {
    /// Applies `change` if the upload is in one of the states `from`; answers whether it
    /// was. The guard makes a stage's retry after a crash change nothing twice.
    pub async fn change_upload(
        &self,
        tenant_id: &str,
        upload_id: &str,
        from: &[UploadStatus],
        change: UploadChange,
    ) -> Result<bool, StoreError> {
        let from: Vec<String> = from.iter().map(|s| format!("'{}'", s.as_str())).collect();
        let ocr = change
            .extraction
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Config(e.to_string()))?;
        let done = sqlx::query(&format!(
            "UPDATE uploads SET status = $1, scan_verdict = COALESCE($2, scan_verdict), \
             scan_signature = COALESCE($3, scan_signature), ocr = COALESCE($4, ocr), \
             failure_code = COALESCE($5, failure_code), failure_message = COALESCE($6, failure_message), \
             updated_at = $7 WHERE tenant_id = $8 AND upload_id = $9 AND status IN ({})",
            from.join(", ")
        ))
        .bind(change.status.as_str())
        .bind(change.verdict.map(|v| v.as_str().to_owned()))
        .bind(change.signature)
        .bind(ocr)
        .bind(change.failure.as_ref().map(|f| f.code.clone()))
        .bind(change.failure.as_ref().map(|f| f.message.clone()))
        .bind(change.at_ms)
        .bind(tenant_id)
        .bind(upload_id)
        .execute(self.writer())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The whole extraction of an upload, for the stages (the view shows a summary).
    pub async fn upload_extraction(
        &self,
        tenant_id: &str,
        upload_id: &str,
    ) -> Result<Option<Extraction>, StoreError> {
        let json: Option<Option<String>> =
            sqlx::query_scalar("SELECT ocr FROM uploads WHERE tenant_id = $1 AND upload_id = $2")
                .bind(tenant_id)
                .bind(upload_id)
                .fetch_optional(self.reader())
                .await?;
        json.flatten()
            .map(|j| serde_json::from_str(&j).map_err(|e| StoreError::Config(e.to_string())))
            .transpose()
    }
}
