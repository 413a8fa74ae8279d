//! Providers and their contracts. A provider is contracted on a day when one of its
//! contracts is `active` and its dates cover that day (contract: Providers and
//! contracts).

use std::collections::BTreeMap;

use schemas::provider::{Contract, ContractStatus, Provider};
use schemas::Date;

use super::audit::AuditEntry;
use super::error::parsed;
use super::{Store, StoreError};
use crate::clock::{ms_to_rfc3339, now_ms};

#[derive(sqlx::FromRow)]
struct ProviderRow {
    provider_id: String,
    name: String,
    npi: Option<String>,
    specialty: Option<String>,
    created_at: i64,
}

impl From<ProviderRow> for Provider {
    fn from(r: ProviderRow) -> Self {
        Provider {
            provider_id: r.provider_id,
            name: r.name,
            npi: r.npi,
            specialty: r.specialty,
            created_at: ms_to_rfc3339(r.created_at),
        }
    }
}

#[derive(sqlx::FromRow)]
struct ContractRow {
    contract_id: String,
    provider_id: String,
    status: String,
    effective_from: String,
    effective_to: Option<String>,
    fee_schedule: String,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<ContractRow> for Contract {
    type Error = StoreError;

    /// A fee schedule that does not parse is an error: read as none, it would pay
    /// every line in full.
    fn try_from(r: ContractRow) -> Result<Self, StoreError> {
        let id = &r.contract_id;
        Ok(Contract {
            status: parsed(ContractStatus::parse(&r.status).ok_or(&r.status), || {
                format!("contract {id}: status")
            })?,
            fee_schedule: parsed(serde_json::from_str(&r.fee_schedule), || {
                format!("contract {id}: fee_schedule")
            })?,
            contract_id: r.contract_id,
            provider_id: r.provider_id,
            effective_from: r.effective_from,
            effective_to: r.effective_to,
            created_at: ms_to_rfc3339(r.created_at),
            updated_at: ms_to_rfc3339(r.updated_at),
        })
    }
}

/// A new provider.
#[derive(Debug, Clone)]
pub struct NewProvider<'a> {
    pub tenant_id: &'a str,
    pub provider_id: &'a str,
    pub name: &'a str,
    pub npi: Option<&'a str>,
    pub specialty: Option<&'a str>,
}

/// A new contract.
#[derive(Debug, Clone)]
pub struct NewContract<'a> {
    pub tenant_id: &'a str,
    pub provider_id: &'a str,
    pub contract_id: &'a str,
    pub effective_from: Date,
    pub effective_to: Option<Date>,
    pub fee_schedule: &'a BTreeMap<String, i64>,
}

/// What the pipeline needs of a contracted provider.
#[derive(Debug, Clone)]
pub struct Contracted {
    pub provider: Provider,
    pub contract: Contract,
}

const CONTRACT_COLUMNS: &str =
    "contract_id, provider_id, status, effective_from, effective_to, fee_schedule, created_at, updated_at";

impl Store {
    /// Creates a provider; `Conflict` when the id is taken in this tenant.
    pub async fn create_provider(
        &self,
        p: NewProvider<'_>,
        actor: &str,
    ) -> Result<Provider, StoreError> {
        let now = now_ms();
        let entry = AuditEntry::new(
            p.tenant_id,
            actor,
            "provider.created",
            ("provider", p.provider_id),
            serde_json::json!({ "name": p.name, "npi": p.npi, "specialty": p.specialty }),
        );
        let change = sqlx::query(
            "INSERT INTO providers (tenant_id, provider_id, name, npi, specialty, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(p.tenant_id)
        .bind(p.provider_id)
        .bind(p.name)
        .bind(p.npi)
        .bind(p.specialty)
        .bind(now);
        self.audited(change, entry).await?;
        Ok(Provider {
            provider_id: p.provider_id.to_owned(),
            name: p.name.to_owned(),
            npi: p.npi.map(str::to_owned),
            specialty: p.specialty.map(str::to_owned),
            created_at: ms_to_rfc3339(now),
        })
    }

    pub async fn provider(
        &self,
        tenant_id: &str,
        provider_id: &str,
    ) -> Result<Option<Provider>, StoreError> {
        let row = sqlx::query_as::<_, ProviderRow>(
            "SELECT provider_id, name, npi, specialty, created_at FROM providers \
             WHERE tenant_id = $1 AND provider_id = $2",
        )
        .bind(tenant_id)
        .bind(provider_id)
        .fetch_optional(self.reader())
        .await?;
        Ok(row.map(Provider::from))
    }

    /// Providers ordered by id, after `after` (exclusive), at most `limit`.
    pub async fn providers(
        &self,
        tenant_id: &str,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Provider>, StoreError> {
        let rows = sqlx::query_as::<_, ProviderRow>(
            "SELECT provider_id, name, npi, specialty, created_at FROM providers \
             WHERE tenant_id = $1 AND provider_id > $2 ORDER BY provider_id LIMIT $3",
        )
        .bind(tenant_id)
        .bind(after.unwrap_or(""))
        .bind(limit)
        .fetch_all(self.reader())
        .await?;
        Ok(rows.into_iter().map(Provider::from).collect())
    }

    /// Creates an active contract for an existing provider (`NotFound` otherwise).
    pub async fn create_contract(
        &self,
        c: NewContract<'_>,
        actor: &str,
    ) -> Result<Contract, StoreError> {
        if self.provider(c.tenant_id, c.provider_id).await?.is_none() {
            return Err(StoreError::NotFound);
        }
        let now = now_ms();
        let schedule =
            serde_json::to_string(c.fee_schedule).map_err(|e| StoreError::Config(e.to_string()))?;
        let entry = AuditEntry::new(
            c.tenant_id,
            actor,
            "contract.created",
            ("contract", c.contract_id),
            serde_json::json!({
                "provider_id": c.provider_id, "effective_from": c.effective_from.to_string(),
                "effective_to": c.effective_to.map(|d| d.to_string()), "fee_schedule": c.fee_schedule,
            }),
        );
        let change = sqlx::query(
            "INSERT INTO contracts (contract_id, tenant_id, provider_id, status, effective_from, effective_to, \
             fee_schedule, created_at, updated_at) VALUES ($1, $2, $3, 'active', $4, $5, $6, $7, $7)",
        )
        .bind(c.contract_id)
        .bind(c.tenant_id)
        .bind(c.provider_id)
        .bind(c.effective_from.to_string())
        .bind(c.effective_to.map(|d| d.to_string()))
        .bind(&schedule)
        .bind(now);
        self.audited(change, entry).await?;
        self.contract(c.tenant_id, c.provider_id, c.contract_id)
            .await?
            .ok_or(StoreError::NotFound)
    }

    pub async fn contract(
        &self,
        tenant_id: &str,
        provider_id: &str,
        contract_id: &str,
    ) -> Result<Option<Contract>, StoreError> {
        let row = sqlx::query_as::<_, ContractRow>(&format!(
            "SELECT {CONTRACT_COLUMNS} FROM contracts WHERE tenant_id = $1 AND provider_id = $2 AND contract_id = $3"
        ))
        .bind(tenant_id)
        .bind(provider_id)
        .bind(contract_id)
        .fetch_optional(self.writer())
        .await?;
        row.map(Contract::try_from).transpose()
    }

    /// A provider's contracts, oldest first, after the contract id `after`.
    pub async fn contracts(
        &self,
        tenant_id: &str,
        provider_id: &str,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Contract>, StoreError> {
        let rows = sqlx::query_as::<_, ContractRow>(&format!(
            "SELECT {CONTRACT_COLUMNS} FROM contracts WHERE tenant_id = $1 AND provider_id = $2 AND contract_id > $3 \
             ORDER BY contract_id LIMIT $4"
        ))
        .bind(tenant_id)
        .bind(provider_id)
        .bind(after.unwrap_or(""))
        .bind(limit)
        .fetch_all(self.reader())
        .await?;
        rows.into_iter().map(Contract::try_from).collect()
    }

    /// Sets a contract's status. `terminated` is final: changing a terminated contract
    /// is a `Conflict`. Answers the contract after the change.
    pub async fn set_contract_status(
        &self,
        tenant_id: &str,
        provider_id: &str,
        contract_id: &str,
        status: ContractStatus,
        actor: &str,
    ) -> Result<Contract, StoreError> {
        let entry = AuditEntry::new(
            tenant_id,
            actor,
            "contract.status_changed",
            ("contract", contract_id),
            serde_json::json!({ "provider_id": provider_id, "status": status.as_str() }),
        );
        let change = sqlx::query(
            "UPDATE contracts SET status = $1, updated_at = $2 WHERE tenant_id = $3 AND provider_id = $4 \
             AND contract_id = $5 AND (status <> 'terminated' OR $1 = 'terminated')",
        )
        .bind(status.as_str())
        .bind(now_ms())
        .bind(tenant_id)
        .bind(provider_id)
        .bind(contract_id);
        let changed = self.audited(change, entry).await?;
        let contract = self
            .contract(tenant_id, provider_id, contract_id)
            .await?
            .ok_or(StoreError::NotFound)?;
        if changed == 0 {
            return Err(StoreError::Conflict(
                "a terminated contract cannot be reopened".into(),
            ));
        }
        Ok(contract)
    }

    /// Answers "is this provider contracted for this tenant on `day`": the provider and
    /// the active contract covering that day (the most recently started one), if any.
    pub async fn contracted_provider(
        &self,
        tenant_id: &str,
        provider_id: &str,
        day: Date,
    ) -> Result<Option<Contracted>, StoreError> {
        let day = day.to_string();
        let row = sqlx::query_as::<_, ContractRow>(&format!(
            "SELECT {CONTRACT_COLUMNS} FROM contracts WHERE tenant_id = $1 AND provider_id = $2 \
             AND status = 'active' AND effective_from <= $3 AND (effective_to IS NULL OR effective_to >= $3) \
             ORDER BY effective_from DESC, contract_id LIMIT 1"
        ))
        .bind(tenant_id)
        .bind(provider_id)
        .bind(&day)
        .fetch_optional(self.reader())
        .await?;
        let Some(contract) = row.map(Contract::try_from).transpose()? else {
            return Ok(None);
        };
        let provider = self
            .provider(tenant_id, provider_id)
            .await?
            .ok_or(StoreError::NotFound)?;
        Ok(Some(Contracted { provider, contract }))
    }
}
