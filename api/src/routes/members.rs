//! `/members` (contract part 2: Plans and members): one at a time, or imported in bulk
//! (NDJSON or a JSON array of up to 10,000, upserted, a result per item in input
//! order). Writes need `tenant:configure`, reads `claims:read`.

use std::collections::{HashMap, HashSet};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use pipeline::store::{StoreError, Upserted};
use schemas::member::{Accumulators, Member, NewMember, PatchMember, MAX_IMPORT};
use schemas::{Date, ErrorBody};
use serde::Serialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::providers::created_at;
use crate::auth::principal::scope::{ClaimsRead, TenantConfigure};
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::items::{self, ItemError};
use crate::http::json::{self, Json};
use crate::state::AppState;

fn no_plan() -> ApiError {
    ApiError::validation("plan_id", "no plan with this plan_id in the tenant")
}

/// Add a member to the roster.
#[utoipa::path(post, path = "/members", tag = "members",
    security(("bearer" = ["tenant:configure"])),
    request_body = NewMember,
    responses(
        (status = 201, description = "Created", body = Member, headers(("location" = String, description = "The member's URL"))),
        (status = 400, description = "Malformed body or a missing field", body = ErrorBody),
        (status = 409, description = "The member id is taken (`CONFLICT`, field `member_id`)", body = ErrorBody),
        (status = 422, description = "A field is invalid, or the plan does not exist; `field` names it", body = ErrorBody),
    ))]
pub async fn create_member(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Json(body): Json<NewMember>,
) -> Result<Response, ApiError> {
    body.validate(Date::today_utc())?;
    if state
        .store
        .plan(&who.tenant_id, body.plan_id.as_str())
        .await?
        .is_none()
    {
        return Err(no_plan());
    }
    let created = state
        .store
        .create_member(&who.tenant_id, &body, &who.user_id)
        .await
        .map_err(|e| match e {
            StoreError::Conflict(_) => {
                ApiError::conflict_on("member_id", "a member with this member_id exists")
            }
            other => other.into(),
        })?;
    state.config_cache.invalidate_tenant(&who.tenant_id).await;
    Ok(created_at(
        format!("/api/v1/members/{}", created.member_id),
        created,
    ))
}

/// One member.
#[utoipa::path(get, path = "/members/{member_id}", tag = "members",
    security(("bearer" = ["claims:read"])),
    responses((status = 200, description = "The member", body = Member), (status = 404, description = "No such member in this tenant", body = ErrorBody)))]
pub async fn get_member(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    Path(member_id): Path<String>,
) -> Result<Json<Member>, ApiError> {
    state
        .store
        .member(&who.tenant_id, &member_id)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound)
}

/// What a member has used of their benefits in a calendar year: the claims with a final
/// payable outcome counted, less those voided or replaced.
#[utoipa::path(get, path = "/members/{member_id}/accumulators", tag = "members",
    security(("bearer" = ["claims:read"])),
    params(("year" = Option<i32>, Query, description = "Calendar year (1900-9999); the current one by default")),
    responses(
        (status = 200, description = "The member's accumulators for the year", body = Accumulators),
        (status = 404, description = "No such member in this tenant", body = ErrorBody),
        (status = 422, description = "Bad year", body = ErrorBody),
    ))]
pub async fn get_accumulators(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    Path(member_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Accumulators>, ApiError> {
    let year = match query.get("year") {
        None => Date::today_utc().year(),
        Some(y) => y
            .parse::<i32>()
            .ok()
            .filter(|y| (1900..=9999).contains(y))
            .ok_or_else(|| ApiError::validation("year", "must be a year from 1900 to 9999"))?,
    };
    if state
        .store
        .member(&who.tenant_id, &member_id)
        .await?
        .is_none()
    {
        return Err(ApiError::NotFound);
    }
    let used = state
        .store
        .member_accumulators(&who.tenant_id, &member_id, year)
        .await?;
    Ok(Json(Accumulators {
        member_id,
        year,
        deductible_met: used.deductible,
        out_of_pocket_met: used.out_of_pocket,
        paid: used.paid,
        visits: used.visits.into(),
    }))
}

/// Change a member's plan or coverage (`coverage` is replaced whole).
#[utoipa::path(patch, path = "/members/{member_id}", tag = "members",
    security(("bearer" = ["tenant:configure"])),
    request_body = PatchMember,
    responses(
        (status = 200, description = "The member after the change", body = Member),
        (status = 404, description = "No such member in this tenant", body = ErrorBody),
        (status = 422, description = "A field is invalid, or the plan does not exist; `field` names it", body = ErrorBody),
    ))]
pub async fn patch_member(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Path(member_id): Path<String>,
    Json(body): Json<PatchMember>,
) -> Result<Json<Member>, ApiError> {
    body.validate()?;
    if let Some(plan_id) = &body.plan_id {
        if state
            .store
            .plan(&who.tenant_id, plan_id.as_str())
            .await?
            .is_none()
        {
            return Err(no_plan());
        }
    }
    let member = state
        .store
        .update_member(&who.tenant_id, &member_id, &body, &who.user_id)
        .await?;
    state.config_cache.invalidate_tenant(&who.tenant_id).await;
    Ok(Json(member))
}

/// One item's result in an import.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ImportItem {
    Imported {
        member_id: String,
        /// `created` or `updated`
        status: &'static str,
    },
    Rejected {
        member_id: Option<String>,
        error: ItemError,
    },
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ImportResult {
    pub imported: usize,
    pub rejected: usize,
    /// In input order.
    pub results: Vec<ImportItem>,
}

/// Import up to 10,000 members at once, as a JSON array or as `application/x-ndjson`.
///
/// Each item is checked as `POST /members` checks a member; the good ones are upserted
/// together, in one transaction, in input order (a member named twice ends as its last
/// item says). Answers 200 with a result per item, in input order.
#[utoipa::path(post, path = "/members/import", tag = "members",
    security(("bearer" = ["tenant:configure"])),
    request_body(content = Vec<NewMember>, description = "A JSON array, or one member per line with Content-Type application/x-ndjson"),
    responses(
        (status = 200, description = "A result per item", body = ImportResult),
        (status = 400, description = "Not a JSON array or NDJSON", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 422, description = "More than 10,000 members", body = ErrorBody),
    ))]
pub async fn import_members(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<ImportResult>, ApiError> {
    let raw = items::split(&headers, &body, "members")?;
    if raw.len() > MAX_IMPORT {
        return Err(ApiError::Validation {
            message: format!("an import holds at most {MAX_IMPORT} members").into(),
            field: None,
        });
    }
    let plans = state.store.plan_ids(&who.tenant_id).await?;
    let (mut results, slots, members) = check_items(raw, &plans, Date::today_utc())?;
    let refs: Vec<&NewMember> = members.iter().collect();
    let outcomes = state
        .store
        .import_members(&who.tenant_id, &refs, &who.user_id)
        .await?;
    state.config_cache.invalidate_tenant(&who.tenant_id).await;
    for ((slot, m), outcome) in slots.into_iter().zip(&members).zip(outcomes) {
        results[slot] = Some(ImportItem::Imported {
            member_id: m.member_id.to_string(),
            status: match outcome {
                Upserted::Created => "created",
                Upserted::Updated => "updated",
            },
        });
    }
    let results: Vec<ImportItem> = results.into_iter().flatten().collect();
    let imported = members.len();
    tracing::info!(tenant_id = %who.tenant_id, imported, rejected = results.len() - imported, "Members imported.");
    Ok(Json(ImportResult {
        imported,
        rejected: results.len() - imported,
        results,
    }))
}

/// Per item its refusal, or the slot of the member to write.
type Checked = (Vec<Option<ImportItem>>, Vec<usize>, Vec<NewMember>);

fn check_items(
    raw: Vec<&RawValue>,
    plans: &HashSet<String>,
    today: Date,
) -> Result<Checked, ApiError> {
    let mut results = Vec::with_capacity(raw.len());
    let (mut slots, mut members) = (Vec::new(), Vec::new());
    for (i, item) in raw.into_iter().enumerate() {
        let hint = items::hint(item, "member_id");
        let checked = json::parse::<NewMember>(item.get().as_bytes()).and_then(|m| {
            m.validate(today)?;
            if !plans.contains(m.plan_id.as_str()) {
                return Err(no_plan());
            }
            Ok(m)
        });
        match checked {
            Ok(m) => {
                results.push(None);
                slots.push(i);
                members.push(m);
            }
            Err(e) => results.push(Some(ImportItem::Rejected {
                member_id: hint,
                error: items::item_error(e)?,
            })),
        }
    }
    Ok((results, slots, members))
}
