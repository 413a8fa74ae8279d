//! Tenants: the unit of isolation. Every other row names its tenant.

use serde::Serialize;

use super::audit::AuditEntry;
use super::error::parsed;
use super::{Store, StoreError};
use crate::clock::now_ms;

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Tenant {
    pub tenant_id: String,
    pub name: String,
    #[serde(skip)]
    pub settings: String,
    pub created_at: i64,
}

impl Store {
    /// Creates the tenant unless it exists; answers the stored tenant and whether it was
    /// created now. Safe to call concurrently.
    pub async fn ensure_tenant(
        &self,
        tenant_id: &str,
        name: &str,
    ) -> Result<(Tenant, bool), StoreError> {
        let inserted = sqlx::query(
            "INSERT INTO tenants (tenant_id, name, settings, created_at) VALUES ($1, $2, '{}', $3) \
             ON CONFLICT (tenant_id) DO NOTHING",
        )
        .bind(tenant_id)
        .bind(name)
        .bind(now_ms())
        .execute(self.writer())
        .await?
        .rows_affected()
            == 1;
        let tenant = self.tenant(tenant_id).await?.ok_or(StoreError::NotFound)?;
        Ok((tenant, inserted))
    }

    pub async fn tenant(&self, tenant_id: &str) -> Result<Option<Tenant>, StoreError> {
        Ok(sqlx::query_as::<_, Tenant>(
            "SELECT tenant_id, name, settings, created_at FROM tenants WHERE tenant_id = $1",
        )
        .bind(tenant_id)
        .fetch_optional(self.writer())
        .await?)
    }
}

impl Store {
    /// The tenant's settings, defaults filled in; `NotFound` for an unknown tenant.
    pub async fn tenant_settings(
        &self,
        tenant_id: &str,
    ) -> Result<schemas::tenant::TenantSettings, StoreError> {
        let raw = self
            .tenant(tenant_id)
            .await?
            .ok_or(StoreError::NotFound)?
            .settings;
        parsed(serde_json::from_str(&raw), || {
            format!("tenant {tenant_id}: settings")
        })
    }

    /// Read-modify-write of the settings document. The write succeeds only if the
    /// document is still the one read (compare-and-set), so concurrent patches from
    /// any number of processes are applied one after the other, never lost.
    pub async fn update_tenant_settings<E>(
        &self,
        tenant_id: &str,
        actor: &str,
        change: impl Fn(&schemas::tenant::TenantSettings) -> Result<schemas::tenant::TenantSettings, E>,
    ) -> Result<Result<schemas::tenant::TenantSettings, E>, StoreError> {
        loop {
            let raw = self
                .tenant(tenant_id)
                .await?
                .ok_or(StoreError::NotFound)?
                .settings;
            let current = parsed(serde_json::from_str(&raw), || {
                format!("tenant {tenant_id}: settings")
            })?;
            let next = match change(&current) {
                Ok(next) => next,
                Err(e) => return Ok(Err(e)),
            };
            let text =
                serde_json::to_string(&next).map_err(|e| StoreError::Config(e.to_string()))?;
            let entry = AuditEntry::new(
                tenant_id,
                actor,
                "settings.changed",
                ("settings", tenant_id),
                serde_json::json!({ "settings": next }),
            );
            let change = sqlx::query(
                "UPDATE tenants SET settings = $1 WHERE tenant_id = $2 AND settings = $3",
            )
            .bind(&text)
            .bind(tenant_id)
            .bind(&raw);
            let done = self.audited(change, entry).await? == 1;
            if done {
                return Ok(Ok(next));
            }
        }
    }
}
