//! Operator commands (contract: Tenants and users). Each is idempotent, prints one JSON
//! document, and only touches the store, so it works while `serve` runs.

use schemas::{ClientId, ScopeSet};
use secrecy::SecretString;
use serde::Serialize;

use crate::cli::{CreateTenantArgs, CreateUserArgs, RetireKeyArgs, VerifyAuditArgs};
use crate::config::Config;
use crate::open::open_store;
use crate::output::{print_json, CliError};

pub async fn migrate(config: &Config) -> anyhow::Result<()> {
    let store = open_store(config).await?;
    store.close().await;
    print_json(
        &serde_json::json!({ "migrated": true, "backend": format!("{:?}", store.backend()).to_lowercase() }),
    );
    Ok(())
}

#[derive(Debug, Serialize)]
struct TenantOut {
    tenant_id: String,
    name: String,
    created: bool,
}

pub async fn create_tenant(config: &Config, args: CreateTenantArgs) -> anyhow::Result<()> {
    let tenant_id = ClientId::parse(args.tenant_id)
        .map_err(|e| CliError::new("VALIDATION_ERROR", format!("--tenant-id {e}")))?;
    let name = args.name.trim();
    if name.is_empty() || name.len() > 200 {
        return Err(CliError::new("VALIDATION_ERROR", "--name must be 1-200 characters").into());
    }
    let store = open_store(config).await?;
    let (tenant, created) = store.ensure_tenant(tenant_id.as_str(), name).await?;
    store.close().await;
    print_json(&TenantOut {
        tenant_id: tenant.tenant_id,
        name: tenant.name,
        created,
    });
    Ok(())
}

#[derive(Debug, Serialize)]
pub struct UserOut {
    pub user_id: String,
    pub tenant_id: String,
    pub email: String,
    pub scopes: ScopeSet,
    pub created: bool,
}

pub async fn create_user(config: &Config, args: CreateUserArgs) -> anyhow::Result<()> {
    let store = open_store(config).await?;
    let out = ensure_user(
        &store,
        &args.tenant_id,
        &args.email,
        SecretString::from(args.password),
        &args.scopes,
    )
    .await;
    store.close().await;
    print_json(&out?);
    Ok(())
}

/// Creates the user or brings it to the given password and scopes; shared by the CLI
/// and the demo seed.
pub async fn ensure_user(
    store: &pipeline::store::Store,
    tenant_id: &str,
    email: &str,
    password: SecretString,
    scopes: &str,
) -> anyhow::Result<UserOut> {
    use secrecy::ExposeSecret;
    let email = email.trim();
    if !api::routes::users::is_plausible_email(email) {
        return Err(CliError::new("VALIDATION_ERROR", "--email is not an email address").into());
    }
    if password.expose_secret().chars().count() < 8 {
        return Err(CliError::new(
            "VALIDATION_ERROR",
            "--password must be at least 8 characters",
        )
        .into());
    }
    let scopes = ScopeSet::parse_space_separated(scopes)
        .map_err(|e| CliError::new("VALIDATION_ERROR", format!("--scopes: {e}")))?;
    if store.tenant(tenant_id).await?.is_none() {
        return Err(
            CliError::new("NOT_FOUND", format!("tenant `{tenant_id}` does not exist")).into(),
        );
    }
    let hash = api::auth::password::hash(password).await?;
    let new_id = uuid::Uuid::now_v7().to_string();
    let result = store
        .upsert_user(pipeline::store::UserUpsert {
            new_user_id: &new_id,
            tenant_id,
            email,
            password_hash: &hash,
            scopes,
        })
        .await;
    let (user, created) = match result {
        Err(pipeline::store::StoreError::Conflict(_)) => {
            return Err(
                CliError::new("CONFLICT", "the email belongs to a user of another tenant").into(),
            )
        }
        other => other?,
    };
    Ok(UserOut {
        user_id: user.user_id,
        tenant_id: user.tenant_id,
        email: user.email,
        scopes: user.scopes,
        created,
    })
}

/// Walks the tenant's audit chain from its first record. Prints
/// `{tenant_id, verified, records}` when it holds; otherwise the first broken record on
/// stdout, and fails with `AUDIT_CHAIN_BROKEN`.
pub async fn verify_audit(config: &Config, args: VerifyAuditArgs) -> anyhow::Result<()> {
    let store = open_store(config).await?;
    let result = store.verify_audit(&args.tenant_id).await;
    store.close().await;
    match result? {
        Ok(records) => {
            print_json(&serde_json::json!({
                "tenant_id": args.tenant_id, "verified": true, "records": records,
            }));
            Ok(())
        }
        Err(b) => {
            print_json(&serde_json::json!({
                "tenant_id": args.tenant_id, "verified": false,
                "first_break": { "seq": b.seq, "audit_id": b.audit_id, "problem": b.problem },
            }));
            Err(CliError::new(
                "AUDIT_CHAIN_BROKEN",
                format!(
                    "the chain breaks at record {} ({}): {}",
                    b.seq, b.audit_id, b.problem
                ),
            )
            .into())
        }
    }
}

/// Prints `{keys: [{kid, algorithm, created_at, retired_at}]}`, oldest first.
pub async fn list_keys(config: &Config) -> anyhow::Result<()> {
    let store = open_store(config).await?;
    let keys = store.signing_keys().await;
    store.close().await;
    print_json(&serde_json::json!({ "keys": keys? }));
    Ok(())
}

/// Retires the key and prints it with its `retired_at`; a key retired before keeps its
/// first retirement. An unknown `kid` fails with `NOT_FOUND`.
pub async fn retire_key(config: &Config, args: RetireKeyArgs) -> anyhow::Result<()> {
    let store = open_store(config).await?;
    let key = store.retire_signing_key(&args.kid).await;
    store.close().await;
    match key? {
        Some(key) => {
            print_json(&key);
            Ok(())
        }
        None => Err(CliError::new(
            "NOT_FOUND",
            format!("no signing key has the kid `{}`", args.kid),
        )
        .into()),
    }
}
