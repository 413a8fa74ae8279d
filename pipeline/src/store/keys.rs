//! Public halves of access-token signing keys. Each process registers the key it signs
//! with; verifiers and the JWKS endpoint read every key that is not retired. An operator
//! retires a key (`claims admin retire-key`) to stop the tokens it signed.

use super::{Store, StoreError};
use crate::clock::now_ms;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SigningKeyRecord {
    pub kid: String,
    pub algorithm: String,
    /// The public key as an RFC 7517 JWK, JSON text.
    pub public_jwk: String,
    pub created_at: i64,
}

/// A key as the operator sees it: when it was registered, and retired if it was.
#[derive(Debug, Clone, serde::Serialize, sqlx::FromRow)]
pub struct SigningKeyState {
    pub kid: String,
    pub algorithm: String,
    pub created_at: i64,
    pub retired_at: Option<i64>,
}

impl Store {
    /// Records a public key; registering the same `kid` again changes nothing.
    pub async fn register_signing_key(
        &self,
        kid: &str,
        algorithm: &str,
        public_jwk: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO signing_keys (kid, algorithm, public_jwk, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (kid) DO NOTHING",
        )
        .bind(kid)
        .bind(algorithm)
        .bind(public_jwk)
        .bind(now_ms())
        .execute(self.writer())
        .await?;
        Ok(())
    }

    /// Every key that still verifies tokens, oldest first.
    pub async fn active_signing_keys(&self) -> Result<Vec<SigningKeyRecord>, StoreError> {
        Ok(sqlx::query_as::<_, SigningKeyRecord>(
            "SELECT kid, algorithm, public_jwk, created_at FROM signing_keys \
             WHERE retired_at IS NULL ORDER BY created_at, kid",
        )
        .fetch_all(self.reader())
        .await?)
    }

    /// Every key ever registered, retired ones included, oldest first.
    pub async fn signing_keys(&self) -> Result<Vec<SigningKeyState>, StoreError> {
        Ok(sqlx::query_as::<_, SigningKeyState>(
            "SELECT kid, algorithm, created_at, retired_at FROM signing_keys ORDER BY created_at, kid",
        )
        .fetch_all(self.reader())
        .await?)
    }

    /// Takes `kid` out of service: tokens it signed stop verifying as each process
    /// reloads its keys. Retiring a retired key keeps its first retirement. Answers the
    /// key as it now stands, none for an unknown `kid`.
    pub async fn retire_signing_key(
        &self,
        kid: &str,
    ) -> Result<Option<SigningKeyState>, StoreError> {
        Ok(sqlx::query_as::<_, SigningKeyState>(
            "UPDATE signing_keys SET retired_at = coalesce(retired_at, $2) WHERE kid = $1 \
             RETURNING kid, algorithm, created_at, retired_at",
        )
        .bind(kid)
        .bind(now_ms())
        .fetch_optional(self.writer())
        .await?)
    }
}
