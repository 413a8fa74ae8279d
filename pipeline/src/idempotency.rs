//! Group commit for idempotency keys: on SQLite, the keys that concurrent requests take
//! and the responses they store are written in one transaction per group, as intake
//! groups its claims ([`crate::intake::Committer`]).
//!
//! A keyed request writes twice besides its own effect: it takes its key before it runs
//! and stores its response after. Each was a transaction of its own, with a sync of its
//! own, one after another on SQLite's single writer, so a client sending one claim a
//! request with an `Idempotency-Key` each got about a seventh of the rate it got
//! without. Now every key write waiting when the writer is free shares one transaction.
//! Each request is still answered only once its write is durable, and the writes of a
//! group are applied in the order they arrived, so two requests with one key in one
//! group see each other as two separate transactions would have. On PostgreSQL, which
//! commits several transactions side by side, each write stays a transaction of its own.

use tokio::sync::{mpsc, oneshot};

use crate::store::{
    begin_idempotent_in, finish_idempotent_in, Backend, Begin, IdempotencyScope, KeyTimes, Store,
    StoreError, StoredResponse,
};

/// Key writes of one transaction, at most.
const MOST_PER_GROUP: usize = 512;

/// A key's scope, owned: what a request's key write carries to the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyScope {
    pub tenant_id: String,
    pub user_id: String,
    pub method: String,
    pub path: String,
    pub key: String,
}

impl KeyScope {
    pub fn scope(&self) -> IdempotencyScope<'_> {
        IdempotencyScope {
            tenant_id: &self.tenant_id,
            user_id: &self.user_id,
            method: &self.method,
            path: &self.path,
            key: &self.key,
        }
    }
}

/// One key write.
#[derive(Debug)]
enum Write {
    Begin {
        scope: KeyScope,
        fingerprint: String,
        times: KeyTimes,
    },
    Finish {
        scope: KeyScope,
        response: StoredResponse,
    },
}

/// What a key write found: [`Begin`]'s answer for a `Begin`, none for a `Finish`.
type Done = Option<Begin>;

#[derive(Debug)]
struct Waiting {
    write: Write,
    answer: oneshot::Sender<Result<Done, StoreError>>,
}

/// Takes keys and stores responses, grouped on SQLite (see the module's notes).
#[derive(Debug)]
pub struct KeyCommitter {
    store: Store,
    /// The groups' task, started by the first write (which runs on the runtime); it
    /// ends when the committer is dropped.
    queue: std::sync::OnceLock<mpsc::Sender<Waiting>>,
}

impl KeyCommitter {
    pub fn new(store: Store) -> Self {
        Self {
            store,
            queue: std::sync::OnceLock::new(),
        }
    }

    /// [`Store::begin_idempotent`], in the next group on SQLite.
    pub async fn begin(
        &self,
        scope: &KeyScope,
        fingerprint: &str,
        times: KeyTimes,
    ) -> Result<Begin, StoreError> {
        if self.store.backend() == Backend::Postgres {
            return self
                .store
                .begin_idempotent(scope.scope(), fingerprint, times)
                .await;
        }
        let write = Write::Begin {
            scope: scope.clone(),
            fingerprint: fingerprint.to_owned(),
            times,
        };
        let done = self.grouped(write).await?;
        done.ok_or_else(|| StoreError::Config("a key's begin was answered as a finish".into()))
    }

    /// [`Store::finish_idempotent`], in the next group on SQLite.
    pub async fn finish(
        &self,
        scope: &KeyScope,
        response: StoredResponse,
    ) -> Result<(), StoreError> {
        if self.store.backend() == Backend::Postgres {
            return self.store.finish_idempotent(scope.scope(), &response).await;
        }
        let write = Write::Finish {
            scope: scope.clone(),
            response,
        };
        self.grouped(write).await.map(|_| ())
    }

    async fn grouped(&self, write: Write) -> Result<Done, StoreError> {
        let (answer, answered) = oneshot::channel();
        let gone = || StoreError::Config("the idempotency key committer has stopped".into());
        self.queue()
            .send(Waiting { write, answer })
            .await
            .map_err(|_| gone())?;
        answered.await.map_err(|_| gone())?
    }

    fn queue(&self) -> &mpsc::Sender<Waiting> {
        self.queue.get_or_init(|| {
            let (queue, waiting) = mpsc::channel(MOST_PER_GROUP);
            tokio::spawn(commit_groups(self.store.clone(), waiting));
            queue
        })
    }
}

/// The committer's task: one transaction at a time, for every key write waiting.
async fn commit_groups(store: Store, mut waiting: mpsc::Receiver<Waiting>) {
    while let Some(first) = waiting.recv().await {
        let mut group = vec![first];
        while group.len() < MOST_PER_GROUP {
            match waiting.try_recv() {
                Ok(w) => group.push(w),
                Err(_) => break,
            }
        }
        let (writes, answers): (Vec<Write>, Vec<_>) =
            group.into_iter().map(|w| (w.write, w.answer)).unzip();
        match write_group(&store, &writes).await {
            Ok(done) => {
                for (answer, done) in answers.into_iter().zip(done) {
                    // A request that went away has nothing to be told.
                    let _ = answer.send(Ok(done));
                }
            }
            Err(e) => {
                for answer in answers {
                    let _ = answer.send(Err(e.for_another()));
                }
            }
        }
    }
}

/// Applies the writes in order in one transaction; all or none of them stand.
async fn write_group(store: &Store, writes: &[Write]) -> Result<Vec<Done>, StoreError> {
    let mut tx = store.begin_write().await?;
    let mut done = Vec::with_capacity(writes.len());
    for w in writes {
        done.push(match w {
            Write::Begin {
                scope,
                fingerprint,
                times,
            } => Some(begin_idempotent_in(&mut tx, scope.scope(), fingerprint, *times).await?),
            Write::Finish { scope, response } => {
                finish_idempotent_in(&mut tx, scope.scope(), response).await?;
                None
            }
        });
    }
    tx.commit().await?;
    Ok(done)
}
