//! Users of a tenant. Emails are unique across tenants (contract: Auth), stored
//! lower-cased; passwords only as argon2id PHC strings produced by the caller.

use schemas::ScopeSet;

use super::audit::AuditEntry;
use super::{parse_scopes, Store, StoreError};
use crate::clock::now_ms;

#[derive(Debug, Clone)]
pub struct User {
    pub user_id: String,
    pub tenant_id: String,
    pub email: String,
    pub password_hash: String,
    pub scopes: ScopeSet,
    pub disabled: bool,
    pub created_at: i64,
}

#[derive(sqlx::FromRow)]
struct UserRow {
    user_id: String,
    tenant_id: String,
    email: String,
    password_hash: String,
    scopes: String,
    disabled: i64,
    created_at: i64,
}

impl From<UserRow> for User {
    fn from(r: UserRow) -> Self {
        User {
            user_id: r.user_id,
            tenant_id: r.tenant_id,
            email: r.email,
            password_hash: r.password_hash,
            scopes: parse_scopes(&r.scopes),
            disabled: r.disabled != 0,
            created_at: r.created_at,
        }
    }
}

/// What `upsert_user` writes.
#[derive(Debug, Clone)]
pub struct UserUpsert<'a> {
    pub new_user_id: &'a str,
    pub tenant_id: &'a str,
    pub email: &'a str,
    pub password_hash: &'a str,
    pub scopes: ScopeSet,
}

const USER_COLUMNS: &str = "user_id, tenant_id, email, password_hash, scopes, disabled, created_at";

impl Store {
    /// Creates the user, or brings an existing user of the same tenant with that email
    /// to the given password and scopes. Answers the user and whether it was created.
    /// An email held by another tenant is a `Conflict`.
    pub async fn upsert_user(&self, u: UserUpsert<'_>) -> Result<(User, bool), StoreError> {
        let email = u.email.to_lowercase();
        let now = now_ms();
        let scopes = u.scopes.to_space_separated();
        // The operator CLI is the actor: it acts outside any user's session.
        let entry = |action: &str, user_id: &str| {
            AuditEntry::new(
                u.tenant_id,
                "admin-cli",
                action,
                ("user", user_id),
                serde_json::json!({ "email": email, "scopes": scopes }),
            )
        };
        let insert = sqlx::query(
            "INSERT INTO users (user_id, tenant_id, email, password_hash, scopes, disabled, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, 0, $6, $6) ON CONFLICT (email) DO NOTHING",
        )
        .bind(u.new_user_id)
        .bind(u.tenant_id)
        .bind(&email)
        .bind(u.password_hash)
        .bind(&scopes)
        .bind(now);
        let inserted = self
            .audited(insert, entry("user.created", u.new_user_id))
            .await?
            == 1;
        if !inserted {
            let mut tx = self.writer().begin().await?;
            let updated: Option<String> = sqlx::query_scalar(
                "UPDATE users SET password_hash = $1, scopes = $2, disabled = 0, updated_at = $3 \
                 WHERE email = $4 AND tenant_id = $5 RETURNING user_id",
            )
            .bind(u.password_hash)
            .bind(&scopes)
            .bind(now)
            .bind(&email)
            .bind(u.tenant_id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(user_id) = updated else {
                return Err(StoreError::Conflict(
                    "the email belongs to a user of another tenant".into(),
                ));
            };
            self.append_audit_in(&mut tx, &[entry("user.changed", &user_id)])
                .await?;
            tx.commit().await?;
        }
        let user = self
            .user_by_email(&email)
            .await?
            .ok_or(StoreError::NotFound)?;
        Ok((user, inserted))
    }

    pub async fn user_by_email(&self, email: &str) -> Result<Option<User>, StoreError> {
        let row = sqlx::query_as::<_, UserRow>(&format!(
            "SELECT {USER_COLUMNS} FROM users WHERE email = $1"
        ))
        .bind(email.to_lowercase())
        .fetch_optional(self.reader())
        .await?;
        Ok(row.map(User::from))
    }

    pub async fn user(&self, user_id: &str) -> Result<Option<User>, StoreError> {
        let row = sqlx::query_as::<_, UserRow>(&format!(
            "SELECT {USER_COLUMNS} FROM users WHERE user_id = $1"
        ))
        .bind(user_id)
        .fetch_optional(self.reader())
        .await?;
        Ok(row.map(User::from))
    }
}

/// What `update_user` may change.
#[derive(Debug, Clone, Default)]
pub struct UserChange {
    pub scopes: Option<ScopeSet>,
    pub disabled: Option<bool>,
    pub password_hash: Option<String>,
}

impl Store {
    /// The tenant's users ordered by email, after `after`.
    pub async fn users(
        &self,
        tenant_id: &str,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<User>, StoreError> {
        let rows = sqlx::query_as::<_, UserRow>(&format!(
            "SELECT {USER_COLUMNS} FROM users WHERE tenant_id = $1 AND email > $2 ORDER BY email LIMIT $3"
        ))
        .bind(tenant_id)
        .bind(after.unwrap_or(""))
        .bind(limit)
        .fetch_all(self.reader())
        .await?;
        Ok(rows.into_iter().map(User::from).collect())
    }

    /// A user of this tenant; `None` for a user of another tenant.
    pub async fn tenant_user(
        &self,
        tenant_id: &str,
        user_id: &str,
    ) -> Result<Option<User>, StoreError> {
        Ok(self
            .user(user_id)
            .await?
            .filter(|u| u.tenant_id == tenant_id))
    }

    /// Creates a user; `Conflict` when the email is taken in any tenant.
    pub async fn create_user(&self, u: UserUpsert<'_>, actor: &str) -> Result<User, StoreError> {
        let now = now_ms();
        let entry = AuditEntry::new(
            u.tenant_id,
            actor,
            "user.created",
            ("user", u.new_user_id),
            serde_json::json!({ "email": u.email.to_lowercase(), "scopes": u.scopes.to_space_separated() }),
        );
        let change = sqlx::query(
            "INSERT INTO users (user_id, tenant_id, email, password_hash, scopes, disabled, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, 0, $6, $6)",
        )
        .bind(u.new_user_id)
        .bind(u.tenant_id)
        .bind(u.email.to_lowercase())
        .bind(u.password_hash)
        .bind(u.scopes.to_space_separated())
        .bind(now);
        self.audited(change, entry).await?;
        self.user(u.new_user_id).await?.ok_or(StoreError::NotFound)
    }

    /// Applies a change to a user of this tenant. Disabling, or changing the password,
    /// also revokes the user's sessions, in the same transaction.
    pub async fn update_user(
        &self,
        tenant_id: &str,
        user_id: &str,
        change: UserChange,
        actor: &str,
    ) -> Result<(User, Vec<String>), StoreError> {
        let now = now_ms();
        // Never the password itself: only that it changed.
        let entry = AuditEntry::new(
            tenant_id,
            actor,
            "user.changed",
            ("user", user_id),
            serde_json::json!({
                "scopes": change.scopes.as_ref().map(|s| s.to_space_separated()),
                "disabled": change.disabled, "password_changed": change.password_hash.is_some(),
            }),
        );
        let mut tx = self.writer().begin().await?;
        let found = sqlx::query(
            "UPDATE users SET scopes = COALESCE($1, scopes), disabled = COALESCE($2, disabled), \
             password_hash = COALESCE($3, password_hash), updated_at = $4 WHERE user_id = $5 AND tenant_id = $6",
        )
        .bind(change.scopes.map(|s| s.to_space_separated()))
        .bind(change.disabled.map(i64::from))
        .bind(change.password_hash.as_deref())
        .bind(now)
        .bind(user_id)
        .bind(tenant_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if found == 0 {
            return Err(StoreError::NotFound);
        }
        let mut revoked = Vec::new();
        if change.disabled == Some(true) || change.password_hash.is_some() {
            revoked = sqlx::query_scalar::<_, String>(
                "UPDATE sessions SET revoked_at = $1, revoke_reason = 'user changed' \
                 WHERE user_id = $2 AND revoked_at IS NULL RETURNING session_id",
            )
            .bind(now)
            .bind(user_id)
            .fetch_all(&mut *tx)
            .await?;
        }
        self.append_audit_in(&mut tx, &[entry]).await?;
        tx.commit().await?;
        let user = self.user(user_id).await?.ok_or(StoreError::NotFound)?;
        Ok((user, revoked))
    }

    /// Deletes a user of this tenant with its sessions; answers the revoked session ids.
    pub async fn delete_user(
        &self,
        tenant_id: &str,
        user_id: &str,
        actor: &str,
    ) -> Result<Vec<String>, StoreError> {
        let mut tx = self.writer().begin().await?;
        let sessions = sqlx::query_scalar::<_, String>(
            "SELECT session_id FROM sessions WHERE user_id = $1 AND tenant_id = $2",
        )
        .bind(user_id)
        .bind(tenant_id)
        .fetch_all(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM refresh_tokens WHERE session_id IN (SELECT session_id FROM sessions WHERE user_id = $1 AND tenant_id = $2)",
        )
        .bind(user_id)
        .bind(tenant_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM sessions WHERE user_id = $1 AND tenant_id = $2")
            .bind(user_id)
            .bind(tenant_id)
            .execute(&mut *tx)
            .await?;
        let gone = sqlx::query("DELETE FROM users WHERE user_id = $1 AND tenant_id = $2")
            .bind(user_id)
            .bind(tenant_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if gone == 0 {
            return Err(StoreError::NotFound);
        }
        let entry = AuditEntry::new(
            tenant_id,
            actor,
            "user.deleted",
            ("user", user_id),
            serde_json::json!({ "sessions_revoked": sessions.len() }),
        );
        self.append_audit_in(&mut tx, &[entry]).await?;
        tx.commit().await?;
        Ok(sessions)
    }
}
