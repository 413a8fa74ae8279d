//! `/providers` and `/providers/{provider_id}/contracts` (contract: Providers and
//! contracts).

use axum::extract::{Path, State};
use axum::http::header::LOCATION;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pipeline::store::{NewContract, NewProvider, StoreError};
use schemas::provider::{
    is_valid_npi, Contract, CreateContract, CreateProvider, PatchContract, Provider,
};
use schemas::{ErrorBody, Page};

use crate::auth::principal::scope::{ProvidersRead, ProvidersWrite};
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::http::list::ListParams;
use crate::state::AppState;

/// Register a provider.
#[utoipa::path(post, path = "/providers", tag = "providers",
    security(("bearer" = ["providers:write"])),
    request_body = CreateProvider,
    responses(
        (status = 201, description = "Created", body = Provider, headers(("location" = String, description = "The provider's URL"))),
        (status = 400, description = "Malformed body or a missing field", body = ErrorBody),
        (status = 409, description = "The provider id is taken (`CONFLICT`)", body = ErrorBody),
        (status = 422, description = "A field is invalid; `field` names it", body = ErrorBody),
    ))]
pub async fn create_provider(
    State(state): State<AppState>,
    who: Authorized<ProvidersWrite>,
    Json(body): Json<CreateProvider>,
) -> Result<Response, ApiError> {
    let name = body.name.trim();
    if name.is_empty() || name.len() > 200 {
        return Err(ApiError::validation("name", "must be 1-200 characters"));
    }
    if let Some(npi) = &body.npi {
        if !is_valid_npi(npi) {
            return Err(ApiError::validation(
                "npi",
                "must be a 10-digit NPI with a valid check digit",
            ));
        }
    }
    if body.specialty.as_ref().is_some_and(|s| s.len() > 200) {
        return Err(ApiError::validation(
            "specialty",
            "must be at most 200 characters",
        ));
    }
    let created = state
        .store
        .create_provider(
            NewProvider {
                tenant_id: &who.tenant_id,
                provider_id: body.provider_id.as_str(),
                name,
                npi: body.npi.as_deref(),
                specialty: body.specialty.as_deref(),
            },
            &who.user_id,
        )
        .await
        .map_err(|e| match e {
            StoreError::Conflict(_) => {
                ApiError::conflict("a provider with this provider_id exists")
            }
            other => other.into(),
        })?;
    tracing::info!(tenant_id = %who.tenant_id, provider_id = %created.provider_id, "Provider created.");
    Ok(created_at(
        format!("/api/v1/providers/{}", created.provider_id),
        created,
    ))
}

/// List the tenant's providers, ordered by id.
#[utoipa::path(get, path = "/providers", tag = "providers",
    security(("bearer" = ["providers:read"])),
    params(("limit" = Option<i64>, Query, description = "1-500, default 50"), ("cursor" = Option<String>, Query, description = "From `next_cursor`")),
    responses((status = 200, description = "A page of providers", body = Page<Provider>), (status = 422, description = "Bad limit or cursor", body = ErrorBody)))]
pub async fn list_providers(
    State(state): State<AppState>,
    who: Authorized<ProvidersRead>,
    list: ListParams,
) -> Result<Json<Page<Provider>>, ApiError> {
    let items = state
        .store
        .providers(&who.tenant_id, list.after.as_deref(), list.fetch_limit())
        .await?;
    Ok(Json(list.page(items, |p| p.provider_id.clone())))
}

/// One provider.
#[utoipa::path(get, path = "/providers/{provider_id}", tag = "providers",
    security(("bearer" = ["providers:read"])),
    responses((status = 200, description = "The provider", body = Provider), (status = 404, description = "No such provider in this tenant", body = ErrorBody)))]
pub async fn get_provider(
    State(state): State<AppState>,
    who: Authorized<ProvidersRead>,
    Path(provider_id): Path<String>,
) -> Result<Json<Provider>, ApiError> {
    state
        .store
        .provider(&who.tenant_id, &provider_id)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound)
}

/// Contract a provider: an `active` contract from `effective_from` to `effective_to`
/// (open-ended when absent), with an optional fee schedule of maximum amounts per unit.
#[utoipa::path(post, path = "/providers/{provider_id}/contracts", tag = "providers",
    security(("bearer" = ["providers:write"])),
    request_body = CreateContract,
    responses(
        (status = 201, description = "Created, status `active`", body = Contract, headers(("location" = String, description = "The contract's URL"))),
        (status = 400, description = "Malformed body or a missing field", body = ErrorBody),
        (status = 404, description = "No such provider in this tenant", body = ErrorBody),
        (status = 422, description = "A field is invalid; `field` names it", body = ErrorBody),
    ))]
pub async fn create_contract(
    State(state): State<AppState>,
    who: Authorized<ProvidersWrite>,
    Path(provider_id): Path<String>,
    Json(body): Json<CreateContract>,
) -> Result<Response, ApiError> {
    if body.effective_to.is_some_and(|to| to < body.effective_from) {
        return Err(ApiError::validation(
            "effective_to",
            "must not be before effective_from",
        ));
    }
    for (code, max) in &body.fee_schedule {
        if code.is_empty() || code.len() > 32 {
            return Err(ApiError::validation(
                format!("fee_schedule.{code}"),
                "procedure codes are 1-32 characters",
            ));
        }
        if *max <= 0 {
            return Err(ApiError::validation(
                format!("fee_schedule.{code}"),
                "must be a positive amount in minor units",
            ));
        }
    }
    let contract_id = format!("ctr_{}", uuid::Uuid::now_v7().simple());
    let created = state
        .store
        .create_contract(
            NewContract {
                tenant_id: &who.tenant_id,
                provider_id: &provider_id,
                contract_id: &contract_id,
                effective_from: body.effective_from,
                effective_to: body.effective_to,
                fee_schedule: &body.fee_schedule,
            },
            &who.user_id,
        )
        .await?;
    state.config_cache.invalidate_tenant(&who.tenant_id).await;
    tracing::info!(tenant_id = %who.tenant_id, %provider_id, %contract_id, "Contract created.");
    Ok(created_at(
        format!("/api/v1/providers/{provider_id}/contracts/{contract_id}"),
        created,
    ))
}

/// A provider's contracts.
#[utoipa::path(get, path = "/providers/{provider_id}/contracts", tag = "providers",
    security(("bearer" = ["providers:read"])),
    params(("limit" = Option<i64>, Query, description = "1-500, default 50"), ("cursor" = Option<String>, Query, description = "From `next_cursor`")),
    responses((status = 200, description = "A page of contracts", body = Page<Contract>), (status = 404, description = "No such provider", body = ErrorBody), (status = 422, description = "Bad limit or cursor", body = ErrorBody)))]
pub async fn list_contracts(
    State(state): State<AppState>,
    who: Authorized<ProvidersRead>,
    Path(provider_id): Path<String>,
    list: ListParams,
) -> Result<Json<Page<Contract>>, ApiError> {
    if state
        .store
        .provider(&who.tenant_id, &provider_id)
        .await?
        .is_none()
    {
        return Err(ApiError::NotFound);
    }
    let items = state
        .store
        .contracts(
            &who.tenant_id,
            &provider_id,
            list.after.as_deref(),
            list.fetch_limit(),
        )
        .await?;
    Ok(Json(list.page(items, |c| c.contract_id.clone())))
}

/// Change a contract's status: `active`, `suspended` or `terminated` (final).
#[utoipa::path(patch, path = "/providers/{provider_id}/contracts/{contract_id}", tag = "providers",
    security(("bearer" = ["providers:write"])),
    request_body = PatchContract,
    responses(
        (status = 200, description = "The contract after the change", body = Contract),
        (status = 404, description = "No such contract", body = ErrorBody),
        (status = 409, description = "The contract is terminated (`CONFLICT`)", body = ErrorBody),
        (status = 422, description = "Unknown status", body = ErrorBody),
    ))]
pub async fn patch_contract(
    State(state): State<AppState>,
    who: Authorized<ProvidersWrite>,
    Path((provider_id, contract_id)): Path<(String, String)>,
    Json(body): Json<PatchContract>,
) -> Result<Json<Contract>, ApiError> {
    let contract = state
        .store
        .set_contract_status(
            &who.tenant_id,
            &provider_id,
            &contract_id,
            body.status,
            &who.user_id,
        )
        .await
        .map_err(|e| match e {
            StoreError::Conflict(m) => ApiError::conflict(m),
            other => other.into(),
        })?;
    state.config_cache.invalidate_tenant(&who.tenant_id).await;
    tracing::info!(tenant_id = %who.tenant_id, %contract_id, status = body.status.as_str(), "Contract status changed.");
    Ok(Json(contract))
}

/// 201 with `Location` and the created resource.
pub fn created_at<T: serde::Serialize>(location: String, body: T) -> Response {
    let mut res = (StatusCode::CREATED, Json(body)).into_response();
    if let Ok(v) = location.parse() {
        res.headers_mut().insert(LOCATION, v);
    }
    res
}
