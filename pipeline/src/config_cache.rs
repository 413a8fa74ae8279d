//! Tenant configuration as the hot path reads it: settings, the active rulebook
//! (its id and version), "is this provider contracted today", and members with their
//! plans, kept in memory so that intake and the stages do not ask the store for every
//! claim.
//!
//! Staleness bound: an entry lives at most `ttl` (`CLAIMS_CONFIG_CACHE_TTL_MS`, default
//! 1 s). A change made through this process is seen here at once, because the writer
//! invalidates the tenant's entries; a change made in another process is seen here
//! within `ttl`.

use std::sync::Arc;
use std::time::Duration;

use moka::future::Cache;
use schemas::member::Member;
use schemas::plan::Plan;
use schemas::tenant::TenantSettings;
use schemas::Date;

use crate::store::{Contracted, Store, StoreError};

/// Which rulebook is active, and its version.
#[derive(Debug, Clone)]
pub struct ActiveRulebook {
    pub rulebook_id: String,
    pub version: i64,
}

#[derive(Clone)]
pub struct ConfigCache {
    store: Store,
    settings: Cache<String, TenantSettings>,
    rulebooks: Cache<String, Option<ActiveRulebook>>,
    contracts: Cache<(String, String, Date), Option<Arc<Contracted>>>,
    members: Cache<(String, String), Option<Arc<MemberPlan>>>,
}

/// A member on the roster with their plan (none only if the plan was deleted from the
/// store by hand: plans cannot be deleted through the API).
#[derive(Debug, Clone, PartialEq)]
pub struct MemberPlan {
    pub member: Member,
    pub plan: Option<Plan>,
}

impl std::fmt::Debug for ConfigCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigCache").finish_non_exhaustive()
    }
}

/// A loader's failure, shared among the callers that waited for it.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct CacheError(#[from] Arc<StoreError>);

impl ConfigCache {
    pub fn new(store: Store, ttl: Duration) -> Self {
        Self {
            store,
            settings: Cache::builder()
                .max_capacity(10_000)
                .time_to_live(ttl)
                .build(),
            rulebooks: Cache::builder()
                .max_capacity(10_000)
                .time_to_live(ttl)
                .build(),
            contracts: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(ttl)
                .support_invalidation_closures()
                .build(),
            members: Cache::builder()
                .max_capacity(1_000_000)
                .time_to_live(ttl)
                .support_invalidation_closures()
                .build(),
        }
    }

    /// The member with their plan; `None` for a member not on the tenant's roster.
    pub async fn member(
        &self,
        tenant_id: &str,
        member_id: &str,
    ) -> Result<Option<Arc<MemberPlan>>, CacheError> {
        let store = &self.store;
        let key = (tenant_id.to_owned(), member_id.to_owned());
        Ok(self
            .members
            .try_get_with(key, async move {
                let Some(member) = store.member(tenant_id, member_id).await? else {
                    return Ok::<_, StoreError>(None);
                };
                let plan = store.plan(tenant_id, &member.plan_id).await?;
                Ok(Some(Arc::new(MemberPlan { member, plan })))
            })
            .await?)
    }

    pub async fn settings(&self, tenant_id: &str) -> Result<TenantSettings, CacheError> {
        let store = &self.store;
        Ok(self
            .settings
            .try_get_with_by_ref(
                tenant_id,
                async move { store.tenant_settings(tenant_id).await },
            )
            .await?)
    }

    /// The id and version of the tenant's active rulebook; `None` when none is
    /// published. Intake records them on each claim; the rules stage compiles the rules.
    pub async fn active_rulebook(
        &self,
        tenant_id: &str,
    ) -> Result<Option<ActiveRulebook>, CacheError> {
        let store = &self.store;
        Ok(self
            .rulebooks
            .try_get_with_by_ref(tenant_id, async move {
                Ok::<_, StoreError>(store.active_rulebook_version(tenant_id).await?.map(
                    |(rulebook_id, version)| ActiveRulebook {
                        rulebook_id,
                        version,
                    },
                ))
            })
            .await?)
    }

    /// Whether the provider is contracted with the tenant on `day`, with the contract.
    pub async fn contracted(
        &self,
        tenant_id: &str,
        provider_id: &str,
        day: Date,
    ) -> Result<Option<Arc<Contracted>>, CacheError> {
        let store = &self.store;
        let key = (tenant_id.to_owned(), provider_id.to_owned(), day);
        Ok(self
            .contracts
            .try_get_with(key, async move {
                Ok::<_, StoreError>(
                    store
                        .contracted_provider(tenant_id, provider_id, day)
                        .await?
                        .map(Arc::new),
                )
            })
            .await?)
    }

    /// Forgets what is cached of a tenant, after this process changed its configuration.
    pub async fn invalidate_tenant(&self, tenant_id: &str) {
        self.settings.invalidate(tenant_id).await;
        self.rulebooks.invalidate(tenant_id).await;
        let tenant = tenant_id.to_owned();
        // Contract entries are keyed by (tenant, provider, day).
        let _ = self.contracts.invalidate_entries_if({
            let tenant = tenant.clone();
            move |k, _| k.0 == tenant
        });
        let _ = self
            .members
            .invalidate_entries_if(move |k, _| k.0 == tenant);
    }
}
