//! The rate-limit middleware (the limiter is `crate::http::rate_limit`). It
//! authenticates the bearer token once, here, so that the limit is the tenant's, and
//! leaves what it found on the request for the handlers' extractors.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::authenticate::authentication;
use crate::auth::principal::{bearer_token, Authentication};
use crate::http::error::ApiError;
use crate::state::AppState;

/// The middleware. It authenticates the bearer token once, here, so that the limit is
/// the tenant's; the handlers' extractors reuse the principal it leaves on the request.
pub async fn rate_limit(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let authentication = match bearer_token(req.headers()) {
        Some(_) if is_credential_route(req.uri().path()) => None,
        Some(raw) => Some(authentication(&state, raw).await),
        None => None,
    };
    let principal = match &authentication {
        Some(Authentication::Authenticated(p)) => Some(p),
        _ => None,
    };
    let verdict = if !state.limits.enabled() {
        None
    } else if let Some(p) = principal {
        let per_minute = match state.config_cache.settings(&p.tenant_id).await {
            Ok(s) => s.rate_limit_per_minute,
            // The tenant's settings cannot be read: the request will fail on the store
            // anyway; limit it by the default rather than not at all.
            Err(_) => schemas::tenant::TenantSettings::default().rate_limit_per_minute,
        };
        Some(state.limits.check_tenant(&p.tenant_id, per_minute).await)
    } else {
        let address = req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
        Some(state.limits.check_address(address).await)
    };
    if let Some(a) = authentication {
        req.extensions_mut().insert(a);
    }
    let mut res = match verdict.and_then(|v| v.retry_after) {
        Some(wait) => ApiError::RateLimited { retry_after: wait }.into_response(),
        None => next.run(req).await,
    };
    if let Some(v) = verdict {
        v.write(res.headers_mut());
    }
    res
}

/// The routes that check credentials themselves (login, refresh, logout): limited per
/// client address even when a bearer token is present.
fn is_credential_route(path: &str) -> bool {
    path.starts_with("/api/v1/auth/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credential_routes_are_the_auth_routes() {
        for p in [
            "/api/v1/auth/login",
            "/api/v1/auth/refresh",
            "/api/v1/auth/logout",
        ] {
            assert!(is_credential_route(p), "{p}");
        }
        assert!(!is_credential_route("/api/v1/claims/intake"));
        assert!(!is_credential_route("/api/v1/authx"));
    }
}
