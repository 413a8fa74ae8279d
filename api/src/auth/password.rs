//! Password hashing with argon2id (OWASP parameters: 19 MiB, 2 passes). Hashing takes
//! tens of milliseconds of CPU by design, so it runs on the blocking pool.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use secrecy::{ExposeSecret, SecretString};

/// A hash verified against when the email is unknown, so that a wrong email and a
/// wrong password take the same time.
static DUMMY_HASH: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| hash_blocking("not a real password").unwrap_or_default());

#[derive(Debug, thiserror::Error)]
#[error("password hashing failed: {0}")]
pub struct HashError(String);

/// The PHC string of `password` under a fresh salt.
pub fn hash_blocking(password: &str) -> Result<String, HashError> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| HashError(e.to_string()))
}

pub async fn hash(password: SecretString) -> Result<String, HashError> {
    tokio::task::spawn_blocking(move || hash_blocking(password.expose_secret()))
        .await
        .map_err(|e| HashError(e.to_string()))?
}

/// Whether `password` matches `phc`; with `phc` absent, burns the same time and fails.
pub async fn verify(password: SecretString, phc: Option<String>) -> bool {
    tokio::task::spawn_blocking(move || {
        let known = phc.is_some();
        let phc = phc.unwrap_or_else(|| DUMMY_HASH.clone());
        let ok = PasswordHash::new(&phc)
            .map(|parsed| {
                Argon2::default()
                    .verify_password(password.expose_secret().as_bytes(), &parsed)
                    .is_ok()
            })
            .unwrap_or(false);
        known && ok
    })
    .await
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn verifies_only_the_right_password() {
        let phc = hash("correct horse".to_owned().into()).await.unwrap();
        assert!(phc.starts_with("$argon2id$"));
        assert!(verify("correct horse".to_owned().into(), Some(phc.clone())).await);
        assert!(!verify("wrong".to_owned().into(), Some(phc)).await);
        assert!(!verify("not a real password".to_owned().into(), None).await);
    }
}
