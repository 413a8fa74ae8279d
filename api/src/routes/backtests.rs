//! `POST /rulebooks/{rulebook_id}/backtest` (contract part 2): the tenant's decided
//! claims run through a rulebook on the facts they were decided with. The work runs on
//! the blocking pool (see `pipeline::backtest`), never on the request workers; a
//! request beyond the limit is refused before anything runs.

use std::sync::Arc;

use axum::extract::{Path, State};
use pipeline::backtest::{self, Backtest};
use pipeline::clock::parse_rfc3339_ms;
use pipeline::store::AuditEntry;
use schemas::backtest::{BacktestReport, BacktestRequest};
use schemas::ErrorBody;

use crate::auth::principal::scope::RulebooksWrite;
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::state::AppState;

/// Run the tenant's decided claims through this rulebook (a draft, usually) with the
/// facts they were decided with, and compare with the decisions they got. Nothing is
/// published, announced or changed; one audit record notes the backtest.
#[utoipa::path(post, path = "/rulebooks/{rulebook_id}/backtest", tag = "rulebooks",
    security(("bearer" = ["rulebooks:write"])),
    request_body = BacktestRequest,
    responses(
        (status = 200, description = "The backtest's result", body = BacktestReport),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 404, description = "No such rulebook", body = ErrorBody),
        (status = 422, description = "A bad `since` or `until`, or a `limit` outside 1-1,000,000", body = ErrorBody),
    ))]
pub async fn backtest_rulebook(
    State(state): State<AppState>,
    who: Authorized<RulebooksWrite>,
    Path(rulebook_id): Path<String>,
    Json(body): Json<BacktestRequest>,
) -> Result<Json<BacktestReport>, ApiError> {
    let limit = body.limit.unwrap_or(BacktestRequest::DEFAULT_LIMIT);
    if !(1..=BacktestRequest::MAX_LIMIT).contains(&limit) {
        return Err(ApiError::validation(
            "limit",
            "must be 1 to 1,000,000 claims",
        ));
    }
    let time = |field: &'static str, v: &Option<String>| match v.as_deref() {
        None => Ok(None),
        Some(s) => parse_rfc3339_ms(s).map(Some).ok_or_else(|| {
            ApiError::validation(field, "must be an RFC 3339 time, e.g. 2026-01-02T03:04:05Z")
        }),
    };
    let since_ms = time("since", &body.since)?;
    let until_ms = time("until", &body.until)?;
    if let (Some(s), Some(u)) = (since_ms, until_ms) {
        if u <= s {
            return Err(ApiError::validation("until", "must be later than since"));
        }
    }
    let rulebook = state
        .store
        .rulebook(&who.tenant_id, &rulebook_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    // A stored rulebook always compiles (it was compiled when created).
    let compiled = pipeline::rules::compile(&rulebook.rules)
        .map_err(|e| ApiError::validation(e.field, e.message))?;
    let started = std::time::Instant::now();
    let report = backtest::run(
        &state.store,
        Backtest {
            tenant_id: who.tenant_id.clone(),
            rulebook_id: rulebook.rulebook_id.clone(),
            version: rulebook.version,
            compiled: Arc::new(compiled),
            since_ms,
            until_ms,
            limit,
        },
    )
    .await?;
    let entry = AuditEntry::new(
        &who.tenant_id,
        &who.user_id,
        "rulebook.backtested",
        ("rulebook", &rulebook.rulebook_id),
        serde_json::json!({
            "since": body.since, "until": body.until, "limit": limit,
            "claims": report.claims, "changed": report.changed,
            "baseline_rulebook_id": report.baseline_rulebook_id,
        }),
    );
    state.store.append_audit(&[entry]).await?;
    tracing::info!(
        tenant_id = %who.tenant_id, %rulebook_id, claims = report.claims, changed = report.changed,
        ms = started.elapsed().as_millis() as u64, "Rulebook backtested."
    );
    Ok(Json(report))
}
