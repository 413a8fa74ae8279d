//! `/tenant/users` (`tenant:configure`; contract: Tenants and users). Disabling a user,
//! deleting one or changing a password ends their sessions at once. A user cannot
//! disable or delete themselves (409 `CONFLICT`): a tenant's only administrator would
//! otherwise lock the tenant out with one mistaken call, and only the operator CLI
//! could let anyone back in.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pipeline::clock::ms_to_rfc3339;
use pipeline::store::{StoreError, User, UserChange, UserUpsert};
use schemas::user::{CreateUser, PatchUser, UserView};
use schemas::{ErrorBody, Page};
use secrecy::{ExposeSecret, SecretString};

use super::providers::created_at;
use crate::auth::password;
use crate::auth::principal::scope::TenantConfigure;
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::http::list::ListParams;
use crate::state::AppState;

fn view(u: User) -> UserView {
    UserView {
        user_id: u.user_id,
        email: u.email,
        scopes: u.scopes,
        disabled: u.disabled,
        created_at: ms_to_rfc3339(u.created_at),
    }
}

fn check_password(p: &SecretString) -> Result<(), ApiError> {
    let n = p.expose_secret().chars().count();
    if !(8..=256).contains(&n) {
        return Err(ApiError::validation("password", "must be 8-256 characters"));
    }
    Ok(())
}

fn not_yourself(what: &str) -> ApiError {
    ApiError::conflict_on(
        "user_id",
        format!("you cannot {what} your own user; another user of the tenant can"),
    )
}

/// Whether `s` looks like an email address: one `@`, a dotted domain, no spaces.
pub fn is_plausible_email(s: &str) -> bool {
    match s.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !domain.contains('@')
                && s.len() <= 254
                && !s.contains(char::is_whitespace)
        }
        None => false,
    }
}

/// Add a user to the caller's tenant. Emails are unique across tenants.
#[utoipa::path(post, path = "/tenant/users", tag = "tenant",
    security(("bearer" = ["tenant:configure"])),
    request_body = CreateUser,
    responses(
        (status = 201, description = "Created", body = UserView, headers(("location" = String, description = "The user's URL"))),
        (status = 400, description = "Malformed body or a missing field", body = ErrorBody),
        (status = 409, description = "The email is taken (`CONFLICT`)", body = ErrorBody),
        (status = 422, description = "A field is invalid; `field` names it", body = ErrorBody),
    ))]
pub async fn create_user(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Json(body): Json<CreateUser>,
) -> Result<Response, ApiError> {
    let email = body.email.trim().to_lowercase();
    if !is_plausible_email(&email) {
        return Err(ApiError::validation("email", "must be an email address"));
    }
    check_password(&body.password)?;
    let hash = password::hash(body.password)
        .await
        .map_err(ApiError::internal)?;
    let user_id = uuid::Uuid::now_v7().to_string();
    let user = state
        .store
        .create_user(
            UserUpsert {
                new_user_id: &user_id,
                tenant_id: &who.tenant_id,
                email: &email,
                password_hash: &hash,
                scopes: body.scopes,
            },
            &who.user_id,
        )
        .await
        .map_err(|e| match e {
            StoreError::Conflict(_) => {
                ApiError::conflict_on("email", "a user with this email exists")
            }
            other => other.into(),
        })?;
    tracing::info!(tenant_id = %who.tenant_id, %user_id, "User created.");
    Ok(created_at(
        format!("/api/v1/tenant/users/{user_id}"),
        view(user),
    ))
}

/// The tenant's users, ordered by email.
#[utoipa::path(get, path = "/tenant/users", tag = "tenant",
    security(("bearer" = ["tenant:configure"])),
    params(("limit" = Option<i64>, Query, description = "1-500, default 50"), ("cursor" = Option<String>, Query, description = "From `next_cursor`")),
    responses((status = 200, description = "A page of users", body = Page<UserView>), (status = 422, description = "Bad limit or cursor", body = ErrorBody)))]
pub async fn list_users(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    list: ListParams,
) -> Result<Json<Page<UserView>>, ApiError> {
    let users = state
        .store
        .users(&who.tenant_id, list.after.as_deref(), list.fetch_limit())
        .await?;
    let page = list.page(users, |u| u.email.clone());
    Ok(Json(Page {
        data: page.data.into_iter().map(view).collect(),
        next_cursor: page.next_cursor,
    }))
}

/// Change a user's scopes, password or `disabled` flag. Disabling or a new password
/// ends the user's sessions; new scopes apply from the user's next token.
#[utoipa::path(patch, path = "/tenant/users/{user_id}", tag = "tenant",
    security(("bearer" = ["tenant:configure"])),
    request_body = PatchUser,
    responses(
        (status = 200, description = "The user after the change", body = UserView),
        (status = 404, description = "No such user in this tenant", body = ErrorBody),
        (status = 409, description = "`CONFLICT`: a user cannot disable themselves", body = ErrorBody),
        (status = 422, description = "A field is invalid", body = ErrorBody),
    ))]
pub async fn patch_user(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Path(user_id): Path<String>,
    Json(body): Json<PatchUser>,
) -> Result<Json<UserView>, ApiError> {
    if user_id == who.user_id && body.disabled == Some(true) {
        return Err(not_yourself("disable"));
    }
    let password_hash = match body.password {
        Some(p) => {
            check_password(&p)?;
            Some(password::hash(p).await.map_err(ApiError::internal)?)
        }
        None => None,
    };
    let (user, revoked) = state
        .store
        .update_user(
            &who.tenant_id,
            &user_id,
            UserChange {
                scopes: body.scopes,
                disabled: body.disabled,
                password_hash,
            },
            &who.user_id,
        )
        .await?;
    for sid in &revoked {
        state.sessions.forget(sid).await;
    }
    tracing::info!(tenant_id = %who.tenant_id, %user_id, sessions_ended = revoked.len(), "User changed.");
    Ok(Json(view(user)))
}

/// Remove a user and end their sessions.
#[utoipa::path(delete, path = "/tenant/users/{user_id}", tag = "tenant",
    security(("bearer" = ["tenant:configure"])),
    responses((status = 204, description = "Deleted"), (status = 404, description = "No such user in this tenant", body = ErrorBody), (status = 409, description = "`CONFLICT`: a user cannot delete themselves", body = ErrorBody)))]
pub async fn delete_user(
    State(state): State<AppState>,
    who: Authorized<TenantConfigure>,
    Path(user_id): Path<String>,
) -> Result<Response, ApiError> {
    if user_id == who.user_id {
        return Err(not_yourself("delete"));
    }
    let revoked = state
        .store
        .delete_user(&who.tenant_id, &user_id, &who.user_id)
        .await?;
    for sid in &revoked {
        state.sessions.forget(sid).await;
    }
    tracing::info!(tenant_id = %who.tenant_id, %user_id, "User deleted.");
    Ok(StatusCode::NO_CONTENT.into_response())
}
