//! The OCR stage: each clean upload's text is read (see `uploads::ocr`), kept with the
//! amounts and dates found in it, and the upload completes with `upload.completed`; a
//! document that cannot be read, or breaks a limit, fails with `processing_error`.
//! As in the scan stage, outputs follow from the row, so a retried batch repeats them.

use schemas::upload::{FailureView, UploadReceived, UploadStatus, UploadView, Verdict};
use schemas::TenantId;

use super::runner::{decode_all, encode, Outputs, Stage, StageError};
use crate::bus::{Record, TopicSpec};
use crate::clock::now_ms;
use crate::model::claim_key;
use crate::model::DomainEvent;
use crate::store::{Store, UploadChange};
use crate::topics::Topics;
use crate::uploads::ocr::extract;
use crate::uploads::{completed_event, failed_event_of, FailureReason, UploadSettings};

#[derive(Debug)]
pub struct Ocr {
    pub topics: Topics,
    pub store: Store,
    pub settings: UploadSettings,
}

impl Stage for Ocr {
    fn name(&self) -> &'static str {
        "ocr"
    }

    fn input(&self) -> TopicSpec {
        self.topics.uploads_scanned.clone()
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let mut out = Vec::new();
        let commands: Vec<UploadReceived> =
            decode_all(self.name(), batch, &self.topics.dead_letter, &mut out);
        for c in commands {
            let (tenant, id) = (&c.tenant_id, c.upload_id.as_str());
            let Some(mut u) = self.store.upload(tenant, id).await? else {
                tracing::warn!(upload_id = %id, "An upload command without its upload; skipped.");
                continue;
            };
            if u.status == UploadStatus::Extracting {
                self.read(&c).await?;
                // Announced from the stored outcome, so a retried batch announces the same.
                let Some(after) = self.store.upload(tenant, id).await? else {
                    continue;
                };
                u = after;
            }
            if let Some(event) = process(&u, tenant) {
                out.push(encode(
                    &self.topics.events,
                    claim_key(tenant, &c.claim_id),
                    &event,
                ));
            }
        }
        Ok(out)
    }
}

/// The pure core: the event an upload in this state announces, if the OCR stage is the
/// one to announce it.
pub fn process(u: &UploadView, tenant_id: &TenantId) -> Option<DomainEvent> {
    match (u.status, u.scan.verdict) {
        (UploadStatus::Completed, _) => Some(completed_event(u, tenant_id)),
        // Failed here, after a clean scan; the scan stage announces its own.
        (UploadStatus::Failed, Verdict::Clean) => Some(failed_event_of(u, tenant_id)),
        _ => None,
    }
}

impl Ocr {
    async fn read(&self, c: &UploadReceived) -> Result<(), StageError> {
        let path = self
            .settings
            .objects
            .path(&c.object_key)
            .map_err(|e| StageError::Transient(e.to_string()))?;
        let started = std::time::Instant::now();
        let change = match extract(&path, &self.settings.ocr).await {
            Ok(extraction) => {
                tracing::debug!(upload_id = %c.upload_id, pages = extraction.pages, elapsed = ?started.elapsed(), "Upload read.");
                UploadChange {
                    status: UploadStatus::Completed,
                    verdict: None,
                    signature: None,
                    extraction: Some(extraction),
                    failure: None,
                    at_ms: now_ms(),
                }
            }
            Err(reason) => {
                tracing::info!(upload_id = %c.upload_id, %reason, "An upload could not be read.");
                UploadChange {
                    status: UploadStatus::Failed,
                    verdict: None,
                    signature: None,
                    extraction: None,
                    failure: Some(FailureView {
                        code: FailureReason::ProcessingError.as_str().into(),
                        message: reason,
                    }),
                    at_ms: now_ms(),
                }
            }
        };
        self.store
            .change_upload(
                &c.tenant_id,
                &c.upload_id,
                &[UploadStatus::Extracting],
                change,
            )
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    fn acme() -> TenantId {
        TenantId::parse("acme").unwrap()
    }

    use schemas::upload::{OcrView, ScanView};

    use super::*;

    fn upload(status: UploadStatus, verdict: Verdict) -> UploadView {
        UploadView {
            upload_id: "upl_1".into(),
            claim_id: "CLM-1".into(),
            status,
            filename: "a.pdf".into(),
            content_type: "application/pdf".into(),
            size_bytes: 10,
            sha256: "ab".into(),
            scan: ScanView {
                verdict,
                signature: None,
            },
            ocr: Some(OcrView {
                pages: 2,
                excerpt: String::new(),
                text_chars: 0,
            }),
            failure: (status == UploadStatus::Failed).then(|| FailureView {
                code: "processing_error".into(),
                message: "pdfinfo failed".into(),
            }),
            created_at: "2026-11-23T10:00:00.000Z".into(),
            updated_at: "2026-11-23T10:00:01.000Z".into(),
        }
    }

    #[test]
    fn announces_completions_and_its_own_failures_only() {
        let done = process(&upload(UploadStatus::Completed, Verdict::Clean), &acme()).unwrap();
        assert_eq!(done.event, "upload.completed");
        assert_eq!(done.value()["pages"], 2);
        let failed = process(&upload(UploadStatus::Failed, Verdict::Clean), &acme()).unwrap();
        assert_eq!(failed.event, "upload.failed");
        assert_eq!(failed.value()["reason"], "processing_error");
        // The same upload announces under the same id every time.
        let again = process(&upload(UploadStatus::Failed, Verdict::Clean), &acme()).unwrap();
        assert_eq!(failed.id, again.id);
        assert!(process(&upload(UploadStatus::Failed, Verdict::Infected), &acme()).is_none());
        assert!(process(&upload(UploadStatus::Extracting, Verdict::Clean), &acme()).is_none());
    }
}
