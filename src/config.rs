//! Layered configuration: defaults, then an optional TOML file (`--config` or
//! `CLAIMS_CONFIG`), then `CLAIMS_*` environment variables; then validation into typed
//! choices. Every setting is documented once, here, and listed in the README.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

/// The settings as written by the operator, before validation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Folder of the embedded default's database and of generated keys (`CLAIMS_DATA_DIR`).
    pub data_dir: PathBuf,
    /// Address the HTTP API listens on (`CLAIMS_HTTP_ADDR`).
    pub http_addr: String,
    /// `sqlite:…` or `postgres://…`; default SQLite at `$CLAIMS_DATA_DIR/claims.db`
    /// (`CLAIMS_DATABASE_URL`).
    pub database_url: Option<String>,
    /// Connections per database pool; unset, 16 on PostgreSQL and two readers per core
    /// (4 to 16) on SQLite (`CLAIMS_DATABASE_MAX_CONNECTIONS`).
    pub database_max_connections: Option<u32>,
    /// SQLite: the page cache of the store's one writer connection, MiB; more holds more
    /// of a large store's indexes at the price of as much memory and more
    /// (`CLAIMS_SQLITE_WRITER_CACHE_MIB`).
    pub sqlite_writer_cache_mib: u32,
    /// RSA private key (PKCS#8 PEM) that signs access tokens; default
    /// `$CLAIMS_DATA_DIR/keys/signing.pem`, generated when missing (`CLAIMS_JWT_KEY_FILE`).
    pub jwt_key_file: Option<PathBuf>,
    /// `iss` of access tokens (`CLAIMS_JWT_ISSUER`).
    pub jwt_issuer: String,
    /// Lifetime of a login session and its refresh tokens, seconds (`CLAIMS_SESSION_TTL_SECS`).
    pub session_ttl_secs: u64,
    /// How long another process may keep accepting a logged-out session's access
    /// tokens, milliseconds (`CLAIMS_SESSION_CACHE_TTL_MS`).
    pub session_cache_ttl_ms: u64,
    /// How long another process's change to tenant configuration (settings, active
    /// rulebook, contracts) may take to be seen here, milliseconds
    /// (`CLAIMS_CONFIG_CACHE_TTL_MS`).
    pub config_cache_ttl_ms: u64,
    /// `Secure` attribute on the refresh cookie; `false` only for plain-http
    /// development (`CLAIMS_COOKIE_SECURE`).
    pub cookie_secure: bool,
    /// Largest JSON request body, bytes (`CLAIMS_MAX_BODY_BYTES`).
    pub max_body_bytes: usize,
    /// Most HTTP connections open at once; at the cap a new connection closes the
    /// oldest one without a request in flight. Lowered to what the open-files limit
    /// allows (`CLAIMS_HTTP_MAX_CONNECTIONS`).
    pub http_max_connections: usize,
    /// Time allowed for a request's headers, counted from when the server starts
    /// waiting for them, seconds; also how long an idle kept-alive connection stays
    /// open (`CLAIMS_HTTP_HEADER_READ_TIMEOUT_SECS`).
    pub http_header_read_timeout_secs: u64,
    /// A connection with no byte moving either way for this long is closed, seconds
    /// (`CLAIMS_HTTP_IDLE_TIMEOUT_SECS`).
    pub http_idle_timeout_secs: u64,
    /// `text` or `json` log lines (`CLAIMS_LOG_FORMAT`).
    pub log_format: LogFormat,
    /// Prefix of every topic name, so deployments can share a broker
    /// (`CLAIMS_TOPIC_PREFIX`).
    pub topic_prefix: String,
    /// Partitions of each topic (`CLAIMS_PARTITIONS`).
    pub partitions: u32,
    /// On the embedded log, run validate, rules, fraud and decide as one chain in memory
    /// when this process runs all four; `false` keeps them apart, so that their topics
    /// show every claim (`CLAIMS_FUSE_STAGES`). Kafka always keeps them apart.
    pub fuse_stages: bool,
    /// Kafka's bootstrap servers, `host:port[,host:port…]`: set, the bus is Kafka
    /// instead of the embedded log (`CLAIMS_KAFKA_BROKERS`).
    pub kafka_brokers: Option<String>,
    /// Replicas of each topic the service creates on Kafka (`CLAIMS_KAFKA_REPLICATION`).
    pub kafka_replication: u16,
    /// A Confluent-compatible schema registry, `http(s)://host:port`: set, Avro values
    /// on Kafka use its wire format and registered ids (`CLAIMS_SCHEMA_REGISTRY_URL`).
    pub schema_registry_url: Option<String>,
    /// A stable name of this process (e.g. a StatefulSet pod name): restarted, it takes
    /// up its embedded-log leases (or, on Kafka, its static group memberships) at once;
    /// unset, a restart waits up to 5 s (Kafka: 10 s) for them.
    /// Two live processes must not share it (`CLAIMS_INSTANCE_ID`).
    pub instance_id: Option<String>,
    /// Let webhooks reach loopback and private addresses, refused by default
    /// (`CLAIMS_WEBHOOK_ALLOW_PRIVATE`).
    pub webhook_allow_private: bool,
    /// Webhook attempts in flight in all (`CLAIMS_WEBHOOK_MAX_IN_FLIGHT`).
    pub webhook_max_in_flight: usize,
    /// Webhook attempts in flight per subscription (`CLAIMS_WEBHOOK_PER_ENDPOINT`).
    pub webhook_per_endpoint: usize,
    /// Milliseconds before each of a failed delivery's three retries, comma-separated
    /// (`CLAIMS_WEBHOOK_RETRY_WAITS_MS`); the spec's 1 s, 5 s and 30 s by default.
    pub webhook_retry_waits_ms: String,
    /// Enforce rate limits; turn off only where a gateway in front limits already
    /// (`CLAIMS_RATE_LIMIT_ENABLED`).
    pub rate_limit_enabled: bool,
    /// Requests per minute per client address before authentication
    /// (`CLAIMS_RATE_LIMIT_ANONYMOUS_PER_MINUTE`).
    pub rate_limit_anonymous_per_minute: u32,
    /// API processes that share each tenant's limit; each enforces an equal share
    /// (`CLAIMS_API_PROCESSES`).
    pub api_processes: u32,
    /// Honour `Idempotency-Key` on POST; off only to measure its cost
    /// (`CLAIMS_IDEMPOTENCY_ENABLED`).
    pub idempotency_enabled: bool,
    /// Folder of the object store that keeps uploaded files; default
    /// `$CLAIMS_DATA_DIR/objects` (`CLAIMS_UPLOAD_DIR`).
    pub upload_dir: Option<PathBuf>,
    /// SHA-256 hashes (hex, comma-separated) refused on upload as known malware
    /// (`CLAIMS_UPLOAD_KNOWN_BAD_SHA256`).
    pub upload_known_bad_sha256: String,
    /// Where `clamd` listens for the scan stage: `tcp://host:port` or `unix:///path`;
    /// unset, only the built-in screen checks uploads (`CLAIMS_CLAMD_ADDRESS`).
    pub clamd_address: Option<String>,
    /// Most pages of a PDF read by OCR (`CLAIMS_OCR_MAX_PAGES`).
    pub ocr_max_pages: u32,
    /// Time allowed to read one document, seconds (`CLAIMS_OCR_TIMEOUT_SECS`).
    pub ocr_timeout_secs: u64,
    /// Address space of each OCR tool process, MiB (`CLAIMS_OCR_MAX_MEMORY_MIB`).
    pub ocr_max_memory_mib: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./data"),
            http_addr: "127.0.0.1:8080".into(),
            database_url: None,
            database_max_connections: None,
            sqlite_writer_cache_mib: pipeline::store::WRITER_CACHE_MIB,
            jwt_key_file: None,
            jwt_issuer: "claims-service".into(),
            session_ttl_secs: 7 * 24 * 3600,
            session_cache_ttl_ms: 2000,
            config_cache_ttl_ms: 1000,
            cookie_secure: true,
            max_body_bytes: 10 * 1024 * 1024,
            http_max_connections: 10_000,
            http_header_read_timeout_secs: 20,
            http_idle_timeout_secs: 60,
            log_format: LogFormat::Text,
            topic_prefix: String::new(),
            partitions: 8,
            fuse_stages: true,
            kafka_brokers: None,
            kafka_replication: 1,
            schema_registry_url: None,
            instance_id: None,
            webhook_allow_private: false,
            webhook_max_in_flight: 256,
            webhook_per_endpoint: 16,
            webhook_retry_waits_ms: "1000,5000,30000".into(),
            rate_limit_enabled: true,
            rate_limit_anonymous_per_minute: 600,
            api_processes: 1,
            idempotency_enabled: true,
            upload_dir: None,
            upload_known_bad_sha256: String::new(),
            clamd_address: None,
            ocr_max_pages: 20,
            ocr_timeout_secs: 120,
            ocr_max_memory_mib: 1024,
        }
    }
}

/// Which relational store, decided from the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    Sqlite { url: String },
    Postgres { url: String },
}

impl StoreChoice {
    pub fn url(&self) -> &str {
        match self {
            StoreChoice::Sqlite { url } | StoreChoice::Postgres { url } => url,
        }
    }
}

/// Validated, typed configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    pub http_addr: SocketAddr,
    pub store: StoreChoice,
    pub database_max_connections: Option<u32>,
    pub sqlite_writer_cache_mib: u32,
    pub jwt_key_file: PathBuf,
    pub api: api::ApiConfig,
    pub log_format: LogFormat,
    pub topic_prefix: String,
    pub partitions: u32,
    pub fuse_stages: bool,
    /// The Kafka bus; `None` selects the embedded log.
    pub kafka: Option<pipeline::bus::KafkaSettings>,
    pub instance_id: Option<String>,
    pub webhooks: pipeline::webhooks::SenderSettings,
    pub clamd: Option<pipeline::uploads::scan::ClamdAddress>,
    pub ocr: pipeline::uploads::ocr::OcrLimits,
}

impl Config {
    /// Reads the layers and validates them.
    pub fn load(file: Option<&Path>) -> anyhow::Result<Self> {
        let mut figment = Figment::from(Serialized::defaults(Settings::default()));
        if let Some(file) = file {
            if !file.exists() {
                bail!("the configuration file {} does not exist", file.display());
            }
            figment = figment.merge(Toml::file(file));
        }
        figment = figment.merge(Env::prefixed("CLAIMS_").ignore(&[
            "config",
            "admin_password",
            "demo_password",
        ]));
        let settings: Settings = figment.extract().context("invalid configuration")?;
        Self::from_settings(settings)
    }

    pub fn from_settings(s: Settings) -> anyhow::Result<Self> {
        let http_addr: SocketAddr = s
            .http_addr
            .parse()
            .with_context(|| format!("CLAIMS_HTTP_ADDR `{}` is not host:port", s.http_addr))?;
        let url = s
            .database_url
            .clone()
            .unwrap_or_else(|| format!("sqlite://{}", s.data_dir.join("claims.db").display()));
        let store = if url.starts_with("sqlite:") {
            StoreChoice::Sqlite { url }
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            StoreChoice::Postgres { url }
        } else {
            bail!("CLAIMS_DATABASE_URL must start with sqlite: or postgres://");
        };
        if s.database_max_connections == Some(0) {
            bail!("CLAIMS_DATABASE_MAX_CONNECTIONS must be at least 1");
        }
        if !(1..=65_536).contains(&s.sqlite_writer_cache_mib) {
            bail!("CLAIMS_SQLITE_WRITER_CACHE_MIB must be from 1 to 65536");
        }
        if s.session_ttl_secs < 60 {
            bail!("CLAIMS_SESSION_TTL_SECS must be at least 60");
        }
        if s.session_cache_ttl_ms > 60_000 {
            bail!("CLAIMS_SESSION_CACHE_TTL_MS must be at most 60000, so that logout takes effect promptly");
        }
        if s.config_cache_ttl_ms > 60_000 {
            bail!("CLAIMS_CONFIG_CACHE_TTL_MS must be at most 60000");
        }
        if !(1..=1024).contains(&s.partitions) {
            bail!("CLAIMS_PARTITIONS must be from 1 to 1024");
        }
        if !s
            .topic_prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            bail!("CLAIMS_TOPIC_PREFIX may contain only letters, digits and . _ -");
        }
        let registry = match s.schema_registry_url.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
                Some(url.to_owned())
            }
            Some(_) => bail!("CLAIMS_SCHEMA_REGISTRY_URL must be an http:// or https:// URL"),
        };
        if registry.is_some()
            && s.kafka_brokers
                .as_deref()
                .is_none_or(|b| b.trim().is_empty())
        {
            bail!("CLAIMS_SCHEMA_REGISTRY_URL is for Kafka: set CLAIMS_KAFKA_BROKERS too");
        }
        let kafka = match s.kafka_brokers.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(brokers) => {
                if s.kafka_replication == 0 {
                    bail!("CLAIMS_KAFKA_REPLICATION must be at least 1");
                }
                if brokers
                    .split(',')
                    .any(|b| b.trim().rsplit_once(':').is_none())
                {
                    bail!("CLAIMS_KAFKA_BROKERS must be host:port, comma-separated");
                }
                Some(pipeline::bus::KafkaSettings {
                    brokers: brokers.to_owned(),
                    replication: s.kafka_replication,
                    group_prefix: s.topic_prefix.clone(),
                    instance_id: s.instance_id.clone(),
                    schema_registry: registry,
                })
            }
        };
        if s.max_body_bytes < 1024 {
            bail!("CLAIMS_MAX_BODY_BYTES must be at least 1024");
        }
        if s.http_max_connections < 16 {
            bail!("CLAIMS_HTTP_MAX_CONNECTIONS must be at least 16");
        }
        if !(1..=3600).contains(&s.http_header_read_timeout_secs)
            || !(1..=3600).contains(&s.http_idle_timeout_secs)
        {
            bail!("CLAIMS_HTTP_HEADER_READ_TIMEOUT_SECS and CLAIMS_HTTP_IDLE_TIMEOUT_SECS must be from 1 to 3600");
        }
        if s.webhook_max_in_flight == 0 || s.webhook_per_endpoint == 0 {
            bail!(
                "CLAIMS_WEBHOOK_MAX_IN_FLIGHT and CLAIMS_WEBHOOK_PER_ENDPOINT must be at least 1"
            );
        }
        if s.rate_limit_anonymous_per_minute == 0 || s.api_processes == 0 {
            bail!(
                "CLAIMS_RATE_LIMIT_ANONYMOUS_PER_MINUTE and CLAIMS_API_PROCESSES must be at least 1"
            );
        }
        let upload_known_bad_sha256: Vec<String> = s
            .upload_known_bad_sha256
            .split(',')
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        if let Some(bad) = upload_known_bad_sha256
            .iter()
            .find(|h| h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            bail!("CLAIMS_UPLOAD_KNOWN_BAD_SHA256: `{bad}` is not a SHA-256 in hex");
        }
        let clamd = s
            .clamd_address
            .as_deref()
            .filter(|a| !a.is_empty())
            .map(pipeline::uploads::scan::ClamdAddress::parse)
            .transpose()
            .map_err(|e| anyhow::anyhow!("CLAIMS_CLAMD_ADDRESS: {e}"))?;
        if s.ocr_max_pages == 0 || s.ocr_timeout_secs == 0 || s.ocr_max_memory_mib < 64 {
            bail!("CLAIMS_OCR_MAX_PAGES and CLAIMS_OCR_TIMEOUT_SECS must be at least 1, CLAIMS_OCR_MAX_MEMORY_MIB at least 64");
        }
        let ocr = pipeline::uploads::ocr::OcrLimits {
            max_pages: s.ocr_max_pages,
            timeout: Duration::from_secs(s.ocr_timeout_secs),
            max_memory_bytes: s.ocr_max_memory_mib << 20,
        };
        let upload_dir = s
            .upload_dir
            .clone()
            .unwrap_or_else(|| s.data_dir.join("objects"));
        let jwt_key_file = s
            .jwt_key_file
            .clone()
            .unwrap_or_else(|| s.data_dir.join("keys").join("signing.pem"));
        Ok(Self {
            data_dir: s.data_dir,
            http_addr,
            store,
            database_max_connections: s.database_max_connections,
            sqlite_writer_cache_mib: s.sqlite_writer_cache_mib,
            jwt_key_file,
            api: api::ApiConfig {
                issuer: s.jwt_issuer,
                access_token_ttl: Duration::from_secs(900),
                session_ttl: Duration::from_secs(s.session_ttl_secs),
                session_cache_ttl: Duration::from_millis(s.session_cache_ttl_ms),
                config_cache_ttl: Duration::from_millis(s.config_cache_ttl_ms),
                cookie_secure: s.cookie_secure,
                max_body_bytes: s.max_body_bytes,
                webhook_allow_private: s.webhook_allow_private,
                rate_limit: api::http::rate_limit::RateLimitSettings {
                    enabled: s.rate_limit_enabled,
                    anonymous_per_minute: s.rate_limit_anonymous_per_minute,
                    processes: s.api_processes,
                },
                connections: api::http::connections::ConnectionSettings {
                    max_connections: s.http_max_connections,
                    header_read_timeout: Duration::from_secs(s.http_header_read_timeout_secs),
                    idle_timeout: Duration::from_secs(s.http_idle_timeout_secs),
                },
                idempotency_enabled: s.idempotency_enabled,
                upload_dir,
                upload_known_bad_sha256,
            },
            log_format: s.log_format,
            topic_prefix: s.topic_prefix,
            partitions: s.partitions,
            fuse_stages: s.fuse_stages,
            kafka,
            instance_id: s.instance_id,
            webhooks: pipeline::webhooks::SenderSettings {
                allow_private: s.webhook_allow_private,
                max_in_flight: s.webhook_max_in_flight,
                per_endpoint: s.webhook_per_endpoint,
                retry_waits: retry_waits(&s.webhook_retry_waits_ms)?,
            },
            clamd,
            ocr,
        })
    }
}

/// `CLAIMS_WEBHOOK_RETRY_WAITS_MS`: three waits in milliseconds, 1 ms to 1 day each.
fn retry_waits(text: &str) -> anyhow::Result<[std::time::Duration; 3]> {
    let waits: Vec<u64> = text
        .split(',')
        .map(|w| w.trim().parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| anyhow::anyhow!("CLAIMS_WEBHOOK_RETRY_WAITS_MS must be three whole numbers of milliseconds, comma-separated"))?;
    match waits.as_slice() {
        [a, b, c] if waits.iter().all(|w| (1..=86_400_000).contains(w)) => {
            Ok([*a, *b, *c].map(std::time::Duration::from_millis))
        }
        _ => anyhow::bail!(
            "CLAIMS_WEBHOOK_RETRY_WAITS_MS must be three waits of 1 to 86400000 ms, comma-separated"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_select_the_embedded_store_under_the_data_dir() {
        let c = Config::from_settings(Settings::default()).unwrap();
        assert_eq!(
            c.store,
            StoreChoice::Sqlite {
                url: "sqlite://./data/claims.db".into()
            }
        );
        assert_eq!(c.jwt_key_file, PathBuf::from("./data/keys/signing.pem"));
        assert_eq!(c.http_addr.to_string(), "127.0.0.1:8080");
        assert!(c.api.cookie_secure);
        // Unset, so that the store picks its backend's own default.
        assert_eq!(c.database_max_connections, None);
    }

    #[test]
    fn a_postgres_url_selects_postgres() {
        let s = Settings {
            database_url: Some("postgres://u@h/db".into()),
            ..Settings::default()
        };
        assert!(matches!(
            Config::from_settings(s).unwrap().store,
            StoreChoice::Postgres { .. }
        ));
    }

    #[test]
    fn refuses_bad_values() {
        let bad_url = Settings {
            database_url: Some("mysql://x".into()),
            ..Settings::default()
        };
        assert!(Config::from_settings(bad_url).is_err());
        let bad_addr = Settings {
            http_addr: "nowhere".into(),
            ..Settings::default()
        };
        assert!(Config::from_settings(bad_addr).is_err());
        let no_connections = Settings {
            database_max_connections: Some(0),
            ..Settings::default()
        };
        assert!(Config::from_settings(no_connections).is_err());
        let no_cache = Settings {
            sqlite_writer_cache_mib: 0,
            ..Settings::default()
        };
        assert!(Config::from_settings(no_cache).is_err());
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment's Jail API returns its own error type
    fn environment_overrides_the_file_which_overrides_defaults() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "claims.toml",
                "http_addr = \"127.0.0.1:9000\"\ncookie_secure = false\njwt_issuer = \"from-file\"",
            )?;
            jail.set_env("CLAIMS_JWT_ISSUER", "from-env");
            jail.set_env("CLAIMS_DATABASE_MAX_CONNECTIONS", "6");
            jail.set_env("CLAIMS_SQLITE_WRITER_CACHE_MIB", "64");
            let c = Config::load(Some(Path::new("claims.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(c.database_max_connections, Some(6));
            assert_eq!(c.sqlite_writer_cache_mib, 64);
            assert_eq!(c.http_addr.port(), 9000);
            assert!(!c.api.cookie_secure);
            assert_eq!(c.api.issuer, "from-env");
            Ok(())
        });
    }

    #[test]
    fn retry_waits_are_three_bounded_milliseconds() {
        let w = super::retry_waits("1000, 5000,30000").unwrap();
        assert_eq!(w.map(|d| d.as_millis()), [1000, 5000, 30000]);
        for bad in ["1000,5000", "1,2,3,4", "0,1,2", "a,b,c", "1,2,86400001"] {
            assert!(super::retry_waits(bad).is_err(), "{bad}");
        }
    }
}
