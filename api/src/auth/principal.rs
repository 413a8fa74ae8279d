//! The extractors that authenticate a request. `Principal` accepts any valid token of a
//! live session; `Authorized<S>` also demands the scope `S`, so a handler states the
//! scope it needs in its signature and cannot forget to check it.

use std::marker::PhantomData;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::HeaderMap;
use schemas::{Scope, ScopeSet};

use super::token::{self, VerifyError};
use crate::http::error::ApiError;
use crate::state::AppState;

/// Who is calling: the verified content of their access token.
#[derive(Debug, Clone)]
pub struct Principal {
    pub tenant_id: String,
    pub user_id: String,
    pub session_id: String,
    pub scopes: ScopeSet,
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        // Authenticated already by the rate limiter, which needs the tenant.
        if let Some(p) = parts.extensions.get::<Principal>() {
            return Ok(p.clone());
        }
        let raw = bearer_token(&parts.headers).ok_or(ApiError::Unauthorized)?;
        authenticate(state, raw).await
    }
}

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
        tenant_id: claims.tenant_id,
        user_id: claims.sub,
        session_id: claims.sid,
        scopes,
    })
}

/// The token of an `Authorization: Bearer …` header.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A scope an endpoint requires, as a type.
pub trait RequiredScope: Send + Sync + 'static {
    const SCOPE: Scope;
}

/// A principal holding the scope `S`; 403 `INSUFFICIENT_SCOPE` otherwise.
#[derive(Debug, Clone)]
pub struct Authorized<S>(pub Principal, PhantomData<S>);

impl<S> std::ops::Deref for Authorized<S> {
    type Target = Principal;
    fn deref(&self) -> &Principal {
        &self.0
    }
}

impl<S: RequiredScope> FromRequestParts<AppState> for Authorized<S> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let principal = Principal::from_request_parts(parts, state).await?;
        if !principal.scopes.contains(S::SCOPE) {
            return Err(ApiError::InsufficientScope(S::SCOPE));
        }
        Ok(Authorized(principal, PhantomData))
    }
}

/// One marker type per scope, for `Authorized<scope::ClaimsWrite>` and the like.
pub mod scope {
    use super::{RequiredScope, Scope};

    macro_rules! markers {
        ($($name:ident),+ $(,)?) => {$(
            #[derive(Debug, Clone, Copy)]
            pub struct $name;
            impl RequiredScope for $name {
                const SCOPE: Scope = Scope::$name;
            }
        )+};
    }

    markers!(
        ClaimsWrite,
        ClaimsRead,
        FraudRead,
        UploadsWrite,
        ProvidersWrite,
        ProvidersRead,
        RulebooksWrite,
        RulebooksRead,
        WorkflowManage,
        AuditRead,
        TenantConfigure,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_bearer_credentials() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer_token(&h), None);
        h.insert(AUTHORIZATION, "Bearer abc.def".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("abc.def"));
        h.insert(AUTHORIZATION, "bearer  abc".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("abc"));
        h.insert(AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
        h.insert(AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
    }
}
