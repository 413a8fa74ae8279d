//! Settings of the front end, already validated by the binary's configuration layer.

use std::time::Duration;

use crate::http::connections::ConnectionSettings;
use crate::http::rate_limit::RateLimitSettings;

/// How the API behaves; built by the binary from layered configuration.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// `iss` of issued access tokens, and the only issuer accepted.
    pub issuer: String,
    /// Lifetime of access tokens; the spec fixes 900 s.
    pub access_token_ttl: Duration,
    /// Lifetime of a login session and so of its refresh tokens.
    pub session_ttl: Duration,
    /// How long a session's "still live" answer may be served from memory. This bounds
    /// how long an access token keeps working in *another* process after logout; the
    /// process that handles the logout forgets the session at once.
    pub session_cache_ttl: Duration,
    /// How long tenant configuration (settings, active rulebook, contracts) may be
    /// served from memory before a change made by another process is seen.
    pub config_cache_ttl: Duration,
    /// Add `Secure` to the refresh cookie (turn off only for plain-http development).
    pub cookie_secure: bool,
    /// Largest JSON body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Accept webhook URLs of loopback and private addresses.
    pub webhook_allow_private: bool,
    /// Per-tenant and per-address request limits.
    pub rate_limit: RateLimitSettings,
    /// The cap on open HTTP connections and their time-outs.
    pub connections: ConnectionSettings,
    /// Honour `Idempotency-Key` (off only to measure what it costs).
    pub idempotency_enabled: bool,
    /// Folder of the object store that keeps uploaded files.
    pub upload_dir: std::path::PathBuf,
    /// SHA-256 hashes (lowercase hex) refused on upload as known malware.
    pub upload_known_bad_sha256: Vec<String>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            issuer: "claims-service".into(),
            access_token_ttl: Duration::from_secs(900),
            session_ttl: Duration::from_secs(7 * 24 * 3600),
            session_cache_ttl: Duration::from_secs(2),
            config_cache_ttl: Duration::from_secs(1),
            cookie_secure: true,
            max_body_bytes: 10 * 1024 * 1024,
            webhook_allow_private: false,
            rate_limit: RateLimitSettings::default(),
            connections: ConnectionSettings::default(),
            idempotency_enabled: true,
            upload_dir: std::path::PathBuf::from("./data/objects"),
            upload_known_bad_sha256: Vec::new(),
        }
    }
}
