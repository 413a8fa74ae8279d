//! `/webhooks` (contract: Webhooks): subscriptions, their delivery log and redelivery.
//! The secret is stored to sign deliveries and is never returned nor logged.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pipeline::clock::parse_rfc3339_ms;
use pipeline::store::{Redelivery, WebhookFields};
use pipeline::webhooks::guard::check_url;
use schemas::webhook::{
    is_event_kind, CreateWebhook, DeliveryAttempt, PatchWebhook, ReplayAccepted, ReplayRequest,
    Webhook, WebhookStats,
};
use schemas::{ErrorBody, Page};

use crate::auth::principal::scope::TenantConfigure;
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::http::list::ListParams;
use crate::routes::providers::created_at;
use crate::state::AppState;

/// Largest secret accepted.
const MAX_SECRET_CHARS: usize = 1024;

fn check_fields(
    state: &AppState,
    url: &str,
    events: &[String],
    secret: &str,
) -> Result<Vec<String>, ApiError> {
    check_url(url, state.config.webhook_allow_private)
        .map_err(|why| ApiError::validation("url", why))?;
    if events.is_empty() {
        return Err(ApiError::validation(
            "events",
            "must name at least one event kind",
        ));
    }
    let mut kinds: Vec<String> = Vec::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        if !is_event_kind(e) {
            return Err(ApiError::validation(
                format!("events[{i}]"),
                format!("`{e}` is not an event kind of this service"),
            ));
        }
        if !kinds.contains(e) {
            kinds.push(e.clone());
        }
    }
    if secret.is_empty() || secret.chars().count() > MAX_SECRET_CHARS {
        return Err(ApiError::validation(
            "secret",
            format!("must be 1-{MAX_SECRET_CHARS} characters"),
        ));
    }
    Ok(kinds)
}

/// Subscribe to events. Deliveries are signed with `secret`, which is never returned.
#[utoipa::path(post, path = "/webhooks", tag = "webhooks",
    security(("bearer" = ["tenant:configure"])),
    request_body = CreateWebhook,
    responses(
        (status = 201, description = "Created", body = Webhook, headers(("location" = String, description = "The subscription's URL"))),
        (status = 400, description = "Malformed body or a missing field", body = ErrorBody),
        (status = 422, description = "An unknown event kind, a URL that is not http(s) or targets a private address, or a bad secret; `field` names it", body = ErrorBody),
    ))]
pub async fn create_webhook(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Json(body): Json<CreateWebhook>,
) -> Result<Response, ApiError> {
    let events = check_fields(&state, &body.url, &body.events, &body.secret)?;
    let webhook_id = format!("wh_{}", uuid::Uuid::now_v7().simple());
    let created = state
        .store
        .create_webhook(
            &who.tenant_id,
            &webhook_id,
            WebhookFields {
                url: &body.url,
                events: &events,
                secret: &body.secret,
                enabled: body.enabled,
                payload: body.payload,
            },
            &who.user_id,
        )
        .await?;
    tracing::info!(tenant_id = %who.tenant_id, %webhook_id, "Webhook created.");
    Ok(created_at(
        format!("/api/v1/webhooks/{webhook_id}"),
        created,
    ))
}

/// The tenant's subscriptions, oldest first.
#[utoipa::path(get, path = "/webhooks", tag = "webhooks",
    security(("bearer" = ["tenant:configure"])),
    params(("limit" = Option<i64>, Query, description = "1-500, default 50"), ("cursor" = Option<String>, Query, description = "From `next_cursor`")),
    responses((status = 200, description = "A page of subscriptions", body = Page<Webhook>), (status = 422, description = "Bad limit or cursor", body = ErrorBody)))]
pub async fn list_webhooks(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    list: ListParams,
) -> Result<Json<Page<Webhook>>, ApiError> {
    let items = state
        .store
        .webhooks(&who.tenant_id, list.after.as_deref(), list.fetch_limit())
        .await?;
    Ok(Json(list.page(items, |w| w.webhook_id.clone())))
}

/// One subscription.
#[utoipa::path(get, path = "/webhooks/{webhook_id}", tag = "webhooks",
    security(("bearer" = ["tenant:configure"])),
    responses((status = 200, description = "The subscription", body = Webhook), (status = 404, description = "No such subscription in this tenant", body = ErrorBody)))]
pub async fn get_webhook(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Path(webhook_id): Path<String>,
) -> Result<Json<Webhook>, ApiError> {
    state
        .store
        .webhook(&who.tenant_id, &webhook_id)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound)
}

/// Deliver again every event of a window that the subscription's kinds (and `events`,
/// when given) match, in the order they happened, one at a time, signed as any
/// delivery, with the same event ids and `X-Service-Replay: true`.
#[utoipa::path(post, path = "/webhooks/{webhook_id}/replay", tag = "webhooks",
    security(("bearer" = ["tenant:configure"])),
    request_body = ReplayRequest,
    responses(
        (status = 202, description = "Queued; follow the job at `GET /jobs/{job_id}`", body = ReplayAccepted),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 404, description = "No such subscription in this tenant", body = ErrorBody),
        (status = 422, description = "`VALIDATION_ERROR` on `since`, `until` or `events[i]`", body = ErrorBody),
    ))]
pub async fn replay_webhook(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Path(webhook_id): Path<String>,
    Json(body): Json<ReplayRequest>,
) -> Result<Response, ApiError> {
    let since_ms = parse_rfc3339_ms(&body.since)
        .ok_or_else(|| ApiError::validation("since", "must be an RFC 3339 time"))?;
    let until_ms = match &body.until {
        None => None,
        Some(u) => Some(
            parse_rfc3339_ms(u)
                .filter(|u| *u > since_ms)
                .ok_or_else(|| {
                    ApiError::validation("until", "must be an RFC 3339 time after since")
                })?,
        ),
    };
    if let Some(events) = &body.events {
        if let Some(i) = events.iter().position(|e| !is_event_kind(e)) {
            return Err(ApiError::validation(
                format!("events[{i}]"),
                "is not an event kind",
            ));
        }
    }
    let webhook = state
        .store
        .webhook(&who.tenant_id, &webhook_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let kinds: Vec<String> = webhook
        .events
        .iter()
        .filter(|k| body.events.as_ref().is_none_or(|only| only.contains(k)))
        .cloned()
        .collect();
    let window = pipeline::replay::Window {
        since_ms,
        until_ms,
        kinds,
    };
    let (job_id, events) = pipeline::replay::start(
        &state.store,
        &state.bus,
        &state.topics,
        &who.tenant_id,
        &webhook,
        &window,
    )
    .await?;
    tracing::info!(tenant_id = %who.tenant_id, %webhook_id, %job_id, events, "Webhook replay queued.");
    Ok((
        StatusCode::ACCEPTED,
        Json(ReplayAccepted { job_id, events }),
    )
        .into_response())
}

/// A subscription's health: its deliveries over the last hour (attempts, successes,
/// failures, latency), its failures since its last success, and when the service
/// disabled it, if it did (after 24 hours of nothing but failures, at least 20).
#[utoipa::path(get, path = "/webhooks/{webhook_id}/stats", tag = "webhooks",
    security(("bearer" = ["tenant:configure"])),
    responses((status = 200, description = "The last hour of deliveries", body = WebhookStats), (status = 404, description = "No such subscription in this tenant", body = ErrorBody)))]
pub async fn webhook_stats(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Path(webhook_id): Path<String>,
) -> Result<Json<WebhookStats>, ApiError> {
    state
        .store
        .webhook_stats(&who.tenant_id, &webhook_id, state.clock.now_ms())
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound)
}

/// Change a subscription: the fields present are replaced. Deliveries already queued
/// go to the new URL, signed with the new secret.
#[utoipa::path(patch, path = "/webhooks/{webhook_id}", tag = "webhooks",
    security(("bearer" = ["tenant:configure"])),
    request_body = PatchWebhook,
    responses(
        (status = 200, description = "The changed subscription", body = Webhook),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 404, description = "No such subscription in this tenant", body = ErrorBody),
        (status = 422, description = "A field is invalid; `field` names it", body = ErrorBody),
    ))]
pub async fn patch_webhook(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Path(webhook_id): Path<String>,
    Json(body): Json<PatchWebhook>,
) -> Result<Json<Webhook>, ApiError> {
    let (current, stored_secret) = state
        .store
        .webhook_with_secret(&who.tenant_id, &webhook_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let secret = body.secret.unwrap_or(stored_secret);
    let url = body.url.unwrap_or(current.url);
    let events = check_fields(
        &state,
        &url,
        &body.events.unwrap_or(current.events),
        &secret,
    )?;
    let updated = state
        .store
        .update_webhook(
            &who.tenant_id,
            &webhook_id,
            WebhookFields {
                url: &url,
                events: &events,
                secret: &secret,
                enabled: body.enabled.unwrap_or(current.enabled),
                payload: body.payload.unwrap_or(current.payload),
            },
            &who.user_id,
        )
        .await?
        .ok_or(ApiError::NotFound)?;
    tracing::info!(tenant_id = %who.tenant_id, %webhook_id, "Webhook changed.");
    Ok(Json(updated))
}

/// Delete a subscription: its pending deliveries are cancelled.
#[utoipa::path(delete, path = "/webhooks/{webhook_id}", tag = "webhooks",
    security(("bearer" = ["tenant:configure"])),
    responses((status = 204, description = "Deleted"), (status = 404, description = "No such subscription in this tenant", body = ErrorBody)))]
pub async fn delete_webhook(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Path(webhook_id): Path<String>,
) -> Result<Response, ApiError> {
    if !state
        .store
        .delete_webhook(&who.tenant_id, &webhook_id, &who.user_id)
        .await?
    {
        return Err(ApiError::NotFound);
    }
    tracing::info!(tenant_id = %who.tenant_id, %webhook_id, "Webhook deleted.");
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The subscription's delivery attempts, newest first.
#[utoipa::path(get, path = "/webhooks/{webhook_id}/deliveries", tag = "webhooks",
    security(("bearer" = ["tenant:configure"])),
    params(("limit" = Option<i64>, Query, description = "1-500, default 50"), ("cursor" = Option<String>, Query, description = "From `next_cursor`")),
    responses(
        (status = 200, description = "A page of attempts", body = Page<DeliveryAttempt>),
        (status = 404, description = "No such subscription in this tenant", body = ErrorBody),
        (status = 422, description = "Bad limit or cursor", body = ErrorBody),
    ))]
pub async fn list_deliveries(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Path(webhook_id): Path<String>,
    list: ListParams,
) -> Result<Json<Page<DeliveryAttempt>>, ApiError> {
    if state
        .store
        .webhook(&who.tenant_id, &webhook_id)
        .await?
        .is_none()
    {
        return Err(ApiError::NotFound);
    }
    let before = match list.after.as_deref() {
        None => None,
        Some(c) => Some(parse_cursor(c).ok_or_else(|| {
            ApiError::validation("cursor", "is not a cursor this service issued")
        })?),
    };
    let items = state
        .store
        .delivery_attempts(&who.tenant_id, &webhook_id, before, list.fetch_limit())
        .await?;
    let page = list.page(items, |(_, (at, id, n))| format!("{at}|{n}|{id}"));
    Ok(Json(Page {
        data: page.data.into_iter().map(|(a, _)| a).collect(),
        next_cursor: page.next_cursor,
    }))
}

fn parse_cursor(c: &str) -> Option<(i64, String, i64)> {
    let mut parts = c.splitn(3, '|');
    let at = parts.next()?.parse().ok()?;
    let n = parts.next()?.parse().ok()?;
    let id = parts.next()?.to_owned();
    Some((at, id, n))
}

/// Deliver an event to this subscription again, at once, with a fresh retry schedule.
/// The event id stays the same.
#[utoipa::path(post, path = "/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver", tag = "webhooks",
    security(("bearer" = ["tenant:configure"])),
    responses((status = 202, description = "Scheduled"), (status = 404, description = "No such subscription or delivery in this tenant", body = ErrorBody),
        (status = 409, description = "The delivery's body was purged: it is older than the tenant's `delivery_log_retention_days`", body = ErrorBody)))]
pub async fn redeliver(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Path((webhook_id, delivery_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    match state
        .store
        .redeliver(&who.tenant_id, &webhook_id, &delivery_id)
        .await?
    {
        Redelivery::Scheduled => {}
        Redelivery::NotFound => return Err(ApiError::NotFound),
        Redelivery::Purged => {
            return Err(ApiError::conflict(
                "the delivery's body was purged: it is older than the tenant's delivery_log_retention_days",
            ))
        }
    }
    tracing::info!(tenant_id = %who.tenant_id, %webhook_id, %delivery_id, "Redelivery scheduled.");
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({"delivery_id": delivery_id, "status": "pending"})),
    )
        .into_response())
}
