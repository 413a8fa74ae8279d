//! Bus failures, by how a caller reacts: `Unavailable` is retried with backoff; `Lease`
//! means another process consumes this group now and this one must stand by.

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum BusError {
    #[error("the bus is unavailable: {0}")]
    Unavailable(#[from] StoreError),
    #[error("unknown topic `{0}`")]
    UnknownTopic(String),
    #[error("the Kafka broker: {0}")]
    Broker(String),
    /// A record that does not fit its topic's Avro schema: a defect, not bad input.
    #[error("a record does not fit its topic's schema: {0}")]
    Schema(String),
    /// The schema registry did not answer: worth retrying.
    #[error("the schema registry: {0}")]
    Registry(String),
}
