//! `/workflow/tasks` (contract: Workflow): the officers' review queue. Claiming and
//! releasing settle who holds a task at once (409 `CONFLICT` for a task held by another
//! officer or done); approving and declining mark the task done and publish the
//! decision on the workflow topic in one transaction; the workflow stage then completes
//! the claim and emits its events.

use axum::extract::{Path, State};
use pipeline::clock::now_ms;
use pipeline::store::TaskRefusal;
use pipeline::workflow::OfficerDecision;
use schemas::workflow::{Task, TaskAction, TaskStatus, Transition, MAX_NOTE_CHARS};
use schemas::{ErrorBody, Page};

use crate::auth::principal::scope::WorkflowManage;
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::http::list::ListParams;
use crate::state::AppState;

fn answer(r: Result<Task, TaskRefusal>) -> Result<Json<Task>, ApiError> {
    match r {
        Ok(t) => Ok(Json(t)),
        Err(TaskRefusal::NotFound) => Err(ApiError::NotFound),
        Err(TaskRefusal::Conflict(why)) => Err(ApiError::conflict(why)),
    }
}

/// The review queue: highest priority first, then oldest.
#[utoipa::path(get, path = "/workflow/tasks", tag = "workflow",
    security(("bearer" = ["workflow:manage"])),
    params(
        ("status" = Option<String>, Query, description = "open, claimed or done"),
        ("limit" = Option<i64>, Query, description = "1-500, default 50"),
        ("cursor" = Option<String>, Query, description = "From `next_cursor`"),
    ),
    responses((status = 200, description = "A page of tasks", body = Page<Task>), (status = 422, description = "Bad status, limit or cursor", body = ErrorBody)))]
pub async fn list_tasks(
    State(state): State<AppState>,
    who: Authorized<WorkflowManage>,
    list: ListParams,
) -> Result<Json<Page<Task>>, ApiError> {
    let status =
        match list.query.get("status").map(String::as_str) {
            None | Some("") => None,
            Some(s) => Some(TaskStatus::parse(s).ok_or_else(|| {
                ApiError::validation("status", "must be one of open, claimed, done")
            })?),
        };
    let rows = state
        .store
        .tasks(
            &who.tenant_id,
            status,
            list.after.as_deref(),
            list.fetch_limit(),
        )
        .await
        .map_err(|e| match e {
            pipeline::store::StoreError::NotFound => {
                ApiError::validation("cursor", "is not a cursor this service issued")
            }
            other => other.into(),
        })?;
    let page = list.page(rows, |(_, cursor)| cursor.clone());
    Ok(Json(Page {
        data: page.data.into_iter().map(|(t, _)| t).collect(),
        next_cursor: page.next_cursor,
    }))
}

/// One task.
#[utoipa::path(get, path = "/workflow/tasks/{task_id}", tag = "workflow",
    security(("bearer" = ["workflow:manage"])),
    responses((status = 200, description = "The task", body = Task), (status = 404, description = "No such task in this tenant", body = ErrorBody)))]
pub async fn get_task(
    State(state): State<AppState>,
    who: Authorized<WorkflowManage>,
    Path(task_id): Path<String>,
) -> Result<Json<Task>, ApiError> {
    state
        .store
        .task(&who.tenant_id, &task_id)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound)
}

/// Take a task: it is assigned to the caller. Claiming a task one already holds
/// changes nothing.
#[utoipa::path(post, path = "/workflow/tasks/{task_id}/claim", tag = "workflow",
    security(("bearer" = ["workflow:manage"])),
    responses(
        (status = 200, description = "The task, held by the caller", body = Task),
        (status = 404, description = "No such task in this tenant", body = ErrorBody),
        (status = 409, description = "`CONFLICT`: another officer holds the task, or it is done", body = ErrorBody),
    ))]
pub async fn claim_task(
    State(state): State<AppState>,
    who: Authorized<WorkflowManage>,
    Path(task_id): Path<String>,
) -> Result<Json<Task>, ApiError> {
    answer(
        state
            .store
            .claim_task(&who.tenant_id, &task_id, &who.user_id, now_ms())
            .await?,
    )
}

/// Decide a task one holds (`approve`, `decline`) or give it back (`release`).
///
/// `approve` completes the claim with outcome `APPROVED` and `approved_amount` (at most
/// the claim amount; by default what processing approved); `decline` completes it with
/// `DECLINED`. The claim's events follow asynchronously: `claim.approved` or
/// `claim.declined`, then `claim.completed`.
#[utoipa::path(post, path = "/workflow/tasks/{task_id}/transition", tag = "workflow",
    security(("bearer" = ["workflow:manage"])),
    request_body = Transition,
    responses(
        (status = 200, description = "The task after the transition", body = Task),
        (status = 400, description = "Malformed body or a missing field", body = ErrorBody),
        (status = 404, description = "No such task in this tenant", body = ErrorBody),
        (status = 409, description = "`CONFLICT`: the caller does not hold the task, or it is done", body = ErrorBody),
        (status = 422, description = "An unknown action, an amount out of range or a note too long; `field` names it", body = ErrorBody),
    ))]
pub async fn transition_task(
    State(state): State<AppState>,
    who: Authorized<WorkflowManage>,
    Path(task_id): Path<String>,
    Json(body): Json<Transition>,
) -> Result<Json<Task>, ApiError> {
    if body
        .note
        .as_ref()
        .is_some_and(|n| n.chars().count() > MAX_NOTE_CHARS)
    {
        return Err(ApiError::validation(
            "note",
            format!("must be at most {MAX_NOTE_CHARS} characters"),
        ));
    }
    if body.approved_amount.is_some() && body.action != TaskAction::Approve {
        return Err(ApiError::validation(
            "approved_amount",
            "is only for the approve action",
        ));
    }
    let now = now_ms();
    if body.action == TaskAction::Release {
        return answer(
            state
                .store
                .release_task(
                    &who.tenant_id,
                    &task_id,
                    &who.user_id,
                    body.note.as_deref(),
                    now,
                )
                .await?,
        );
    }
    let task = state
        .store
        .task(&who.tenant_id, &task_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let claim = state
        .store
        .claim(&who.tenant_id, &task.claim_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let approved_amount = match body.action {
        TaskAction::Approve => {
            let limit = claim.submission.claim_amount;
            let amount = body
                .approved_amount
                .unwrap_or_else(|| claim.approved_amount.unwrap_or(limit));
            if !(0..=limit).contains(&amount) {
                return Err(ApiError::validation(
                    "approved_amount",
                    format!("must be from 0 to the claim amount ({limit})"),
                ));
            }
            Some(amount)
        }
        _ => None,
    };
    let decision = OfficerDecision {
        tenant_id: who.tenant_id.clone(),
        claim_id: task.claim_id.clone(),
        task_id: task_id.clone(),
        officer: who.user_id.clone(),
        action: body.action,
        approved_amount,
        note: body.note.clone(),
        decided_at_ms: now,
    };
    let result =
        pipeline::workflow::decide(&state.store, &state.bus, &state.topics.workflow, &decision)
            .await?;
    if result.is_ok() {
        tracing::info!(tenant_id = %who.tenant_id, %task_id, action = body.action.as_str(), "Review decided.");
    }
    answer(result)
}
