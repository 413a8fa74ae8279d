//! Access tokens: RS256 JWTs with the contract's claims (`iss sub tenant_id scope sid
//! iat exp jti`) and the signing key's `kid` in the header. Verification accepts only
//! RS256 with a registered key; the signature is checked before any claim, so an
//! expired token is reported as expired only when it is genuinely ours.

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Header, Validation};
use serde::{Deserialize, Serialize};

use super::keys::KeyRing;

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
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(keys.kid().to_owned());
    Ok(jsonwebtoken::encode(&header, claims, keys.encoding_key())?)
}

pub async fn verify(
    keys: &KeyRing,
    issuer: &str,
    token: &str,
) -> Result<AccessClaims, VerifyError> {
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
    match jsonwebtoken::decode::<AccessClaims>(token, &key, &validation) {
        Ok(data) => Ok(data.claims),
        Err(e) if matches!(e.kind(), ErrorKind::ExpiredSignature) => Err(VerifyError::Expired),
        Err(_) => Err(VerifyError::Invalid),
    }
}
