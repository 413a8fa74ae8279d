//! Which sessions are live, remembered for a short while so that checking a token costs
//! no store round trip on the hot path. The bound is `session_cache_ttl`: a session
//! revoked by another process stops working here at most that long afterwards; one
//! revoked by this process stops at once, because it is forgotten here.

use std::sync::Arc;
use std::time::Duration;

use moka::future::Cache;
use pipeline::clock::now_ms;
use pipeline::store::{SessionState, Store, StoreError};

use crate::http::error::ApiError;

#[derive(Debug, Clone)]
pub struct SessionCache {
    store: Store,
    /// Shared, so that the hot path's look-up copies a pointer, not the session's ids.
    cache: Cache<String, Option<Arc<SessionState>>>,
}

impl SessionCache {
    pub fn new(store: Store, ttl: Duration) -> Self {
        Self {
            store,
            cache: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(ttl)
                .build(),
        }
    }

    /// The session when it may be used now; `None` when it is unknown, revoked or
    /// expired.
    pub async fn live(&self, session_id: &str) -> Result<Option<Arc<SessionState>>, ApiError> {
        let store = &self.store;
        let state = self
            .cache
            .try_get_with_by_ref(session_id, async move {
                Ok(store.session_state(session_id).await?.map(Arc::new))
            })
            .await
            .map_err(|e| match &*e {
                // A session read while the database restarts is worth a retry, as any
                // other read then is: 503, not 500.
                StoreError::Unavailable(cause) => ApiError::store_unavailable(cause),
                _ => ApiError::Internal(Box::new(ArcError(e))),
            })?;
        Ok(state.filter(|s| s.is_live(now_ms())))
    }

    /// Drops what is remembered of a session, after it was revoked here.
    pub async fn forget(&self, session_id: &str) {
        self.cache.invalidate(session_id).await;
    }
}

/// moka shares one loader error among waiters as an `Arc`.
#[derive(Debug)]
struct ArcError(std::sync::Arc<StoreError>);

impl std::fmt::Display for ArcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ArcError {}
