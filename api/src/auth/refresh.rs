//! Refresh tokens: 256 random bits, base64url, handed out once. The store keeps only
//! their SHA-256, so a leaked database does not yield usable tokens.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use cookie::{Cookie, SameSite};
use rand::RngCore;
use sha2::{Digest, Sha256};

pub const COOKIE_NAME: &str = "service_refresh_token";
/// The cookie travels only to the auth endpoints.
pub const COOKIE_PATH: &str = "/api/v1/auth";

pub fn generate() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Lower-case hex SHA-256 of the token, the form the store keys on.
pub fn hash(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// `Set-Cookie` value that hands the client its refresh token.
pub fn set_cookie(token: &str, max_age_secs: i64, secure: bool) -> String {
    Cookie::build((COOKIE_NAME, token))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path(COOKIE_PATH)
        .secure(secure)
        .max_age(cookie::time::Duration::seconds(max_age_secs))
        .build()
        .to_string()
}

/// `Set-Cookie` value that makes the client forget the token.
pub fn clear_cookie(secure: bool) -> String {
    Cookie::build((COOKIE_NAME, ""))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path(COOKIE_PATH)
        .secure(secure)
        .max_age(cookie::time::Duration::ZERO)
        .build()
        .to_string()
}

/// The refresh token from the request's `Cookie` headers, if any.
pub fn from_cookies(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == COOKIE_NAME && !c.value().is_empty())
        .map(|c| c.value().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_has_the_contract_attributes() {
        let c = set_cookie("abc", 60, true);
        for part in [
            "service_refresh_token=abc",
            "HttpOnly",
            "SameSite=Strict",
            "Path=/api/v1/auth",
            "Secure",
            "Max-Age=60",
        ] {
            assert!(c.contains(part), "{c} lacks {part}");
        }
        assert!(!set_cookie("abc", 60, false).contains("Secure"));
        assert!(clear_cookie(true).contains("Max-Age=0"));
    }

    #[test]
    fn tokens_are_unique_and_hash_to_hex() {
        let (a, b) = (generate(), generate());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert_eq!(hash(&a).len(), 64);
        assert_eq!(hash(&a), hash(&a));
    }
}
