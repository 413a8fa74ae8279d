//! Checkpoints of SQLite's write-ahead log, off the writer.
//!
//! Left to itself, SQLite checkpoints inside the commit that crosses 1,000 log pages:
//! the one writer then copies pages into the database file while every stage and
//! intake request queues behind it. `serve` and `claims replay` (whose writer is what a
//! rebuild waits for) instead run [`checkpoints`], which copies them on a connection
//! (and so a thread) of its own, without waiting for the writer or the readers (a
//! passive checkpoint). The writer keeps a backstop at a much larger log for processes
//! that do not run it (the other admin commands).

use std::time::Duration;

use tokio::sync::watch;

use super::{Store, StoreError};

/// How often [`checkpoints`] copies the log into the database file: often enough that
/// the log stays far below the writer's backstop under a steady load of writes.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

impl Store {
    /// SQLite: one passive checkpoint on the checkpointing connection. A no-op on
    /// PostgreSQL.
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        if let Some(c) = &self.checkpointer {
            sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(c)
                .await?;
        }
        Ok(())
    }
}

/// Checkpoints every `every` until `shutdown` turns true. Returns at once on
/// PostgreSQL, which has nothing of the kind to do.
pub async fn checkpoints(store: Store, every: Duration, mut shutdown: watch::Receiver<bool>) {
    if store.checkpointer.is_none() {
        return;
    }
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => return,
        }
        if let Err(e) = store.checkpoint().await {
            tracing::warn!(error = %e, "Checkpointing the write-ahead log failed.");
        }
    }
}

/// [`checkpoints`] running beside a job of writes (a rebuild, a benchmark) until
/// [`Checkpointing::stop`].
#[derive(Debug)]
pub struct Checkpointing {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Checkpointing {
    /// Starts checkpointing `store` every [`CHECKPOINT_EVERY`].
    pub fn start(store: &Store) -> Self {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(checkpoints(store.clone(), CHECKPOINT_EVERY, stopped));
        Self { stop, task }
    }

    /// Stops after the checkpoint under way, if any. Checkpoints are the writer's help,
    /// not its duty: had they stopped early, the writer's backstop copied the log, and
    /// nothing written depends on them, so their end is not a failure of the job.
    pub async fn stop(self) {
        self.stop.send_replace(true);
        let _ = self.task.await;
    }
}
