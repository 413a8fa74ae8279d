//! `claims replay --into DATABASE_URL` and `claims snapshot checksum` (contract part 2:
//! Operations and analysts): rebuilding the queryable snapshots from the topics alone,
//! and showing that the rebuilt store and the live one agree (see `pipeline::rebuild`).
//! Progress goes to a terminal as a bar (`indicatif`), and otherwise as JSON lines on
//! stdout, at most one a second; the result is one JSON document.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use pipeline::rebuild::{rebuild, Progress};
use pipeline::store::{Store, StoreOptions};
use pipeline::topics::Topics;

use crate::cli::{ChecksumArgs, ReplayArgs};
use crate::config::Config;
use crate::open::{open_bus, open_store};
use crate::output::{print_json, print_json_line, CliError};

/// The rebuild's writer keeps at least this page cache, MiB: a rebuild is bound by its
/// one writer and runs apart from the service, whose memory the smaller default spares
/// (`pipeline::store::WRITER_CACHE_MIB`).
const REBUILD_WRITER_CACHE_MIB: u32 = 32;

pub async fn replay(config: &Config, args: ReplayArgs) -> anyhow::Result<()> {
    // Before the first SQLite connection. A rebuild is SQLite's writer's work more
    // than anything: a tenth faster on mimalloc at a million claims. The service keeps
    // the C library's allocator under SQLite, which held 20 MiB less at its peak (see
    // docs/decisions.md, "Rebuilding from the topics").
    if let Err(e) = sqlite_mimalloc::install() {
        tracing::warn!("{e}");
    }
    let source = open_store(config).await?;
    let bus = open_bus(config, &source)?;
    let topics = Topics::new(&config.topic_prefix, config.partitions);
    // A rebuild that stops short leaves a database to throw away: it is not made
    // durable commit by commit, only once it is whole (see `StoreOptions::bulk_load`).
    let bulk = StoreOptions {
        bulk_load: true,
        writer_cache_mib: config.sqlite_writer_cache_mib.max(REBUILD_WRITER_CACHE_MIB),
        ..StoreOptions::default()
    };
    let into = Store::open(&args.into, &bulk).await.map_err(|e| {
        CliError::new(
            "STORE_UNAVAILABLE",
            format!("cannot open the database to rebuild into: {e}"),
        )
    })?;
    let started = Instant::now();
    let mut shown = Shown::new();
    let result = rebuild(&bus, &topics, &into, |p| shown.show(p)).await;
    shown.finish();
    into.close().await;
    source.close().await;
    let rebuilt = result.map_err(|e| match e {
        pipeline::rebuild::RebuildError::NotEmpty => {
            CliError::new("CONFLICT", e.to_string()).into()
        }
        e => anyhow::Error::from(e),
    })?;
    let seconds = started.elapsed().as_secs_f64();
    print_json(&serde_json::json!({
        "rebuilt": rebuilt,
        "seconds": (seconds * 1000.0).round() / 1000.0,
        "claims_per_second": (rebuilt.claims as f64 / seconds).round(),
    }));
    Ok(())
}

pub async fn checksum(config: &Config, args: ChecksumArgs) -> anyhow::Result<()> {
    let store = match &args.database {
        Some(url) => Store::connect(url, &StoreOptions::default())
            .await
            .map_err(|e| {
                CliError::new(
                    "STORE_UNAVAILABLE",
                    format!("cannot open the database: {e}"),
                )
            })?,
        None => open_store(config).await?,
    };
    let sums = store.snapshot_checksums().await;
    store.close().await;
    let tables: serde_json::Map<String, serde_json::Value> = sums?
        .into_iter()
        .map(|t| {
            (
                t.table.to_owned(),
                serde_json::json!({ "rows": t.rows, "digest": t.digest }),
            )
        })
        .collect();
    print_json(&serde_json::json!({ "tables": tables }));
    Ok(())
}

/// Where progress goes: a bar on a terminal, JSON lines otherwise.
enum Shown {
    Bar(ProgressBar),
    Lines { last: Option<Instant> },
}

impl Shown {
    fn new() -> Self {
        if !std::io::stdout().is_terminal() {
            return Shown::Lines { last: None };
        }
        let bar = ProgressBar::new(0);
        if let Ok(style) = ProgressStyle::with_template(
            "{msg:>16} [{bar:40}] {human_pos}/{human_len} records ({per_sec}, {eta} left)",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        Shown::Bar(bar)
    }

    fn show(&mut self, p: &Progress) {
        match self {
            Shown::Bar(bar) => {
                bar.set_length(p.total);
                bar.set_position(p.done);
                bar.set_message(p.topic.clone());
            }
            Shown::Lines { last } => {
                if last.is_none_or(|l| l.elapsed() >= Duration::from_secs(1)) || p.done == p.total {
                    print_json_line(&serde_json::json!({ "progress": p }));
                    *last = Some(Instant::now());
                }
            }
        }
    }

    fn finish(&self) {
        if let Shown::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}
