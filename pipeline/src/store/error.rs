//! The store's one error type, grouped by how a caller reacts: `Conflict` and `NotFound`
//! are answers about the data; `Unavailable` is worth a retry; the rest are bugs or
//! misconfiguration. Database constraint violations are mapped here and nowhere else.

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule would be broken; names the rule in domain words.
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("not found")]
    NotFound,
    /// The database could not be reached, timed out, is restarting or has no room
    /// left; retry later.
    #[error("store unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    #[error("migration failed: {0}")]
    Migration(String),
    #[error("store configuration: {0}")]
    Config(String),
    /// Stored data that does not parse: a bug or a hand edit, never read as a default.
    /// A stage parks the record that needed it (see `stages::runner`).
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    #[error("store error: {0}")]
    Other(#[source] sqlx::Error),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::RowNotFound => StoreError::NotFound,
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                StoreError::Conflict(db.constraint().unwrap_or("unique").to_owned())
            }
            // PostgreSQL's serialization failure and deadlock: the transaction lost a
            // race and may simply be run again.
            sqlx::Error::Database(db)
                if matches!(db.code().as_deref(), Some("40001" | "40P01")) =>
            {
                StoreError::Conflict("concurrent update; retry".to_owned())
            }
            // The server is shutting down, crashed or starting (57P01-57P03), the
            // connection broke (class 08, connection exception), or it is out of disk
            // (PostgreSQL 53100, SQLite's SQLITE_FULL 13): the store is away for a while,
            // and the same write succeeds once it is back or has room.
            sqlx::Error::Database(db)
                if db.code().as_deref().is_some_and(|c| {
                    matches!(c, "57P01" | "57P02" | "57P03" | "53100" | "13") || c.starts_with("08")
                }) =>
            {
                StoreError::Unavailable(e)
            }
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::WorkerCrashed => StoreError::Unavailable(e),
            _ => StoreError::Other(e),
        }
    }
}

/// A stored column parsed: `what` names it for the error (`rulebook rb_1: rules`), and a
/// value that does not parse is [`StoreError::Corrupt`].
pub(crate) fn parsed<T, E: std::fmt::Display>(
    value: Result<T, E>,
    what: impl FnOnce() -> String,
) -> Result<T, StoreError> {
    value.map_err(|e| StoreError::Corrupt(format!("{}: {e}", what())))
}

impl StoreError {
    /// The same error for another caller, of the same kind (the driver's own error
    /// kept as text): one failed transaction of several callers answers each of them.
    pub(crate) fn for_another(&self) -> Self {
        let text = |e: &sqlx::Error| sqlx::Error::Protocol(e.to_string());
        match self {
            StoreError::Conflict(s) => StoreError::Conflict(s.clone()),
            StoreError::NotFound => StoreError::NotFound,
            StoreError::Unavailable(e) => StoreError::Unavailable(text(e)),
            StoreError::Migration(s) => StoreError::Migration(s.clone()),
            StoreError::Config(s) => StoreError::Config(s.clone()),
            StoreError::Corrupt(s) => StoreError::Corrupt(s.clone()),
            StoreError::Other(e) => StoreError::Other(text(e)),
        }
    }
}
