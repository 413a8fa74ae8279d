//! Supporting documents (contract: Uploads). The file streams from the request to the
//! object store's staging area while the screen hashes it and looks for known malware;
//! nothing holds it whole in memory. Refused (too large, malware) it is removed before
//! the answer; accepted, it is renamed under its key, and its row and command are
//! written together before the 202.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::header::{CONTENT_TYPE, LOCATION};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use pipeline::clock::{ms_to_rfc3339, now_ms};
use pipeline::store::NewUpload;
use pipeline::uploads::objects::Staged;
use pipeline::uploads::{failed_event, intake, FailureReason, Screen};
use schemas::page::Page;
use schemas::upload::{
    FailureView, UploadAccepted, UploadReceived, UploadStatus, UploadView, Verdict,
};
use schemas::ErrorBody;
use tokio::io::AsyncWriteExt;

use crate::auth::principal::scope::{ClaimsRead, UploadsWrite};
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::routes::claims::claim_not_found;
use crate::state::AppState;

/// The longest file name kept; longer ones are cut.
const MAX_FILENAME_CHARS: usize = 255;
/// The longest media type stored: RFC 6838 allows 127 characters for each of its two
/// names.
const MAX_CONTENT_TYPE_CHARS: usize = 255;
/// Room for the multipart framing around the file.
const MULTIPART_OVERHEAD: u64 = 64 * 1024;

fn upload_not_found() -> ApiError {
    ApiError::Refused {
        status: StatusCode::NOT_FOUND,
        code: "NOT_FOUND",
        message: "no upload with this upload_id exists for the tenant".into(),
        field: None,
    }
}

/// 404 `CLAIM_NOT_FOUND` unless the tenant has this claim.
async fn claim_exists(state: &AppState, tenant_id: &str, claim_id: &str) -> Result<(), ApiError> {
    match state.store.claim(tenant_id, claim_id).await? {
        Some(_) => Ok(()),
        None => Err(claim_not_found()),
    }
}

/// A file received into staging, with what the screen found.
struct Received {
    staged: Staged,
    filename: String,
    content_type: String,
    screened: pipeline::uploads::Screened,
}

/// Upload a supporting document for a claim.
///
/// `multipart/form-data` with the file in the field `file`. Answers 202 once the file
/// and its upload record are durable; scanning and OCR follow asynchronously.
#[utoipa::path(post, path = "/claims/{claim_id}/uploads", tag = "uploads",
    security(("bearer" = ["uploads:write"])),
    request_body(content_type = "multipart/form-data", description = "The field `file`"),
    responses(
        (status = 202, description = "Accepted", body = UploadAccepted, headers(("location" = String, description = "The upload's URL"))),
        (status = 400, description = "Not multipart, or no `file` field", body = ErrorBody),
        (status = 404, description = "`CLAIM_NOT_FOUND`", body = ErrorBody),
        (status = 413, description = "The file exceeds the tenant's `max_upload_bytes`", body = ErrorBody),
        (status = 422, description = "`UPLOAD_VIRUS_DETECTED`", body = ErrorBody),
    ))]
pub async fn upload(
    State(state): State<AppState>,
    who: Authorized<UploadsWrite>,
    Path(claim_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    claim_exists(&state, &who.tenant_id, &claim_id).await?;
    let boundary = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| multer::parse_boundary(ct).ok())
        .ok_or_else(|| ApiError::bad_request("the body must be multipart/form-data"))?;
    let limit = state
        .config_cache
        .settings(&who.tenant_id)
        .await?
        .max_upload_bytes;
    let received = receive(&state, body, boundary, limit).await?;

    let now = now_ms();
    let upload_id = format!("upl_{}", uuid::Uuid::now_v7().simple());
    let mut row = NewUpload {
        tenant_id: who.tenant_id.to_string(),
        upload_id: upload_id.clone(),
        claim_id: claim_id.clone(),
        status: UploadStatus::Pending,
        filename: received.filename,
        content_type: received.content_type,
        size_bytes: received.screened.size as i64,
        sha256: received.screened.sha256.clone(),
        object_key: None,
        verdict: Verdict::Pending,
        signature: None,
        failure: None,
        at_ms: now,
    };
    let bus = &state.bus;

    if let Some(signature) = received.screened.signature {
        // Nothing of an infected file is kept; its refusal is recorded and announced.
        state.objects.discard(received.staged).await;
        let message = format!("malware found while receiving: {signature}");
        row.status = UploadStatus::Failed;
        row.verdict = Verdict::Infected;
        row.signature = Some(signature);
        row.failure = Some(FailureView {
            code: FailureReason::VirusDetected.as_str().into(),
            message: message.clone(),
        });
        let event = failed_event(
            &who.tenant_id,
            &upload_id,
            &claim_id,
            FailureReason::VirusDetected,
            &message,
            ms_to_rfc3339(now),
        );
        intake::refuse(&state.store, bus, &state.topics.events, &row, &event).await?;
        tracing::info!(tenant_id = %who.tenant_id, %upload_id, "Upload refused: malware.");
        return Err(ApiError::Refused {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: "UPLOAD_VIRUS_DETECTED",
            message: message.into(),
            field: Some("file".into()),
        });
    }

    let key = format!("{}/{upload_id}", who.tenant_id);
    state
        .objects
        .commit(received.staged, &key)
        .await
        .map_err(ApiError::internal)?;
    row.object_key = Some(key.clone());
    let command = UploadReceived {
        tenant_id: who.tenant_id.clone(),
        upload_id: upload_id.clone(),
        claim_id: claim_id.clone(),
        object_key: key.clone(),
        content_type: row.content_type.clone(),
        size_bytes: row.size_bytes,
        sha256: row.sha256.clone(),
    };
    if let Err(e) = intake::accept(&state.store, bus, &state.topics.uploads, &row, &command).await {
        // Not accepted: the file must not outlive the failed request.
        if let Err(e) = state.objects.delete(&key).await {
            tracing::warn!(%key, error = %e, "An unaccepted upload's file could not be removed.");
        }
        return Err(e.into());
    }
    let mut res = (
        StatusCode::ACCEPTED,
        Json(UploadAccepted {
            upload_id: upload_id.clone(),
            claim_id,
            status: UploadStatus::Pending,
            size_bytes: row.size_bytes,
            sha256: row.sha256,
            content_type: row.content_type,
        }),
    )
        .into_response();
    if let Ok(v) = format!("/api/v1/uploads/{upload_id}").parse() {
        res.headers_mut().insert(LOCATION, v);
    }
    Ok(res)
}

/// Streams the `file` field into staging through the screen. Any failure removes the
/// staged file before answering.
async fn receive(
    state: &AppState,
    body: Body,
    boundary: String,
    limit: u64,
) -> Result<Received, ApiError> {
    let constraints = multer::Constraints::new().size_limit(
        multer::SizeLimit::new()
            .whole_stream(limit.saturating_add(MULTIPART_OVERHEAD))
            .for_field("file", limit),
    );
    let mut multipart =
        multer::Multipart::with_constraints(body.into_data_stream(), boundary, constraints);
    // The limits are multer's: it stops reading the body once the file passes them.
    let malformed = |e: multer::Error| match e {
        multer::Error::FieldSizeExceeded { .. } | multer::Error::StreamSizeExceeded { .. } => {
            ApiError::PayloadTooLarge {
                limit: usize::try_from(limit).unwrap_or(usize::MAX),
            }
        }
        other => ApiError::bad_request(format!("malformed multipart body: {other}")),
    };
    loop {
        let Some(mut field) = multipart.next_field().await.map_err(malformed)? else {
            return Err(ApiError::missing_field("file"));
        };
        if field.name() != Some("file") {
            continue;
        }
        let filename = clean_filename(field.file_name());
        let content_type = field
            .content_type()
            .map(|m| m.essence_str().to_owned())
            .unwrap_or_else(|| "application/octet-stream".into());
        if content_type.len() > MAX_CONTENT_TYPE_CHARS {
            return Err(ApiError::validation(
                "file",
                format!(
                    "the file's Content-Type must be at most {MAX_CONTENT_TYPE_CHARS} characters"
                ),
            ));
        }
        let mut staged = state.objects.stage().await.map_err(ApiError::internal)?;
        let mut screen = Screen::default();
        let copied: Result<(), ApiError> = async {
            while let Some(chunk) = field.chunk().await.map_err(malformed)? {
                screen.feed(&chunk);
                staged
                    .file
                    .write_all(&chunk)
                    .await
                    .map_err(ApiError::internal)?;
            }
            Ok(())
        }
        .await;
        if let Err(e) = copied {
            state.objects.discard(staged).await;
            return Err(e);
        }
        return Ok(Received {
            staged,
            filename,
            content_type,
            screened: screen.finish(&state.config.upload_known_bad_sha256),
        });
    }
}

/// The file name as given, without any path, control characters, characters that
/// reorder or hide text (bidirectional overrides and isolates, zero-width characters:
/// `invoice\u{202E}fdp.exe` would show as `invoiceexe.pdf`), or excess length.
fn clean_filename(name: Option<&str>) -> String {
    let base = name
        .unwrap_or_default()
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or_default();
    let clean: String = base
        .chars()
        .filter(|c| !c.is_control() && !is_invisible_format(*c))
        .take(MAX_FILENAME_CHARS)
        .collect();
    if clean.trim().is_empty() {
        "upload".into()
    } else {
        clean
    }
}

/// Unicode format characters that change how the text around them is shown.
fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// An upload with its scan verdict and extraction.
#[utoipa::path(get, path = "/uploads/{upload_id}", tag = "uploads",
    security(("bearer" = ["claims:read"])),
    responses((status = 200, description = "The upload", body = UploadView), (status = 404, description = "`NOT_FOUND`", body = ErrorBody)))]
pub async fn get_upload(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    Path(upload_id): Path<String>,
) -> Result<Json<UploadView>, ApiError> {
    state
        .store
        .upload(&who.tenant_id, &upload_id)
        .await?
        .map(Json)
        .ok_or_else(upload_not_found)
}

/// A claim's uploads, oldest first, in one page.
#[utoipa::path(get, path = "/claims/{claim_id}/uploads", tag = "uploads",
    security(("bearer" = ["claims:read"])),
    responses((status = 200, description = "The claim's uploads", body = Page<UploadView>), (status = 404, description = "`CLAIM_NOT_FOUND`", body = ErrorBody)))]
pub async fn list_uploads(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    Path(claim_id): Path<String>,
) -> Result<Json<Page<UploadView>>, ApiError> {
    claim_exists(&state, &who.tenant_id, &claim_id).await?;
    Ok(Json(Page {
        data: state
            .store
            .uploads_of_claim(&who.tenant_id, &claim_id)
            .await?,
        next_cursor: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_lose_paths_and_control_characters() {
        assert_eq!(clean_filename(Some("../../etc/passwd")), "passwd");
        assert_eq!(clean_filename(Some("C:\\docs\\bill.pdf")), "bill.pdf");
        assert_eq!(clean_filename(Some("a\u{0}b\nc.png")), "abc.png");
        assert_eq!(clean_filename(None), "upload");
        assert_eq!(
            clean_filename(Some("invoice\u{202E}fdp.exe")),
            "invoicefdp.exe"
        );
        assert_eq!(
            clean_filename(Some("a\u{2066}b\u{200B}c\u{FEFF}.pdf")),
            "abc.pdf"
        );
        assert_eq!(clean_filename(Some("x".repeat(300).as_str())).len(), 255);
    }
}
