//! The outermost middleware: gives every request its id (the client's `X-Request-Id`
//! when valid, else a new UUIDv7), runs the request inside a span carrying it, renders
//! every error response into the spec's body with that id, and records metrics.

use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::{CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use schemas::{ErrorBody, ErrorDetail};
use tracing::Instrument;

use crate::http::error::ErrorPayload;
use crate::state::AppState;

pub static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The id of the request being served; an extension on every request.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

pub async fn request_context(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let request_id = req
        .headers()
        .get(&X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| is_valid_request_id(v))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    req.extensions_mut().insert(RequestId(request_id.clone()));
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned());
    let method = req.method().clone();

    let span = tracing::info_span!("request", request_id = %request_id, %method, route = route.as_deref().unwrap_or("-"));
    let mut res = next.run(req).instrument(span).await;

    let status = res.status();
    if status.is_client_error() || status.is_server_error() {
        let payload = res
            .extensions_mut()
            .remove::<ErrorPayload>()
            .unwrap_or_else(|| ErrorPayload::for_status(status));
        let body = ErrorBody {
            error: ErrorDetail {
                code: payload.code.into_owned(),
                message: payload.message.into_owned(),
                field: payload.field,
                details: payload.details,
                request_id: request_id.clone(),
            },
        };
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        res.headers_mut().remove(CONTENT_LENGTH);
        res.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        *res.body_mut() = Body::from(bytes);
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            // The rest of the body is not read, so the server closes the connection
            // after answering. Saying so keeps a client from sending its next request
            // on this connection, where it would race the close and fail.
            res.headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
    }
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        res.headers_mut().insert(X_REQUEST_ID.clone(), v);
    }
    state.metrics.observe(
        route.as_deref(),
        &method,
        status.as_u16(),
        started.elapsed(),
    );
    res
}

/// A client's request id is echoed when it is 1-128 characters of `[A-Za-z0-9._:-]`,
/// so that it cannot inject anything into headers or logs.
fn is_valid_request_id(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 128
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::is_valid_request_id;

    #[test]
    fn echoes_only_safe_request_ids() {
        assert!(is_valid_request_id("0190b4c2-7d1e-7c3a-9a5e-3f1d2b4c5a6e"));
        assert!(!is_valid_request_id(""));
        assert!(!is_valid_request_id("a b"));
        assert!(!is_valid_request_id("x\r\ny"));
        assert!(!is_valid_request_id(&"a".repeat(129)));
    }
}
