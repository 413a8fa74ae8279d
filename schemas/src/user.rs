//! Users of a tenant (contract: Tenants and users).

use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::scope::ScopeSet;

/// `POST /tenant/users`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    pub email: String,
    /// 8-256 characters.
    #[schema(value_type = String, format = Password, min_length = 8, max_length = 256)]
    pub password: SecretString,
    #[schema(value_type = Vec<String>, example = json!(["claims:read"]))]
    pub scopes: ScopeSet,
}

/// `PATCH /tenant/users/{user_id}`: fields present change. Disabling ends the user's
/// sessions at once.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchUser {
    #[schema(value_type = Option<Vec<String>>)]
    pub scopes: Option<ScopeSet>,
    pub disabled: Option<bool>,
    #[schema(value_type = Option<String>, format = Password)]
    pub password: Option<SecretString>,
}

/// A user as the API shows it; never the password hash.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UserView {
    pub user_id: String,
    pub email: String,
    #[schema(value_type = Vec<String>)]
    pub scopes: ScopeSet,
    pub disabled: bool,
    pub created_at: String,
}
