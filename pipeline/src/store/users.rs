//! Users of a tenant. Emails are unique across tenants (contract: Auth), stored
//! lower-cased; passwords only as argon2id PHC strings produced by the caller.

use schemas::ScopeSet;

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
        let inserted = sqlx::query(
            "INSERT INTO users (user_id, tenant_id, email, password_hash, scopes, disabled, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, 0, $6, $6) ON CONFLICT (email) DO NOTHING",
        )
        .bind(u.new_user_id)
        .bind(u.tenant_id)
        .bind(&email)
        .bind(u.password_hash)
        .bind(u.scopes.to_space_separated())
        .bind(now)
        .execute(self.writer())
        .await?
        .rows_affected()
            == 1;
        if !inserted {
            let updated = sqlx::query(
                "UPDATE users SET password_hash = $1, scopes = $2, disabled = 0, updated_at = $3 \
                 WHERE email = $4 AND tenant_id = $5",
            )
            .bind(u.password_hash)
            .bind(u.scopes.to_space_separated())
            .bind(now)
            .bind(&email)
            .bind(u.tenant_id)
            .execute(self.writer())
            .await?
            .rows_affected();
            if updated == 0 {
                return Err(StoreError::Conflict(
                    "the email belongs to a user of another tenant".into(),
                ));
            }
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
