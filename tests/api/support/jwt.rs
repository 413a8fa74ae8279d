//! Token tools for tests: an independent RS256 verifier (the `rsa` crate, not the
//! service's jsonwebtoken/ring path) and a forger.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rsa::pkcs1v15::{Signature, VerifyingKey};
use rsa::signature::Verifier;
use rsa::{BigUint, RsaPublicKey};
use serde_json::Value;

pub fn b64(bytes: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

pub fn unb64(s: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD.decode(s).unwrap()
}

/// Splits a JWT into its decoded header and payload.
pub fn parts(token: &str) -> (Value, Value) {
    let mut it = token.split('.');
    let header = serde_json::from_slice(&unb64(it.next().unwrap())).unwrap();
    let payload = serde_json::from_slice(&unb64(it.next().unwrap())).unwrap();
    (header, payload)
}

/// Verifies an RS256 JWT against one JWK with RSASSA-PKCS1-v1_5 / SHA-256.
pub fn verify_rs256(token: &str, jwk: &Value) -> bool {
    let n = BigUint::from_bytes_be(&unb64(jwk["n"].as_str().unwrap()));
    let e = BigUint::from_bytes_be(&unb64(jwk["e"].as_str().unwrap()));
    let key = VerifyingKey::<sha2::Sha256>::new(RsaPublicKey::new(n, e).unwrap());
    let (signed, sig) = token.rsplit_once('.').unwrap();
    let Ok(sig) = Signature::try_from(unb64(sig).as_slice()) else {
        return false;
    };
    key.verify(signed.as_bytes(), &sig).is_ok()
}

/// RFC 7638 thumbprint of an RSA JWK, computed here independently of the service.
pub fn thumbprint(jwk: &Value) -> String {
    use sha2::Digest;
    let canonical = serde_json::json!({ "e": jwk["e"], "kty": "RSA", "n": jwk["n"] });
    // serde_json orders object keys alphabetically without the preserve_order feature.
    b64(sha2::Sha256::digest(
        serde_json::to_vec(&canonical).unwrap(),
    ))
}
