//! Access tokens already verified by this process, so that a client sending the same
//! token with every request pays for its RS256 signature once. Checking a signature
//! costs about 60 µs of CPU (ring parses the public key and its Montgomery constants
//! anew for each check): about 28% of the API's CPU for a single intake, measured.
//!
//! Only a token whose signature and claims all verified is remembered, keyed by the
//! SHA-256 of its text (the cache holds no bearer token), with its claims, until the
//! instant it expires: from then on it is verified again, and found expired, exactly as
//! a token never seen. Its session is checked by the caller as for any token. All are
//! forgotten when a reload of the verifying keys finds one gone, so a key taken out of
//! service stops verifying its tokens here as soon as the key ring learns of it.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::token::AccessClaims;

/// Tokens remembered at most: one per live session is the usual need.
const CAPACITY: u64 = 10_000;

#[derive(Debug)]
pub struct VerifiedTokens {
    cache: moka::sync::Cache<TokenKey, Arc<AccessClaims>>,
}

/// A token's key in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenKey([u8; 32]);

impl TokenKey {
    pub fn of(token: &str) -> Self {
        Self(Sha256::digest(token.as_bytes()).into())
    }
}

/// A token's entry lives until the token expires: jsonwebtoken (with no leeway) finds it
/// expired once the clock's whole seconds exceed `exp`, so at `exp + 1` s exactly.
struct UntilExpired;

impl moka::Expiry<TokenKey, Arc<AccessClaims>> for UntilExpired {
    fn expire_after_create(
        &self,
        _: &TokenKey,
        claims: &Arc<AccessClaims>,
        _: Instant,
    ) -> Option<Duration> {
        let expires = Duration::from_secs(u64::try_from(claims.exp).unwrap_or(0) + 1);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Some(expires.saturating_sub(now))
    }
}

impl Default for VerifiedTokens {
    fn default() -> Self {
        Self {
            cache: moka::sync::Cache::builder()
                .max_capacity(CAPACITY)
                .expire_after(UntilExpired)
                .build(),
        }
    }
}

impl VerifiedTokens {
    /// The claims of the token, if it verified here before.
    pub fn get(&self, key: TokenKey) -> Option<Arc<AccessClaims>> {
        self.cache.get(&key)
    }

    /// Remembers a token that verified.
    pub fn insert(&self, key: TokenKey, claims: Arc<AccessClaims>) {
        self.cache.insert(key, claims);
    }

    /// Forgets every token, when the keys that verify them change.
    pub fn clear(&self) {
        self.cache.invalidate_all();
    }
}
