//! List parameters of the contract's Conventions: `?limit=` (1-500, default 50) and an
//! opaque `?cursor=`. A cursor is the base64url of the last item's sort key; clients
//! pass it back unchanged. Bad values are 422 `VALIDATION_ERROR` naming the parameter.

use std::collections::HashMap;

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use schemas::Page;

use super::error::ApiError;

pub const DEFAULT_LIMIT: i64 = 50;
pub const MAX_LIMIT: i64 = 500;

/// `limit` and the decoded cursor, plus any other query parameters for the handler.
#[derive(Debug, Clone)]
pub struct ListParams {
    pub limit: i64,
    pub after: Option<String>,
    pub query: HashMap<String, String>,
}

impl<S: Send + Sync> FromRequestParts<S> for ListParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(mut query) = Query::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::bad_request("the query string is malformed"))?;
        let limit = match query.remove("limit") {
            None => DEFAULT_LIMIT,
            Some(v) => v
                .parse::<i64>()
                .ok()
                .filter(|l| (1..=MAX_LIMIT).contains(l))
                .ok_or_else(|| {
                    ApiError::validation(
                        "limit",
                        format!("must be an integer from 1 to {MAX_LIMIT}"),
                    )
                })?,
        };
        let after = match query.remove("cursor").filter(|c| !c.is_empty()) {
            None => None,
            Some(c) => Some(decode_cursor(&c).ok_or_else(|| {
                ApiError::validation("cursor", "is not a cursor this service issued")
            })?),
        };
        Ok(ListParams {
            limit,
            after,
            query,
        })
    }
}

impl ListParams {
    /// Asks the store for one more than the page, to know whether a next page exists.
    pub fn fetch_limit(&self) -> i64 {
        self.limit + 1
    }

    /// Builds the page from up to `limit + 1` items, with the cursor of the last one.
    pub fn page<T>(&self, mut items: Vec<T>, key: impl Fn(&T) -> String) -> Page<T> {
        let more = items.len() as i64 > self.limit;
        items.truncate(self.limit as usize);
        let next_cursor = if more {
            items.last().map(|i| encode_cursor(&key(i)))
        } else {
            None
        };
        Page {
            data: items,
            next_cursor,
        }
    }
}

pub fn encode_cursor(key: &str) -> String {
    URL_SAFE_NO_PAD.encode(key.as_bytes())
}

fn decode_cursor(c: &str) -> Option<String> {
    URL_SAFE_NO_PAD
        .decode(c)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
}
