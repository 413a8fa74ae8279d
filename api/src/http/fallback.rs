//! Answers for requests no handler takes: an unknown route, a panic.

use std::any::Any;

use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// Unknown route: 404 `NOT_FOUND` (contract: Conventions).
pub async fn not_found() -> ApiError {
    ApiError::NotFound
}

/// A handler panicked: log it, answer 500 without internals.
pub fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let detail = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    tracing::error!(panic = detail, "Handler panicked.");
    ApiError::Internal("handler panicked".into()).into_response()
}
