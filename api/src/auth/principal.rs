//! Who is calling, and the extractors that hand it to handlers. The middleware that
//! authenticates a request's bearer token leaves its [`Authentication`] on the request. `Principal` accepts any valid token of a
//! live session; `Authorized<S>` also demands the scope `S`, so a handler states the
//! scope it needs in its signature and cannot forget to check it.

use std::marker::PhantomData;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::HeaderMap;
use schemas::{Scope, ScopeSet, TenantId};

use crate::http::error::ApiError;

/// Who is calling: the verified content of their access token.
#[derive(Debug, Clone)]
pub struct Principal {
    pub tenant_id: TenantId,
    pub user_id: String,
    pub session_id: String,
    pub scopes: ScopeSet,
}

/// What authenticating a request's bearer token found, left on the request by the
/// middleware that authenticates (`crate::middleware::rate_limit`, which needs the
/// tenant first), for the extractors below.
#[derive(Debug, Clone)]
pub enum Authentication {
    Authenticated(Principal),
    /// A genuine token past its expiry: 401 `TOKEN_EXPIRED`.
    Expired,
    /// Not a token of ours, or of a session that ended: 401 `UNAUTHORIZED`.
    Invalid,
    /// The sessions' store is away (a restart, a lost connection): 503
    /// `SERVICE_UNAVAILABLE`, which a client retries.
    Unavailable,
    /// The sessions could not be read: 500, logged where it happened.
    Failed,
}

impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        match parts.extensions.get::<Authentication>() {
            Some(Authentication::Authenticated(p)) => Ok(p.clone()),
            Some(Authentication::Expired) => Err(ApiError::TokenExpired),
            Some(Authentication::Unavailable) => Err(ApiError::Unavailable),
            Some(Authentication::Failed) => Err(ApiError::internal(std::io::Error::other(
                "the session store could not be read",
            ))),
            Some(Authentication::Invalid) | None => Err(ApiError::Unauthorized),
        }
    }
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

impl<S: RequiredScope, St: Send + Sync> FromRequestParts<St> for Authorized<S> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &St) -> Result<Self, Self::Rejection> {
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
