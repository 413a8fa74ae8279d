//! Checkpoints of SQLite's write-ahead log, off the writer.
//!
//! Left to itself, SQLite checkpoints inside the commit that crosses 1,000 log pages:
//! the one writer then copies pages into the database file while every stage and
//! intake request queues behind it. `serve` and `claims replay` (whose writer is what a
//! rebuild waits for) instead run [`checkpoints`], which copies them on a connection
//! (and so a thread) of its own, without waiting for the writer or the readers (a
//! passive checkpoint). The writer keeps a backstop at a much larger log for processes
//! that do not run it (the other admin commands).
//!
//! A passive checkpoint never starts the log over: SQLite does that only when a writer
//! begins while every frame of the log has been copied and no reader still reads one,
//! and with commits and reads overlapping without pause that moment never came. At a
//! million claims the log grew by gigabytes a minute, past the writer's backstop, after
//! which every commit checkpointed too, and every page lookup consulted a larger log
//! index. So once a passive checkpoint reports a log past [`RESTART_PAST_BYTES`] with
//! little left to copy, the next one runs on the writer's own connection, in its turn,
//! and waits for the readers (`RESTART`): the writer waits only for the little left,
//! and its next commit starts the log over. Should the checkpoints fall behind the
//! writes for good, the same happens past [`RESTART_ANYWAY_BYTES`] with whatever is
//! left, and the writer is held to the pace of the checkpoints.

use std::time::Duration;

use sqlx::Row;
use tokio::sync::watch;

use super::{Store, StoreError, BUSY_TIMEOUT, PAGE_SIZE};

/// How often [`checkpoints`] copies the log into the database file: often enough that
/// the log stays far below the writer's backstop under a steady load of writes.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// Size of the write-ahead log past which it is started over, once the passive
/// checkpoints have copied all of it but [`RESTART_LEFT_BYTES`], so that the writer
/// waits only for that little.
const RESTART_PAST_BYTES: u32 = 64 * 1024 * 1024;

/// What a passive checkpoint may have left uncopied for the restart to follow it.
const RESTART_LEFT_BYTES: u32 = 4 * 1024 * 1024;

/// Size past which the log is started over however much of it is left to copy: the
/// checkpoints have fallen behind the writes, and the writer waits while the rest is
/// copied, which paces it to what the disk can take instead of letting the log grow
/// without end. Below the writer's own backstop, so that while [`checkpoints`] runs
/// the writer never checkpoints inside a commit.
const RESTART_ANYWAY_BYTES: u32 = 512 * 1024 * 1024;

/// How long a restarting checkpoint waits for the readers still reading the log before
/// it gives up until the next round. It holds the writer meanwhile, and a stage's read
/// may hold its place in the log for longer than that; a restart that can wait
/// ([`RESTART_PAST_BYTES`]) tries again soon rather than hold the writer.
const RESTART_WAIT: Duration = Duration::from_millis(50);
/// As [`RESTART_WAIT`], past [`RESTART_ANYWAY_BYTES`].
const RESTART_ANYWAY_WAIT: Duration = Duration::from_millis(500);

impl Store {
    /// SQLite: one passive checkpoint on the checkpointing connection, followed by one
    /// that starts the log over when it has grown past [`RESTART_PAST_BYTES`] and little
    /// is left to copy, or past [`RESTART_ANYWAY_BYTES`]. A no-op on PostgreSQL, which
    /// has nothing of the kind to do.
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        let Some(c) = &self.checkpointer else {
            return Ok(());
        };
        // The row is (busy, frames in the log, frames copied); -1 when not in WAL mode.
        let row = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(c)
            .await?;
        let (log_frames, copied_frames): (i64, i64) = (row.try_get(1)?, row.try_get(2)?);
        let frames = |bytes: u32| i64::from(bytes / PAGE_SIZE);
        let anyway = log_frames > frames(RESTART_ANYWAY_BYTES);
        let restart = anyway
            || (log_frames > frames(RESTART_PAST_BYTES)
                && log_frames - copied_frames <= frames(RESTART_LEFT_BYTES));
        if !restart {
            return Ok(());
        }
        // On the writer's connection, taken in its turn from the pool: from another
        // connection, the checkpoint's wait for the write lock lost every race to the
        // writer, which takes it again the moment a commit ends.
        let asked = std::time::Instant::now();
        let mut writer = self.write.acquire().await?;
        let taken = std::time::Instant::now();
        let set_wait = |wait: Duration| format!("PRAGMA busy_timeout = {}", wait.as_millis());
        let wait = if anyway {
            RESTART_ANYWAY_WAIT
        } else {
            RESTART_WAIT
        };
        sqlx::query(&set_wait(wait)).execute(&mut *writer).await?;
        let restarted = sqlx::query("PRAGMA wal_checkpoint(RESTART)")
            .fetch_one(&mut *writer)
            .await;
        if let Err(e) = sqlx::query(&set_wait(BUSY_TIMEOUT))
            .execute(&mut *writer)
            .await
        {
            // A writer that would give up on the admin CLI's lock within a second
            // is not handed back: the pool opens a fresh one.
            writer.close_on_drop();
            return Err(e.into());
        }
        let busy: i64 = restarted?.try_get(0)?;
        drop(writer);
        // `done` is false when it gave up on a reader; `queued` is the wait for the
        // writer's turn, `held` how long it kept the writer.
        tracing::debug!(log_frames, copied_frames, done = busy == 0, queued = ?(taken - asked), held = ?taken.elapsed(), "Restarting checkpoint.");
        Ok(())
    }
}

/// Checkpoints every `every` until `shutdown` turns true. Returns at once on
/// PostgreSQL, which has nothing of the kind to do.
pub async fn checkpoints(store: Store, every: Duration, mut shutdown: watch::Receiver<bool>) {
    if store.checkpointer.is_none() {
        return;
    }
    while crate::clock::sleep_unless_stopped(every, &mut shutdown).await {
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::*;

    /// With reads and commits overlapping without pause, the log is started over
    /// instead of growing with everything written: six times the bound goes through
    /// it, and it never holds three times the bound.
    ///
    /// Two readers each hold a snapshot for [`READ_HELD`], half of it apart, so that
    /// whenever a write begins one of them began before the last checkpoint and still
    /// reads the log: SQLite never starts it over on its own. The writes come at a
    /// steady pace (a write at most every [`WRITE_EVERY`], shorter than a read), which
    /// the checkpoints every 100 ms keep up with; written as fast as the disk takes
    /// them while other tests took the cores, the checkpoints fell behind and the log
    /// passed the bound by what the writer outran them by (222 MiB once), which is
    /// the backstop's case, not this one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_log_starts_over_while_reads_and_commits_overlap() {
        let (store, path) = crate::store::temp("restart").await;
        let writer = store.writer().clone();
        sqlx::query("CREATE TABLE scratch (id INTEGER PRIMARY KEY, b BLOB NOT NULL)")
            .execute(&writer)
            .await
            .unwrap();
        const READ_HELD: Duration = Duration::from_millis(30);
        const WRITE_EVERY: Duration = Duration::from_millis(10);
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2u32)
            .map(|i| {
                let (store, stop) = (store.clone(), stop.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(READ_HELD / 2 * i).await;
                    while !stop.load(Ordering::Relaxed) {
                        let mut tx = store.reader().begin().await.unwrap();
                        sqlx::query("SELECT count(*) FROM scratch")
                            .fetch_one(&mut *tx)
                            .await
                            .unwrap();
                        tokio::time::sleep(READ_HELD).await;
                        tx.commit().await.unwrap();
                    }
                })
            })
            .collect();
        let checkpointing = Checkpointing::start(&store);
        let wal = std::path::PathBuf::from(format!("{}-wal", path.display()));
        let mut largest = 0;
        const MIB: u32 = 1024 * 1024;
        let mut pace = tokio::time::interval(WRITE_EVERY);
        // A write that came late does not bring the next ones closer together.
        pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        for id in 0..6 * RESTART_PAST_BYTES / MIB {
            pace.tick().await;
            sqlx::query("INSERT INTO scratch (id, b) VALUES (?, zeroblob(?))")
                .bind(i64::from(id))
                .bind(i64::from(MIB))
                .execute(&writer)
                .await
                .unwrap();
            // Kept small, so that what grows is the log, not the database.
            sqlx::query("DELETE FROM scratch WHERE id < ?")
                .bind(i64::from(id))
                .execute(&writer)
                .await
                .unwrap();
            largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.await.unwrap();
        }
        checkpointing.stop().await;
        crate::store::remove_temp(store, &path).await;
        assert!(
            largest < 3 * u64::from(RESTART_PAST_BYTES),
            "the write-ahead log reached {} MiB",
            largest / u64::from(MIB)
        );
    }
}
