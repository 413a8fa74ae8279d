//! `claims serve`: opens the store (applying migrations), loads the signing key, and
//! runs the roles this process was given until SIGINT or SIGTERM.

use std::net::SocketAddr;

use anyhow::Context;
use api::auth::keys::KeyRing;
use api::AppState;
use pipeline::bus::Bus;
use pipeline::topics::Topics;
use tokio::net::TcpListener;

use crate::cli::ServeArgs;
use crate::config::Config;
use crate::open::{open_bus, open_store};

/// A service bound to its address and ready to run.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    state: AppState,
    /// The roles this process runs: `api` and stage names.
    roles: Vec<String>,
    webhooks: pipeline::webhooks::SenderSettings,
    uploads: pipeline::uploads::UploadSettings,
    fuse_stages: bool,
}

/// Every role a process can take, in pipeline order.
pub fn all_roles() -> Vec<String> {
    std::iter::once("api")
        .chain(pipeline::stages::NAMES)
        .map(str::to_owned)
        .collect()
}

impl Server {
    /// Everything that can fail at start-up happens here, before any request is taken.
    pub async fn build(config: &Config) -> anyhow::Result<Self> {
        let store = open_store(config).await?;
        let keys = KeyRing::open(&config.jwt_key_file, store.clone())
            .await
            .context("cannot load the access-token signing key")?;
        let listener = TcpListener::bind(config.http_addr)
            .await
            .with_context(|| format!("cannot listen on {}", config.http_addr))?;
        let bus = open_bus(config, &store)?;
        let topics = Topics::new(&config.topic_prefix, config.partitions);
        // Created once here, so that intake's hot path need not check for them.
        bus.ensure_topics(&topics.all())
            .await
            .map_err(|e| anyhow::anyhow!("cannot create the topics: {e}"))?;
        Ok(Self {
            listener,
            state: AppState::new(store, keys, config.api.clone(), bus, topics),
            roles: all_roles(),
            webhooks: config.webhooks,
            fuse_stages: config.fuse_stages,
            uploads: pipeline::uploads::UploadSettings {
                objects: pipeline::uploads::ObjectStore::local(&config.api.upload_dir),
                clamd: config.clamd.clone(),
                ocr: config.ocr,
            },
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Runs only these roles (`api` and stage names).
    pub fn with_roles(mut self, roles: Vec<String>) -> Self {
        self.roles = roles;
        self
    }

    /// Runs until `shutdown` completes; then stops taking requests, lets every stage
    /// finish and commit the batch in hand, and closes the store.
    pub async fn run_until(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let state = self.state.clone();
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut tasks = tokio::task::JoinSet::new();
        let deps = pipeline::stages::Deps {
            bus: state.bus.clone(),
            store: state.store.clone(),
            config: state.config_cache.clone(),
            topics: state.topics.clone(),
            batch_size: pipeline::stages::batch_size(&state.bus),
            fuse: self.fuse_stages,
            webhooks: self.webhooks,
            uploads: self.uploads.clone(),
            clock: state.clock.clone(),
        };
        if self.roles.iter().any(|r| r == "scan") && self.uploads.clamd.is_none() {
            tracing::warn!("CLAIMS_CLAMD_ADDRESS is not set: uploads are checked only by the built-in screen (EICAR and known-bad hashes), not by clamd.");
        }
        pipeline::stages::spawn(&self.roles, &deps, &stop_rx, &mut tasks)
            .await
            .map_err(|e| anyhow::anyhow!("cannot start the stages: {e}"))?;
        // Reprocess jobs run beside the officers' decisions: both decide claims again.
        if self.roles.iter().any(|r| r == "workflow") {
            tasks.spawn(pipeline::reprocess::run(
                state.store.clone(),
                state.bus.clone(),
                state.topics.clone(),
                stop_rx.clone(),
            ));
        }
        match &state.bus {
            // Only the embedded log needs upkeep; a broker keeps its own logs.
            Bus::Embedded(log) => {
                tasks.spawn(pipeline::bus::embedded::maintain(
                    log.clone(),
                    state.topics.all(),
                    LOG_MAINTENANCE_EVERY,
                    LOG_RETENTION,
                    stop_rx.clone(),
                ));
            }
            // Every process relays the outbox: any of them may have written to it, and
            // one that crashed leaves its rows to the others.
            Bus::Kafka(k) => {
                tasks.spawn(pipeline::bus::outbox::relay(k.clone(), stop_rx.clone()));
            }
        }
        tasks.spawn(pipeline::store::checkpoints(
            state.store.clone(),
            pipeline::store::CHECKPOINT_EVERY,
            stop_rx.clone(),
        ));
        tasks.spawn(trim_c_heap(stop_rx.clone()));
        let mut http_stop = stop_rx.clone();
        if self.roles.iter().any(|r| r == "api") {
            tasks.spawn(api::middleware::idempotency::purge_expired(
                self.state.clone(),
                stop_rx.clone(),
            ));
            let (state, stop) = (self.state.clone(), stop_rx.clone());
            tasks.spawn(async move { state.keys.keep_fresh(stop).await });
        }
        let http = self.roles.iter().any(|r| r == "api").then(|| {
            tokio::spawn(api::serve(self.listener, self.state, async move {
                let _ = http_stop.wait_for(|stop| *stop).await;
            }))
        });
        shutdown.await;
        let _ = stop_tx.send(true);
        if let Some(http) = http {
            http.await
                .context("the HTTP server panicked")?
                .context("the HTTP server failed")?;
        }
        while tasks.join_next().await.is_some() {}
        state.store.close().await;
        Ok(())
    }
}

/// Hands the C library's free pages back to the system every [`TRIM_C_HEAP_EVERY`]
/// (`sqlite_mimalloc::trim_c_heap`): SQLite's threads allocate from glibc's arenas,
/// which keep what a burst freed. At a million claims through `scripts/bench` the
/// arenas held some 40 MiB free at the service's peak.
async fn trim_c_heap(mut stop: tokio::sync::watch::Receiver<bool>) {
    while pipeline::clock::sleep_unless_stopped(TRIM_C_HEAP_EVERY, &mut stop).await {
        // It walks every arena: milliseconds, off the runtime's workers.
        let _ = tokio::task::spawn_blocking(sqlite_mimalloc::trim_c_heap).await;
    }
}

/// Often enough to catch a burst's leavings before the next burst's peak; each trim
/// takes milliseconds.
const TRIM_C_HEAP_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// How often the embedded log is compacted and trimmed.
const LOG_MAINTENANCE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);
/// How long consumed records stay in the embedded log, for inspection.
const LOG_RETENTION: std::time::Duration = std::time::Duration::from_secs(3600);

pub async fn serve(config: &Config, args: ServeArgs) -> anyhow::Result<()> {
    raise_open_files_limit();
    let mut config = config.clone();
    // The demo runs on one machine, so its webhooks go to receivers on localhost, which
    // the service otherwise refuses; CLAIMS_WEBHOOK_ALLOW_PRIVATE=false keeps the refusal.
    if args.demo && std::env::var_os("CLAIMS_WEBHOOK_ALLOW_PRIVATE").is_none() {
        config.api.webhook_allow_private = true;
        config.webhooks.allow_private = true;
        tracing::warn!("Demo: webhooks may reach loopback and private addresses (CLAIMS_WEBHOOK_ALLOW_PRIVATE=false to refuse them).");
    }
    let config = &config;
    let mut server = Server::build(config).await?;
    if let Some(roles) = args.stages {
        server = server.with_roles(roles);
    }
    if args.demo {
        crate::demo::seed(server.state(), server.local_addr()).await?;
    }
    tracing::info!(addr = %server.local_addr(), store = ?server.state().store.backend(), "Claims service listening.");
    server.run_until(shutdown_signal()).await
}

/// Raises this process's soft limit on open files to its hard limit, as servers that
/// hold many connections do (Go's runtime does it for every program): a fresh system's
/// soft limit of 1,024 would cap the HTTP connections far below what the machine
/// allows. The cap on connections is then taken from the raised limit.
pub fn raise_open_files_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::debug!(limit, "Open-files limit raised."),
        Err(e) => tracing::warn!(error = %e, "Cannot raise the open-files limit."),
    }
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("Shutting down: finishing in-flight requests.");
}
