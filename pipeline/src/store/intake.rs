//! The claim rows intake writes (`received`), inside the transaction that also puts the
//! claims' commands on the intake topic (`crate::intake`). The `(tenant_id, claim_id)`
//! key decides duplicates, also between simultaneous submissions: exactly one insert
//! wins.

use std::collections::HashSet;

use super::{values_list, AnyQuery, Backend, Store, StoreError};
use crate::model::ClaimSubmitted;

/// Rows per INSERT: 14 values each, within SQLite's limit on bound values.
const ROWS_PER_INSERT: usize = 2000;

/// A claim's row as intake writes it.
#[derive(Debug)]
pub struct NewClaim<'a> {
    pub command: &'a ClaimSubmitted,
    /// The submission as the row keeps it (JSON), serialised before the writer is taken.
    pub submission: &'a str,
}

impl<'a> NewClaim<'a> {
    /// Each command with its submission as the row keeps it, in order.
    pub fn all(commands: &'a [ClaimSubmitted], submissions: &'a [String]) -> Vec<Self> {
        commands
            .iter()
            .zip(submissions)
            .map(|(command, submission)| NewClaim {
                command,
                submission,
            })
            .collect()
    }

    fn key(&self) -> (&str, &str) {
        (
            self.command.tenant_id.as_str(),
            self.command.claim.claim_id.as_str(),
        )
    }
}

impl Store {
    /// Inserts the claims not stored yet (by tenant and id) inside `tx`, and answers,
    /// per claim, whether it was inserted. The claims' ids are distinct.
    pub async fn insert_claims_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        claims: &[NewClaim<'_>],
        now: i64,
    ) -> Result<Vec<bool>, StoreError> {
        let mut inserted = Vec::with_capacity(claims.len());
        for chunk in claims.chunks(ROWS_PER_INSERT) {
            inserted.extend(match self.backend() {
                Backend::Postgres => insert_returning(tx, chunk, now).await?,
                Backend::Sqlite => read_then_insert(tx, chunk, now).await?,
            });
        }
        Ok(inserted)
    }
}

/// PostgreSQL: concurrent transactions may insert the same claim; the insert itself
/// tells which rows were its own.
async fn insert_returning(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    chunk: &[NewClaim<'_>],
    now: i64,
) -> Result<Vec<bool>, StoreError> {
    let sql = format!(
        "{} RETURNING tenant_id, claim_id",
        insert_sql(Backend::Postgres, chunk.len())
    );
    let rows = chunk
        .iter()
        .fold(sqlx::query(&sql), |q, c| bind_claim(q, c, now))
        .fetch_all(&mut **tx)
        .await?;
    let returned = rows
        .iter()
        .map(|row| Ok((sqlx::Row::try_get(row, 0)?, sqlx::Row::try_get(row, 1)?)))
        .collect::<Result<HashSet<(String, String)>, sqlx::Error>>()?;
    Ok(chunk
        .iter()
        .map(|c| {
            let (t, id) = c.key();
            returned.contains(&(t.to_owned(), id.to_owned()))
        })
        .collect())
}

/// SQLite: its one writer runs this transaction alone (it began immediate), so the
/// claims stored already are those its own read finds, and the insert returns nothing:
/// returned rows crossed from the store's thread one by one while the writer waited.
async fn read_then_insert(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    chunk: &[NewClaim<'_>],
    now: i64,
) -> Result<Vec<bool>, StoreError> {
    let read = format!(
        "SELECT c.tenant_id, c.claim_id FROM (VALUES {}) AS v \
         JOIN claims AS c ON c.tenant_id = v.column1 AND c.claim_id = v.column2",
        values_list(Backend::Sqlite, chunk.len(), 2)
    );
    let stored: HashSet<(String, String)> = chunk
        .iter()
        .fold(sqlx::query_as(&read), |q, c| {
            let (t, id) = c.key();
            q.bind(t).bind(id)
        })
        .fetch_all(&mut **tx)
        .await?
        .into_iter()
        .collect();
    let new: Vec<bool> = chunk
        .iter()
        .map(|c| {
            let (t, id) = c.key();
            !stored.contains(&(t.to_owned(), id.to_owned()))
        })
        .collect();
    let count = new.iter().filter(|n| **n).count();
    if count == 0 {
        return Ok(new);
    }
    let sql = insert_sql(Backend::Sqlite, count);
    let added = chunk
        .iter()
        .zip(&new)
        .filter(|(_, new)| **new)
        .fold(sqlx::query(&sql), |q, (c, _)| bind_claim(q, c, now))
        .execute(&mut **tx)
        .await?
        .rows_affected();
    if added != count as u64 {
        // Another writer inserted some of them after the read: the transaction must
        // not go on as if they were new.
        return Err(StoreError::Conflict(
            "claims were stored by another writer during intake; retry".into(),
        ));
    }
    Ok(new)
}

fn insert_sql(backend: Backend, rows: usize) -> String {
    format!(
        "INSERT INTO claims (tenant_id, claim_id, member_id, provider_id, claim_amount, service_date, submission, \
         rulebook_id, rulebook_version, status, received_at, updated_at, frequency, replaces_claim_id) VALUES {} \
         ON CONFLICT (tenant_id, claim_id) DO NOTHING",
        values_list(backend, rows, 14)
    )
}

fn bind_claim<'q>(q: AnyQuery<'q>, c: &NewClaim<'q>, now: i64) -> AnyQuery<'q> {
    let cmd = c.command;
    q.bind(cmd.tenant_id.as_str())
        .bind(cmd.claim.claim_id.as_str())
        .bind(cmd.claim.member_id.as_str())
        .bind(cmd.claim.provider_id.as_str())
        .bind(cmd.claim.claim_amount)
        .bind(cmd.claim.service_date.to_string())
        .bind(c.submission)
        .bind(cmd.rulebook_id.as_str())
        .bind(cmd.rulebook_version)
        .bind("received")
        .bind(cmd.received_at_ms)
        .bind(now)
        .bind(cmd.claim.frequency.as_str())
        .bind(cmd.claim.replaces_claim_id.as_ref().map(|c| c.as_str()))
}

/// What the claim a replacement or a void names is to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreplaceable {
    /// No such claim in the tenant.
    Missing,
    /// A claim of another member.
    OtherMember,
    /// Not `completed` yet.
    NotCompleted,
    /// Replaced or voided already.
    Superseded,
}

impl Unreplaceable {
    pub fn message(self) -> &'static str {
        match self {
            Unreplaceable::Missing => "no claim with this claim_id exists for the tenant",
            Unreplaceable::OtherMember => "the claim it replaces is of another member",
            Unreplaceable::NotCompleted => "the claim it replaces is not completed yet",
            Unreplaceable::Superseded => "the claim it replaces was replaced or voided already",
        }
    }
}

impl Store {
    /// Whether `replaced` may be replaced or voided by a claim of `member_id`: checked
    /// before intake for a clear answer; the intake transaction settles it for good
    /// ([`Self::supersede_in`]).
    pub async fn replaceable(
        &self,
        tenant_id: &str,
        replaced: &str,
        member_id: &str,
    ) -> Result<Result<(), Unreplaceable>, StoreError> {
        let row: Option<(String, String, Option<String>)> = sqlx::query_as(
            "SELECT member_id, status, superseded_by FROM claims WHERE tenant_id = $1 AND claim_id = $2",
        )
        .bind(tenant_id)
        .bind(replaced)
        .fetch_optional(self.reader())
        .await?;
        Ok(match row {
            None => Err(Unreplaceable::Missing),
            Some((m, ..)) if m != member_id => Err(Unreplaceable::OtherMember),
            Some((_, _, Some(_))) => Err(Unreplaceable::Superseded),
            Some((_, status, None)) if status != "completed" => Err(Unreplaceable::NotCompleted),
            Some(_) => Ok(()),
        })
    }

    /// Marks `replaced` as superseded by `by` inside the intake transaction, if it is
    /// still completed and not superseded: false when another replacement got there
    /// first (or it changed since [`Self::replaceable`]).
    pub async fn supersede_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        tenant_id: &str,
        replaced: &str,
        member_id: &str,
        by: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE claims SET superseded_by = $1 WHERE tenant_id = $2 AND claim_id = $3 \
             AND member_id = $4 AND status = 'completed' AND superseded_by IS NULL",
        )
        .bind(by)
        .bind(tenant_id)
        .bind(replaced)
        .bind(member_id)
        .execute(&mut **tx)
        .await?
        .rows_affected();
        Ok(done == 1)
    }

    /// Takes back a claim row inserted in `tx` that turned out not to be admissible.
    pub async fn uninsert_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        tenant_id: &str,
        claim_id: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM claims WHERE tenant_id = $1 AND claim_id = $2")
            .bind(tenant_id)
            .bind(claim_id)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }
}
