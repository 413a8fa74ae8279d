//! Shared state of the handlers: the store, the key ring, caches and settings.

use std::sync::Arc;

use pipeline::bus::Bus;
use pipeline::clock::Clock;
use pipeline::config_cache::ConfigCache;
use pipeline::idempotency::KeyCommitter;
use pipeline::intake::Committer;
use pipeline::store::Store;
use pipeline::topics::Topics;
use pipeline::uploads::ObjectStore;

use crate::auth::keys::KeyRing;
use crate::auth::session_cache::SessionCache;
use crate::config::ApiConfig;
use crate::http::metrics::Metrics;
use crate::http::rate_limit::RateLimits;

/// Cheap to clone: one `Arc`.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Inner>);

#[derive(Debug)]
pub struct Inner {
    pub store: Store,
    pub keys: KeyRing,
    pub sessions: SessionCache,
    /// Tenant configuration for the hot path; see its staleness bound.
    pub config_cache: ConfigCache,
    pub config: ApiConfig,
    pub metrics: Metrics,
    pub bus: Bus,
    pub topics: Topics,
    /// This process's rate-limit buckets.
    pub limits: RateLimits,
    /// Time as idempotency keys see it; tests move it forward.
    pub clock: Clock,
    /// Where uploaded files are kept.
    pub objects: ObjectStore,
    /// Intake's group commit (docs/decisions.md, "Intake's group commit").
    pub intake: Committer,
    /// Idempotency keys' group commit (docs/decisions.md, "Idempotency keys' group commit").
    pub idempotency: KeyCommitter,
}

impl AppState {
    pub fn new(store: Store, keys: KeyRing, config: ApiConfig, bus: Bus, topics: Topics) -> Self {
        let sessions = SessionCache::new(store.clone(), config.session_cache_ttl);
        let config_cache = ConfigCache::new(store.clone(), config.config_cache_ttl);
        let limits = RateLimits::new(config.rate_limit);
        let intake = Committer::new(store.clone(), bus.clone(), topics.intake.clone());
        let idempotency = KeyCommitter::new(store.clone());
        Self(Arc::new(Inner {
            store,
            keys,
            sessions,
            config_cache,
            metrics: Metrics::new(),
            bus,
            topics,
            limits,
            clock: Clock::default(),
            objects: ObjectStore::local(&config.upload_dir),
            intake,
            idempotency,
            config,
        }))
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl axum::extract::FromRef<AppState> for crate::http::json::BodyLimit {
    fn from_ref(state: &AppState) -> Self {
        crate::http::json::BodyLimit(state.config.max_body_bytes)
    }
}
