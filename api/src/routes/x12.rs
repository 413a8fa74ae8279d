//! `/claims/x12` and `/x12/batches` (contract part 2: Standard formats): an 837P or
//! 837I interchange taken through exactly the path of batch intake, answered with a
//! result per claim, and the 999 and 277CA kept for the submitter to fetch.
//!
//! An interchange that cannot be read (no ISA, cut short, a group of another kind) is
//! refused with 400 and a 999 rejecting it, and changes nothing. A transaction set whose
//! trailer does not match is rejected by the 999, and its claims are refused. A claim
//! that cannot be mapped (an amount that is not dollars, a frequency the service does
//! not take, no billing NPI) is refused alone, noted in the 999 and rejected in the
//! 277CA with the reason; so is a claim that fails intake's own checks.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use pipeline::clock::now_ms;
use pipeline::store::{X12Ack, X12Batch};
use schemas::claim::ClaimSubmission;
use schemas::id::ClientId;
use schemas::x12::claim837::{read_837, Claim837, Read837};
use schemas::x12::envelope::Stamp;
use schemas::x12::{ack277ca, ack999};
use schemas::ErrorBody;
use serde::Serialize;
use utoipa::ToSchema;

use super::claims::{admit, check_items, BatchItem, Item, MAX_BATCH};
use crate::auth::principal::scope::{ClaimsRead, ClaimsWrite};
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::state::AppState;

pub const MEDIA_TYPE: &str = "application/edi-x12";

/// What `POST /claims/x12` answers: a result per claim in interchange order, and the
/// batch whose acknowledgments can be fetched.
#[derive(Debug, Serialize, ToSchema)]
pub struct X12BatchResult {
    pub batch_id: String,
    pub accepted: usize,
    pub rejected: usize,
    pub results: Vec<BatchItem>,
}

/// A control number for an acknowledgment's ISA13 and GS06: random, as nothing ties it
/// to the sender's numbering, and unlikely to repeat within a receiver's duplicate
/// window.
fn control_number() -> u32 {
    use rand::Rng;
    rand::thread_rng().gen_range(1..=999_999_999)
}

fn refused(field: &str, message: String) -> ApiError {
    ApiError::validation(field.to_owned(), message)
}

/// One claim of the interchange as intake takes it, or why it cannot be taken.
fn submission(
    c: &mut Claim837,
    set_rejected: Option<&str>,
    providers: &HashMap<String, String>,
) -> Result<ClaimSubmission, ApiError> {
    if let Some(why) = set_rejected {
        return Err(refused(
            "claim",
            format!(
                "its transaction set {} is rejected by the 999: {why}",
                c.set_control
            ),
        ));
    }
    if let Some(p) = &c.problem {
        return Err(refused(p.field, p.message.clone()));
    }
    let id = |field: &str, v: &str| {
        ClientId::parse(v).map_err(|e| refused(field, format!("`{v}`: {e}")))
    };
    let provider_id = providers.get(&c.billing_npi).ok_or_else(|| {
        refused(
            "provider_id",
            format!(
                "no provider of the tenant has the billing NPI {}",
                c.billing_npi
            ),
        )
    })?;
    Ok(ClaimSubmission {
        claim_id: id("claim_id", &c.claim_id)?,
        member_id: id("member_id", &c.member_id)?,
        provider_id: id("provider_id", provider_id)?,
        claim_amount: c.amount,
        service_date: c
            .service_date
            .ok_or_else(|| refused("service_date", "no service date".into()))?,
        // Moved, not copied: the acknowledgments need neither.
        lines: std::mem::take(&mut c.lines),
        diagnosis_codes: std::mem::take(&mut c.diagnosis_codes),
        metadata: Default::default(),
        frequency: c.frequency,
        replaces_claim_id: c
            .replaces_claim_id
            .as_deref()
            .map(|r| id("replaces_claim_id", r))
            .transpose()?,
    })
}

fn unreadable(bad: &schemas::x12::claim837::Unreadable) -> ApiError {
    let ack = ack999::rejecting(bad, Stamp::from_unix_ms(now_ms()), control_number());
    ApiError::BadRequestWithDetails {
        message: format!("the interchange cannot be read: {}", bad.error).into(),
        details: Box::new(serde_json::json!({ "999": ack })),
    }
}

/// Submit an X12 837P (005010X222A1) or 837I (005010X223A2) interchange of up to 10,000
/// claims.
///
/// Each claim is mapped as the contract says and checked exactly as batch intake checks
/// a claim; the accepted ones are stored together, in one transaction. The 999 and the
/// 277CA are then at `/x12/batches/{batch_id}/999` and `/277ca`.
#[utoipa::path(post, path = "/claims/x12", tag = "claims",
    security(("bearer" = ["claims:write"])),
    request_body(content = String, content_type = "application/edi-x12", description = "One 837P or 837I interchange"),
    responses(
        (status = 200, description = "A result per claim, in interchange order", body = X12BatchResult),
        (status = 400, description = "`BAD_REQUEST`: the interchange cannot be read; `details.999` rejects it", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 422, description = "More than 10,000 claims", body = ErrorBody),
    ))]
pub async fn x12_intake(
    State(state): State<AppState>,
    who: Authorized<ClaimsWrite>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<X12BatchResult>, ApiError> {
    let mime = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    if mime.as_deref() != Some(MEDIA_TYPE) {
        return Err(ApiError::bad_request(format!(
            "the body must be an X12 interchange with Content-Type {MEDIA_TYPE}"
        )));
    }
    let text = std::str::from_utf8(&body)
        .map_err(|_| ApiError::bad_request("an X12 interchange is ASCII text"))?;
    let mut read: Read837 = pipeline::cpu::heavy(async { read_837(text) })
        .await
        .map_err(|bad| unreadable(&bad))?;
    let total = read.claims().count();
    if total > MAX_BATCH {
        return Err(ApiError::Validation {
            message: format!(
                "an interchange holds at most {MAX_BATCH} claims; this one has {total}"
            )
            .into(),
            field: None,
        });
    }
    let mut npis: Vec<&str> = read.claims().map(|c| c.billing_npi.as_str()).collect();
    npis.sort_unstable();
    npis.dedup();
    let providers = state.store.providers_by_npi(&who.tenant_id, &npis).await?;
    let items: Vec<Item> = read
        .sets
        .iter_mut()
        .flat_map(|s| {
            let rejected = s.rejected.as_ref().map(|r| r.1.as_str());
            let providers = &providers;
            s.claims.iter_mut().map(move |c| {
                let hint = (!c.claim_id.is_empty()).then(|| c.claim_id.clone());
                (hint, submission(c, rejected, providers))
            })
        })
        .collect();
    let checked = pipeline::cpu::heavy(check_items(&state, &who.tenant_id, items)).await?;
    let result = admit(&state, &who.user_id, checked).await?;
    let acks: Vec<ack277ca::ClaimAck> = result
        .results
        .iter()
        .map(|r| match r {
            BatchItem::Accepted { .. } => Ok(()),
            BatchItem::Rejected { error, .. } => Err(match &error.field {
                Some(f) => format!("{} ({f}): {}", error.code, error.message),
                None => format!("{}: {}", error.code, error.message),
            }),
        })
        .collect();
    let batch_id = format!("x12_{}", uuid::Uuid::now_v7().simple());
    let stamp = Stamp::from_unix_ms(now_ms());
    let control = control_number();
    let ack_999 = ack999::accepting(&read, stamp, control);
    let ack_277ca = ack277ca::render(&read, &acks, &batch_id, stamp, control % 999_999_999 + 1);
    let batch = X12Batch {
        batch_id: &batch_id,
        version: &read.version,
        accepted: result.accepted as i64,
        rejected: result.rejected as i64,
        ack_999: &ack_999,
        ack_277ca: &ack_277ca,
    };
    pipeline::acknowledgments::record(
        &state.store,
        &state.bus,
        &state.topics,
        &who.tenant_id,
        &batch,
    )
    .await?;
    tracing::info!(tenant_id = %who.tenant_id, %batch_id, accepted = result.accepted, rejected = result.rejected, "X12 interchange received.");
    Ok(Json(X12BatchResult {
        batch_id,
        accepted: result.accepted,
        rejected: result.rejected,
        results: result.results,
    }))
}

async fn ack(
    state: &AppState,
    tenant_id: &str,
    batch_id: &str,
    which: X12Ack,
) -> Result<Response, ApiError> {
    let text = state
        .store
        .x12_ack(tenant_id, batch_id, which)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(edi(text))
}

/// An X12 document as a response, served as `application/edi-x12`.
pub(crate) fn edi(text: String) -> Response {
    let mut res = text.into_response();
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    res
}

/// The 999 implementation acknowledgment (005010X231A1) of an interchange taken.
#[utoipa::path(get, path = "/x12/batches/{batch_id}/999", tag = "claims",
    security(("bearer" = ["claims:read"])),
    responses(
        (status = 200, description = "The 999", body = String, content_type = "application/edi-x12"),
        (status = 404, description = "`NOT_FOUND`: no such batch of the tenant", body = ErrorBody),
    ))]
pub async fn get_999(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    Path(batch_id): Path<String>,
) -> Result<Response, ApiError> {
    ack(&state, &who.tenant_id, &batch_id, X12Ack::Implementation999).await
}

/// The 277CA claim acknowledgment (005010X214) of an interchange taken: one status per
/// claim.
#[utoipa::path(get, path = "/x12/batches/{batch_id}/277ca", tag = "claims",
    security(("bearer" = ["claims:read"])),
    responses(
        (status = 200, description = "The 277CA", body = String, content_type = "application/edi-x12"),
        (status = 404, description = "`NOT_FOUND`: no such batch of the tenant", body = ErrorBody),
    ))]
pub async fn get_277ca(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    Path(batch_id): Path<String>,
) -> Result<Response, ApiError> {
    ack(&state, &who.tenant_id, &batch_id, X12Ack::ClaimStatus277Ca).await
}
