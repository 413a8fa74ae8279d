//! Idempotency keys (contract: Conventions): the first request with a key takes it,
//! runs, and stores its response; a repeat with the same body replays that response.
//!
//! A running request holds the key under a lease that it renews while it runs, so a
//! concurrent repeat is told to wait, and a first attempt that crashed (whose lease
//! lapses) does not hold the key forever: the next attempt takes it over. Times are
//! passed in, so that expiry is testable with a controllable clock.

use sqlx::AnyConnection;

use super::{Store, StoreError};

/// Which key: the contract scopes a key to the tenant, the user, the method and the path.
#[derive(Debug, Clone, Copy)]
pub struct IdempotencyScope<'a> {
    pub tenant_id: &'a str,
    pub user_id: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub key: &'a str,
}

/// The response of a request that finished, as stored for replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    /// The replayed headers, as a JSON array of `[name, value]` pairs.
    pub headers: String,
    pub body: String,
    /// An error response's code, message and field as JSON, rendered with the request id
    /// of each replay; `body` is empty then.
    pub error: Option<String>,
}

/// What taking a key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begin {
    /// The key is this request's now: run it, then `finish_idempotent` or
    /// `release_idempotent`.
    Started,
    /// The key's first request finished: replay its response.
    Replay(StoredResponse),
    /// The key was used with another body.
    Mismatch,
    /// The key's first request is still running; its lease lapses at `locked_until`.
    InProgress { locked_until: i64 },
}

/// How long a key is kept, and how long a request's hold on it lasts between renewals.
#[derive(Debug, Clone, Copy)]
pub struct KeyTimes {
    pub now: i64,
    pub lease_ms: i64,
    pub ttl_ms: i64,
}

#[derive(sqlx::FromRow)]
struct KeyRow {
    fingerprint: String,
    state: String,
    locked_until: i64,
    status: Option<i64>,
    headers: Option<String>,
    body: Option<String>,
    error: Option<String>,
    expires_at: i64,
}

const WHERE_KEY: &str =
    "tenant_id = $1 AND user_id = $2 AND method = $3 AND path = $4 AND idem_key = $5";

impl Store {
    /// Takes the key for a request whose body has this fingerprint, or says why not.
    pub async fn begin_idempotent(
        &self,
        scope: IdempotencyScope<'_>,
        fingerprint: &str,
        times: KeyTimes,
    ) -> Result<Begin, StoreError> {
        let mut conn = self.writer().acquire().await?;
        begin_in(&mut conn, scope, fingerprint, times).await
    }

    /// Extends a running request's hold on its key.
    pub async fn renew_idempotent(
        &self,
        scope: IdempotencyScope<'_>,
        locked_until: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(&format!(
            "UPDATE idempotency_keys SET locked_until = $6 WHERE {WHERE_KEY} AND state = 'running'"
        ))
        .bind(scope.tenant_id)
        .bind(scope.user_id)
        .bind(scope.method)
        .bind(scope.path)
        .bind(scope.key)
        .bind(locked_until)
        .execute(self.writer())
        .await?;
        Ok(())
    }

    /// Stores the response of the key's first request, for replay.
    pub async fn finish_idempotent(
        &self,
        scope: IdempotencyScope<'_>,
        response: &StoredResponse,
    ) -> Result<(), StoreError> {
        let mut conn = self.writer().acquire().await?;
        finish_in(&mut conn, scope, response).await
    }

    /// Lets the key go without a stored response (the request failed on our side), so
    /// that a retry runs afresh.
    pub async fn release_idempotent(&self, scope: IdempotencyScope<'_>) -> Result<(), StoreError> {
        let mut conn = self.writer().acquire().await?;
        delete_key(&mut conn, scope, None).await
    }

    /// Deletes the keys expired by `now`; answers how many.
    pub async fn purge_idempotency_keys(&self, now: i64) -> Result<u64, StoreError> {
        Ok(
            sqlx::query("DELETE FROM idempotency_keys WHERE expires_at <= $1")
                .bind(now)
                .execute(self.writer())
                .await?
                .rows_affected(),
        )
    }
}

/// [`Store::begin_idempotent`] on a connection of the writer's, or in a transaction of it
/// (see [`crate::idempotency`]).
pub(crate) async fn begin_in(
    conn: &mut AnyConnection,
    scope: IdempotencyScope<'_>,
    fingerprint: &str,
    times: KeyTimes,
) -> Result<Begin, StoreError> {
    let KeyTimes {
        now,
        lease_ms,
        ttl_ms,
    } = times;
    // A few rounds at most: each lost race means another request changed the row.
    for _ in 0..4 {
        let inserted = sqlx::query(
            "INSERT INTO idempotency_keys (tenant_id, user_id, method, path, idem_key, \
             fingerprint, state, locked_until, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $8, $9) ON CONFLICT DO NOTHING",
        )
        .bind(scope.tenant_id)
        .bind(scope.user_id)
        .bind(scope.method)
        .bind(scope.path)
        .bind(scope.key)
        .bind(fingerprint)
        .bind(now + lease_ms)
        .bind(now)
        .bind(now + ttl_ms)
        .execute(&mut *conn)
        .await?
        .rows_affected();
        if inserted == 1 {
            return Ok(Begin::Started);
        }
        let row: Option<KeyRow> = sqlx::query_as(&format!(
            "SELECT fingerprint, state, locked_until, status, headers, body, error, expires_at \
             FROM idempotency_keys WHERE {WHERE_KEY}"
        ))
        .bind(scope.tenant_id)
        .bind(scope.user_id)
        .bind(scope.method)
        .bind(scope.path)
        .bind(scope.key)
        .fetch_optional(&mut *conn)
        .await?;
        let Some(row) = row else { continue };
        if row.expires_at <= now {
            // Expired and not yet purged: as if it were not there.
            delete_key(&mut *conn, scope, Some(row.expires_at)).await?;
            continue;
        }
        if row.fingerprint != fingerprint {
            return Ok(Begin::Mismatch);
        }
        if row.state == "done" {
            return Ok(Begin::Replay(StoredResponse {
                status: row
                    .status
                    .and_then(|s| u16::try_from(s).ok())
                    .unwrap_or(500),
                headers: row.headers.unwrap_or_else(|| "[]".into()),
                body: row.body.unwrap_or_default(),
                error: row.error,
            }));
        }
        if row.locked_until > now {
            return Ok(Begin::InProgress {
                locked_until: row.locked_until,
            });
        }
        // The first attempt's lease lapsed (it crashed): take the key over, unless
        // another repeat just did.
        let taken = sqlx::query(&format!(
            "UPDATE idempotency_keys SET locked_until = $6 \
             WHERE {WHERE_KEY} AND state = 'running' AND locked_until = $7"
        ))
        .bind(scope.tenant_id)
        .bind(scope.user_id)
        .bind(scope.method)
        .bind(scope.path)
        .bind(scope.key)
        .bind(now + lease_ms)
        .bind(row.locked_until)
        .execute(&mut *conn)
        .await?
        .rows_affected();
        if taken == 1 {
            return Ok(Begin::Started);
        }
    }
    Err(StoreError::Conflict(
        "the idempotency key kept changing; retry".into(),
    ))
}

/// [`Store::finish_idempotent`] on a connection of the writer's, or in a transaction of it.
pub(crate) async fn finish_in(
    conn: &mut AnyConnection,
    scope: IdempotencyScope<'_>,
    response: &StoredResponse,
) -> Result<(), StoreError> {
    sqlx::query(&format!(
        "UPDATE idempotency_keys SET state = 'done', status = $6, headers = $7, body = $8, error = $9 \
         WHERE {WHERE_KEY}"
    ))
    .bind(scope.tenant_id)
    .bind(scope.user_id)
    .bind(scope.method)
    .bind(scope.path)
    .bind(scope.key)
    .bind(i64::from(response.status))
    .bind(&response.headers)
    .bind(&response.body)
    .bind(response.error.as_deref())
    .execute(conn)
    .await?;
    Ok(())
}

/// Deletes a key; with `expires_at`, only if it is still that (expired) row.
async fn delete_key(
    conn: &mut AnyConnection,
    scope: IdempotencyScope<'_>,
    expires_at: Option<i64>,
) -> Result<(), StoreError> {
    let q = match expires_at {
        Some(_) => {
            format!("DELETE FROM idempotency_keys WHERE {WHERE_KEY} AND expires_at = $6")
        }
        None => format!("DELETE FROM idempotency_keys WHERE {WHERE_KEY}"),
    };
    let mut q = sqlx::query(&q)
        .bind(scope.tenant_id)
        .bind(scope.user_id)
        .bind(scope.method)
        .bind(scope.path)
        .bind(scope.key);
    if let Some(at) = expires_at {
        q = q.bind(at);
    }
    q.execute(conn).await?;
    Ok(())
}
