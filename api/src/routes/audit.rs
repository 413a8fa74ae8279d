//! `/audit` (contract: Audit): the tenant's audit log, oldest first. Each record is a
//! link of the tenant's hash chain; `claims admin verify-audit` walks it.

use axum::extract::{Path, State};
use pipeline::clock::{ms_to_rfc3339, parse_rfc3339_ms};
use pipeline::store::{AuditFilter, AuditRecord};
use schemas::workflow::AuditRecordView;
use schemas::{ErrorBody, Page};

use crate::auth::principal::scope::AuditRead;
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::http::list::ListParams;
use crate::state::AppState;

fn view(r: AuditRecord) -> AuditRecordView {
    AuditRecordView {
        details: serde_json::from_str(&r.details).unwrap_or(serde_json::Value::Null),
        audit_id: r.audit_id,
        seq: r.seq,
        at: ms_to_rfc3339(r.at),
        actor: r.actor,
        action: r.action,
        entity_type: r.entity_type,
        entity_id: r.entity_id,
        prev_hash: r.prev_hash,
        hash: r.hash,
    }
}

/// The audit log, oldest first.
#[utoipa::path(get, path = "/audit", tag = "audit",
    security(("bearer" = ["audit:read"])),
    params(
        ("entity_id" = Option<String>, Query, description = "Only records of this entity (a claim id, task id, …)"),
        ("since" = Option<String>, Query, description = "Only records at or after this RFC 3339 time"),
        ("limit" = Option<i64>, Query, description = "1-500, default 50"),
        ("cursor" = Option<String>, Query, description = "From `next_cursor`"),
    ),
    responses((status = 200, description = "A page of audit records", body = Page<AuditRecordView>), (status = 422, description = "Bad since, limit or cursor", body = ErrorBody)))]
pub async fn list_audit(
    State(state): State<AppState>,
    who: Authorized<AuditRead>,
    list: ListParams,
) -> Result<Json<Page<AuditRecordView>>, ApiError> {
    let since_ms = match list.query.get("since").filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => Some(parse_rfc3339_ms(s).ok_or_else(|| {
            ApiError::validation(
                "since",
                "must be an RFC 3339 time, e.g. 2026-01-02T03:04:05Z",
            )
        })?),
    };
    let after_seq =
        match list.after.as_deref() {
            None => None,
            Some(c) => Some(c.parse::<i64>().map_err(|_| {
                ApiError::validation("cursor", "is not a cursor this service issued")
            })?),
        };
    let records = state
        .store
        .audit_records(
            &who.tenant_id,
            &AuditFilter {
                entity_id: list
                    .query
                    .get("entity_id")
                    .filter(|e| !e.is_empty())
                    .cloned(),
                since_ms,
                after_seq,
                limit: list.fetch_limit() as usize,
            },
        )
        .await?;
    let page = list.page(records, |r| r.seq.to_string());
    Ok(Json(Page {
        data: page.data.into_iter().map(view).collect(),
        next_cursor: page.next_cursor,
    }))
}

/// One audit record.
#[utoipa::path(get, path = "/audit/{audit_id}", tag = "audit",
    security(("bearer" = ["audit:read"])),
    responses((status = 200, description = "The record", body = AuditRecordView), (status = 404, description = "No such record in this tenant", body = ErrorBody)))]
pub async fn get_audit(
    State(state): State<AppState>,
    who: Authorized<AuditRead>,
    Path(audit_id): Path<String>,
) -> Result<Json<AuditRecordView>, ApiError> {
    state
        .store
        .audit_record(&who.tenant_id, &audit_id)
        .await?
        .map(|r| Json(view(r)))
        .ok_or(ApiError::NotFound)
}
