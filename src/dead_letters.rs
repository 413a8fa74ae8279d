//! `claims dead-letters list|show|redrive`: the records the stages parked because they
//! can never be processed as they are (see `pipeline::dead_letters`). Prints JSON;
//! works while `serve` runs.

use pipeline::dead_letters::{self, Parked};
use pipeline::topics::Topics;

use crate::cli::{DeadLettersCommand, ShowDeadLetterArgs};
use crate::config::Config;
use crate::open::{open_bus, open_store};
use crate::output::{print_json, CliError};

pub async fn run(config: &Config, command: DeadLettersCommand) -> anyhow::Result<()> {
    let store = open_store(config).await?;
    let bus = open_bus(config, &store)?;
    let topics = Topics::new(&config.topic_prefix, config.partitions);
    let result = match command {
        DeadLettersCommand::List(args) => dead_letters::list(&bus, &topics).await.map(|all| {
            let shown: Vec<serde_json::Value> = all
                .iter()
                .filter(|p| args.all || !p.redriven)
                .map(summary)
                .collect();
            serde_json::json!({ "dead_letters": shown })
        }),
        DeadLettersCommand::Show(ShowDeadLetterArgs { id }) => dead_letters::list(&bus, &topics)
            .await
            .map(|all| match all.into_iter().find(|p| p.id == id) {
                Some(p) => detail(p),
                None => serde_json::Value::Null,
            }),
        DeadLettersCommand::Redrive => dead_letters::redrive(&bus, &topics).await.map(|done| {
            let shown: Vec<serde_json::Value> = done.iter().map(summary).collect();
            serde_json::json!({ "redriven": shown.len(), "dead_letters": shown })
        }),
    };
    store.close().await;
    let out = result?;
    if out.is_null() {
        return Err(CliError::new("NOT_FOUND", "no dead letter has that id").into());
    }
    print_json(&out);
    Ok(())
}

/// A parked record without its value.
fn summary(p: &Parked) -> serde_json::Value {
    serde_json::json!({
        "id": p.id, "redriven": p.redriven, "stage": p.letter.stage, "error": p.letter.error,
        "source": p.letter.source, "key": p.letter.key, "parked_at": p.letter.parked_at,
    })
}

/// A parked record with its value: as JSON when it is JSON, else as it is stored.
fn detail(p: Parked) -> serde_json::Value {
    let mut out = summary(&p);
    let value = p
        .letter
        .original_value()
        .ok()
        .and_then(|v| serde_json::from_slice::<serde_json::Value>(&v).ok());
    match value {
        Some(v) => out["value"] = v,
        None => out["value_base64"] = p.letter.value.into(),
    }
    out
}
