//! `/claims` (contract: Claims): intake, batch intake and reads.
//!
//! Intake checks, in order: the body (400/422), an active rulebook (409
//! `RULEBOOK_NOT_ACTIVE`), the provider's contract today (422 `PROVIDER_NOT_CONTRACTED`),
//! then stores the claim and its command in one transaction, where the claim id decides
//! duplicates (409 `CLAIM_DUPLICATE`). A replacement or a void must name a claim of the
//! tenant (404 `CLAIM_NOT_FOUND`) of the same member that is completed and not replaced
//! or voided already (409 `CONFLICT` on `replaces_claim_id`). Batch intake checks each
//! item the same way and stores all accepted items in one transaction.

use std::collections::{HashMap, HashSet};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::LOCATION;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use pipeline::clock::{ms_to_rfc3339, now_ms};
use pipeline::config_cache::ActiveRulebook;
use pipeline::intake::Admitted;
use pipeline::model::ClaimSubmitted;
use pipeline::store::{ClaimFilter, Unreplaceable};
use schemas::claim::{Accepted, ClaimStatus, ClaimSubmission, ClaimView, Outcome};
use schemas::receipt::FraudReasonView;
use schemas::{Date, ErrorBody, Page, TenantId};
use serde::Serialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::auth::principal::scope::{ClaimsRead, ClaimsWrite, FraudRead};
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::items::{self, ItemError};
use crate::http::json::{self, Json};
use crate::http::list::{encode_cursor, ListParams};
use crate::state::AppState;

/// The most claims one batch may carry.
pub const MAX_BATCH: usize = 10_000;

pub(crate) fn claim_not_found() -> ApiError {
    ApiError::Refused {
        status: StatusCode::NOT_FOUND,
        code: "CLAIM_NOT_FOUND",
        message: "no claim with this claim_id exists for the tenant".into(),
        field: None,
    }
}

fn duplicate() -> ApiError {
    ApiError::Refused {
        status: StatusCode::CONFLICT,
        code: "CLAIM_DUPLICATE",
        message: "a claim with this claim_id already exists for the tenant".into(),
        field: Some("claim_id".into()),
    }
}

fn not_replaceable(why: Unreplaceable) -> ApiError {
    match why {
        Unreplaceable::Missing => ApiError::Refused {
            status: StatusCode::NOT_FOUND,
            code: "CLAIM_NOT_FOUND",
            message: "replaces_claim_id: no claim with this claim_id exists for the tenant".into(),
            field: Some("replaces_claim_id".into()),
        },
        other => ApiError::conflict_on("replaces_claim_id", other.message()),
    }
}

/// The answer for a claim intake did not store.
fn refused(a: Admitted) -> ApiError {
    match a {
        Admitted::NotReplaceable => not_replaceable(Unreplaceable::Superseded),
        _ => duplicate(),
    }
}

fn not_contracted() -> ApiError {
    ApiError::Refused {
        status: StatusCode::UNPROCESSABLE_ENTITY,
        code: "PROVIDER_NOT_CONTRACTED",
        message: "the provider is not under an active contract with the tenant today".into(),
        field: Some("provider_id".into()),
    }
}

fn no_rulebook() -> ApiError {
    ApiError::Refused {
        status: StatusCode::CONFLICT,
        code: "RULEBOOK_NOT_ACTIVE",
        message: "the tenant has no active rulebook; publish one first".into(),
        field: None,
    }
}

/// The checks of one claim that need the tenant's configuration; answers its command.
async fn check(
    state: &AppState,
    tenant_id: &TenantId,
    claim: ClaimSubmission,
    rulebook: &Option<ActiveRulebook>,
    today: Date,
    now: i64,
) -> Result<ClaimSubmitted, ApiError> {
    claim
        .validate(today)
        .map_err(|e| ApiError::validation(e.field, e.message))?;
    let Some(rb) = rulebook else {
        return Err(no_rulebook());
    };
    let contracted = state
        .config_cache
        .contracted(tenant_id, claim.provider_id.as_str(), today)
        .await?;
    if contracted.is_none() {
        return Err(not_contracted());
    }
    if let Some(replaced) = &claim.replaces_claim_id {
        state
            .store
            .replaceable(tenant_id, replaced.as_str(), claim.member_id.as_str())
            .await?
            .map_err(not_replaceable)?;
    }
    Ok(ClaimSubmitted {
        tenant_id: tenant_id.clone(),
        claim,
        rulebook_id: rb.rulebook_id.clone(),
        rulebook_version: rb.version,
        received_at_ms: now,
    })
}

/// Submit a claim for processing.
///
/// Answers 202 once the claim and its command are durable; processing continues
/// asynchronously. Follow `Location`, or subscribe to webhooks.
#[utoipa::path(post, path = "/claims/intake", tag = "claims",
    security(("bearer" = ["claims:write"])),
    request_body = ClaimSubmission,
    responses(
        (status = 202, description = "Accepted", body = Accepted, headers(("location" = String, description = "The claim's URL"))),
        (status = 400, description = "Malformed body or a missing field", body = ErrorBody),
        (status = 404, description = "`CLAIM_NOT_FOUND`: the claim `replaces_claim_id` names does not exist", body = ErrorBody),
        (status = 409, description = "`CLAIM_DUPLICATE`, `RULEBOOK_NOT_ACTIVE`, or `CONFLICT` on `replaces_claim_id`: the claim it names is of another member, not completed, or replaced or voided already", body = ErrorBody),
        (status = 422, description = "`VALIDATION_ERROR` with `field`, or `PROVIDER_NOT_CONTRACTED`", body = ErrorBody),
    ))]
pub async fn intake(
    State(state): State<AppState>,
    who: Authorized<ClaimsWrite>,
    Json(claim): Json<ClaimSubmission>,
) -> Result<Response, ApiError> {
    let rulebook = state.config_cache.active_rulebook(&who.tenant_id).await?;
    let now = now_ms();
    let command = check(
        &state,
        &who.tenant_id,
        claim,
        &rulebook,
        Date::today_utc(),
        now,
    )
    .await?;
    let claim_id = command.claim.claim_id.as_str().to_owned();
    let admitted = state.intake.accept(vec![command], &who.user_id).await?;
    match admitted.first().copied() {
        Some(Admitted::New) => {}
        other => return Err(refused(other.unwrap_or(Admitted::Duplicate))),
    }
    tracing::debug!(tenant_id = %who.tenant_id, %claim_id, "Claim accepted.");
    let location = format!("/api/v1/claims/{claim_id}");
    let mut res = (
        StatusCode::ACCEPTED,
        Json(Accepted {
            claim_id,
            status: ClaimStatus::Received,
            received_at: ms_to_rfc3339(now),
        }),
    )
        .into_response();
    if let Ok(v) = location.parse() {
        res.headers_mut().insert(LOCATION, v);
    }
    Ok(res)
}

/// One item's result in a batch.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum BatchItem {
    Accepted {
        claim_id: String,
        /// `received`
        status: ClaimStatus,
    },
    Rejected {
        claim_id: Option<String>,
        error: ItemError,
    },
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BatchResult {
    pub accepted: usize,
    pub rejected: usize,
    /// In input order.
    pub results: Vec<BatchItem>,
}

fn item_error(claim_id: Option<String>, e: ApiError) -> Result<BatchItem, ApiError> {
    Ok(BatchItem::Rejected {
        claim_id,
        error: items::item_error(e)?,
    })
}

/// Submit up to 10,000 claims at once, as a JSON array or as `application/x-ndjson`.
///
/// Each item is checked exactly as intake checks a claim; the accepted ones are stored
/// together, in one transaction. Answers 200 with a result per item, in input order.
#[utoipa::path(post, path = "/claims/batch", tag = "claims",
    security(("bearer" = ["claims:write"])),
    request_body(content = Vec<ClaimSubmission>, description = "A JSON array, or one claim per line with Content-Type application/x-ndjson"),
    responses(
        (status = 200, description = "A result per item", body = BatchResult),
        (status = 400, description = "Not a JSON array or NDJSON", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 422, description = "More than 10,000 claims", body = ErrorBody),
    ))]
pub async fn batch(
    State(state): State<AppState>,
    who: Authorized<ClaimsWrite>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<BatchResult>, ApiError> {
    let checked =
        pipeline::cpu::heavy(check_batch(&state, &who.tenant_id, &headers, &body)).await?;
    let result = admit(&state, &who.user_id, checked).await?;
    tracing::info!(tenant_id = %who.tenant_id, accepted = result.accepted, rejected = result.rejected, "Claim batch received.");
    Ok(Json(result))
}

/// Stores the checked items' commands in one transaction and answers a result per item,
/// in input order.
pub(crate) async fn admit(
    state: &AppState,
    user_id: &str,
    (mut results, slots, commands): Checked,
) -> Result<BatchResult, ApiError> {
    let ids: Vec<String> = commands
        .iter()
        .map(|c| c.claim.claim_id.as_str().to_owned())
        .collect();
    let admitted = state.intake.accept_batch(commands, user_id).await?;
    for ((slot, claim_id), a) in slots.into_iter().zip(ids).zip(admitted) {
        results[slot] = Some(if a.is_new() {
            BatchItem::Accepted {
                claim_id,
                status: ClaimStatus::Received,
            }
        } else {
            item_error(Some(claim_id), refused(a))?
        });
    }
    let results: Vec<BatchItem> = results.into_iter().flatten().collect();
    let accepted = results
        .iter()
        .filter(|r| matches!(r, BatchItem::Accepted { .. }))
        .count();
    Ok(BatchResult {
        accepted,
        rejected: results.len() - accepted,
        results,
    })
}

/// A batch body's items, each parsed and checked as single intake does: per item its
/// error, or the slot of its command.
pub(crate) type Checked = (Vec<Option<BatchItem>>, Vec<usize>, Vec<ClaimSubmitted>);

async fn check_batch(
    state: &AppState,
    tenant_id: &TenantId,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Checked, ApiError> {
    let items = items::split(headers, body, "claims")?;
    if items.len() > MAX_BATCH {
        return Err(ApiError::Validation {
            message: format!("a batch holds at most {MAX_BATCH} claims").into(),
            field: None,
        });
    }
    check_items(state, tenant_id, items.into_iter().map(read_item)).await
}

/// An item of a batch body read as single intake reads a body. (A function, not a
/// closure: the future holding the iterator must be `Send` for any lifetime of the body.)
fn read_item(raw: &RawValue) -> Item {
    let claim = json::parse::<ClaimSubmission>(raw.get().as_bytes());
    (items::hint(raw, "claim_id"), claim)
}

/// One item of a batch as read: the claim id it seems to carry, and the claim or why it
/// could not be read.
pub(crate) type Item = (Option<String>, Result<ClaimSubmission, ApiError>);

/// Each item checked as single intake checks a claim, duplicates within the batch
/// refused.
pub(crate) async fn check_items(
    state: &AppState,
    tenant_id: &TenantId,
    items: impl IntoIterator<Item = Item>,
) -> Result<Checked, ApiError> {
    let rulebook = state.config_cache.active_rulebook(tenant_id).await?;
    let (today, now) = (Date::today_utc(), now_ms());
    let mut results: Vec<Option<BatchItem>> = Vec::new();
    let mut commands = Vec::new();
    let mut slots = Vec::new();
    let mut seen = HashSet::new();
    for (i, (id_hint, parsed)) in items.into_iter().enumerate() {
        let outcome = match parsed {
            Err(e) => Err(e),
            Ok(claim) => check(state, tenant_id, claim, &rulebook, today, now).await,
        };
        match outcome {
            Err(e) => results.push(Some(item_error(id_hint, e)?)),
            Ok(cmd) if !seen.insert(cmd.claim.claim_id.as_str().to_owned()) => {
                results.push(Some(item_error(id_hint, duplicate())?));
            }
            Ok(cmd) => {
                results.push(None);
                slots.push(i);
                commands.push(cmd);
            }
        }
    }
    Ok((results, slots, commands))
}

/// A claim with its processing state.
#[utoipa::path(get, path = "/claims/{claim_id}", tag = "claims",
    security(("bearer" = ["claims:read"])),
    responses((status = 200, description = "The claim", body = ClaimView), (status = 404, description = "`CLAIM_NOT_FOUND`", body = ErrorBody)))]
pub async fn get_claim(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    Path(claim_id): Path<String>,
) -> Result<Json<ClaimView>, ApiError> {
    state
        .store
        .claim(&who.tenant_id, &claim_id)
        .await?
        .map(Json)
        .ok_or_else(claim_not_found)
}

/// The fraud analysis of a claim.
#[derive(Debug, Serialize, serde::Deserialize, ToSchema)]
pub struct FraudView {
    /// In [0, 1].
    pub fraud_score: f64,
    pub model_version: String,
    pub reasons: Vec<FraudReasonView>,
}

/// A claim's fraud score with the features that made it.
#[utoipa::path(get, path = "/claims/{claim_id}/fraud", tag = "claims",
    security(("bearer" = ["fraud:read"])),
    responses(
        (status = 200, description = "The analysis", body = FraudView),
        (status = 404, description = "`CLAIM_NOT_FOUND`, or `NOT_FOUND` while the claim is not scored yet", body = ErrorBody),
    ))]
pub async fn get_fraud(
    State(state): State<AppState>,
    who: Authorized<FraudRead>,
    Path(claim_id): Path<String>,
) -> Result<Json<FraudView>, ApiError> {
    let stored = state
        .store
        .claim_fraud(&who.tenant_id, &claim_id)
        .await?
        .ok_or_else(claim_not_found)?;
    let Some(text) = stored else {
        return Err(ApiError::Refused {
            status: StatusCode::NOT_FOUND,
            code: "NOT_FOUND",
            message: "the claim has not been scored yet".into(),
            field: None,
        });
    };
    serde_json::from_str(&text)
        .map(Json)
        .map_err(ApiError::internal)
}

/// The tenant's claims, oldest first, filtered.
#[utoipa::path(get, path = "/claims", tag = "claims",
    security(("bearer" = ["claims:read"])),
    params(
        ("status" = Option<String>, Query, description = "received, processing, pending_review or completed"),
        ("outcome" = Option<String>, Query, description = "ADJUDICATED, APPROVED, DECLINED, FLAGGED or BLOCKED"),
        ("provider_id" = Option<String>, Query),
        ("received_after" = Option<String>, Query, description = "RFC 3339 time; claims received strictly after it"),
        ("limit" = Option<i64>, Query, description = "1-500, default 50"),
        ("cursor" = Option<String>, Query, description = "From `next_cursor`"),
    ),
    responses((status = 200, description = "A page of claims", body = Page<ClaimView>), (status = 422, description = "A bad filter, limit or cursor", body = ErrorBody)))]
pub async fn list_claims(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    list: ListParams,
) -> Result<Json<Page<ClaimView>>, ApiError> {
    let q: &HashMap<String, String> = &list.query;
    let filter = ClaimFilter {
        status: match q.get("status") {
            None => None,
            Some(s) => Some(ClaimStatus::parse(s).ok_or_else(|| {
                ApiError::validation(
                    "status",
                    "must be received, processing, pending_review or completed",
                )
            })?),
        },
        outcome: match q.get("outcome") {
            None => None,
            Some(s) => Some(Outcome::parse(s).ok_or_else(|| {
                ApiError::validation(
                    "outcome",
                    "must be ADJUDICATED, APPROVED, DECLINED, FLAGGED or BLOCKED",
                )
            })?),
        },
        provider_id: q.get("provider_id").cloned(),
        received_after_ms: match q.get("received_after") {
            None => None,
            Some(s) => Some(pipeline::clock::parse_rfc3339_ms(s).ok_or_else(|| {
                ApiError::validation("received_after", "must be an RFC 3339 time")
            })?),
        },
    };
    let after = match &list.after {
        None => None,
        Some(c) => Some(
            c.split_once('|')
                .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id.to_owned())))
                .ok_or_else(|| {
                    ApiError::validation("cursor", "is not a cursor this service issued")
                })?,
        ),
    };
    let rows = state
        .store
        .claims(&who.tenant_id, &filter, after, list.fetch_limit())
        .await?;
    let more = rows.len() as i64 > list.limit;
    let mut rows = rows;
    rows.truncate(list.limit as usize);
    let next_cursor = if more {
        rows.last()
            .map(|(at, v)| encode_cursor(&format!("{at}|{}", v.submission.claim_id)))
    } else {
        None
    };
    Ok(Json(Page {
        data: rows.into_iter().map(|(_, v)| v).collect(),
        next_cursor,
    }))
}
