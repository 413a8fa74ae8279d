//! The JSON body extractor. axum's own `Json` answers with plain-text rejections; this
//! one maps every failure onto the contract's conventions: wrong content type or
//! malformed JSON or a missing required field → 400 `BAD_REQUEST`; a field present but
//! invalid → 422 `VALIDATION_ERROR` with its dotted path; too large → 413.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRef, FromRequest, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::error::ApiError;

/// The largest request body the router takes (`max_body_bytes`), named in the 413.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);

/// A JSON request body (as extractor) or response body (as response).
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<T, S> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
    BodyLimit: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers()) {
            return Err(ApiError::bad_request(
                "the request body must be JSON with Content-Type: application/json",
            ));
        }
        let bytes = read_body(req, state).await?;
        parse(&bytes).map(Json)
    }
}

/// A JSON body that may be absent (empty): refresh and logout take their credential
/// from a cookie or from the body.
#[derive(Debug, Clone, Default)]
pub struct OptionalJson<T>(pub Option<T>);

impl<T, S> FromRequest<S> for OptionalJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
    BodyLimit: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json = is_json(req.headers());
        let bytes = read_body(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(None));
        }
        if !json {
            return Err(ApiError::bad_request(
                "the request body must be JSON with Content-Type: application/json",
            ));
        }
        parse(&bytes).map(|v| OptionalJson(Some(v)))
    }
}

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|mime| {
            let mime = mime.trim().to_ascii_lowercase();
            mime == "application/json"
                || (mime.starts_with("application/") && mime.ends_with("+json"))
        })
        .unwrap_or(false)
}

async fn read_body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError>
where
    BodyLimit: FromRef<S>,
{
    Bytes::from_request(req, state).await.map_err(|e| match e {
        BytesRejection::FailedToBufferBody(inner)
            if inner.status() == StatusCode::PAYLOAD_TOO_LARGE =>
        {
            // The router's `DefaultBodyLimit` is this setting.
            ApiError::PayloadTooLarge {
                limit: BodyLimit::from_ref(state).0,
            }
        }
        _ => ApiError::bad_request("the request body could not be read"),
    })
}

/// Deserialises with the path of the failing field, and classifies the failure.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| classify(&e))?;
    de.end().map_err(|_| {
        ApiError::bad_request("the request body is not valid JSON: trailing characters")
    })?;
    Ok(value)
}

fn classify(e: &serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let inner = e.inner();
    let path = e.path().to_string();
    let path = (path != ".").then_some(path);
    match inner.classify() {
        serde_json::error::Category::Data => {
            let text = inner.to_string();
            // serde's wording is stable: "missing field `name` at line 1 column 9".
            if let Some(rest) = text.strip_prefix("missing field `") {
                let name = rest.split('`').next().unwrap_or_default();
                let field = match path {
                    Some(p) => format!("{p}.{name}"),
                    None => name.to_owned(),
                };
                return ApiError::missing_field(field);
            }
            match path {
                Some(field) => ApiError::validation(field, strip_position(&text)),
                None => ApiError::Validation {
                    message: strip_position(&text).into(),
                    field: None,
                },
            }
        }
        // `1e400` is well-formed JSON whose value no field here can hold: the field is
        // present but invalid, like any other value out of its range.
        serde_json::error::Category::Syntax
            if inner.to_string().starts_with("number out of range") =>
        {
            ApiError::Validation {
                message: "the number is out of range".into(),
                field: path,
            }
        }
        _ => ApiError::bad_request(format!(
            "the request body is not valid JSON: {}",
            strip_position(&inner.to_string())
        )),
    }
}

/// serde_json appends " at line L column C"; keep the message, drop the position noise
/// only when it would be misleading (the caller's field path is more precise).
fn strip_position(text: &str) -> String {
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Line {
        amount: i64,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Body {
        name: String,
        lines: Vec<Line>,
    }

    fn field_of(e: ApiError) -> (StatusCode, Option<String>) {
        let status = e.status();
        match e {
            ApiError::BadRequest { field, .. } | ApiError::Validation { field, .. } => {
                (status, field)
            }
            _ => (status, None),
        }
    }

    #[test]
    fn a_wrong_type_is_422_with_the_dotted_path() {
        let e =
            parse::<Body>(br#"{"name":"x","lines":[{"amount":1},{"amount":"2"}]}"#).unwrap_err();
        assert_eq!(
            field_of(e),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("lines[1].amount".into())
            )
        );
    }

    #[test]
    fn a_missing_field_is_400_naming_it() {
        let e = parse::<Body>(br#"{"name":"x","lines":[{}]}"#).unwrap_err();
        assert_eq!(
            field_of(e),
            (StatusCode::BAD_REQUEST, Some("lines[0].amount".into()))
        );
        let e = parse::<Body>(br#"{"lines":[]}"#).unwrap_err();
        assert_eq!(field_of(e), (StatusCode::BAD_REQUEST, Some("name".into())));
    }

    #[test]
    fn a_number_out_of_range_is_422_naming_the_field() {
        let e = parse::<Body>(br#"{"name":"x","lines":[{"amount":1e400}]}"#).unwrap_err();
        assert_eq!(
            field_of(e),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("lines[0].amount".into())
            )
        );
    }

    #[test]
    fn malformed_json_is_400() {
        let e = parse::<Body>(br#"{"name": "#).unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        let e = parse::<Body>(br#"{"name":"x","lines":[]} x"#).unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    }
}
