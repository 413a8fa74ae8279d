//! Bodies of many items (batch intake, member import): a JSON array or NDJSON, each
//! item checked on its own and answered with its own result, in input order.

use std::fmt;

use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderMap;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Serialize;
use serde_json::value::RawValue;
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
///
/// Each item is the body's own text of it, checked only for being well-formed JSON: a
/// caller parses it as single intake parses a body ([`super::json::parse`]), so an item
/// is read exactly as it would be alone, and a batch of 1,000 claims holds no tree of
/// values beside its body (a `serde_json::Value` per item took several times the
/// item's bytes, for every item of the batch at once, and a second parse besides).
pub fn split<'a>(
    headers: &HeaderMap,
    body: &'a [u8],
    what: &str,
) -> Result<Vec<&'a RawValue>, ApiError> {
    let mime = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .unwrap_or_default();
    match mime.as_str() {
        "application/json" => {
            serde_json::from_slice::<Vec<&RawValue>>(body).map_err(|_| ApiError::BadRequest {
                message: format!("the body must be a JSON array of {what}").into(),
                field: None,
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

/// The text of an item's member `key` when the item is an object and that member a
/// string: the id a refused item is answered with, read even when the item as a whole
/// does not parse.
pub fn hint(item: &RawValue, key: &str) -> Option<String> {
    let mut de = serde_json::Deserializer::from_str(item.get());
    Hint(key).deserialize(&mut de).ok().flatten()
}

/// Reads an object's members, keeping the one string named by `.0` and skipping the
/// rest unparsed.
struct Hint<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for Hint<'_> {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Hint<'_> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(wanted) = map.next_key_seed(KeyIs(self.0))? {
            if wanted {
                // The last of a repeated member, as a parse of the whole item would
                // refuse it anyway; any other type is no id.
                found = match map.next_value::<serde_json::Value>()? {
                    serde_json::Value::String(s) => Some(s),
                    _ => None,
                };
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Whether a member's name is `.0`, read without keeping it.
struct KeyIs<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<bool, D::Error> {
        de.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn typed(mime: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_str(mime).unwrap());
        h
    }

    #[test]
    fn an_array_splits_into_each_items_own_text() {
        let body = br#"[{"claim_id":"C1","n":[1, 2]}, 7 ,{"claim_id":"C\u0033"}]"#;
        let items = split(&typed("application/json"), body, "claims").unwrap();
        let texts: Vec<&str> = items.iter().map(|i| i.get()).collect();
        assert_eq!(
            texts,
            [
                r#"{"claim_id":"C1","n":[1, 2]}"#,
                "7",
                r#"{"claim_id":"C\u0033"}"#
            ]
        );
    }

    #[test]
    fn ndjson_splits_by_line_and_skips_blank_ones() {
        let body = b"{\"a\":1}\r\n\n  \n{\"b\":2}\n";
        let items = split(&typed("application/x-ndjson"), body, "claims").unwrap();
        let texts: Vec<&str> = items.iter().map(|i| i.get()).collect();
        assert_eq!(texts, [r#"{"a":1}"#, r#"{"b":2}"#]);
        let e = split(
            &typed("application/x-ndjson"),
            b"{\"a\":1}\n{oops\n",
            "claims",
        );
        assert!(
            matches!(e, Err(ApiError::BadRequest { message, .. }) if message == "line 2 is not a JSON object")
        );
    }

    #[test]
    fn a_body_that_is_not_an_array_of_json_is_refused_whole() {
        for body in [&br#"{"claim_id":"C1"}"#[..], br#"[{"claim_id":"C1"},"#, b""] {
            assert!(matches!(
                split(&typed("application/json"), body, "claims"),
                Err(ApiError::BadRequest { .. })
            ));
        }
        assert!(split(&typed("text/plain"), b"[]", "claims").is_err());
    }

    #[test]
    fn the_hint_is_the_named_string_member_of_an_object() {
        let items = split(
            &typed("application/json"),
            br#"[{"x":{"claim_id":"inner"},"claim_id":"C\u0031"},{"claim_id":5},[1],"s",{"claim_id":"C2","amount":"bad"}]"#,
            "claims",
        )
        .unwrap();
        let hints: Vec<Option<String>> = items.iter().map(|i| hint(i, "claim_id")).collect();
        assert_eq!(
            hints,
            [Some("C1".into()), None, None, None, Some("C2".into())]
        );
    }
}
