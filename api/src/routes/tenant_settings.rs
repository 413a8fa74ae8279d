//! `GET/PATCH /tenant/settings` (`tenant:configure`; contract: Tenants and users).

use axum::extract::State;
use schemas::tenant::{TenantSettings, TenantSettingsPatch};
use schemas::ErrorBody;

use crate::auth::principal::scope::TenantConfigure;
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::state::AppState;

/// The caller's tenant settings, defaults filled in.
#[utoipa::path(get, path = "/tenant/settings", tag = "tenant",
    security(("bearer" = ["tenant:configure"])),
    responses((status = 200, description = "The settings", body = TenantSettings)))]
pub async fn get_settings(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
) -> Result<Json<TenantSettings>, ApiError> {
    Ok(Json(state.store.tenant_settings(&who.tenant_id).await?))
}

/// Change some settings; fields left out keep their value. Changes apply at once.
#[utoipa::path(patch, path = "/tenant/settings", tag = "tenant",
    security(("bearer" = ["tenant:configure"])),
    request_body = TenantSettingsPatch,
    responses(
        (status = 200, description = "The settings after the change", body = TenantSettings),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 422, description = "A setting out of range; `field` names it", body = ErrorBody),
    ))]
pub async fn patch_settings(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Json(patch): Json<TenantSettingsPatch>,
) -> Result<Json<TenantSettings>, ApiError> {
    let next = state
        .store
        .update_tenant_settings(&who.tenant_id, &who.user_id, |current| patch.apply(current))
        .await?
        .map_err(|bad| ApiError::validation(bad.field, bad.message))?;
    state.config_cache.invalidate_tenant(&who.tenant_id).await;
    tracing::info!(tenant_id = %who.tenant_id, user_id = %who.user_id, "Tenant settings changed.");
    Ok(Json(next))
}
