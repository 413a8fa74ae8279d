//! Delivery-log retention (contract part 2: the tenant setting
//! `delivery_log_retention_days`, default 30): the bodies of finished deliveries older
//! than the tenant's retention are dropped, once at start and then hourly, by every
//! process that sends webhooks (the purge is idempotent, so several doing it is
//! harmless). The delivery and attempt rows stay, so the log still tells what happened;
//! a purged delivery can no longer be redelivered (409).

use std::time::Duration;

use tokio::sync::watch;

use crate::clock::now_ms;
use crate::store::{Store, StoreError};

/// How often the purge runs.
pub const EVERY: Duration = Duration::from_secs(3600);

const DAY_MS: i64 = 24 * 3600 * 1000;

/// One pass over every tenant as of `now_ms`: the bodies dropped.
pub async fn purge(store: &Store, now_ms: i64) -> Result<u64, StoreError> {
    let mut purged = 0;
    for tenant_id in store.tenant_ids().await? {
        let days = store
            .tenant_settings(&tenant_id)
            .await?
            .delivery_log_retention_days;
        purged += store
            .purge_delivery_bodies(&tenant_id, now_ms - i64::from(days) * DAY_MS)
            .await?;
    }
    Ok(purged)
}

/// Purges at start, then every [`EVERY`], until `shutdown` turns true.
pub async fn run(store: Store, mut shutdown: watch::Receiver<bool>) {
    loop {
        match purge(&store, now_ms()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                deliveries = n,
                "Delivery bodies past their retention dropped."
            ),
            Err(e) => tracing::warn!(error = %e, "Delivery-log retention will be tried again."),
        }
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}
