//! Group commit for idempotency keys: on SQLite, the keys that concurrent requests take
//! and the responses they store are written in one transaction per group
//! ([`crate::group_commit`]), as intake groups its claims.
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

use crate::group_commit::{Commit, GroupCommit};
use crate::store::{
    begin_idempotent_in, finish_idempotent_in, Backend, Begin, IdempotencyScope, KeyTimes, Store,
    StoreError, StoredResponse,
};

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
enum KeyWrite {
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

/// What a key write found.
#[derive(Debug)]
enum KeyWritten {
    /// [`Begin`]'s answer, for a [`KeyWrite::Begin`].
    Began(Begin),
    Finished,
}

/// The key writes of a group, in one transaction on the store.
#[derive(Debug, Clone)]
struct KeyWrites {
    store: Store,
}

impl Commit for KeyWrites {
    type Item = KeyWrite;
    type Answer = KeyWritten;
    type Turn = sqlx::Transaction<'static, sqlx::Any>;
    const NAME: &'static str = "idempotency key committer";
    const MOST_PER_GROUP: usize = 512;

    async fn begin(&self) -> Result<Self::Turn, StoreError> {
        self.store.begin_write().await
    }

    /// Applies the writes in order in one transaction; all or none of them stand.
    async fn commit(
        &self,
        mut tx: Self::Turn,
        writes: Vec<KeyWrite>,
    ) -> Result<Vec<KeyWritten>, StoreError> {
        let mut done = Vec::with_capacity(writes.len());
        for w in &writes {
            done.push(match w {
                KeyWrite::Begin {
                    scope,
                    fingerprint,
                    times,
                } => KeyWritten::Began(
                    begin_idempotent_in(&mut tx, scope.scope(), fingerprint, *times).await?,
                ),
                KeyWrite::Finish { scope, response } => {
                    finish_idempotent_in(&mut tx, scope.scope(), response).await?;
                    KeyWritten::Finished
                }
            });
        }
        tx.commit().await?;
        Ok(done)
    }
}

/// Takes keys and stores responses, grouped on SQLite (see the module's notes).
#[derive(Debug)]
pub struct KeyCommitter {
    groups: GroupCommit<KeyWrites>,
}

impl KeyCommitter {
    pub fn new(store: Store) -> Self {
        Self {
            groups: GroupCommit::new(KeyWrites { store }),
        }
    }

    fn store(&self) -> &Store {
        &self.groups.committer().store
    }

    /// [`Store::begin_idempotent`], in the next group on SQLite.
    pub async fn begin(
        &self,
        scope: &KeyScope,
        fingerprint: &str,
        times: KeyTimes,
    ) -> Result<Begin, StoreError> {
        if self.store().backend() == Backend::Postgres {
            return self
                .store()
                .begin_idempotent(scope.scope(), fingerprint, times)
                .await;
        }
        let write = KeyWrite::Begin {
            scope: scope.clone(),
            fingerprint: fingerprint.to_owned(),
            times,
        };
        match self.groups.submit(write).await? {
            KeyWritten::Began(begin) => Ok(begin),
            KeyWritten::Finished => Err(StoreError::Config(
                "a key's begin was answered as a finish".into(),
            )),
        }
    }

    /// [`Store::finish_idempotent`], in the next group on SQLite.
    pub async fn finish(
        &self,
        scope: &KeyScope,
        response: StoredResponse,
    ) -> Result<(), StoreError> {
        if self.store().backend() == Backend::Postgres {
            return self
                .store()
                .finish_idempotent(scope.scope(), &response)
                .await;
        }
        let write = KeyWrite::Finish {
            scope: scope.clone(),
            response,
        };
        self.groups.submit(write).await.map(|_| ())
    }
}
