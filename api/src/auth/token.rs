//! Access tokens: RS256 JWTs with the contract's claims (`iss sub tenant_id scope sid
//! iat exp jti`) and the signing key's `kid` in the header. Verification accepts only
//! RS256 with a registered key; the signature is checked before any claim, so an
//! expired token is reported as expired only when it is genuinely ours. As RFC 8725
//! advises, every claim is checked, not only the signature: a token issued in the
//! future, or living longer than the service issues tokens for, is refused even when
//! signed with our key (a leaked key or a bug elsewhere must not mint long-lived
//! tokens).

use std::sync::Arc;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Header, Validation};
use serde::{Deserialize, Serialize};

use super::keys::KeyRing;
use super::verified::TokenKey;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AccessClaims {
    pub iss: String,
    /// The user id.
    pub sub: String,
    pub tenant_id: String,
    /// Space-separated scopes.
    pub scope: String,
    /// The session id; the token dies with its session.
    pub sid: String,
    pub iat: i64,
    pub exp: i64,
    pub jti: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("token expired")]
    Expired,
    #[error("token invalid")]
    Invalid,
}

#[derive(Debug, thiserror::Error)]
#[error("token signing failed: {0}")]
pub struct SignError(#[from] jsonwebtoken::errors::Error);

pub fn sign(keys: &KeyRing, claims: &AccessClaims) -> Result<String, SignError> {
    let signer = keys.signer();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(signer.kid.clone());
    Ok(jsonwebtoken::encode(&header, claims, &signer.encoding)?)
}

/// How far ahead of this process's clock a token's `iat` may be: the processes that
/// issue and check tokens run on clocks that agree only this closely.
pub const CLOCK_SKEW_SECS: i64 = 5;

/// The token's claims once its signature and every claim verify; a token verified here
/// before and not yet expired is taken as verified (see [`super::verified`]).
pub async fn verify(
    keys: &KeyRing,
    issuer: &str,
    max_lifetime: std::time::Duration,
    token: &str,
) -> Result<Arc<AccessClaims>, VerifyError> {
    let remembered = TokenKey::of(token);
    if let Some(claims) = keys.verified().get(remembered) {
        return Ok(claims);
    }
    // decode_header refuses `alg: none` and anything it cannot parse.
    let header = jsonwebtoken::decode_header(token).map_err(|_| VerifyError::Invalid)?;
    if header.alg != Algorithm::RS256 {
        return Err(VerifyError::Invalid);
    }
    let kid = header.kid.ok_or(VerifyError::Invalid)?;
    let key = keys.decoding_key(&kid).await.ok_or(VerifyError::Invalid)?;
    let mut validation = Validation::new(Algorithm::RS256);
    validation.leeway = 0;
    validation.validate_aud = false;
    validation.set_issuer(&[issuer]);
    validation.set_required_spec_claims(&["exp", "iat", "iss", "sub"]);
    let claims = match jsonwebtoken::decode::<AccessClaims>(token, &key, &validation) {
        Ok(data) => data.claims,
        Err(e) if matches!(e.kind(), ErrorKind::ExpiredSignature) => {
            return Err(VerifyError::Expired)
        }
        Err(_) => return Err(VerifyError::Invalid),
    };
    let now = jsonwebtoken::get_current_timestamp() as i64;
    let lifetime = i64::try_from(max_lifetime.as_secs()).unwrap_or(i64::MAX);
    if claims.iat > now + CLOCK_SKEW_SECS || claims.exp.saturating_sub(claims.iat) > lifetime {
        return Err(VerifyError::Invalid);
    }
    let claims = Arc::new(claims);
    keys.verified().insert(remembered, claims.clone());
    Ok(claims)
}
