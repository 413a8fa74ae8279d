//! `claims topics`: what is on the bus, for operators and analysts. Reads only; works
//! while `serve` runs.

use pipeline::bus::{Bus, RecordView, TopicSpec};
use pipeline::store::Store;
use pipeline::topics::Topics;

use crate::cli::TailArgs;
use crate::config::Config;
use crate::open::open_store;
use crate::output::{print_json, print_json_line, CliError};

/// Prints `{"topics": [...]}`: each topic's partitions, records written and held, and
/// every consumer group's lag.
pub async fn list(config: &Config) -> anyhow::Result<()> {
    let (store, bus) = open_bus(config).await?;
    let topics = Topics::new(&config.topic_prefix, config.partitions).all();
    let result = bus.describe(&topics).await;
    store.close().await;
    let kind = match bus {
        Bus::Embedded(_) => "embedded",
        Bus::Kafka(_) => "kafka",
    };
    print_json(&serde_json::json!({ "bus": kind, "topics": result? }));
    Ok(())
}

/// Prints the topic's latest records, oldest first, one JSON document per line.
pub async fn tail(config: &Config, args: TailArgs) -> anyhow::Result<()> {
    let topics = Topics::new(&config.topic_prefix, config.partitions).all();
    let topic: TopicSpec = topics
        .iter()
        // With or without the deployment's prefix.
        .find(|t| {
            t.name == args.topic || t.name == format!("{}{}", config.topic_prefix, args.topic)
        })
        .cloned()
        .ok_or_else(|| {
            let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
            CliError::new(
                "TOPIC_NOT_FOUND",
                format!(
                    "no topic {:?}; the topics are {}",
                    args.topic,
                    names.join(", ")
                ),
            )
        })?;
    let (store, bus) = open_bus(config).await?;
    let result = bus.latest(&topic, usize::from(args.limit)).await;
    store.close().await;
    for r in result? {
        print_json_line(&RecordView::from(r));
    }
    Ok(())
}

/// The store and the bus on it; the store is closed by the caller when done.
async fn open_bus(config: &Config) -> anyhow::Result<(Store, Bus)> {
    let store = open_store(config).await?;
    let bus = crate::open::open_bus(config, &store)?;
    Ok((store, bus))
}
