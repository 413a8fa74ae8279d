//! Rate limits (spec: Limits; contract: Conventions), the limiter itself; the
//! middleware that applies them is `crate::middleware::rate_limit`. Limited: per tenant once a request is
//! authenticated, per client address before (so that login cannot be brute-forced).
//! Login, refresh and logout are always limited per client address, whatever token
//! rides along: charged to a tenant's large allowance, a client holding any valid
//! token could guess passwords far past the per-address bound.
//!
//! - GCRA through `governor`, in memory: the check costs no store round trip. A tenant's
//!   allowance is `rate_limit_per_minute` with a burst of the same size, replenished
//!   evenly over the minute.
//! - Several API processes share a tenant's limit by each enforcing an equal share of it
//!   (`CLAIMS_API_PROCESSES`): behind a load balancer that spreads requests evenly, the
//!   processes together allow the tenant's limit, never a multiple of it, and no shared
//!   store sits on the hot path. The headers describe the share that answered.
//! - Settings apply at once: a bucket is rebuilt when the tenant's setting changes (the
//!   process that takes a PATCH sees it at once, others within the configuration
//!   cache's bound).
//! - Every response, errors included, carries `X-RateLimit-Limit`, `-Remaining` and
//!   `-Reset`. Reset is the Unix second by which the whole allowance is back; when
//!   nothing remains, it is the second at which the next request is allowed, the same
//!   moment that a 429's `Retry-After` gives.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use governor::clock::{Clock as _, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use moka::future::Cache;

pub static X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
pub static X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
pub static X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

type Limiter = RateLimiter<NotKeyed, InMemoryState, DefaultClock, StateInformationMiddleware>;

/// How the limits are set.
#[derive(Debug, Clone, Copy)]
pub struct RateLimitSettings {
    /// Off only where something in front of the service limits already.
    pub enabled: bool,
    /// Requests per minute per client address before authentication.
    pub anonymous_per_minute: u32,
    /// API processes sharing each limit; each enforces `1/processes` of it.
    pub processes: u32,
}

impl Default for RateLimitSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            anonymous_per_minute: 600,
            processes: 1,
        }
    }
}

/// The buckets of this process: one per tenant and one per client address, forgotten
/// after ten idle minutes so that many addresses cannot exhaust memory.
pub struct RateLimits {
    settings: RateLimitSettings,
    clock: DefaultClock,
    tenants: Cache<String, Arc<Bucket>>,
    addresses: Cache<IpAddr, Arc<Bucket>>,
}

impl std::fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimits")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

struct Bucket {
    /// The per-minute setting this bucket was built for, before the process share.
    per_minute: u32,
    /// This process's share: the allowance it enforces.
    limit: u32,
    limiter: Limiter,
}

/// The answer for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub limit: u32,
    pub remaining: u32,
    /// Unix seconds.
    pub reset: u64,
    /// Set when the request is refused: seconds until the next one is allowed.
    pub retry_after: Option<u64>,
}

impl RateLimits {
    pub fn new(settings: RateLimitSettings) -> Self {
        fn cache<K: std::hash::Hash + Eq + Send + Sync + 'static>() -> Cache<K, Arc<Bucket>> {
            Cache::builder()
                .max_capacity(1_000_000)
                .time_to_idle(Duration::from_secs(600))
                .build()
        }
        Self {
            settings: RateLimitSettings {
                processes: settings.processes.max(1),
                ..settings
            },
            clock: DefaultClock::default(),
            tenants: cache(),
            addresses: cache(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.settings.enabled
    }

    /// Counts a request of `tenant_id`, whose setting is `per_minute`.
    pub async fn check_tenant(&self, tenant_id: &str, per_minute: u32) -> Verdict {
        let bucket = match self.tenants.get(tenant_id).await {
            Some(b) if b.per_minute == per_minute => b,
            _ => {
                let b = Arc::new(self.bucket(per_minute));
                self.tenants.insert(tenant_id.to_owned(), b.clone()).await;
                b
            }
        };
        self.check(&bucket)
    }

    /// Counts a request not (yet) authenticated, from `address`.
    pub async fn check_address(&self, address: IpAddr) -> Verdict {
        let per_minute = self.settings.anonymous_per_minute;
        let bucket = self
            .addresses
            .get_with(address, async { Arc::new(self.bucket(per_minute)) })
            .await;
        self.check(&bucket)
    }

    fn bucket(&self, per_minute: u32) -> Bucket {
        let limit = (per_minute / self.settings.processes).max(1);
        let quota = Quota::per_minute(NonZeroU32::new(limit).unwrap_or(NonZeroU32::MIN));
        Bucket {
            per_minute,
            limit,
            limiter: RateLimiter::direct_with_clock(quota, self.clock.clone())
                .with_middleware::<StateInformationMiddleware>(),
        }
    }

    fn check(&self, bucket: &Bucket) -> Verdict {
        let now_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        // One request's share of the minute: how long a used request takes to come back.
        let per_request = Duration::from_secs(60) / bucket.limit;
        match bucket.limiter.check() {
            Ok(state) => {
                let remaining = state.remaining_burst_capacity();
                let until_full = per_request * (bucket.limit - remaining.min(bucket.limit));
                Verdict {
                    limit: bucket.limit,
                    remaining,
                    reset: ceil_secs(now_unix + until_full),
                    retry_after: None,
                }
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                // Whole seconds, at least one: a client that waits as told gets through.
                let wait_secs = ceil_secs(wait).max(1);
                Verdict {
                    limit: bucket.limit,
                    remaining: 0,
                    reset: now_unix.as_secs() + wait_secs,
                    retry_after: Some(wait_secs),
                }
            }
        }
    }
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

impl Verdict {
    pub fn write(&self, headers: &mut HeaderMap) {
        headers.insert(X_RATELIMIT_LIMIT.clone(), HeaderValue::from(self.limit));
        headers.insert(
            X_RATELIMIT_REMAINING.clone(),
            HeaderValue::from(self.remaining),
        );
        headers.insert(X_RATELIMIT_RESET.clone(), HeaderValue::from(self.reset));
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn limits(processes: u32) -> RateLimits {
        RateLimits::new(RateLimitSettings {
            enabled: true,
            anonymous_per_minute: 3,
            processes,
        })
    }

    #[tokio::test]
    async fn a_tenant_gets_its_allowance_then_a_wait() {
        let l = limits(1);
        let first = l.check_tenant("acme", 6).await;
        assert_eq!((first.limit, first.remaining), (6, 5));
        assert_eq!(first.retry_after, None);
        for left in (0..5).rev() {
            assert_eq!(l.check_tenant("acme", 6).await.remaining, left);
        }
        let refused = l.check_tenant("acme", 6).await;
        assert_eq!(refused.remaining, 0);
        // Six a minute: one comes back every ten seconds.
        let wait = refused.retry_after.unwrap();
        assert!((9..=10).contains(&wait), "waits {wait} s");
        // Another tenant is unaffected.
        assert_eq!(l.check_tenant("globex", 6).await.remaining, 5);
    }

    #[tokio::test]
    async fn a_changed_setting_applies_at_once() {
        let l = limits(1);
        assert_eq!(l.check_tenant("acme", 2).await.remaining, 1);
        assert_eq!(l.check_tenant("acme", 2).await.remaining, 0);
        assert!(l.check_tenant("acme", 2).await.retry_after.is_some());
        let v = l.check_tenant("acme", 100).await;
        assert_eq!((v.limit, v.remaining, v.retry_after), (100, 99, None));
    }

    #[tokio::test]
    async fn processes_share_a_limit() {
        let l = limits(4);
        let v = l.check_tenant("acme", 100).await;
        assert_eq!(v.limit, 25, "each of four processes enforces a quarter");
        assert_eq!(
            l.check_address(IpAddr::V4(Ipv4Addr::LOCALHOST)).await.limit,
            1
        );
    }

    #[tokio::test]
    async fn addresses_are_limited_apart() {
        let l = limits(1);
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        for _ in 0..3 {
            assert_eq!(l.check_address(a).await.retry_after, None);
        }
        assert!(l.check_address(a).await.retry_after.is_some());
        let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(l.check_address(b).await.retry_after, None);
    }
}
