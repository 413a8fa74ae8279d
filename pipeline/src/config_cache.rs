//! Tenant configuration as the hot path reads it: settings, the active rulebook
//! (its id and version), "is this provider contracted today" and plans, kept in memory
//! so that intake and the stages do not ask the store for every claim. Members are read
//! a batch at a time ([`ConfigCache::members_of`]), not cached: there are as many as
//! claimants, and a cache of them would ask the store a member at a time each time one
//! expired.
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
    plans: Cache<(String, String), Option<Arc<Plan>>>,
}

/// The members of a batch's claims, by tenant and member id; a member not on the
/// roster is absent.
pub type Members = std::collections::HashMap<(String, String), Arc<MemberPlan>>;

/// A member on the roster with their plan (none only if the plan was deleted from the
/// store by hand: plans cannot be deleted through the API).
#[derive(Debug, Clone, PartialEq)]
pub struct MemberPlan {
    pub member: Member,
    /// Shared with the cache: a batch's members on one plan hold one copy.
    pub plan: Option<Arc<Plan>>,
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
            plans: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(ttl)
                .support_invalidation_closures()
                .build(),
        }
    }

    /// The plan, by id; `None` when the tenant has no such plan.
    pub async fn plan(
        &self,
        tenant_id: &str,
        plan_id: &str,
    ) -> Result<Option<Arc<Plan>>, CacheError> {
        let store = &self.store;
        let key = (tenant_id.to_owned(), plan_id.to_owned());
        Ok(self
            .plans
            .try_get_with(key, async move {
                Ok::<_, StoreError>(store.plan(tenant_id, plan_id).await?.map(Arc::new))
            })
            .await?)
    }

    /// The members of `claims` (tenant, member id) with their plans, read from the store
    /// in one query per tenant (a batch's members, read fresh: a stage would otherwise
    /// ask the store a member at a time each time the cache lets one go); plans from
    /// the cache.
    pub async fn members_of<'a>(
        &self,
        claims: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Members, CacheError> {
        let mut by_tenant: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for (tenant, member) in claims {
            by_tenant.entry(tenant).or_default().push(member);
        }
        let mut out = Members::new();
        for (tenant, mut ids) in by_tenant {
            ids.sort_unstable();
            ids.dedup();
            let members = self
                .store
                .members_of(tenant, &ids)
                .await
                .map_err(|e| CacheError(Arc::new(e)))?;
            for member in members {
                let plan = self.plan(tenant, &member.plan_id).await?;
                out.insert(
                    (tenant.to_owned(), member.member_id.clone()),
                    Arc::new(MemberPlan { member, plan }),
                );
            }
        }
        Ok(out)
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
        let _ = self.plans.invalidate_entries_if(move |k, _| k.0 == tenant);
    }
}
