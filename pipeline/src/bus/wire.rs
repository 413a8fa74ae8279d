//! Values as Kafka carries them: Avro single-object encoded where the topic has a schema
//! (`schemas::avro`), JSON elsewhere. The stages see JSON either way; the embedded log,
//! which no outside client reads, keeps JSON.

use std::borrow::Cow;

use schemas::avro::{TopicSchema, MAGIC};

use super::record::{Message, Record};
use super::topic::TopicSpec;
use super::BusError;

/// `messages` as written to `topic`.
pub(super) fn encoded<'a>(
    topic: &TopicSpec,
    messages: &'a [Message],
) -> Result<Cow<'a, [Message]>, BusError> {
    let Some(schema) = topic.schema else {
        return Ok(Cow::Borrowed(messages));
    };
    let codec = schema.codec();
    messages
        .iter()
        .map(|m| {
            Ok(Message {
                key: m.key.clone(),
                value: codec.encode_text(&m.value).map_err(|e| {
                    BusError::Schema(format!("{} on {}: {e}", schema.name, topic.name))
                })?,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Cow::Owned)
}

/// Turns an Avro value read from a topic with `schema` back into JSON. A value that is
/// not Avro (JSON written before the topic had a schema) is left as it is; one that
/// fails to decode is left too, and the stage parks it on the dead-letter topic.
pub(super) fn decode(schema: Option<&TopicSchema>, r: &mut Record) {
    let Some(schema) = schema else { return };
    if !r.value.starts_with(&MAGIC) {
        return;
    }
    match schema.codec().decode(&r.value) {
        Ok(json) => r.value = serde_json::to_vec(&json).unwrap_or_default(),
        Err(e) => tracing::warn!(
            topic = %r.topic, partition = r.partition, offset = r.offset, error = %e,
            "An Avro value that does not decode."
        ),
    }
}
