//! Compiled rulebooks, kept by tenant and rulebook id. A rulebook's rules never change after it is
//! created, so an entry never goes stale; the cache is bounded by count and entries
//! unused for an hour are dropped.

use std::sync::Arc;
use std::time::Duration;

use moka::sync::Cache;
use schemas::rulebook::Rule;

use super::compile::{compile, CompileError, CompiledRulebook};

#[derive(Clone)]
pub struct RulebookCache {
    /// Keyed by (tenant, rulebook id): ids are unique, but a tenant's key can never
    /// reach another tenant's entry even if one were not.
    cache: Cache<(String, String), Arc<CompiledRulebook>>,
}

impl std::fmt::Debug for RulebookCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RulebookCache")
            .field("entries", &self.cache.entry_count())
            .finish()
    }
}

impl Default for RulebookCache {
    fn default() -> Self {
        Self {
            cache: Cache::builder()
                .max_capacity(10_000)
                .time_to_idle(Duration::from_secs(3600))
                .build(),
        }
    }
}

impl RulebookCache {
    /// The tenant's compiled rulebook `id`, if it was compiled before.
    pub fn get(&self, tenant_id: &str, id: &str) -> Option<Arc<CompiledRulebook>> {
        self.cache.get(&(tenant_id.to_owned(), id.to_owned()))
    }

    /// The compiled form of the tenant's rulebook `id`, compiling `rules` on first use.
    pub fn get_or_compile(
        &self,
        tenant_id: &str,
        id: &str,
        rules: &[Rule],
    ) -> Result<Arc<CompiledRulebook>, CompileError> {
        if let Some(hit) = self.get(tenant_id, id) {
            return Ok(hit);
        }
        let compiled = Arc::new(compile(rules)?);
        self.cache
            .insert((tenant_id.to_owned(), id.to_owned()), compiled.clone());
        Ok(compiled)
    }
}
