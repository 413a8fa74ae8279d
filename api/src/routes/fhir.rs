//! `/claims/{claim_id}/fhir` (contract part 2: Standard formats): a decided claim as a
//! FHIR R4 `ClaimResponse`, or with `?type=eob` an `ExplanationOfBenefit`, served as
//! `application/fhir+json`.

use axum::extract::{Path, Query, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use schemas::{fhir, ErrorBody};
use serde::Deserialize;
use utoipa::IntoParams;

use super::claims::claim_not_found;
use crate::auth::principal::scope::ClaimsRead;
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::state::AppState;

pub const MEDIA_TYPE: &str = "application/fhir+json";

#[derive(Debug, Deserialize, IntoParams)]
pub struct FhirParams {
    /// `claimresponse` (the default) or `eob`.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    pub kind: Option<String>,
}

/// The decided claim as FHIR R4: a `ClaimResponse` with each line's adjudication and
/// CARC reasons, or with `type=eob` an `ExplanationOfBenefit`.
#[utoipa::path(get, path = "/claims/{claim_id}/fhir", tag = "claims",
    security(("bearer" = ["claims:read"])),
    params(FhirParams),
    responses(
        (status = 200, description = "The FHIR resource", body = Object, content_type = "application/fhir+json"),
        (status = 404, description = "`CLAIM_NOT_FOUND`, or `NOT_FOUND` while the claim is not decided yet", body = ErrorBody),
        (status = 422, description = "`VALIDATION_ERROR` on `type`", body = ErrorBody),
    ))]
pub async fn get_fhir(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    Path(claim_id): Path<String>,
    Query(params): Query<FhirParams>,
) -> Result<Response, ApiError> {
    let eob = match params.kind.as_deref() {
        None | Some("claimresponse") => false,
        Some("eob") => true,
        Some(_) => return Err(ApiError::validation("type", "must be claimresponse or eob")),
    };
    let claim = state
        .store
        .claim(&who.tenant_id, &claim_id)
        .await?
        .ok_or_else(claim_not_found)?;
    if claim.outcome.is_none() {
        return Err(ApiError::Refused {
            status: StatusCode::NOT_FOUND,
            code: "NOT_FOUND",
            message: "the claim has not been decided yet".into(),
            field: None,
        });
    }
    let body = if eob {
        serde_json::to_vec(&fhir::explanation_of_benefit(&who.tenant_id, &claim))
    } else {
        serde_json::to_vec(&fhir::claim_response(&who.tenant_id, &claim))
    }
    .map_err(ApiError::internal)?;
    let mut res = body.into_response();
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    Ok(res)
}
