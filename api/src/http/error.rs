//! The API's one error type. Handlers return `Result<_, ApiError>` and use `?`; the
//! response carries an [`ErrorPayload`] extension that [`super::request_context`]
//! renders into the spec's body with the request id. Internal causes are logged here
//! and never reach the client.

use std::borrow::Cow;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pipeline::store::StoreError;
use schemas::Scope;

/// An error as the client sees it, variants grouped by what the client should do.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    // The request itself is wrong: fix it, do not retry as is.
    #[error("bad request: {message}")]
    BadRequest {
        message: Cow<'static, str>,
        field: Option<String>,
    },
    /// A body that could not be read, with a document that says why in the format the
    /// client sent (an X12 999 rejecting an interchange).
    #[error("bad request: {message}")]
    BadRequestWithDetails {
        message: Cow<'static, str>,
        details: Box<serde_json::Value>,
    },
    #[error("validation failed on {field:?}: {message}")]
    Validation {
        message: Cow<'static, str>,
        field: Option<String>,
    },
    #[error("payload too large")]
    PayloadTooLarge { limit: usize },
    #[error("no such route")]
    NotFound,
    #[error("method not allowed")]
    MethodNotAllowed,
    /// A business rule refused the request; `code` is one of the spec's codes.
    #[error("{code}: {message}")]
    Refused {
        status: StatusCode,
        code: &'static str,
        message: Cow<'static, str>,
        field: Option<String>,
    },

    // Credentials: log in again or refresh.
    #[error("unauthorized")]
    Unauthorized,
    /// Login with a wrong email or password; one message for both.
    #[error("invalid credentials")]
    InvalidCredentials,
    #[error("token expired")]
    TokenExpired,
    #[error("insufficient scope, needs {0}")]
    InsufficientScope(Scope),

    // Our fault: the client may retry later.
    #[error("internal error: {0}")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("service unavailable")]
    Unavailable,
    /// Over the rate limit: retry after this many seconds.
    #[error("rate limited for {retry_after} s")]
    RateLimited { retry_after: u64 },
}

/// The parts of the body that do not depend on the request; rendered by the
/// request-context middleware, which knows the request id.
#[derive(Debug, Clone)]
pub struct ErrorPayload {
    pub code: Cow<'static, str>,
    pub message: Cow<'static, str>,
    pub field: Option<String>,
    pub details: Option<serde_json::Value>,
}

impl ApiError {
    pub fn bad_request(message: impl Into<Cow<'static, str>>) -> Self {
        Self::BadRequest {
            message: message.into(),
            field: None,
        }
    }

    pub fn missing_field(field: impl Into<String>) -> Self {
        let field = field.into();
        Self::BadRequest {
            message: format!("the required field `{field}` is missing").into(),
            field: Some(field),
        }
    }

    pub fn validation(field: impl Into<String>, message: impl Into<Cow<'static, str>>) -> Self {
        Self::Validation {
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// 409 `CONFLICT`: a duplicate or a state that does not allow the change.
    pub fn conflict(message: impl Into<Cow<'static, str>>) -> Self {
        Self::Refused {
            status: StatusCode::CONFLICT,
            code: "CONFLICT",
            message: message.into(),
            field: None,
        }
    }

    /// 409 `CONFLICT` naming the field whose value clashes (a taken id).
    pub fn conflict_on(field: &str, message: impl Into<Cow<'static, str>>) -> Self {
        Self::Refused {
            status: StatusCode::CONFLICT,
            code: "CONFLICT",
            message: message.into(),
            field: Some(field.to_owned()),
        }
    }

    pub fn internal(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Internal(Box::new(e))
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } | Self::BadRequestWithDetails { .. } => StatusCode::BAD_REQUEST,
            Self::Validation { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Refused { status, .. } => *status,
            Self::Unauthorized | Self::InvalidCredentials | Self::TokenExpired => {
                StatusCode::UNAUTHORIZED
            }
            Self::InsufficientScope(_) => StatusCode::FORBIDDEN,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    fn payload(self) -> ErrorPayload {
        if let Self::BadRequestWithDetails { message, details } = self {
            return ErrorPayload {
                code: "BAD_REQUEST".into(),
                message,
                field: None,
                details: Some(*details),
            };
        }
        let (code, message, field): (&'static str, Cow<'static, str>, Option<String>) = match self {
            Self::BadRequestWithDetails { message, .. } => ("BAD_REQUEST", message, None),
            Self::BadRequest { message, field } => ("BAD_REQUEST", message, field),
            Self::Validation { message, field } => ("VALIDATION_ERROR", message, field),
            Self::PayloadTooLarge { limit } => (
                "PAYLOAD_TOO_LARGE",
                format!("the request body exceeds the limit of {limit} bytes").into(),
                None,
            ),
            Self::NotFound => ("NOT_FOUND", "the resource does not exist".into(), None),
            Self::MethodNotAllowed => (
                "METHOD_NOT_ALLOWED",
                "this method is not allowed on this resource".into(),
                None,
            ),
            Self::Refused {
                code,
                message,
                field,
                ..
            } => (code, message, field),
            Self::Unauthorized => (
                "UNAUTHORIZED",
                "a valid access token is required".into(),
                None,
            ),
            Self::InvalidCredentials => (
                "UNAUTHORIZED",
                "the email or password is incorrect".into(),
                None,
            ),
            Self::TokenExpired => (
                "TOKEN_EXPIRED",
                "the access token has expired; obtain a new one with POST /auth/refresh".into(),
                None,
            ),
            Self::InsufficientScope(scope) => (
                "INSUFFICIENT_SCOPE",
                format!("this action requires the scope {scope}").into(),
                None,
            ),
            Self::Internal(_) => (
                "INTERNAL_ERROR",
                "the server failed to complete the request".into(),
                None,
            ),
            Self::Unavailable => (
                "SERVICE_UNAVAILABLE",
                "the service cannot store or read data right now; try again shortly".into(),
                None,
            ),
            Self::RateLimited { retry_after } => (
                "RATE_LIMITED",
                format!("the rate limit is exceeded; it resets in {retry_after} seconds").into(),
                None,
            ),
        };
        ErrorPayload {
            code: code.into(),
            message,
            field,
            details: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Self::Internal(source) = &self {
            // The request id is a field of the enclosing span.
            tracing::error!(error = %source, "Request failed.");
        }
        let status = self.status();
        let mut res = status.into_response();
        let retry_after = match &self {
            Self::RateLimited { retry_after } => Some(*retry_after),
            // The store restarts or regains room within seconds; a client that retries
            // sooner only adds load.
            Self::Unavailable => Some(1),
            _ => None,
        };
        if let Some(secs) = retry_after {
            res.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(secs),
            );
        }
        res.extensions_mut().insert(self.payload());
        res
    }
}

/// A body's own check failed: 422 naming the field.
impl From<schemas::claim::FieldError> for ApiError {
    fn from(e: schemas::claim::FieldError) -> Self {
        ApiError::validation(e.field, e.message)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => ApiError::NotFound,
            StoreError::Unavailable(cause) => ApiError::store_unavailable(&cause),
            other => ApiError::internal(other),
        }
    }
}

/// A configuration read that failed: 503 while the store is away, as any read then.
impl From<pipeline::config_cache::CacheError> for ApiError {
    fn from(e: pipeline::config_cache::CacheError) -> Self {
        match e.cause() {
            StoreError::Unavailable(cause) => ApiError::store_unavailable(cause),
            _ => ApiError::internal(e),
        }
    }
}

impl ApiError {
    /// 503 for a store that is away for a while. The client is told to retry; the
    /// operator learns why (a restarting database, a full disk) from the log.
    pub fn store_unavailable(cause: &dyn std::fmt::Display) -> Self {
        tracing::warn!(error = %cause, "The store is unavailable; answering 503.");
        ApiError::Unavailable
    }
}

impl From<tokio::task::JoinError> for ApiError {
    fn from(e: tokio::task::JoinError) -> Self {
        ApiError::internal(e)
    }
}

impl ErrorPayload {
    /// The body for an error response that did not come from an [`ApiError`]: axum's
    /// own rejections, a panic, a layer that refused the request.
    pub fn for_status(status: StatusCode) -> Self {
        let err = match status {
            StatusCode::NOT_FOUND => ApiError::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed,
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge { limit: 0 },
            StatusCode::UNAUTHORIZED => ApiError::Unauthorized,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                ApiError::bad_request("the request has an unsupported content type")
            }
            s if s.is_client_error() => {
                ApiError::bad_request("the request could not be understood")
            }
            _ => ApiError::Internal("unexpected error response".into()),
        };
        let mut payload = err.payload();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            payload.message = "the request body is too large".into();
        }
        payload
    }
}
