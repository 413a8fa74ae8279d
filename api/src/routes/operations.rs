//! `GET /openapi.json`, `GET /docs`, `GET /metrics` (contract: Operations).

use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{Html, IntoResponse, Response};

use crate::state::AppState;

/// A readable rendering of this document (Redoc, served locally).
#[utoipa::path(get, path = "/docs", tag = "operations",
    responses((status = 200, description = "HTML documentation page", content_type = "text/html")))]
pub async fn docs() -> Html<&'static str> {
    Html(DOCS_PAGE)
}

/// The Redoc script the docs page loads.
#[utoipa::path(get, path = "/docs/redoc.js", tag = "operations",
    responses((status = 200, description = "Redoc 2.5.4 standalone bundle", content_type = "application/javascript")))]
pub async fn redoc_js() -> Response {
    (
        [
            (CONTENT_TYPE, "application/javascript"),
            (CACHE_CONTROL, "public, max-age=86400"),
        ],
        REDOC_JS,
    )
        .into_response()
}

/// Prometheus metrics in text format.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain")))]
pub async fn metrics(State(state): State<AppState>) -> Response {
    let mut body = state.metrics.render();
    // Read from the dead-letter topic, so that it counts what every process parked.
    match pipeline::dead_letters::total(&state.bus, &state.topics).await {
        Ok(total) => body.push_str(&format!(
            "# HELP claims_dead_letters_total Records the stages parked on the dead-letter topic.\n\
             # TYPE claims_dead_letters_total counter\nclaims_dead_letters_total {total}\n"
        )),
        Err(e) => {
            tracing::warn!(error = %e, "The dead-letter topic could not be read for /metrics.")
        }
    }
    match state.store.attempt_totals().await {
        Ok(rows) => body.push_str(&crate::http::delivery_metrics::render(rows)),
        Err(e) => tracing::warn!(error = %e, "Webhook totals could not be read for /metrics."),
    }
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

const REDOC_JS: &[u8] = include_bytes!("../../assets/redoc.standalone.js");

const DOCS_PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Claims Service API</title>
<style>body { margin: 0; padding: 0; }</style>
</head>
<body>
<redoc spec-url="/api/v1/openapi.json" hide-download-button="false"></redoc>
<script src="/api/v1/docs/redoc.js"></script>
</body>
</html>
"#;
