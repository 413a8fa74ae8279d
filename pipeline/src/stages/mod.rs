//! The processing stages. Each has the same shape: its input topic, a pure `process`
//! function from an input record and the facts the stage gathered (state, store rows)
//! to its outputs, the state, and its tests. [`runner`] drives any stage on the bus: poll a batch, gather the state the
//! batch needs, process, then publish the outputs and commit the batch together.
//!
//! The chain: (`claims.submissions` → submissions, for claims produced straight onto
//! Kafka, refusals on `claims.rejects`) `claims.intake` → validate → `claims.validated`
//! → rules → `claims.evaluated` → fraud → `claims.scored` → decide → `claims.decided`
//! (decisions with their domain events) → snapshot (the member's plan against their
//! accumulators, kept on `state.accumulators`; the queryable claim, its audit record,
//! its review task; then the events on `claims.events`); `claims.workflow`
//! (officers' decisions) → workflow → `claims.decided`; `claims.events` → webhooks
//! (deliveries queued for the sender);
//! `uploads.received` → scan (`clamd`) → `uploads.scanned` → ocr (+ `upload.*` events).

pub mod chain;
pub mod decide;
pub mod fraud;
pub mod ocr;
pub mod passed;
pub mod rules;
pub mod runner;
pub mod scan;
pub mod snapshot;
pub mod submissions;
pub mod validate;
pub mod webhooks;
pub mod workflow;

pub use runner::{run, Stage, StageError};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::bus::Bus;
use crate::config_cache::ConfigCache;
use crate::rules::RulebookCache;
use crate::store::Store;
use crate::topics::Topics;

/// The stages, by the names `claims serve --stages` takes. `webhooks` is the
/// dispatcher with its sender.
pub const NAMES: [&str; 10] = [
    "submissions",
    "validate",
    "rules",
    "fraud",
    "decide",
    "snapshot",
    "workflow",
    "webhooks",
    "scan",
    "ocr",
];

/// Records a stage takes per batch on the embedded log: large enough to amortise a
/// transaction, small enough to keep latency and memory low. A batch and the one
/// committing beside it are held whole with their decisions, events and texts, so this
/// sets most of the peak RSS: at a million claims through `scripts/bench`, 500 kept the
/// service under 300 MiB (276 and 282 MiB against 329 and 339 with 1,000), and at
/// 100,000 claims decided as many a second (0.93 and 1.04 of 1,000 in alternating
/// runs; docs/decisions.md, "The embedded log").
pub const EMBEDDED_BATCH: usize = 500;
/// Records a stage takes per batch on Kafka, whose stages run apart, as measured there.
pub const KAFKA_BATCH: usize = 1000;

/// The stages' batch size on `bus`.
pub fn batch_size(bus: &Bus) -> usize {
    match bus {
        Bus::Embedded(_) => EMBEDDED_BATCH,
        Bus::Kafka(_) => KAFKA_BATCH,
    }
}

/// What the stages share.
#[derive(Debug, Clone)]
pub struct Deps {
    pub bus: Bus,
    pub store: Store,
    pub config: ConfigCache,
    pub topics: Topics,
    /// Records per batch.
    pub batch_size: usize,
    /// On the embedded log, run validate→decide as one chain when all four run here
    /// (see [`chain`]).
    pub fuse: bool,
    pub webhooks: crate::webhooks::SenderSettings,
    pub uploads: crate::uploads::UploadSettings,
    /// The wall clock, which tests move forward (a day of webhook failures).
    pub clock: crate::clock::Clock,
}

/// Starts the named stages on `tasks`; they stop when `shutdown` turns true.
pub async fn spawn(
    names: &[String],
    deps: &Deps,
    shutdown: &watch::Receiver<bool>,
    tasks: &mut JoinSet<()>,
) -> Result<(), StageError> {
    let all_four = deps.fuse
        && matches!(deps.bus, Bus::Embedded(_))
        && chain::FUSED.iter().all(|s| names.iter().any(|n| n == s));
    let fused = all_four && chain::fusable(&deps.bus, &deps.topics).await?;
    if all_four && !fused {
        tracing::info!("Claims wait on the topics between the stages: the stages run apart until a restart finds those topics drained.");
    }
    // The members' accumulators: one state for the snapshot stage and the chain that
    // writes its decisions in this process.
    let accumulators = if names.iter().any(|n| n == "snapshot") {
        Some(snapshot::accumulators::Accumulators::shared(&deps.store).await?)
    } else {
        None
    };
    // The webhook sender, with the stage that queues its deliveries and, beside it, the
    // chain that queues those of the events it publishes.
    let deliveries = if names.iter().any(|n| n == "webhooks") {
        Some(webhook_sender(deps, shutdown, tasks)?)
    } else {
        None
    };
    for name in names {
        let (bus, rx, batch) = (deps.bus.clone(), shutdown.clone(), deps.batch_size);
        let t = deps.topics.clone();
        let dead = deps.topics.dead_letter.clone();
        macro_rules! go {
            ($stage:expr) => {{
                let stage = $stage;
                tasks.spawn(async move {
                    match run(stage, bus, batch, dead, rx).await {
                        Ok(()) => {}
                        // The process cannot work; better stopped, and restarted by its
                        // supervisor once fixed, than running without a stage.
                        Err(e @ StageError::Fatal(_)) => {
                            tracing::error!(error = %e, "A stage cannot go on; stopping the process.");
                            std::process::exit(70);
                        }
                        // Joining its group failed (the process is stopping, or the bus
                        // is gone): the stage ends, as the process's other work does.
                        Err(e) => tracing::error!(error = %e, "A stage stopped."),
                    }
                });
            }};
        }
        match name.as_str() {
            "submissions" => go!(submissions::Submissions {
                topics: t,
                config: deps.config.clone(),
                store: deps.store.clone(),
                bus: deps.bus.clone()
            }),
            // The chain takes the validate group's place and the other three's work.
            "validate" if fused => go!(chain::Chain {
                validate: validate(deps),
                rules: rules(deps),
                fraud: fraud::Fraud::restore(t.clone(), &deps.bus).await?,
                decide: decide(deps),
                snapshot: accumulators.is_some().then(|| deps.store.clone()),
                accumulators: accumulators.clone(),
                committing: None,
                webhooks: accumulators.as_ref().and(deliveries.clone()),
                topics: t,
            }),
            "rules" | "fraud" | "decide" if fused => continue,
            "validate" => go!(validate(deps)),
            "rules" => go!(rules(deps)),
            "fraud" => go!(fraud::Fraud::restore(t, &deps.bus).await?),
            "decide" => go!(decide(deps)),
            "snapshot" => go!(snapshot::Snapshot {
                topics: t,
                store: deps.store.clone(),
                accumulators: accumulators.clone().unwrap_or_default(),
                // The chain shares the accumulators only with a snapshot stage here.
                twins: fused,
                passed: Default::default()
            }),
            "workflow" => go!(workflow::Workflow {
                topics: t,
                store: deps.store.clone()
            }),
            "webhooks" => {
                let Some(deliveries) = deliveries.clone() else {
                    continue;
                };
                go!(webhooks::Dispatch {
                    topics: t,
                    deliveries,
                    passed: Default::default()
                })
            }
            "scan" => go!(scan::Scan {
                topics: t,
                store: deps.store.clone(),
                settings: deps.uploads.clone()
            }),
            "ocr" => go!(ocr::Ocr {
                topics: t,
                store: deps.store.clone(),
                settings: deps.uploads.clone()
            }),
            _ => continue,
        }
        if fused && name == "validate" {
            tracing::info!(stages = ?chain::FUSED, "Stages started as one chain.");
        } else {
            tracing::info!(stage = %name, "Stage started.");
        }
    }
    Ok(())
}

fn validate(deps: &Deps) -> validate::Validate {
    validate::Validate {
        topics: deps.topics.clone(),
        config: deps.config.clone(),
    }
}

fn rules(deps: &Deps) -> rules::Rules {
    rules::Rules {
        topics: deps.topics.clone(),
        store: deps.store.clone(),
        config: deps.config.clone(),
        compiled: RulebookCache::default(),
    }
}

fn decide(deps: &Deps) -> decide::Decide {
    decide::Decide {
        topics: deps.topics.clone(),
        config: deps.config.clone(),
        clock: deps.clock.clone(),
    }
}

/// Starts the webhook sender and its retention sweep; answers how the stages of this
/// process queue deliveries for it.
fn webhook_sender(
    deps: &Deps,
    shutdown: &watch::Receiver<bool>,
    tasks: &mut JoinSet<()>,
) -> Result<webhooks::Deliveries, StageError> {
    let queued = std::sync::Arc::new(tokio::sync::Notify::new());
    let health = crate::webhooks::health::Health::new(
        deps.store.clone(),
        deps.bus.clone(),
        deps.topics.events.clone(),
        deps.clock.clone(),
    );
    let sender =
        crate::webhooks::Sender::new(deps.store.clone(), deps.webhooks, queued.clone(), health)
            .map_err(StageError::Transient)?;
    let handoff = sender.handoff();
    tasks.spawn(sender.run(shutdown.clone()));
    tasks.spawn(crate::webhooks::retention::run(
        deps.store.clone(),
        shutdown.clone(),
    ));
    Ok(webhooks::Deliveries {
        store: deps.store.clone(),
        handoff,
        queued,
    })
}
