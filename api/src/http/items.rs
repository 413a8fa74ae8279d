//! Bodies of many items (batch intake, member import): a JSON array or NDJSON, each
//! item checked on its own and answered with its own result, in input order.

use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderMap;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;

/// Why one item was refused: the error body's members, without a request id.
#[derive(Debug, Serialize, ToSchema)]
pub struct ItemError {
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// The item's share of an error that would have answered a single request, or the error
/// itself when it is no fault of the item (the store away, a bug of ours): that answers
/// the whole request, as it would have answered the item alone. An item is never told
/// `INTERNAL_ERROR` while its neighbours are accepted; the caller has written nothing
/// yet, so the client sends the whole body again.
pub fn item_error(e: ApiError) -> Result<ItemError, ApiError> {
    let (code, message, field) = match e {
        ApiError::BadRequest { message, field } => ("BAD_REQUEST", message.into_owned(), field),
        ApiError::Validation { message, field } => {
            ("VALIDATION_ERROR", message.into_owned(), field)
        }
        ApiError::Refused {
            code,
            message,
            field,
            ..
        } => (code, message.into_owned(), field),
        other => return Err(other),
    };
    Ok(ItemError {
        code: code.to_owned(),
        message,
        field,
    })
}

/// The items of a body, each still unparsed: a JSON array (`application/json`) or one
/// object per line (`application/x-ndjson`). `what` names the items in errors.
pub fn split(
    headers: &HeaderMap,
    body: &[u8],
    what: &str,
) -> Result<Vec<serde_json::Value>, ApiError> {
    let mime = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .unwrap_or_default();
    match mime.as_str() {
        "application/json" => {
            serde_json::from_slice::<Vec<serde_json::Value>>(body).map_err(|_| {
                ApiError::BadRequest {
                    message: format!("the body must be a JSON array of {what}").into(),
                    field: None,
                }
            })
        }
        "application/x-ndjson" | "application/jsonl" => body
            .split(|b| *b == b'\n')
            .enumerate()
            .filter(|(_, line)| !line.iter().all(u8::is_ascii_whitespace))
            .map(|(n, line)| {
                serde_json::from_slice(line).map_err(|_| ApiError::BadRequest {
                    message: format!("line {} is not a JSON object", n + 1).into(),
                    field: None,
                })
            })
            .collect(),
        _ => Err(ApiError::bad_request(
            "the body must be application/json (an array) or application/x-ndjson",
        )),
    }
}
