//! `GET /health/live` and `GET /health/ready` (contract: Operations).

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::state::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`
    pub status: &'static str,
}

/// The process is running.
#[utoipa::path(get, path = "/health/live", tag = "operations",
    responses((status = 200, description = "Alive", body = Health)))]
pub async fn live() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// The process can serve requests: its store answers.
#[utoipa::path(get, path = "/health/ready", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "The store does not answer", body = schemas::ErrorBody),
    ))]
pub async fn ready(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    match state.store.ping().await {
        Ok(()) => Ok(Json(Health { status: "ok" })),
        Err(e) => {
            tracing::warn!(error = %e, "Readiness check failed.");
            Err(ApiError::Unavailable)
        }
    }
}
