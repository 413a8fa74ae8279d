//! `claims serve --demo`: a demo tenant and a user holding every scope, so that a
//! newcomer can log in at once. The password is new on every start (or taken from
//! `CLAIMS_DEMO_PASSWORD`) and printed, never stored in clear.
#![allow(clippy::print_stdout)] // telling the newcomer how to log in is the point

use std::net::SocketAddr;

use api::AppState;
use rand::distributions::Alphanumeric;
use rand::Rng;
use schemas::ScopeSet;
use secrecy::SecretString;

pub const TENANT_ID: &str = "demo";
pub const EMAIL: &str = "demo@example.com";

pub async fn seed(state: &AppState, addr: SocketAddr) -> anyhow::Result<()> {
    let store = &state.store;
    store.ensure_tenant(TENANT_ID, "Demo Health Plan").await?;
    let password = std::env::var("CLAIMS_DEMO_PASSWORD").unwrap_or_else(|_| {
        rand::thread_rng()
            .sample_iter(&Alphanumeric)
            .take(20)
            .map(char::from)
            .collect()
    });
    let scopes = ScopeSet::all().to_space_separated();
    crate::admin::ensure_user(
        store,
        TENANT_ID,
        EMAIL,
        SecretString::from(password.clone()),
        &scopes,
    )
    .await?;
    let base = format!("http://{addr}/api/v1");
    println!(
        "\nDemo tenant `{TENANT_ID}` is ready.\n  email:    {EMAIL}\n  password: {password}\n  scopes:   {scopes}\n\n\
         Log in:\n  curl -s -X POST {base}/auth/login -H 'Content-Type: application/json' \\\n    \
         -d '{{\"email\":\"{EMAIL}\",\"password\":\"{password}\"}}'\n\n\
         API documentation: {base}/docs\n"
    );
    Ok(())
}
