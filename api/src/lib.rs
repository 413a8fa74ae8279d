//! The HTTP front end of the claims service (spec: Endpoints; contract: Conventions).
//!
//! `http` holds what every request passes through (request ids, the error body, the
//! JSON extractor, metrics); `auth` the tokens, keys, passwords and the scope check;
//! `routes` one file per resource. [`router`] wires them; [`serve`] runs them.

pub mod auth;
pub mod config;
pub mod http;
pub mod middleware;
pub mod openapi;
pub mod routes;
pub mod state;

use std::future::Future;

use axum::Router;
use tokio::net::TcpListener;

pub use config::ApiConfig;
pub use http::error::ApiError;
pub use state::AppState;

/// The whole application: every documented route under `/api/v1`, plus the layers that
/// give every response its request id and the spec's error body.
pub fn router(state: AppState) -> Router {
    let (routes, _doc) = openapi::routes().split_for_parts();
    Router::new()
        .nest("/api/v1", routes)
        .route("/", axum::routing::get(routes::console::root))
        .route("/console", axum::routing::get(routes::console::page))
        .route("/console/{file}", axum::routing::get(routes::console::file))
        .fallback(http::fallback::not_found)
        .layer(axum::extract::DefaultBodyLimit::max(
            state.config.max_body_bytes,
        ))
        // Inside the idempotency layer: a panic becomes a 500, which releases the key.
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            http::fallback::panic_response,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            middleware::idempotency::idempotency,
        ))
        // Authenticates once for the limiter; the idempotency layer needs the user too.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            middleware::rate_limit::rate_limit,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            middleware::request_context::request_context,
        ))
        .with_state(state)
}

/// Serves until `shutdown` completes, then lets in-flight requests finish; the
/// connections are bounded as `http::connections` describes.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let settings = state.config.connections;
    http::connections::serve(listener, router(state), settings, shutdown).await
}
