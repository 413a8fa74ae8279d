//! Opening what a command works on: the store the configuration names (SQLite or
//! PostgreSQL) and the bus (the embedded log in that store, or Kafka).

use anyhow::Context;
use pipeline::bus::{Bus, EmbeddedLog, KafkaBus};
use pipeline::store::{Store, StoreOptions};

use crate::config::Config;

/// The bus the configuration selects: Kafka when brokers are set, else the embedded log
/// in `store`.
pub fn open_bus(config: &Config, store: &Store) -> anyhow::Result<Bus> {
    Ok(match &config.kafka {
        Some(kafka) => Bus::Kafka(
            KafkaBus::connect(kafka.clone(), store.clone())
                .map_err(|e| anyhow::anyhow!("cannot set up the Kafka clients: {e}"))?,
        ),
        None => Bus::Embedded(EmbeddedLog::with_instance(
            store.clone(),
            config.instance_id.as_deref(),
        )),
    })
}

pub async fn open_store(config: &Config) -> anyhow::Result<Store> {
    let opts = StoreOptions {
        max_connections: config.database_max_connections,
        writer_cache_mib: config.sqlite_writer_cache_mib,
        ..StoreOptions::default()
    };
    Store::open(config.store.url(), &opts)
        .await
        .context("cannot open the database")
}
