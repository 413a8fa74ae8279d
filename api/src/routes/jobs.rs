//! `POST /claims/reprocess` and `GET /jobs/{job_id}` (contract part 2): the tenant's
//! claims pending review decided again with the active rulebook, as a job. The job
//! and its items are on disk before the 202; the pipeline's job runner does the work
//! (see `pipeline::reprocess`).

use axum::extract::{Path, State};
use axum::http::header::LOCATION;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use schemas::job::{JobView, ReprocessAccepted, ReprocessRequest};
use schemas::ErrorBody;

use crate::auth::principal::scope::{ClaimsRead, ClaimsWrite};
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::state::AppState;

/// Decide the tenant's claims pending review again with the active rulebook: each gets
/// a new decision, audit record and events, and the review task of a claim that no
/// longer needs review is closed.
#[utoipa::path(post, path = "/claims/reprocess", tag = "claims",
    security(("bearer" = ["claims:write"])),
    request_body = ReprocessRequest,
    responses(
        (status = 202, description = "The job is started; `claims` it covers", body = ReprocessAccepted,
         headers(("location" = String, description = "The job's URL"))),
        (status = 400, description = "Malformed body or a missing field", body = ErrorBody),
        (status = 409, description = "The tenant has no active rulebook", body = ErrorBody),
        (status = 422, description = "`status` other than `pending_review` or `rulebook` other than `active`", body = ErrorBody),
    ))]
pub async fn reprocess_claims(
    State(state): State<AppState>,
    who: Authorized<ClaimsWrite>,
    Json(body): Json<ReprocessRequest>,
) -> Result<Response, ApiError> {
    if body.status != "pending_review" {
        return Err(ApiError::validation(
            "status",
            "only claims pending review are reprocessed: pending_review",
        ));
    }
    if body.rulebook != "active" {
        return Err(ApiError::validation(
            "rulebook",
            "claims are reprocessed with the active rulebook: active",
        ));
    }
    let active = state
        .store
        .active_rulebook(&who.tenant_id)
        .await?
        .ok_or_else(|| ApiError::conflict("the tenant has no active rulebook"))?;
    let job_id = format!("job_{}", uuid::Uuid::now_v7().simple());
    let claims = state
        .store
        .create_reprocess_job(
            &who.tenant_id,
            &job_id,
            (&active.rulebook_id, active.version),
            &who.user_id,
        )
        .await?;
    tracing::info!(tenant_id = %who.tenant_id, %job_id, claims, rulebook_id = %active.rulebook_id, "Reprocess job started.");
    let location = format!("/api/v1/jobs/{job_id}");
    let mut res = (
        StatusCode::ACCEPTED,
        Json(ReprocessAccepted { job_id, claims }),
    )
        .into_response();
    if let Ok(v) = location.parse() {
        res.headers_mut().insert(LOCATION, v);
    }
    Ok(res)
}

/// A job's progress: a bulk reprocess, or a webhook replay (its events delivered and
/// failed for good).
#[utoipa::path(get, path = "/jobs/{job_id}", tag = "claims",
    security(("bearer" = ["claims:read"])),
    responses(
        (status = 200, description = "The job", body = JobView),
        (status = 404, description = "No such job", body = ErrorBody),
    ))]
pub async fn get_job(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    Path(job_id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    let job = if job_id.starts_with("rpl_") {
        state.store.replay_job(&who.tenant_id, &job_id).await?
    } else {
        state.store.job(&who.tenant_id, &job_id).await?
    };
    job.map(Json).ok_or(ApiError::NotFound)
}
