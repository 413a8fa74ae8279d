//! The console (contract part 2, "The console"): one page for claims officers and rule
//! authors at `/console`, beside `/api/v1`, with `/` redirecting there. Its HTML, CSS
//! and JavaScript are built into the binary (`api/assets/console`), so it works with no
//! internet and no front-end build: plain DOM code that calls the same API with the
//! signed-in user's scopes. Loading it needs no token; it signs in with `/auth/login`.

use axum::extract::Path;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::response::{IntoResponse, Redirect, Response};

use crate::http::error::ApiError;

const PAGE: &str = include_str!("../../assets/console/index.html");
const SCRIPT: &str = include_str!("../../assets/console/console.js");
const STYLE: &str = include_str!("../../assets/console/console.css");

/// Only the binary's own scripts, styles and API: no inline code, no other origin.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// `GET /`: the console.
pub async fn root() -> Redirect {
    Redirect::to("/console")
}

/// `GET /console`.
pub async fn page() -> Response {
    asset("text/html; charset=utf-8", PAGE)
}

/// `GET /console/{file}`: its script and style sheet.
pub async fn file(Path(file): Path<String>) -> Result<Response, ApiError> {
    match file.as_str() {
        "console.js" => Ok(asset("text/javascript; charset=utf-8", SCRIPT)),
        "console.css" => Ok(asset("text/css; charset=utf-8", STYLE)),
        _ => Err(ApiError::NotFound),
    }
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, content_type),
            (CONTENT_SECURITY_POLICY, POLICY),
            // The assets change only with the binary; a restart may bring new ones.
            (CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
