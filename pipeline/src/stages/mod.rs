//! The processing stages. Each has the same shape: its input topic, a pure `process`
//! function from an input record and the stage's state to its outputs, the state, and
//! its tests. [`runner`] drives any stage on the bus: poll a batch, gather the state the
//! batch needs, process, publish every output, then commit.
//!
//! The chain: `claims.intake` → validate → `claims.validated` → rules →
//! `claims.evaluated` → fraud → `claims.scored` → decide → `claims.decided` (+ domain
//! events on `claims.events`) → snapshot (the queryable claim, its audit record, its
//! review task).

pub mod decide;
pub mod fraud;
pub mod record;
pub mod rules;
pub mod runner;
pub mod snapshot;
pub mod validate;

pub use record::ClaimInProcess;
pub use runner::{run, Stage, StageError};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::bus::Bus;
use crate::config_cache::ConfigCache;
use crate::rules::RulebookCache;
use crate::store::Store;
use crate::topics::Topics;

/// The stages, by the names `claims serve --stages` takes.
pub const NAMES: [&str; 5] = ["validate", "rules", "fraud", "decide", "snapshot"];

/// What the stages share.
#[derive(Debug, Clone)]
pub struct Deps {
    pub bus: Bus,
    pub store: Store,
    pub config: ConfigCache,
    pub topics: Topics,
    /// Records per batch.
    pub batch_size: usize,
}

/// Starts the named stages on `tasks`; they stop when `shutdown` turns true.
pub async fn spawn(
    names: &[String],
    deps: &Deps,
    shutdown: &watch::Receiver<bool>,
    tasks: &mut JoinSet<()>,
) -> Result<(), StageError> {
    for name in names {
        let (bus, rx, batch) = (deps.bus.clone(), shutdown.clone(), deps.batch_size);
        let t = deps.topics.clone();
        macro_rules! go {
            ($stage:expr) => {{
                let stage = $stage;
                tasks.spawn(async move {
                    if let Err(e) = run(stage, bus, batch, rx).await {
                        tracing::error!(error = %e, "A stage stopped.");
                    }
                });
            }};
        }
        match name.as_str() {
            "validate" => go!(validate::Validate {
                topics: t,
                config: deps.config.clone()
            }),
            "rules" => go!(rules::Rules {
                topics: t,
                store: deps.store.clone(),
                compiled: RulebookCache::default()
            }),
            "fraud" => go!(fraud::Fraud::restore(t, &deps.bus).await?),
            "decide" => go!(decide::Decide {
                topics: t,
                config: deps.config.clone()
            }),
            "snapshot" => go!(snapshot::Snapshot {
                topics: t,
                store: deps.store.clone()
            }),
            _ => continue,
        }
        tracing::info!(stage = %name, "Stage started.");
    }
    Ok(())
}
