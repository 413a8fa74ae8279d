//! Authenticating a bearer token against its session.

use schemas::{ScopeSet, TenantId};

use crate::auth::principal::{Authentication, Principal};
use crate::auth::token::{self, VerifyError};
use crate::http::error::ApiError;
use crate::state::AppState;

/// Verifies a bearer token and its session.
pub async fn authenticate(state: &AppState, raw: &str) -> Result<Principal, ApiError> {
    let claims = token::verify(
        &state.keys,
        &state.config.issuer,
        state.config.access_token_ttl,
        raw,
    )
    .await
    .map_err(|e| match e {
        VerifyError::Expired => ApiError::TokenExpired,
        VerifyError::Invalid => ApiError::Unauthorized,
    })?;
    // The token must name the session's own tenant and user: a token is only as good
    // as the session it was issued for (RFC 8725, 3.8: validate every claim).
    let session = state.sessions.live(&claims.sid).await?;
    if !session.is_some_and(|s| s.tenant_id == claims.tenant_id && s.user_id == claims.sub) {
        return Err(ApiError::Unauthorized);
    }
    let scopes =
        ScopeSet::parse_space_separated(&claims.scope).map_err(|_| ApiError::Unauthorized)?;
    Ok(Principal {
        // Issued for a tenant that exists, so a valid id; anything else is not our token.
        tenant_id: TenantId::parse(claims.tenant_id.clone()).map_err(|_| ApiError::Unauthorized)?,
        user_id: claims.sub.clone(),
        session_id: claims.sid.clone(),
        scopes,
    })
}

/// [`authenticate`], as the extractors read it off the request.
pub async fn authentication(state: &AppState, raw: &str) -> Authentication {
    match authenticate(state, raw).await {
        Ok(p) => Authentication::Authenticated(p),
        Err(ApiError::TokenExpired) => Authentication::Expired,
        Err(ApiError::Unauthorized) => Authentication::Invalid,
        // Logged where the store's error became this one.
        Err(ApiError::Unavailable) => Authentication::Unavailable,
        Err(e) => {
            tracing::error!(error = %e, "Authenticating a request failed.");
            Authentication::Failed
        }
    }
}
