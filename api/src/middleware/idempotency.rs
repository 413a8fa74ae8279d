//! `Idempotency-Key` on POST (contract: Conventions).
//!
//! - A key (1-255 characters) is scoped to the tenant, the user, the method and the
//!   path, and fingerprinted by the SHA-256 of the body.
//! - The first request takes the key in the store, runs, and stores its status, headers
//!   and body for 24 hours. A repeat with the same body replays them with
//!   `Idempotent-Replayed: true` and has no second effect; another body is 422
//!   `VALIDATION_ERROR` (field `Idempotency-Key`); a repeat while the first still runs
//!   is 409 `CONFLICT` with `Retry-After`.
//! - A keyed request runs to its end in a task of its own, even if the client goes away.
//!   It renews its hold every few seconds; one whose process crashed lets it lapse, and
//!   the next attempt takes the key over, so no key is locked forever.
//! - A response of 500 or above is not kept: the key is released, and a retry runs
//!   afresh.
//! - Only authenticated requests are keyed (the scope names a user); the login and
//!   token endpoints ignore the header, so that no stored response holds a credential.
//! - A request without the header costs nothing here: no store round trip.

use std::borrow::Cow;
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_LENGTH, RETRY_AFTER};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pipeline::idempotency::KeyScope;
use pipeline::store::{Begin, KeyTimes, StoredResponse};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tracing::Instrument;

use crate::auth::principal::Authentication;
use crate::http::error::{ApiError, ErrorPayload};
use crate::state::AppState;

pub static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
pub static IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// How long a key and its response are kept (spec: Limits).
pub const KEY_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a running request holds its key between renewals.
const LEASE: Duration = Duration::from_secs(30);
const RENEW_EVERY: Duration = Duration::from_secs(10);
/// Longest key (contract: Conventions).
const MAX_KEY_CHARS: usize = 255;

/// An error response as stored: rendered again with each replay's request id.
#[derive(Serialize, Deserialize)]
struct StoredError {
    code: String,
    message: String,
    field: Option<String>,
    #[serde(default)]
    details: Option<serde_json::Value>,
}

pub async fn idempotency(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if req.method() != Method::POST || !state.config.idempotency_enabled {
        return next.run(req).await;
    }
    let Some(raw) = req.headers().get(&IDEMPOTENCY_KEY) else {
        return next.run(req).await;
    };
    let key = match raw.to_str() {
        Ok(k) if !k.is_empty() && k.chars().count() <= MAX_KEY_CHARS => k.to_owned(),
        _ => {
            return ApiError::validation(
                "Idempotency-Key",
                "must be 1 to 255 visible ASCII characters",
            )
            .into_response()
        }
    };
    let Some(Authentication::Authenticated(principal)) =
        req.extensions().get::<Authentication>().cloned()
    else {
        return next.run(req).await;
    };
    let (parts, body) = req.into_parts();
    let limit = state.config.max_body_bytes;
    let Ok(bytes) = to_bytes(body, limit).await else {
        return ApiError::PayloadTooLarge { limit }.into_response();
    };
    let fingerprint = hex::encode(Sha256::digest(&bytes));
    let owned = KeyScope {
        tenant_id: principal.tenant_id.to_string(),
        user_id: principal.user_id,
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        key,
    };
    let times = KeyTimes {
        now: state.clock.now_ms(),
        lease_ms: millis(LEASE),
        ttl_ms: millis(KEY_TTL),
    };
    match state.idempotency.begin(&owned, &fingerprint, times).await {
        Ok(Begin::Started) => {}
        Ok(Begin::Replay(stored)) => return replay(stored),
        Ok(Begin::Mismatch) => {
            return ApiError::validation(
                "Idempotency-Key",
                "this key was used with a different request body",
            )
            .into_response()
        }
        Ok(Begin::InProgress { .. }) => {
            let mut res = ApiError::conflict(
                "a request with this Idempotency-Key is still in progress; retry after 1 second",
            )
            .into_response();
            res.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            return res;
        }
        Err(e) => return ApiError::from(e).into_response(),
    }

    // The keyed request runs to its end in a task of its own, even if the client goes
    // away meanwhile: a client that timed out and retries then gets the real response
    // replayed, instead of waiting out the lease and running the request again.
    let req = Request::from_parts(parts, Body::from(bytes));
    let task =
        tokio::spawn(run_keyed(state, owned, next, req).instrument(tracing::Span::current()));
    task.await
        .unwrap_or_else(|e| ApiError::from(e).into_response())
}

/// Runs a request that holds its key, renewing the hold, then stores the response (or
/// releases the key after a server error).
async fn run_keyed(state: AppState, owned: KeyScope, next: Next, req: Request) -> Response {
    let scope = owned.scope();
    let run = next.run(req);
    tokio::pin!(run);
    let mut renew =
        tokio::time::interval_at(tokio::time::Instant::now() + RENEW_EVERY, RENEW_EVERY);
    let res = loop {
        tokio::select! {
            res = &mut run => break res,
            _ = renew.tick() => {
                let until = state.clock.now_ms() + millis(LEASE);
                if let Err(e) = state.store.renew_idempotent(scope, until).await {
                    tracing::warn!(error = %e, "Cannot renew an idempotency key's lease.");
                }
            }
        }
    };
    if res.status().is_server_error() {
        if let Err(e) = state.store.release_idempotent(scope).await {
            tracing::warn!(error = %e, "Cannot release an idempotency key; it lapses with its lease.");
        }
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let Ok(body) = to_bytes(body, usize::MAX).await else {
        let _ = state.store.release_idempotent(scope).await;
        return ApiError::Internal("the response body could not be read".into()).into_response();
    };
    let error = parts.extensions.get::<ErrorPayload>().map(|p| {
        serde_json::to_string(&StoredError {
            code: p.code.to_string(),
            message: p.message.to_string(),
            field: p.field.clone(),
            details: p.details.clone(),
        })
        .unwrap_or_default()
    });
    let headers: Vec<(&str, &str)> = parts
        .headers
        .iter()
        .filter(|(name, _)| *name != CONTENT_LENGTH)
        .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
        .collect();
    let stored = StoredResponse {
        status: parts.status.as_u16(),
        headers: serde_json::to_string(&headers).unwrap_or_else(|_| "[]".into()),
        body: String::from_utf8_lossy(&body).into_owned(),
        error,
    };
    if let Err(e) = state.idempotency.finish(&owned, stored).await {
        // The effect happened; only the replay is lost. The key lapses with its lease and
        // a repeat then runs again, which the handlers' own duplicate checks absorb.
        tracing::warn!(error = %e, "Cannot store an idempotent response.");
    }
    parts.headers.remove(CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

/// The stored response again, marked as a replay.
fn replay(stored: StoredResponse) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut res = Response::new(Body::from(stored.body));
    *res.status_mut() = status;
    let headers: Vec<(String, String)> = serde_json::from_str(&stored.headers).unwrap_or_default();
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            res.headers_mut().append(n, v);
        }
    }
    if let Some(e) = stored
        .error
        .and_then(|e| serde_json::from_str::<StoredError>(&e).ok())
    {
        res.extensions_mut().insert(ErrorPayload {
            code: Cow::Owned(e.code),
            message: Cow::Owned(e.message),
            field: e.field,
            details: e.details,
        });
    }
    res.headers_mut().insert(
        IDEMPOTENT_REPLAYED.clone(),
        HeaderValue::from_static("true"),
    );
    res
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Deletes expired keys every ten minutes until `stop` turns true.
pub async fn purge_expired(state: AppState, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut every = tokio::time::interval(Duration::from_secs(600));
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        match state
            .store
            .purge_idempotency_keys(state.clock.now_ms())
            .await
        {
            Ok(0) => {}
            Ok(n) => tracing::debug!(purged = n, "Purged expired idempotency keys."),
            Err(e) => tracing::warn!(error = %e, "Cannot purge expired idempotency keys."),
        }
    }
}
