//! `/rulebooks` (contract: Rulebooks). Expressions are compiled when the rulebook is
//! created, so a rulebook that exists always compiles.

use axum::extract::{Path, State};
use axum::response::Response;
use schemas::rulebook::{CreateRulebook, Rulebook};
use schemas::{ErrorBody, Page};

use super::providers::created_at;
use crate::auth::principal::scope::{RulebooksRead, RulebooksWrite};
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::http::list::ListParams;
use crate::state::AppState;

/// Create a draft rulebook; its `version` is one higher than the tenant's last.
#[utoipa::path(post, path = "/rulebooks", tag = "rulebooks",
    security(("bearer" = ["rulebooks:write"])),
    request_body = CreateRulebook,
    responses(
        (status = 201, description = "Created, status `draft`", body = Rulebook, headers(("location" = String, description = "The rulebook's URL"))),
        (status = 400, description = "Malformed body or a missing field", body = ErrorBody),
        (status = 422, description = "A rule is invalid or an expression does not compile; `field` is like `rules[1].when`", body = ErrorBody),
    ))]
pub async fn create_rulebook(
    State(state): State<AppState>,
    who: Authorized<RulebooksWrite>,
    Json(body): Json<CreateRulebook>,
) -> Result<Response, ApiError> {
    let name = body.name.trim();
    if name.is_empty() || name.len() > 200 {
        return Err(ApiError::validation("name", "must be 1-200 characters"));
    }
    pipeline::rules::compile(&body.rules).map_err(|e| ApiError::validation(e.field, e.message))?;
    let rulebook_id = format!("rb_{}", uuid::Uuid::now_v7().simple());
    let created = state
        .store
        .create_rulebook(
            &who.tenant_id,
            &rulebook_id,
            name,
            &body.rules,
            &who.user_id,
        )
        .await?;
    tracing::info!(tenant_id = %who.tenant_id, %rulebook_id, version = created.version, "Rulebook created.");
    Ok(created_at(
        format!("/api/v1/rulebooks/{rulebook_id}"),
        created,
    ))
}

/// Make this rulebook the tenant's only active one; the previously active one is
/// retired. Publishing a retired rulebook again rolls back to it.
#[utoipa::path(post, path = "/rulebooks/{rulebook_id}/publish", tag = "rulebooks",
    security(("bearer" = ["rulebooks:write"])),
    responses((status = 200, description = "Published, status `active`", body = Rulebook), (status = 404, description = "No such rulebook", body = ErrorBody)))]
pub async fn publish_rulebook(
    State(state): State<AppState>,
    who: Authorized<RulebooksWrite>,
    Path(rulebook_id): Path<String>,
) -> Result<Json<Rulebook>, ApiError> {
    let published = state
        .store
        .publish_rulebook(&who.tenant_id, &rulebook_id, &who.user_id)
        .await?;
    tracing::info!(tenant_id = %who.tenant_id, %rulebook_id, version = published.version, "Rulebook published.");
    Ok(Json(published))
}

/// The tenant's rulebooks, newest version first.
#[utoipa::path(get, path = "/rulebooks", tag = "rulebooks",
    security(("bearer" = ["rulebooks:read"])),
    params(("limit" = Option<i64>, Query, description = "1-500, default 50"), ("cursor" = Option<String>, Query, description = "From `next_cursor`")),
    responses((status = 200, description = "A page of rulebooks", body = Page<Rulebook>), (status = 422, description = "Bad limit or cursor", body = ErrorBody)))]
pub async fn list_rulebooks(
    State(state): State<AppState>,
    who: Authorized<RulebooksRead>,
    list: ListParams,
) -> Result<Json<Page<Rulebook>>, ApiError> {
    let before =
        match &list.after {
            None => None,
            Some(v) => Some(v.parse::<i64>().map_err(|_| {
                ApiError::validation("cursor", "is not a cursor this service issued")
            })?),
        };
    let items = state
        .store
        .rulebooks(&who.tenant_id, before, list.fetch_limit())
        .await?;
    Ok(Json(list.page(items, |r| r.version.to_string())))
}

/// The tenant's active rulebook.
#[utoipa::path(get, path = "/rulebooks/active", tag = "rulebooks",
    security(("bearer" = ["rulebooks:read"])),
    responses((status = 200, description = "The active rulebook", body = Rulebook), (status = 404, description = "No rulebook is active", body = ErrorBody)))]
pub async fn active_rulebook(
    State(state): State<AppState>,
    who: Authorized<RulebooksRead>,
) -> Result<Json<Rulebook>, ApiError> {
    state
        .store
        .active_rulebook(&who.tenant_id)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound)
}

/// One rulebook.
#[utoipa::path(get, path = "/rulebooks/{rulebook_id}", tag = "rulebooks",
    security(("bearer" = ["rulebooks:read"])),
    responses((status = 200, description = "The rulebook", body = Rulebook), (status = 404, description = "No such rulebook", body = ErrorBody)))]
pub async fn get_rulebook(
    State(state): State<AppState>,
    who: Authorized<RulebooksRead>,
    Path(rulebook_id): Path<String>,
) -> Result<Json<Rulebook>, ApiError> {
    state
        .store
        .rulebook(&who.tenant_id, &rulebook_id)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound)
}
