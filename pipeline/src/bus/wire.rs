//! Values as Kafka carries them where the topic has a schema (`schemas::avro`): Avro in
//! the Confluent wire format when a schema registry is configured
//! ([`super::registry`]), else in Avro's single-object encoding; JSON on the topics
//! without one. The stages see JSON either way; the embedded log, which no outside
//! client reads, keeps JSON.

use std::borrow::Cow;

use schemas::avro::{TopicSchema, MAGIC};

use super::record::{Message, Record};
use super::registry::{frame, framed, SchemaRegistry};
use super::topic::TopicSpec;
use super::BusError;

/// `messages` as written to `topic`.
pub(super) async fn encoded<'a>(
    topic: &TopicSpec,
    messages: &'a [Message],
    registry: Option<&SchemaRegistry>,
) -> Result<Cow<'a, [Message]>, BusError> {
    let Some(schema) = topic.schema else {
        return Ok(Cow::Borrowed(messages));
    };
    let id = match registry {
        Some(r) => Some(r.id_for(&topic.name, schema).await?),
        None => None,
    };
    let codec = schema.codec();
    let unfit = |e: &dyn std::fmt::Display| {
        BusError::Schema(format!("{} on {}: {e}", schema.name, topic.name))
    };
    messages
        .iter()
        .map(|m| {
            let value = match id {
                Some(id) => {
                    let json = serde_json::from_slice(&m.value).map_err(|e| unfit(&e))?;
                    let mut v = Vec::with_capacity(m.value.len());
                    frame(id, &mut v);
                    codec.write_datum(&json, &mut v).map_err(|e| unfit(&e))?;
                    v
                }
                None => codec.encode_text(&m.value).map_err(|e| unfit(&e))?,
            };
            Ok(Message {
                key: m.key.clone(),
                value,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Cow::Owned)
}

/// Turns an Avro value read from a topic with `schema` back into JSON: single-object
/// encoded, or in the registry's wire format when there is a registry. A value that is
/// neither (JSON written before the topic had a schema) is left as it is; one that fails
/// to decode is left too, and the stage parks it on the dead-letter topic.
pub(super) async fn decode(
    schema: Option<&TopicSchema>,
    registry: Option<&SchemaRegistry>,
    r: &mut Record,
) {
    let Some(schema) = schema else { return };
    let codec = schema.codec();
    let text = if r.value.starts_with(&MAGIC) {
        codec.decode_text(&r.value)
    } else if let (Some(registry), Some((id, datum))) = (registry, framed(&r.value)) {
        // A registry that does not answer holds the partition back (a record parked
        // for that would never be processed); an id it does not know parks the record.
        let mut attempt = 0;
        loop {
            match registry.writer(id).await {
                Ok(writer) => break codec.read_datum_text(&writer, datum),
                Err(BusError::Registry(e)) => {
                    tracing::warn!(topic = %r.topic, error = %e, attempt, "The schema registry did not answer; retrying.");
                    tokio::time::sleep(crate::retry::backoff(attempt)).await;
                    attempt += 1;
                }
                Err(e) => {
                    tracing::warn!(topic = %r.topic, partition = r.partition, offset = r.offset, error = %e,
                        "The writer schema of a value is not to be had.");
                    return;
                }
            }
        }
    } else {
        return;
    };
    match text {
        Ok(text) => r.value = text,
        Err(e) => tracing::warn!(
            topic = %r.topic, partition = r.partition, offset = r.offset, error = %e,
            "An Avro value that does not decode."
        ),
    }
}
