//! Tenant configuration as the hot path reads it: settings, the active rulebook
//! (its id and version), "is this provider contracted today" and plans, kept in memory
//! so that intake and the stages do not ask the store for every claim.
//!
//! Members are exact, not merely recent: a batch asks the store for its tenant's roster
//! version ([`Store::roster_version`], moved by every change to a member) and keeps the
//! members it read before while the version stands; only the batch's members not read
//! yet are fetched, in one query. A time to live would instead have each member fetched
//! again, one at a time, whenever its entry expired, and let a claim be decided against
//! coverage changed a moment before.
//!
//! Staleness bound: an entry lives at most `ttl` (`CLAIMS_CONFIG_CACHE_TTL_MS`, default
//! 1 s). A change made through this process is seen here at once, because the writer
//! invalidates the tenant's entries; a change made in another process is seen here
//! within `ttl`.

use std::collections::HashMap;
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
    rosters: Arc<std::sync::Mutex<HashMap<String, Roster>>>,
}

/// The members of a tenant read while its roster stood at `version`; `None` for an id
/// not on it. Plans are not kept with them: each batch pairs a member with the plan the
/// plan cache holds then.
#[derive(Debug, Default)]
struct Roster {
    version: i64,
    members: HashMap<String, Option<Arc<Member>>>,
}

/// A member id with what is kept of it (`None`: not on the roster).
type Kept<'i> = (&'i str, Option<Arc<Member>>);

/// Members kept per tenant before its roster is read afresh: a bound on memory for a
/// payer with millions of members, far above what a batch names.
const ROSTER_CAPACITY: usize = 100_000;

/// The members of a batch's claims, by tenant and member id; a member not on the
/// roster is absent.
pub type Members = HashMap<(String, String), Arc<MemberPlan>>;

/// A member on the roster with their plan (none only if the plan was deleted from the
/// store by hand: plans cannot be deleted through the API).
#[derive(Debug, Clone, PartialEq)]
pub struct MemberPlan {
    /// Shared with the roster kept in the cache.
    pub member: Arc<Member>,
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

impl CacheError {
    /// The store's error the loader met.
    pub fn cause(&self) -> &StoreError {
        &self.0
    }
}

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
            rosters: Default::default(),
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

    /// The members of `claims` (tenant, member id) with their plans: per tenant, its
    /// roster version, then in one query the members not kept from before; plans from
    /// the cache.
    pub async fn members_of<'a>(
        &self,
        claims: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Members, CacheError> {
        let mut by_tenant: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for (tenant, member) in claims {
            by_tenant.entry(tenant).or_default().push(member);
        }
        let store_error = |e| CacheError(Arc::new(e));
        let mut out = Members::new();
        for (tenant, mut ids) in by_tenant {
            ids.sort_unstable();
            ids.dedup();
            let version = self
                .store
                .roster_version(tenant)
                .await
                .map_err(store_error)?;
            let (mut members, missing) = self.kept(tenant, version, &ids);
            let read = self
                .store
                .members_of(tenant, &missing)
                .await
                .map_err(store_error)?;
            let mut read: HashMap<String, Member> =
                read.into_iter().map(|m| (m.member_id.clone(), m)).collect();
            let keep: Vec<Kept<'_>> = missing
                .into_iter()
                .map(|id| (id, read.remove(id).map(Arc::new)))
                .collect();
            members.extend(keep.iter().cloned());
            // Each member with the plan the cache holds now, asked once per plan.
            let mut plans: HashMap<String, Option<Arc<Plan>>> = HashMap::new();
            for (id, member) in members {
                let Some(member) = member else { continue };
                let plan = match plans.get(&member.plan_id) {
                    Some(p) => p.clone(),
                    None => {
                        let p = self.plan(tenant, &member.plan_id).await?;
                        plans.insert(member.plan_id.clone(), p.clone());
                        p
                    }
                };
                out.insert(
                    (tenant.to_owned(), id.to_owned()),
                    Arc::new(MemberPlan { member, plan }),
                );
            }
            self.keep(tenant, version, keep);
        }
        Ok(out)
    }

    /// Of `ids`, the members kept for the tenant at `version` (`None`: not on the
    /// roster), and those to read. A roster that moved is forgotten.
    fn kept<'i>(
        &self,
        tenant: &str,
        version: i64,
        ids: &[&'i str],
    ) -> (Vec<Kept<'i>>, Vec<&'i str>) {
        let mut rosters = self.rosters.lock().unwrap_or_else(|p| p.into_inner());
        let roster = rosters.entry(tenant.to_owned()).or_default();
        if roster.version != version || roster.members.len() > ROSTER_CAPACITY {
            *roster = Roster {
                version,
                members: HashMap::new(),
            };
        }
        let (mut kept, mut missing) = (Vec::new(), Vec::new());
        for id in ids {
            match roster.members.get(*id) {
                Some(m) => kept.push((*id, m.clone())),
                None => missing.push(*id),
            }
        }
        (kept, missing)
    }

    /// Keeps `members`, read while the tenant's roster stood at `version`, unless it
    /// has moved since (another batch saw a later version first).
    fn keep(&self, tenant: &str, version: i64, members: Vec<Kept<'_>>) {
        let mut rosters = self.rosters.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(roster) = rosters.get_mut(tenant).filter(|r| r.version == version) {
            roster
                .members
                .extend(members.into_iter().map(|(id, m)| (id.to_owned(), m)));
        }
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
