//! Topics: a name, a partition count, whether the topic is compacted (only the latest
//! record of each key is kept, as state topics need), whether it is a topic of record
//! (kept whole, as the history the snapshots are rebuilt from), and the Avro schema of
//! its values on Kafka, if it has one.

use schemas::avro::TopicSchema;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: u32,
    pub compacted: bool,
    /// A topic of record: never trimmed on the embedded log, created with unlimited
    /// retention on Kafka, because `claims replay` rebuilds the store's snapshots from it.
    pub kept: bool,
    /// How long a record of a topic neither compacted nor kept stays once consumed,
    /// when not the deployment's default (an hour on the embedded log, the broker's
    /// on Kafka).
    pub retention: Option<std::time::Duration>,
    /// On Kafka, values are written in Avro with this schema (see `schemas::avro`);
    /// without one, and on the embedded log, they are JSON.
    pub schema: Option<&'static TopicSchema>,
}

impl TopicSpec {
    pub fn new(name: impl Into<String>, partitions: u32, compacted: bool) -> Self {
        Self {
            name: name.into(),
            partitions: partitions.max(1),
            compacted,
            kept: false,
            retention: None,
            schema: None,
        }
    }

    /// Marks the topic as one of record (see [`TopicSpec::kept`]).
    pub fn kept(mut self) -> Self {
        self.kept = true;
        self
    }

    /// Keeps the topic's records `for` long (see [`TopicSpec::retention`]).
    pub fn retained(mut self, r#for: std::time::Duration) -> Self {
        self.retention = Some(r#for);
        self
    }

    pub fn with_schema(mut self, schema: &'static TopicSchema) -> Self {
        self.schema = Some(schema);
        self
    }
}
