//! Bodies of the authentication endpoints (spec: Authentication; contract: Auth).
//! Credentials are `SecretString`s so that a stray `{:?}` never prints them.

use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct LoginRequest {
    pub email: String,
    #[schema(value_type = String, format = Password)]
    pub password: SecretString,
}

/// Returned by login and refresh.
#[derive(Clone, Serialize, Deserialize, ToSchema)]
pub struct TokenResponse {
    /// RS256-signed JWT.
    pub access_token: String,
    /// Seconds until the access token expires: always 900.
    pub expires_in: u64,
    /// Always `bearer`.
    pub token_type: String,
    /// The rotated refresh token; present only when the old one came in the body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
}

impl std::fmt::Debug for TokenResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenResponse")
            .field("expires_in", &self.expires_in)
            .finish_non_exhaustive()
    }
}

/// Body of refresh and logout; the token may come in the cookie instead.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct RefreshRequest {
    #[schema(value_type = Option<String>)]
    pub refresh_token: Option<SecretString>,
}
