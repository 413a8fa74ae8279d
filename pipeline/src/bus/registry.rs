//! A Confluent-compatible schema registry (`CLAIMS_SCHEMA_REGISTRY_URL`). With one,
//! values on Kafka are in the Confluent wire format: a zero byte, the writer schema's
//! registry id as 4 big-endian bytes, then the binary datum. That is what Confluent's
//! serializers write and read, and what `kcat -s value=avro -r URL` reads.
//!
//! The service registers each topic's current schema under the subject `<topic>-value`
//! (Confluent's default subject naming, `TopicNameStrategy`) when it creates its topics;
//! the registry answers the same id for a schema it already holds, so every process of
//! a deployment writes the same id, and it refuses a schema that breaks the subject's
//! compatibility setting, which stops the service at start instead of writing values
//! old readers cannot read. A value another producer wrote (a payer's Avro serializer)
//! names its writer schema by id; the service fetches it once and reads the value into
//! its current schema by Avro's schema resolution.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use schemas::avro::{TopicSchema, WriterSchema};
use serde::Deserialize;
use serde_json::json;

use super::BusError;

/// The wire format's first byte.
pub const WIRE_MAGIC: u8 = 0;
/// How long one request to the registry may take.
const TIMEOUT: Duration = Duration::from_secs(10);
const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

pub struct SchemaRegistry {
    base: String,
    http: reqwest::Client,
    /// Topic → the registry id of its current value schema.
    ids: RwLock<HashMap<String, u32>>,
    /// Registry id → the schema values with that id were written with.
    writers: RwLock<HashMap<u32, Arc<WriterSchema>>>,
}

impl std::fmt::Debug for SchemaRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The address may carry credentials (`https://user:secret@host`): not shown.
        f.debug_struct("SchemaRegistry").finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Registered {
    id: u32,
}

#[derive(Deserialize)]
struct Fetched {
    schema: String,
    #[serde(rename = "schemaType")]
    schema_type: Option<String>,
}

#[derive(Deserialize)]
struct RegistryError {
    message: Option<String>,
}

fn failed(what: &str, e: impl std::fmt::Display) -> BusError {
    BusError::Registry(format!("{what}: {e}"))
}

impl SchemaRegistry {
    /// A client of the registry at `url` (`http(s)://host:port[/path]`); nothing is sent
    /// until the first request.
    pub fn new(url: &str) -> Result<Self, BusError> {
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .map_err(|e| failed("client", e))?;
        Ok(Self {
            base: url.trim_end_matches('/').to_owned(),
            http,
            ids: RwLock::default(),
            writers: RwLock::default(),
        })
    }

    /// The id `topic`'s values are written with, registering its schema under
    /// `<topic>-value` the first time.
    pub async fn id_for(&self, topic: &str, schema: &TopicSchema) -> Result<u32, BusError> {
        if let Some(id) = self.ids.read().expect("registry ids").get(topic) {
            return Ok(*id);
        }
        let subject = format!("{topic}-value");
        let res = self
            .http
            .post(format!("{}/subjects/{subject}/versions", self.base))
            .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
            .body(json!({ "schema": schema.avsc }).to_string())
            .send()
            .await
            .map_err(|e| failed(&format!("registering {subject}"), without_url(e)))?;
        let Registered { id } = answer(res, &format!("registering {subject}")).await?;
        let writer = WriterSchema::parse(schema.avsc).map_err(|e| failed(schema.name, e))?;
        self.writers
            .write()
            .expect("registry writers")
            .insert(id, Arc::new(writer));
        self.ids
            .write()
            .expect("registry ids")
            .insert(topic.to_owned(), id);
        tracing::info!(%subject, id, schema = schema.name, "Schema registered.");
        Ok(id)
    }

    /// The schema that registry id `id` names, fetched once. `BusError::Registry` is
    /// worth retrying (the registry did not answer); `BusError::Schema` is not.
    pub async fn writer(&self, id: u32) -> Result<Arc<WriterSchema>, BusError> {
        if let Some(w) = self.writers.read().expect("registry writers").get(&id) {
            return Ok(w.clone());
        }
        let what = format!("schema id {id}");
        let res = self
            .http
            .get(format!("{}/schemas/ids/{id}", self.base))
            .header(reqwest::header::ACCEPT, CONTENT_TYPE)
            .send()
            .await
            .map_err(|e| failed(&what, without_url(e)))?;
        let fetched: Fetched = answer(res, &what).await?;
        if let Some(t) = fetched.schema_type.filter(|t| t != "AVRO") {
            return Err(BusError::Schema(format!("{what}: a {t} schema, not Avro")));
        }
        let writer = WriterSchema::parse(&fetched.schema)
            .map_err(|e| BusError::Schema(format!("{what}: {e}")))?;
        let writer = Arc::new(writer);
        self.writers
            .write()
            .expect("registry writers")
            .insert(id, writer.clone());
        Ok(writer)
    }
}

/// A registry answer's body, or its error message.
async fn answer<T: serde::de::DeserializeOwned>(
    res: reqwest::Response,
    what: &str,
) -> Result<T, BusError> {
    let status = res.status();
    let body = res
        .bytes()
        .await
        .map_err(|e| failed(what, without_url(e)))?;
    if !status.is_success() {
        let message = serde_json::from_slice::<RegistryError>(&body)
            .ok()
            .and_then(|e| e.message)
            .unwrap_or_default();
        let e = format!("{what}: {status} {message}");
        // Not found, incompatible, invalid: asking again changes nothing.
        return Err(if status.is_client_error() {
            BusError::Schema(e)
        } else {
            BusError::Registry(e)
        });
    }
    serde_json::from_slice(&body).map_err(|e| failed(what, e))
}

/// reqwest's errors name the URL, which may hold credentials.
fn without_url(e: reqwest::Error) -> reqwest::Error {
    e.without_url()
}

/// A value in the wire format: the registry id and the datum.
pub fn framed(value: &[u8]) -> Option<(u32, &[u8])> {
    match value {
        [WIRE_MAGIC, a, b, c, d, datum @ ..] => Some((u32::from_be_bytes([*a, *b, *c, *d]), datum)),
        _ => None,
    }
}

/// Starts a value in the wire format with registry id `id`; the datum follows.
pub fn frame(id: u32, out: &mut Vec<u8>) {
    out.push(WIRE_MAGIC);
    out.extend_from_slice(&id.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_is_a_zero_byte_and_the_id_big_endian() {
        let mut v = Vec::new();
        frame(0x0102_0304, &mut v);
        v.extend_from_slice(b"datum");
        assert_eq!(&v[..5], &[0, 1, 2, 3, 4]);
        assert_eq!(framed(&v), Some((0x0102_0304, &b"datum"[..])));
        assert_eq!(framed(b"{\"json\": 1}"), None);
        assert_eq!(framed(&[0, 1, 2]), None, "too short for an id");
    }
}
