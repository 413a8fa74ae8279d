//! `/plans` (contract part 2: Plans and members). Writes need `tenant:configure`,
//! reads `claims:read`. A change to a plan applies to the claims processed after it.

use axum::extract::{Path, State};
use axum::response::Response;
use pipeline::store::StoreError;
use schemas::plan::{CreatePlan, PatchPlan, Plan};
use schemas::{ErrorBody, Page};

use super::providers::created_at;
use crate::auth::principal::scope::{ClaimsRead, TenantConfigure};
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::http::list::ListParams;
use crate::state::AppState;

/// Create a benefit plan.
#[utoipa::path(post, path = "/plans", tag = "members",
    security(("bearer" = ["tenant:configure"])),
    request_body = CreatePlan,
    responses(
        (status = 201, description = "Created", body = Plan, headers(("location" = String, description = "The plan's URL"))),
        (status = 400, description = "Malformed body or a missing field", body = ErrorBody),
        (status = 409, description = "The plan id is taken (`CONFLICT`, field `plan_id`)", body = ErrorBody),
        (status = 422, description = "A field is invalid; `field` names it", body = ErrorBody),
    ))]
pub async fn create_plan(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Json(body): Json<CreatePlan>,
) -> Result<Response, ApiError> {
    body.validate()?;
    let created = state
        .store
        .create_plan(&who.tenant_id, &body, &who.user_id)
        .await
        .map_err(|e| match e {
            StoreError::Conflict(_) => {
                ApiError::conflict_on("plan_id", "a plan with this plan_id exists")
            }
            other => other.into(),
        })?;
    state.config_cache.invalidate_tenant(&who.tenant_id).await;
    tracing::info!(tenant_id = %who.tenant_id, plan_id = %created.plan_id, "Plan created.");
    Ok(created_at(
        format!("/api/v1/plans/{}", created.plan_id),
        created,
    ))
}

/// List the tenant's plans, ordered by id.
#[utoipa::path(get, path = "/plans", tag = "members",
    security(("bearer" = ["claims:read"])),
    params(("limit" = Option<i64>, Query, description = "1-500, default 50"), ("cursor" = Option<String>, Query, description = "From `next_cursor`")),
    responses((status = 200, description = "A page of plans", body = Page<Plan>), (status = 422, description = "Bad limit or cursor", body = ErrorBody)))]
pub async fn list_plans(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    list: ListParams,
) -> Result<Json<Page<Plan>>, ApiError> {
    let items = state
        .store
        .plans(&who.tenant_id, list.after.as_deref(), list.fetch_limit())
        .await?;
    Ok(Json(list.page(items, |p| p.plan_id.clone())))
}

/// One plan.
#[utoipa::path(get, path = "/plans/{plan_id}", tag = "members",
    security(("bearer" = ["claims:read"])),
    responses((status = 200, description = "The plan", body = Plan), (status = 404, description = "No such plan in this tenant", body = ErrorBody)))]
pub async fn get_plan(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    Path(plan_id): Path<String>,
) -> Result<Json<Plan>, ApiError> {
    state
        .store
        .plan(&who.tenant_id, &plan_id)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound)
}

/// Change a plan's name or benefits (`benefits` is replaced whole). Claims processed
/// after the change use it.
#[utoipa::path(patch, path = "/plans/{plan_id}", tag = "members",
    security(("bearer" = ["tenant:configure"])),
    request_body = PatchPlan,
    responses(
        (status = 200, description = "The plan after the change", body = Plan),
        (status = 404, description = "No such plan in this tenant", body = ErrorBody),
        (status = 422, description = "A field is invalid; `field` names it", body = ErrorBody),
    ))]
pub async fn patch_plan(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Path(plan_id): Path<String>,
    Json(body): Json<PatchPlan>,
) -> Result<Json<Plan>, ApiError> {
    body.validate()?;
    let plan = state
        .store
        .update_plan(&who.tenant_id, &plan_id, &body, &who.user_id)
        .await?;
    state.config_cache.invalidate_tenant(&who.tenant_id).await;
    tracing::info!(tenant_id = %who.tenant_id, %plan_id, "Plan changed.");
    Ok(Json(plan))
}
