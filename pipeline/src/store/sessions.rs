//! Login sessions and their refresh-token families.
//!
//! A session lives until it expires or is revoked (logout, reuse of a rotated refresh
//! token, the user disabled). Refresh rotates the token: the presented one is marked
//! `rotated_at` and a new one joins the family in the same transaction. Presenting a
//! rotated token again means two parties hold the family, so the session is revoked.

use super::{Store, StoreError};
use crate::clock::now_ms;

/// Everything needed to open a session.
#[derive(Debug, Clone)]
pub struct NewSession<'a> {
    pub session_id: &'a str,
    pub tenant_id: &'a str,
    pub user_id: &'a str,
    pub expires_at: i64,
    pub refresh_token_hash: &'a str,
}

/// Whose a session is, and whether it may still be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionState {
    pub tenant_id: String,
    pub user_id: String,
    pub revoked: bool,
    pub expires_at: i64,
}

impl SessionState {
    pub fn is_live(&self, now_ms: i64) -> bool {
        !self.revoked && now_ms < self.expires_at
    }
}

/// The answer to presenting a refresh token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefreshOutcome {
    /// The token was current; it is rotated out and `new_hash` is now current.
    Rotated {
        session_id: String,
        tenant_id: String,
        user_id: String,
    },
    /// The token had been rotated out before: the session is now revoked.
    Reused { session_id: String },
    /// The session had already ended (revoked or expired).
    Ended,
    /// No such token.
    Unknown,
}

#[derive(sqlx::FromRow)]
struct TokenRow {
    session_id: String,
    tenant_id: String,
    user_id: String,
    rotated_at: Option<i64>,
    revoked_at: Option<i64>,
    expires_at: i64,
}

impl Store {
    pub async fn create_session(&self, s: NewSession<'_>) -> Result<(), StoreError> {
        let now = now_ms();
        let mut tx = self.writer().begin().await?;
        sqlx::query(
            "INSERT INTO sessions (session_id, tenant_id, user_id, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(s.session_id)
        .bind(s.tenant_id)
        .bind(s.user_id)
        .bind(now)
        .bind(s.expires_at)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO refresh_tokens (token_hash, session_id, issued_at) VALUES ($1, $2, $3)",
        )
        .bind(s.refresh_token_hash)
        .bind(s.session_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Presents a refresh token (by hash) and, when it is current, rotates it to
    /// `new_hash`. Concurrent presentations of one token: exactly one rotates, the
    /// others are treated as reuse, because the conditional update decides.
    pub async fn rotate_refresh_token(
        &self,
        old_hash: &str,
        new_hash: &str,
    ) -> Result<RefreshOutcome, StoreError> {
        let now = now_ms();
        let mut tx = self.writer().begin().await?;
        let row = sqlx::query_as::<_, TokenRow>(
            "SELECT t.session_id, s.tenant_id, s.user_id, t.rotated_at, s.revoked_at, s.expires_at \
             FROM refresh_tokens t JOIN sessions s ON s.session_id = t.session_id \
             WHERE t.token_hash = $1",
        )
        .bind(old_hash)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Ok(RefreshOutcome::Unknown);
        };
        if row.revoked_at.is_some() || row.expires_at <= now {
            return Ok(RefreshOutcome::Ended);
        }
        let rotated = row.rotated_at.is_none()
            && sqlx::query(
                "UPDATE refresh_tokens SET rotated_at = $1 WHERE token_hash = $2 AND rotated_at IS NULL",
            )
            .bind(now)
            .bind(old_hash)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
        if !rotated {
            revoke_in(&mut tx, &row.session_id, "refresh token reused", now).await?;
            tx.commit().await?;
            return Ok(RefreshOutcome::Reused {
                session_id: row.session_id,
            });
        }
        sqlx::query(
            "INSERT INTO refresh_tokens (token_hash, session_id, issued_at) VALUES ($1, $2, $3)",
        )
        .bind(new_hash)
        .bind(&row.session_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(RefreshOutcome::Rotated {
            session_id: row.session_id,
            tenant_id: row.tenant_id,
            user_id: row.user_id,
        })
    }

    /// The session a refresh token belongs to, whether current or rotated out.
    pub async fn session_of_refresh_token(&self, hash: &str) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar::<_, String>(
            "SELECT session_id FROM refresh_tokens WHERE token_hash = $1",
        )
        .bind(hash)
        .fetch_optional(self.reader())
        .await?)
    }

    /// Revokes one session; revoking an ended session changes nothing.
    pub async fn revoke_session(&self, session_id: &str, reason: &str) -> Result<(), StoreError> {
        let mut tx = self.writer().begin().await?;
        revoke_in(&mut tx, session_id, reason, now_ms()).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Revokes every live session of a user; answers their ids.
    pub async fn revoke_user_sessions(
        &self,
        user_id: &str,
        reason: &str,
    ) -> Result<Vec<String>, StoreError> {
        let ids = sqlx::query_scalar::<_, String>(
            "UPDATE sessions SET revoked_at = $1, revoke_reason = $2 \
             WHERE user_id = $3 AND revoked_at IS NULL RETURNING session_id",
        )
        .bind(now_ms())
        .bind(reason)
        .bind(user_id)
        .fetch_all(self.writer())
        .await?;
        Ok(ids)
    }

    pub async fn session_state(
        &self,
        session_id: &str,
    ) -> Result<Option<SessionState>, StoreError> {
        let row = sqlx::query_as::<_, (String, String, Option<i64>, i64)>(
            "SELECT tenant_id, user_id, revoked_at, expires_at FROM sessions WHERE session_id = $1",
        )
        .bind(session_id)
        .fetch_optional(self.reader())
        .await?;
        Ok(row.map(
            |(tenant_id, user_id, revoked_at, expires_at)| SessionState {
                tenant_id,
                user_id,
                revoked: revoked_at.is_some(),
                expires_at,
            },
        ))
    }
}

async fn revoke_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    session_id: &str,
    reason: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE sessions SET revoked_at = $1, revoke_reason = $2 WHERE session_id = $3 AND revoked_at IS NULL",
    )
    .bind(now)
    .bind(reason)
    .bind(session_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
