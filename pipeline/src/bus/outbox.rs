//! The outbox: how work accepted together with rows of the store reaches Kafka without
//! being lost or waiting on the broker inside a store transaction.
//!
//! Intake writes a claim's row and its command in one store transaction, so a 202
//! means both are durable. On the embedded log the command goes straight into the log's
//! table; on Kafka it goes into `bus_outbox`, and [`relay`] produces the outbox's rows
//! in id order and deletes them once the broker acknowledged them. A crash between the
//! two produces a row again; the stages absorb a repeated command as they absorb any
//! redelivery. On PostgreSQL one relay at a time produces (a transaction-scoped
//! advisory lock; the others skip their round): two relays producing side by side
//! would put a member's later claims on the topic before earlier ones, and a member's
//! claims must be adjudicated in the order they were accepted.

use std::time::Duration;

use tokio::sync::watch;

use super::kafka::KafkaBus;
use super::record::{partition_for, Message};
use super::topic::TopicSpec;
use super::BusError;
use crate::clock::now_ms;
use crate::store::{placeholders, values_list, Backend, StoreError};

/// Rows per INSERT (6 bound values each) and per relay round.
const ROWS_PER_INSERT: usize = 2000;
const ROWS_PER_ROUND: i64 = 5000;
/// The advisory lock that lets one relay at a time produce (an arbitrary constant).
const RELAY_LOCK: i64 = 0x636c_6169_6d73;
/// How often a relay looks for rows written by another process.
const SWEEP_EVERY: Duration = Duration::from_millis(500);

/// Writes `messages` for `topic` to the outbox inside the caller's transaction.
pub async fn stage_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    bus: &KafkaBus,
    topic: &TopicSpec,
    messages: &[Message],
) -> Result<(), BusError> {
    let now = now_ms();
    let backend = bus.store().backend();
    // Written as Kafka will carry them, so the relay only copies bytes.
    let messages = bus.encoded(topic, messages).await?;
    for chunk in messages.chunks(ROWS_PER_INSERT) {
        let sql = format!(
            "INSERT INTO bus_outbox (topic, partition, record_key, value, timestamp_ms) VALUES {}",
            values_list(backend, chunk.len(), 5)
        );
        let mut q = sqlx::query(&sql);
        for m in chunk {
            q = q
                .bind(&topic.name)
                .bind(i64::from(partition_for(&m.key, topic.partitions)))
                .bind(&m.key)
                .bind(&m.value)
                .bind(now);
        }
        q.execute(&mut **tx).await.map_err(StoreError::from)?;
    }
    Ok(())
}

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    topic: String,
    partition: i64,
    record_key: String,
    value: Vec<u8>,
    timestamp_ms: i64,
}

/// Produces the outbox's rows to Kafka until `shutdown` turns true: at once when this
/// process wrote some, and every [`SWEEP_EVERY`] for rows of other processes or of
/// one that crashed.
pub async fn relay(bus: KafkaBus, mut shutdown: watch::Receiver<bool>) {
    let mut attempt = 0;
    loop {
        match relay_round(&bus).await {
            Ok(n) if n as i64 == ROWS_PER_ROUND => continue,
            Ok(_) => attempt = 0,
            Err(e) => {
                tracing::warn!(error = %e, "Relaying the outbox failed; retrying.");
                attempt += 1;
            }
        }
        let pause = if attempt == 0 {
            SWEEP_EVERY
        } else {
            crate::retry::backoff(attempt)
        };
        tokio::select! {
            _ = bus.outbox_notified(), if attempt == 0 => {}
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => {
                // Whatever was accepted before the stop goes out before the process ends.
                let _ = relay_round(&bus).await;
                return;
            }
        }
    }
}

/// Produces up to [`ROWS_PER_ROUND`] of the oldest rows and deletes them; answers how
/// many.
pub async fn relay_round(bus: &KafkaBus) -> Result<usize, BusError> {
    let store = bus.store();
    let mut tx = store.writer().begin().await.map_err(StoreError::from)?;
    if store.backend() == Backend::Postgres {
        let ours: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
            .bind(RELAY_LOCK)
            .fetch_one(&mut *tx)
            .await
            .map_err(StoreError::from)?;
        if !ours {
            // Another process's relay is producing; its rows come first. The sweep
            // tries again.
            return Ok(0);
        }
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, topic, partition, record_key, value, timestamp_ms FROM bus_outbox \
         ORDER BY id LIMIT $1",
    )
    .bind(ROWS_PER_ROUND)
    .fetch_all(&mut *tx)
    .await
    .map_err(StoreError::from)?;
    if rows.is_empty() {
        return Ok(0);
    }
    if store.backend() == Backend::Sqlite {
        // SQLite's one writer must not wait on the broker: produce outside the
        // transaction (a second process's relay may then produce a row twice).
        tx.commit().await.map_err(StoreError::from)?;
        bus.produce(rows_to_records(&rows)).await?;
        let mut tx = store.writer().begin().await.map_err(StoreError::from)?;
        delete(&mut tx, store.backend(), &rows).await?;
        tx.commit().await.map_err(StoreError::from)?;
    } else {
        bus.produce(rows_to_records(&rows)).await?;
        delete(&mut tx, store.backend(), &rows).await?;
        tx.commit().await.map_err(StoreError::from)?;
    }
    Ok(rows.len())
}

fn rows_to_records(rows: &[Row]) -> impl Iterator<Item = (&str, u32, &str, &[u8], Option<i64>)> {
    rows.iter().map(|r| {
        (
            r.topic.as_str(),
            r.partition as u32,
            r.record_key.as_str(),
            &r.value[..],
            Some(r.timestamp_ms),
        )
    })
}

/// Deletes exactly these rows: ids are not committed in order, so a range could take a
/// row not yet produced.
async fn delete(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    backend: Backend,
    rows: &[Row],
) -> Result<(), BusError> {
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let sql = format!(
            "DELETE FROM bus_outbox WHERE id IN ({})",
            placeholders(backend, 1, chunk.len())
        );
        let mut q = sqlx::query(&sql);
        for r in chunk {
            q = q.bind(r.id);
        }
        q.execute(&mut **tx).await.map_err(StoreError::from)?;
    }
    Ok(())
}
