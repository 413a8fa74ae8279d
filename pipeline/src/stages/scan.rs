//! The scan stage: each received upload goes to `clamd`. Clean → `extracting` and on to
//! OCR; infected → `failed`, the file deleted and `upload.failed` announced. While
//! `clamd` cannot be reached the batch is retried with backoff and the upload stays
//! `scanning`: nothing is called clean without an answer.
//!
//! Its outputs follow from the upload's row, so a batch retried after a crash (the row
//! already changed, the outputs not yet published) publishes the same outputs again,
//! with the same event ids.

use schemas::upload::{FailureView, UploadReceived, UploadStatus, Verdict};

use super::runner::{decode_all, encode, Outputs, Stage, StageError};
use crate::bus::{Record, TopicSpec};
use crate::clock::now_ms;
use crate::model::claim_key;
use crate::store::{Store, UploadChange};
use crate::topics::Topics;
use crate::uploads::scan::{scan_file, ScanAnswer};
use crate::uploads::{failed_event_of, FailureReason, UploadSettings};

#[derive(Debug)]
pub struct Scan {
    pub topics: Topics,
    pub store: Store,
    pub settings: UploadSettings,
}

/// What the stage does with an upload in a given state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Not scanned yet.
    Scan,
    /// Scanned clean earlier: hand it to OCR (again).
    Forward,
    /// Refused by the scan earlier: announce it (again).
    Announce,
    Nothing,
}

/// The pure core: from the upload's state to the stage's step.
pub fn process(status: UploadStatus, verdict: Verdict) -> Step {
    match status {
        UploadStatus::Pending | UploadStatus::Scanning => Step::Scan,
        UploadStatus::Extracting => Step::Forward,
        UploadStatus::Failed if verdict != Verdict::Clean => Step::Announce,
        UploadStatus::Failed | UploadStatus::Completed => Step::Nothing,
    }
}

impl Stage for Scan {
    fn name(&self) -> &'static str {
        "scan"
    }

    fn input(&self) -> TopicSpec {
        self.topics.uploads.clone()
    }

    async fn handle(&mut self, batch: &[Record]) -> Result<Outputs, StageError> {
        let mut out = Vec::new();
        let commands: Vec<UploadReceived> =
            decode_all(self.name(), batch, &self.topics.dead_letter, &mut out);
        for c in commands {
            let Some(u) = self.store.upload(&c.tenant_id, &c.upload_id).await? else {
                tracing::warn!(upload_id = %c.upload_id, "An upload command without its upload; skipped.");
                continue;
            };
            let key = claim_key(&c.tenant_id, &c.claim_id);
            match process(u.status, u.scan.verdict) {
                Step::Scan => self.scan(&c, &mut out).await?,
                Step::Forward => out.push(encode(&self.topics.uploads_scanned, key, &c)),
                Step::Announce => out.push(encode(
                    &self.topics.events,
                    key,
                    &failed_event_of(&u, &c.tenant_id),
                )),
                Step::Nothing => {}
            }
        }
        Ok(out)
    }
}

impl Scan {
    async fn scan(&self, c: &UploadReceived, out: &mut Outputs) -> Result<(), StageError> {
        let (tenant, id) = (&c.tenant_id, c.upload_id.as_str());
        let change = |status, verdict| UploadChange {
            status,
            verdict,
            signature: None,
            extraction: None,
            failure: None,
            at_ms: now_ms(),
        };
        self.store
            .change_upload(
                tenant,
                id,
                &[UploadStatus::Pending],
                change(UploadStatus::Scanning, None),
            )
            .await?;
        let path = self
            .settings
            .objects
            .path(&c.object_key)
            .map_err(|e| StageError::Transient(e.to_string()))?;
        if !tokio::fs::try_exists(&path).await.unwrap_or(true) {
            // Gone from the object store (removed by hand?): retrying cannot help, and
            // the partition must not wait on it for ever.
            let message = "the stored file is missing".to_owned();
            let unknown = (Verdict::Pending, None);
            self.fail(c, FailureReason::ProcessingError, message, unknown)
                .await?;
            if let Some(u) = self.store.upload(tenant, id).await? {
                let key = claim_key(tenant, &c.claim_id);
                out.push(encode(
                    &self.topics.events,
                    key,
                    &failed_event_of(&u, tenant),
                ));
            }
            return Ok(());
        }
        let answer = match &self.settings.clamd {
            Some(clamd) => scan_file(clamd, &path).await.map_err(|e| {
                StageError::Transient(format!("clamd cannot scan upload {id}: {e}"))
            })?,
            // The screen on receipt found nothing, or the upload would not be here.
            None => ScanAnswer::Clean,
        };
        let from = [UploadStatus::Pending, UploadStatus::Scanning];
        let key = claim_key(tenant, &c.claim_id);
        match answer {
            ScanAnswer::Clean => {
                self.store
                    .change_upload(
                        tenant,
                        id,
                        &from,
                        change(UploadStatus::Extracting, Some(Verdict::Clean)),
                    )
                    .await?;
                out.push(encode(&self.topics.uploads_scanned, key, c));
                return Ok(());
            }
            ScanAnswer::Infected { signature } => {
                let message = format!("clamd found {signature}");
                let infected = (Verdict::Infected, Some(signature));
                self.fail(c, FailureReason::VirusDetected, message, infected)
                    .await?;
                // An infected file is not kept.
                if let Err(e) = self.settings.objects.delete(&c.object_key).await {
                    tracing::warn!(upload_id = %id, error = %e, "An infected upload could not be deleted.");
                }
            }
            ScanAnswer::Unscannable { reason } => {
                let message = format!("the virus scanner could not scan it: {reason}");
                let unknown = (Verdict::Pending, None);
                self.fail(c, FailureReason::ProcessingError, message, unknown)
                    .await?;
            }
        }
        if let Some(u) = self.store.upload(tenant, id).await? {
            out.push(encode(
                &self.topics.events,
                key,
                &failed_event_of(&u, tenant),
            ));
        }
        Ok(())
    }
}

impl Scan {
    /// Marks a scanned upload failed, with the scan's verdict and signature.
    async fn fail(
        &self,
        c: &UploadReceived,
        reason: FailureReason,
        message: String,
        (verdict, signature): (Verdict, Option<String>),
    ) -> Result<(), StageError> {
        let change = UploadChange {
            status: UploadStatus::Failed,
            verdict: Some(verdict),
            signature,
            extraction: None,
            failure: Some(FailureView {
                code: reason.as_str().into(),
                message,
            }),
            at_ms: now_ms(),
        };
        let from = [UploadStatus::Pending, UploadStatus::Scanning];
        self.store
            .change_upload(&c.tenant_id, &c.upload_id, &from, change)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_has_its_step() {
        assert_eq!(process(UploadStatus::Pending, Verdict::Pending), Step::Scan);
        assert_eq!(
            process(UploadStatus::Scanning, Verdict::Pending),
            Step::Scan
        );
        assert_eq!(
            process(UploadStatus::Extracting, Verdict::Clean),
            Step::Forward
        );
        assert_eq!(
            process(UploadStatus::Failed, Verdict::Infected),
            Step::Announce
        );
        assert_eq!(
            process(UploadStatus::Failed, Verdict::Pending),
            Step::Announce
        );
        // Failed in OCR: the OCR stage announces it.
        assert_eq!(process(UploadStatus::Failed, Verdict::Clean), Step::Nothing);
        assert_eq!(
            process(UploadStatus::Completed, Verdict::Clean),
            Step::Nothing
        );
    }
}
