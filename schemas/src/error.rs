//! The error body of the spec's Errors section: `{"error": {code, message, field?,
//! request_id}}`. Every error response of the service has exactly this shape.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Machine-readable code, e.g. `VALIDATION_ERROR`.
    pub code: String,
    /// Human-readable explanation; never contains internal details.
    pub message: String,
    /// The offending field as a dotted path (`lines[2].amount`), when one is to blame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// A document that explains the error in the request's own format, when the request
    /// was not JSON: `{"999": "ISA*…"}` for an X12 interchange that cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub details: Option<serde_json::Value>,
    /// Equals the response's `X-Request-Id` header.
    pub request_id: String,
}
