//! `claims serve`: opens the store (applying migrations), loads the signing key, and
//! runs the roles this process was given until SIGINT or SIGTERM.

use std::net::SocketAddr;

use anyhow::Context;
use api::auth::keys::KeyRing;
use api::AppState;
use pipeline::bus::{Bus, EmbeddedLog};
use pipeline::store::{Store, StoreOptions};
use pipeline::topics::Topics;
use tokio::net::TcpListener;

use crate::cli::ServeArgs;
use crate::config::Config;

/// A service bound to its address and ready to run.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    state: AppState,
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
        let bus = Bus::Embedded(EmbeddedLog::new(store.clone()));
        let topics = Topics::new(&config.topic_prefix, config.partitions);
        Ok(Self {
            listener,
            state: AppState::new(store, keys, config.api.clone(), bus, topics),
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

    /// Serves until `shutdown` completes, then drains in-flight requests.
    pub async fn run_until(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let store = self.state.store.clone();
        api::serve(self.listener, self.state, shutdown)
            .await
            .context("the HTTP server failed")?;
        store.close().await;
        Ok(())
    }
}

pub async fn open_store(config: &Config) -> anyhow::Result<Store> {
    let opts = StoreOptions {
        max_connections: config.database_max_connections,
        ..StoreOptions::default()
    };
    Store::open(config.store.url(), &opts)
        .await
        .context("cannot open the database")
}

pub async fn serve(config: &Config, args: ServeArgs) -> anyhow::Result<()> {
    let server = Server::build(config).await?;
    if args.demo {
        crate::demo::seed(server.state(), server.local_addr()).await?;
    }
    tracing::info!(addr = %server.local_addr(), store = ?server.state().store.backend(), "Claims service listening.");
    server.run_until(shutdown_signal()).await
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
