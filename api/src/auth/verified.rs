//! Access tokens already verified by this process, so that a client sending the same
//! token with every request pays for its RS256 signature once. Checking a signature
//! costs about 60 µs of CPU (ring parses the public key and its Montgomery constants
//! anew for each check): about 28% of the API's CPU for a single intake, measured.
//!
//! Only a token whose signature and claims all verified is remembered, keyed by the
//! SHA-256 of its text (the cache holds no bearer token), with its claims. A remembered
//! token is still checked for expiry at every use, and its session is checked by the
//! caller as for any token; the memory is forgotten whenever the verifying keys are
//! reloaded, so a key taken out of service stops verifying its tokens here as soon as
//! the key ring learns of it.

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::token::AccessClaims;

/// Tokens remembered at most: one per live session is the usual need.
const CAPACITY: u64 = 10_000;

#[derive(Debug)]
pub struct VerifiedTokens {
    cache: moka::sync::Cache<[u8; 32], Arc<AccessClaims>>,
}

/// A token's key in the cache.
#[derive(Debug, Clone, Copy)]
pub struct TokenKey([u8; 32]);

impl TokenKey {
    pub fn of(token: &str) -> Self {
        Self(Sha256::digest(token.as_bytes()).into())
    }
}

impl VerifiedTokens {
    /// Remembers tokens for at most `ttl` (the longest lifetime of an access token).
    pub fn new(ttl: Duration) -> Self {
        Self {
            cache: moka::sync::Cache::builder()
                .max_capacity(CAPACITY)
                .time_to_live(ttl)
                .build(),
        }
    }

    /// The claims of the token, if it verified here before.
    pub fn get(&self, key: TokenKey) -> Option<Arc<AccessClaims>> {
        self.cache.get(&key.0)
    }

    /// Remembers a token that verified.
    pub fn insert(&self, key: TokenKey, claims: Arc<AccessClaims>) {
        self.cache.insert(key.0, claims);
    }

    /// Forgets every token, when the keys that verify them change.
    pub fn clear(&self) {
        self.cache.invalidate_all();
    }
}
