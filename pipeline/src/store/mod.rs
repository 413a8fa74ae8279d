//! The relational store: one code path over SQLite (the embedded default) and PostgreSQL
//! (scale-out), through sqlx's `Any` driver. Queries use `$n` placeholders, which both
//! engines accept, and only portable types (TEXT, BIGINT, DOUBLE), so each query is
//! written once. The schema itself differs where the engines do, hence one migration
//! folder per backend.
//!
//! SQLite allows one writer at a time; a pool of writers would only queue on the file
//! lock and fail deferred transactions with SQLITE_BUSY. So on SQLite writes go through
//! a single-connection pool while reads use several; on PostgreSQL both are one pool.

mod accumulators;
mod audit;
mod checkpoint;
mod checksum;
mod claims;
mod decided;
mod decisions;
mod error;
mod idempotency;
mod intake;
mod jobs;
mod keys;
mod members;
mod payments;
mod plans;
mod providers;
mod rebuild;
mod receipts;
mod rulebooks;
mod sessions;
mod tasks;
mod tenants;
pub(crate) mod uploads;
mod users;
mod webhook_health;
mod webhooks;
mod x12;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Executor};

pub use accumulators::CountedClaim;
pub use audit::{AuditEntry, AuditFilter, AuditRecord, ChainBreak, PreparedEntry};
pub use checkpoint::{checkpoints, Checkpointing, CHECKPOINT_EVERY};
pub use checksum::TableChecksum;
pub use claims::ClaimFilter;
pub use decided::{DecidedPage, DecidedWindow};
pub use decisions::{DecisionCheck, DecisionTexts, PreparedDecisions};
pub use error::StoreError;
pub(crate) use idempotency::{begin_in as begin_idempotent_in, finish_in as finish_idempotent_in};
pub use idempotency::{Begin, IdempotencyScope, KeyTimes, StoredResponse};
pub use intake::{NewClaim, Unreplaceable};
pub use jobs::{ClaimStanding, ItemEnd, RunningJob};
pub use keys::{SigningKeyRecord, SigningKeyState};
pub use members::Upserted;
pub use payments::{NewPayment, PayableClaim};
pub use providers::{Contracted, NewContract, NewProvider};
pub use receipts::ReceiptLookup;
pub use sessions::{NewSession, RefreshOutcome, SessionState};
pub use tasks::{TaskDecision, TaskRefusal};
pub use tenants::Tenant;
pub use uploads::{Extraction, NewUpload, UploadChange};
pub use users::{User, UserChange, UserUpsert};
pub use webhook_health::{Disabled, FailingStreak, STATS_WINDOW_MS};
pub use webhooks::{
    AttemptOutcome, AttemptTotals, DueDelivery, DueEndpoint, NewDelivery, Redelivery, Subscription,
    WebhookFields, LATENCY_BUCKETS_MS,
};
pub use x12::{X12Ack, X12Batch};

/// Which database engine a URL selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn of_url(url: &str) -> Result<Self, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(StoreError::Config(
                "database URL must start with sqlite: or postgres://".into(),
            ))
        }
    }
}

/// Pool sizes and timeouts.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Connections of the pool: on PostgreSQL the one pool, on SQLite the readers' (its
    /// one writer and its checkpointer are apart). `None` takes the backend's default:
    /// [`POSTGRES_CONNECTIONS`], or [`sqlite_readers`] of this machine's cores.
    pub max_connections: Option<u32>,
    pub acquire_timeout: Duration,
    /// SQLite: a bulk load into a database that is thrown away whole if the load stops
    /// short (`claims replay --into`): commits keep their undo journal in memory and
    /// wait for no disk, the pages are written once, into the database file, and
    /// nothing copies a write-ahead log after them; [`Store::sync`] makes it all
    /// durable at the end. A process that stops midway may leave the file unreadable,
    /// which a load that starts from an empty database only ever discards. Off for
    /// every store that holds work accepted from outside.
    pub bulk_load: bool,
    /// SQLite: the page cache of the one writer connection, MiB (see
    /// [`WRITER_CACHE_MIB`]).
    pub writer_cache_mib: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_connections: None,
            acquire_timeout: Duration::from_secs(10),
            bulk_load: false,
            writer_cache_mib: WRITER_CACHE_MIB,
        }
    }
}

/// The PostgreSQL pool's default size: the server runs the statements, so connections
/// waiting on it cost the service little.
pub const POSTGRES_CONNECTIONS: u32 = 16;

/// SQLite's readers by default: two per core, from 4 to 16. Each reader runs its
/// statements on a thread of its own, with its own page cache and prepared statements,
/// and glibc gives each such thread a heap of its own (the bundled SQLite allocates from
/// the C library, not mimalloc), which keeps what it once held. More readers than cores
/// can use only held memory: at a million claims through `scripts/bench` on two cores,
/// 16 readers peaked at 442 MiB and 4 at 339, at the same pace (docs/decisions.md,
/// "The writer's turn").
pub fn sqlite_readers(cores: usize) -> u32 {
    u32::try_from(cores.saturating_mul(2))
        .unwrap_or(u32::MAX)
        .clamp(4, 16)
}

/// Handle to the store; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    read: AnyPool,
    write: AnyPool,
    /// SQLite only: the connection that copies the write-ahead log into the database
    /// file, so that the one writer never does it inside a commit (see
    /// [`Store::checkpoint`]).
    checkpointer: Option<AnyPool>,
    backend: Backend,
    /// SQLite: the database file, for [`Store::sync`].
    file: Option<std::path::PathBuf>,
}

impl Store {
    /// Connects without touching the schema.
    pub async fn connect(url: &str, opts: &StoreOptions) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = Backend::of_url(url)?;
        match backend {
            Backend::Sqlite => {
                ensure_sqlite_parent_dir(url)?;
                let options = connect_options(&with_create_mode(url))?;
                // Checked as it is handed back, so not again before each turn: sqlx's
                // test before acquiring is a round trip to SQLite's thread at the start
                // of every write transaction, while every other writer waits.
                let write = sqlite_pool(1, opts.writer_cache_mib.saturating_mul(1024), opts)
                    .after_release(|conn, _| Box::pin(still_usable(conn)))
                    .test_before_acquire(false)
                    .connect_with(options.clone())
                    .await
                    .map_err(StoreError::from)?;
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                let readers = opts.max_connections.unwrap_or(sqlite_readers(cores));
                let read = sqlite_pool(readers.max(2), READER_CACHE_KIB, opts)
                    .connect_with(options.clone())
                    .await
                    .map_err(StoreError::from)?;
                // A bulk load keeps no write-ahead log to copy.
                let checkpointer = if opts.bulk_load {
                    None
                } else {
                    Some(
                        sqlite_pool(1, READER_CACHE_KIB, opts)
                            .connect_with(options)
                            .await
                            .map_err(StoreError::from)?,
                    )
                };
                Ok(Self {
                    read,
                    write,
                    checkpointer,
                    backend,
                    file: sqlite_file(url).map(Path::to_path_buf),
                })
            }
            Backend::Postgres => {
                let pool = AnyPoolOptions::new()
                    .max_connections(opts.max_connections.unwrap_or(POSTGRES_CONNECTIONS))
                    .acquire_timeout(opts.acquire_timeout)
                    .connect_with(connect_options(url)?)
                    .await
                    .map_err(StoreError::from)?;
                Ok(Self {
                    read: pool.clone(),
                    write: pool,
                    checkpointer: None,
                    backend,
                    file: None,
                })
            }
        }
    }

    /// Connects and applies every pending migration.
    pub async fn open(url: &str, opts: &StoreOptions) -> Result<Self, StoreError> {
        let store = Self::connect(url, opts).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Applies pending migrations; safe to run concurrently from several processes
    /// (sqlx takes an advisory lock on PostgreSQL, SQLite serialises on its file lock).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let migrator = match self.backend {
            Backend::Sqlite => sqlx::migrate!("migrations/sqlite"),
            Backend::Postgres => sqlx::migrate!("migrations/postgres"),
        };
        migrator
            .run(&self.write)
            .await
            .map_err(|e| StoreError::Migration(e.to_string()))
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// A trivial query, for readiness checks.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.read).await?;
        Ok(())
    }

    /// Makes every commit so far durable, whatever the store's options: SQLite's file
    /// is synced to the disk (what ends a [`StoreOptions::bulk_load`]); PostgreSQL's
    /// commits are durable as they return.
    pub async fn sync(&self) -> Result<(), StoreError> {
        let Some(file) = self.file.clone() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || std::fs::File::open(&file)?.sync_all())
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
            .map_err(|e| StoreError::Unavailable(sqlx::Error::Io(e)))
    }

    pub async fn close(&self) {
        self.write.close().await;
        self.read.close().await;
        if let Some(c) = &self.checkpointer {
            c.close().await;
        }
    }

    pub(crate) fn reader(&self) -> &AnyPool {
        &self.read
    }

    pub(crate) fn writer(&self) -> &AnyPool {
        &self.write
    }

    /// A transaction that reads before it writes. On SQLite it takes the write lock at
    /// `BEGIN`: deferred, its first read took a snapshot that another process's commit
    /// could make stale before its first write, which then failed
    /// (`SQLITE_BUSY_SNAPSHOT`) instead of waiting its turn.
    pub async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        Ok(match self.backend {
            Backend::Sqlite => self.write.begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres => self.write.begin().await?,
        })
    }
}

/// Page cache of the one writer connection by default, MiB. SQLite's default (2 MiB)
/// made a large store's writes spill dirty pages and re-read index pages on every
/// statement. 32 MiB held more of a million claims' indexes and measured 4% more claims/s
/// end to end at a million claims (none at 100,000), but the C allocator's arena behind
/// it took some 25 MiB more at the service's peak (docs/decisions.md, "The writer's
/// turn"); an operator with memory to spare sets more (`CLAIMS_SQLITE_WRITER_CACHE_MIB`).
pub const WRITER_CACHE_MIB: u32 = 16;
/// Per reader connection: several of them, each with SQLite's default.
const READER_CACHE_KIB: u32 = 2 * 1024;
/// Page size of a new database file (an existing one keeps its own). SQLite's default
/// of 4 KiB made every batch write several pages per claim: a claim's rows (its snapshot,
/// its records on the bus, its audit records) are a few hundred bytes to a few KiB each,
/// and each commit wrote, checksummed and synced every page it dirtied with one call
/// apiece. Larger pages halved the pipeline's commits; 32 KiB and 64 KiB gained no
/// throughput over 16 KiB, while at a steady rate, where commits are small and each
/// dirtied page is written whole, they made every commit and so every wait for the
/// writer longer (measurements: docs/decisions.md, "The embedded log").
const PAGE_SIZE: u32 = 16 * 1024;
/// Write-ahead log pages after which a commit checkpoints by itself (1 GiB): only a
/// backstop, since `serve` and `claims replay` checkpoint on a connection of their own
/// and start the log over well before (`checkpoint::RESTART_ANYWAY_BYTES`).
const WRITER_CHECKPOINT_PAGES: u32 = 1024 * 1024 * 1024 / PAGE_SIZE;
/// How long a connection waits for another's lock: long enough for the admin CLI to
/// write while `serve` runs.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// What a write-ahead log that has been started over is cut back to, so that one burst
/// does not keep its size on disk for good.
const WAL_SIZE_LIMIT_BYTES: u32 = 64 * 1024 * 1024;

/// Whether a writer connection handed back to the pool can begin a transaction. A
/// COMMIT that fails for want of room (`SQLITE_FULL`) or on an I/O error is rolled back
/// by SQLite itself; sqlx's own ROLLBACK then fails, and its count of open
/// transactions stays at one, so every later `BEGIN` on that connection failed with
/// "non-zero transaction depth" long after the disk had room again. Such a
/// connection is closed and the pool opens a fresh one.
async fn still_usable(conn: &mut sqlx::AnyConnection) -> Result<bool, sqlx::Error> {
    use sqlx::Connection;
    match conn.begin_with("BEGIN DEFERRED").await {
        Ok(tx) => {
            tx.rollback().await?;
            Ok(true)
        }
        Err(_) => Ok(false),
    }
}

/// A pool of `size` connections to one SQLite file, each with these settings.
fn sqlite_pool(size: u32, cache_kib: u32, opts: &StoreOptions) -> AnyPoolOptions {
    // See [`StoreOptions::bulk_load`].
    let journal = if opts.bulk_load {
        "PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF;"
    } else {
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
    };
    AnyPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(opts.acquire_timeout)
        .after_connect(move |conn, _meta| {
            Box::pin(async move {
                // The page size takes effect only on a new file, before WAL is chosen.
                // WAL lets readers run beside the writer; synchronous=FULL makes every
                // commit durable before it returns (a 202 means on disk); the busy
                // timeout lets the admin CLI write while `serve` runs. It comes first, so
                // that the settings after it wait for another connection's lock too,
                // rather than failing at once with "database is locked".
                // The writer checkpoints only as a backstop when no process runs
                // [`Store::checkpoint`] (the admin CLI, say): at WRITER_CHECKPOINT_PAGES
                // rather than SQLite's 1,000. temp_store = MEMORY keeps the statement
                // journals of multi-row statements (the original of every page they
                // change, kept to undo the statement alone) in memory instead of in
                // temporary files written on every batch.
                let busy_ms = BUSY_TIMEOUT.as_millis();
                conn.execute(
                    format!(
                        "PRAGMA busy_timeout = {busy_ms}; PRAGMA page_size = {PAGE_SIZE}; \
                         {journal} PRAGMA foreign_keys = ON; \
                         PRAGMA cache_size = -{cache_kib}; \
                         PRAGMA wal_autocheckpoint = {WRITER_CHECKPOINT_PAGES}; \
                         PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}; \
                         PRAGMA temp_store = MEMORY;"
                    )
                    .as_str(),
                )
                .await?;
                Ok(())
            })
        })
}

/// The URL's connect options, with slow statements logged at debug rather than sqlx's
/// warning: the warning carries the statement's whole text, and under load a batch's
/// thousand-row statement wrote some 100 KB per log line.
fn connect_options(url: &str) -> Result<sqlx::any::AnyConnectOptions, StoreError> {
    use sqlx::ConnectOptions;
    let options: sqlx::any::AnyConnectOptions = url
        .parse()
        .map_err(|e: sqlx::Error| StoreError::Config(format!("database URL: {e}")))?;
    Ok(options.log_slow_statements(log::LevelFilter::Debug, Duration::from_secs(1)))
}

/// SQLite refuses to create a file in a missing folder; create the folder first.
fn ensure_sqlite_parent_dir(url: &str) -> Result<(), StoreError> {
    let Some(path) = sqlite_file(url) else {
        return Ok(());
    };
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent).map_err(|e| {
                StoreError::Config(format!("cannot create {}: {e}", parent.display()))
            })?;
        }
    }
    Ok(())
}

/// The file of a SQLite URL; none for an in-memory database.
fn sqlite_file(url: &str) -> Option<&Path> {
    let path = url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:");
    let path = path.split('?').next().unwrap_or_default();
    (!path.is_empty() && path != ":memory:").then(|| Path::new(path))
}

/// Opens the file read-write and creates it when missing, unless the URL says otherwise.
fn with_create_mode(url: &str) -> String {
    if url.contains("mode=") {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&mode=rwc")
    } else {
        format!("{url}?mode=rwc")
    }
}

/// A statement on either backend, with its values bound.
pub(crate) type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// The multi-row VALUES list for `rows` rows of `cols` values, bound in order. sqlx's
/// `QueryBuilder` writes `?` for `Any`, which PostgreSQL refuses, so PostgreSQL gets
/// `($1, $2), ($3, $4)`; SQLite gets plain `?`, because sqlx looks each `$n` up by name
/// there, which is quadratic in the number of parameters and dominated large inserts.
pub(crate) fn values_list(backend: Backend, rows: usize, cols: usize) -> String {
    // Written into one string: a batch's statements list up to 2,000 rows each, and a
    // string per row and per list showed in the chain's profile.
    let mut out = String::with_capacity(rows * (cols * 5 + 4));
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        push_placeholders(&mut out, backend, r * cols + 1, cols);
        out.push(')');
    }
    out
}

/// `count` comma-separated placeholders, the first being parameter number `first`
/// (1-based): for lists inside a statement that has other parameters. SQLite's `?`
/// binds by position, so the statement's parameters must be bound in text order.
pub(crate) fn placeholders(backend: Backend, first: usize, count: usize) -> String {
    let mut out = String::with_capacity(count * 5);
    push_placeholders(&mut out, backend, first, count);
    out
}

fn push_placeholders(out: &mut String, backend: Backend, first: usize, count: usize) {
    use std::fmt::Write;
    for i in 0..count {
        if i > 0 {
            out.push_str(", ");
        }
        match backend {
            Backend::Sqlite => out.push('?'),
            Backend::Postgres => {
                let _ = write!(out, "${}", first + i);
            }
        }
    }
}

/// Parses a stored scope string; the store only ever writes valid ones.
pub(crate) fn parse_scopes(s: &str) -> schemas::ScopeSet {
    schemas::ScopeSet::parse_space_separated(s).unwrap_or_default()
}

impl FromStr for Backend {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::of_url(s)
    }
}

/// A store in a new SQLite file under the system's temporary directory, for unit tests;
/// with the file's path.
#[cfg(test)]
pub async fn temp(name: &str) -> (Store, std::path::PathBuf) {
    let path = std::env::temp_dir().join(format!(
        "claims-{name}-{}.db",
        uuid::Uuid::new_v4().simple()
    ));
    let url = format!("sqlite://{}", path.display());
    let store = Store::open(&url, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    (store, path)
}

/// Closes a store of [`temp`] and removes its file with the write-ahead log beside it.
#[cfg(test)]
pub async fn remove_temp(store: Store, path: &std::path::Path) {
    store.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sqlite_readers_are_two_per_core_within_bounds() {
        assert_eq!(super::sqlite_readers(1), 4);
        assert_eq!(super::sqlite_readers(2), 4);
        assert_eq!(super::sqlite_readers(3), 6);
        assert_eq!(super::sqlite_readers(64), 16);
    }

    #[test]
    fn values_list_numbers_placeholders_row_by_row() {
        use super::Backend::{Postgres, Sqlite};
        assert_eq!(
            super::values_list(Postgres, 2, 3),
            "($1, $2, $3), ($4, $5, $6)"
        );
        assert_eq!(super::values_list(Sqlite, 2, 2), "(?, ?), (?, ?)");
        assert_eq!(super::placeholders(Postgres, 4, 2), "$4, $5");
        assert_eq!(super::placeholders(Sqlite, 4, 2), "?, ?");
    }

    /// The writer's page cache is the one asked for; the readers keep SQLite's default.
    #[tokio::test]
    async fn the_writer_has_the_page_cache_it_was_given() {
        use super::{Store, StoreOptions};
        let path =
            std::env::temp_dir().join(format!("claims-cache-{}.db", uuid::Uuid::new_v4().simple()));
        let url = format!("sqlite://{}", path.display());
        let opts = StoreOptions {
            writer_cache_mib: 5,
            ..StoreOptions::default()
        };
        let store = Store::open(&url, &opts).await.unwrap();
        let cache = |pool| sqlx::query_scalar::<_, i64>("PRAGMA cache_size").fetch_one(pool);
        let (writer, reader) = (
            cache(&store.write).await.unwrap(),
            cache(&store.read).await.unwrap(),
        );
        store.close().await;
        let _ = std::fs::remove_file(&path);
        // Negative: KiB rather than pages.
        assert_eq!(
            (writer, reader),
            (-5 * 1024, -i64::from(super::READER_CACHE_KIB))
        );
    }

    /// The page size is set before anything else touches a new file; placed after the
    /// journal mode (or after the first table) SQLite ignores it without a word.
    #[tokio::test]
    async fn a_new_sqlite_database_gets_the_large_pages() {
        let (store, path) = super::temp("pages").await;
        let size: i64 = sqlx::query_scalar("PRAGMA page_size")
            .fetch_one(store.reader())
            .await
            .unwrap();
        super::remove_temp(store, &path).await;
        assert_eq!(size, i64::from(super::PAGE_SIZE));
    }

    /// A bulk load writes without a write-ahead log and without waiting for the disk;
    /// once synced and closed, the file is an ordinary store again, its rows there.
    #[tokio::test]
    async fn a_database_loaded_in_bulk_opens_as_an_ordinary_store() {
        use super::{Store, StoreOptions};
        let path =
            std::env::temp_dir().join(format!("claims-bulk-{}.db", uuid::Uuid::new_v4().simple()));
        let url = format!("sqlite://{}", path.display());
        // The writer's settings: (journal mode, synchronous level).
        async fn settings(store: &Store) -> (String, i64) {
            let mode = sqlx::query_scalar("PRAGMA journal_mode")
                .fetch_one(&store.write)
                .await
                .unwrap();
            let sync = sqlx::query_scalar("PRAGMA synchronous")
                .fetch_one(&store.write)
                .await
                .unwrap();
            (mode, sync)
        }
        let bulk = StoreOptions {
            bulk_load: true,
            ..StoreOptions::default()
        };
        let store = Store::open(&url, &bulk).await.unwrap();
        assert_eq!(settings(&store).await, ("memory".to_owned(), 0));
        assert!(store.checkpointer.is_none());
        sqlx::query("INSERT INTO tenants (tenant_id, name, settings, created_at) VALUES ('t1', 't1', '{}', 0)")
            .execute(&store.write)
            .await
            .unwrap();
        store.sync().await.unwrap();
        store.close().await;
        assert!(!std::path::Path::new(&format!("{}-wal", path.display())).exists());

        let store = Store::open(&url, &StoreOptions::default()).await.unwrap();
        assert_eq!(settings(&store).await, ("wal".to_owned(), 2));
        let tenants: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tenants")
            .fetch_one(store.reader())
            .await
            .unwrap();
        super::remove_temp(store, &path).await;
        assert_eq!(tenants, 1);
    }
}
