//! `POST /auth/login`, `/auth/refresh`, `/auth/logout` (spec: Authentication;
//! contract: Auth).

use std::time::Duration;

use axum::extract::State;
use axum::http::header::SET_COOKIE;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use pipeline::clock::now_ms;
use pipeline::store::{NewSession, RefreshOutcome};
use schemas::auth::{LoginRequest, RefreshRequest, TokenResponse};
use schemas::{ErrorBody, ScopeSet};
use secrecy::ExposeSecret;

use crate::auth::principal::bearer_token;
use crate::auth::token::{self, AccessClaims};
use crate::auth::{password, refresh};
use crate::http::error::ApiError;
use crate::http::json::{Json, OptionalJson};
use crate::middleware::authenticate::authenticate;
use crate::state::AppState;

/// Log in with email and password.
///
/// Answers an access token and sets the refresh cookie. A wrong email and a wrong
/// password get the same answer, in the same time.
#[utoipa::path(post, path = "/auth/login", tag = "auth",
    request_body = LoginRequest,
    responses(
        (status = 200, description = "Logged in; the refresh token is in the `service_refresh_token` cookie", body = TokenResponse,
            headers(("set-cookie" = String, description = "service_refresh_token=…; HttpOnly; SameSite=Strict; Path=/api/v1/auth"))),
        (status = 400, description = "Malformed body or a missing field", body = ErrorBody),
        (status = 401, description = "Wrong email or password", body = ErrorBody),
    ))]
pub async fn login(
    State(state): State<AppState>,
    Json(req): Json<LoginRequest>,
) -> Result<Response, ApiError> {
    let user = state.store.user_by_email(req.email.trim()).await?;
    let phc = user.as_ref().map(|u| u.password_hash.clone());
    let matches = password::verify(req.password, phc).await;
    let user = match user {
        Some(u) if matches && !u.disabled => u,
        _ => return Err(ApiError::InvalidCredentials),
    };
    let session_id = uuid::Uuid::now_v7().to_string();
    let refresh_token = refresh::generate();
    state
        .store
        .create_session(NewSession {
            session_id: &session_id,
            tenant_id: &user.tenant_id,
            user_id: &user.user_id,
            expires_at: now_ms() + millis(state.config.session_ttl),
            refresh_token_hash: &refresh::hash(&refresh_token),
        })
        .await?;
    tracing::info!(user_id = %user.user_id, tenant_id = %user.tenant_id, "User logged in.");
    let access = issue(
        &state,
        &user.tenant_id,
        &user.user_id,
        user.scopes,
        &session_id,
    )?;
    Ok(token_response(&state, access, refresh_token, false))
}

/// Exchange a refresh token for a new access token.
///
/// The refresh token comes from the cookie or from the body field `refresh_token`. It
/// is rotated: the answer sets a new cookie, and returns the new token as
/// `refresh_token` when the old one came in the body. Presenting a rotated-out token
/// again ends the whole session.
#[utoipa::path(post, path = "/auth/refresh", tag = "auth",
    request_body(content = Option<RefreshRequest>, description = "Optional when the cookie carries the token"),
    responses(
        (status = 200, description = "A new access token; the refresh token is rotated", body = TokenResponse,
            headers(("set-cookie" = String, description = "The rotated refresh token"))),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "No, unknown, expired or reused refresh token", body = ErrorBody),
    ))]
pub async fn refresh(
    State(state): State<AppState>,
    headers: HeaderMap,
    OptionalJson(body): OptionalJson<RefreshRequest>,
) -> Result<Response, ApiError> {
    let from_body = body.and_then(|b| b.refresh_token);
    let came_in_body = from_body.is_some();
    let presented = match from_body {
        Some(t) => t.expose_secret().to_owned(),
        None => refresh::from_cookies(&headers).ok_or(ApiError::Unauthorized)?,
    };
    let next = refresh::generate();
    match state
        .store
        .rotate_refresh_token(&refresh::hash(&presented), &refresh::hash(&next))
        .await?
    {
        RefreshOutcome::Rotated {
            session_id,
            tenant_id,
            user_id,
        } => {
            // Scopes are read afresh, so a change of scopes takes effect on refresh.
            let user = state.store.user(&user_id).await?;
            let Some(user) = user.filter(|u| !u.disabled) else {
                end_session(&state, &session_id, "user disabled").await?;
                return Err(ApiError::Unauthorized);
            };
            let access = issue(&state, &tenant_id, &user_id, user.scopes, &session_id)?;
            Ok(token_response(&state, access, next, came_in_body))
        }
        RefreshOutcome::Reused { session_id } => {
            state.sessions.forget(&session_id).await;
            tracing::warn!(%session_id, "A rotated refresh token was presented again; the session is revoked.");
            Err(ApiError::Unauthorized)
        }
        RefreshOutcome::Ended | RefreshOutcome::Unknown => Err(ApiError::Unauthorized),
    }
}

/// End the session.
///
/// The session is named by the refresh token (body field `refresh_token` or cookie) or
/// by a bearer token of the session. Its refresh and access tokens stop working; the
/// user's other sessions live on.
#[utoipa::path(post, path = "/auth/logout", tag = "auth",
    request_body(content = Option<RefreshRequest>, description = "Optional when the cookie or a bearer token names the session"),
    responses(
        (status = 204, description = "Session ended; the refresh cookie is cleared (Max-Age=0)",
            headers(("set-cookie" = String, description = "service_refresh_token=; Max-Age=0"))),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "No credential names a session", body = ErrorBody),
    ))]
pub async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    OptionalJson(body): OptionalJson<RefreshRequest>,
) -> Result<Response, ApiError> {
    let presented = body
        .and_then(|b| b.refresh_token)
        .map(|t| t.expose_secret().to_owned())
        .or_else(|| refresh::from_cookies(&headers));
    let mut session_id = match presented {
        Some(t) => {
            state
                .store
                .session_of_refresh_token(&refresh::hash(&t))
                .await?
        }
        None => None,
    };
    if session_id.is_none() {
        if let Some(raw) = bearer_token(&headers) {
            session_id = Some(authenticate(&state, raw).await?.session_id);
        }
    }
    let session_id = session_id.ok_or(ApiError::Unauthorized)?;
    end_session(&state, &session_id, "logout").await?;
    tracing::info!(%session_id, "Session ended by logout.");
    let mut res = StatusCode::NO_CONTENT.into_response();
    set_cookie(&mut res, refresh::clear_cookie(state.config.cookie_secure));
    Ok(res)
}

async fn end_session(state: &AppState, session_id: &str, reason: &str) -> Result<(), ApiError> {
    state.store.revoke_session(session_id, reason).await?;
    state.sessions.forget(session_id).await;
    Ok(())
}

fn issue(
    state: &AppState,
    tenant_id: &str,
    user_id: &str,
    scopes: ScopeSet,
    session_id: &str,
) -> Result<String, ApiError> {
    let iat = now_ms() / 1000;
    let claims = AccessClaims {
        iss: state.config.issuer.clone(),
        sub: user_id.to_owned(),
        tenant_id: tenant_id.to_owned(),
        scope: scopes.to_space_separated(),
        sid: session_id.to_owned(),
        iat,
        exp: iat + state.config.access_token_ttl.as_secs() as i64,
        jti: uuid::Uuid::new_v4().to_string(),
    };
    token::sign(&state.keys, &claims).map_err(ApiError::internal)
}

fn token_response(
    state: &AppState,
    access_token: String,
    refresh_token: String,
    in_body: bool,
) -> Response {
    let cookie = refresh::set_cookie(
        &refresh_token,
        state.config.session_ttl.as_secs() as i64,
        state.config.cookie_secure,
    );
    let body = TokenResponse {
        access_token,
        expires_in: state.config.access_token_ttl.as_secs(),
        token_type: "bearer".into(),
        refresh_token: in_body.then_some(refresh_token),
    };
    let mut res = Json(body).into_response();
    set_cookie(&mut res, cookie);
    res.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    res
}

fn set_cookie(res: &mut Response, cookie: String) {
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        res.headers_mut().append(SET_COOKIE, v);
    }
}

fn millis(d: Duration) -> i64 {
    d.as_millis() as i64
}
