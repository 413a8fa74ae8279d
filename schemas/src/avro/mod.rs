//! Avro on Kafka: the schemas of `schemas/avro/` and the codec between the service's
//! JSON records and Avro values.
//!
//! The stages work on JSON; the Kafka bus turns a record into Avro as it produces it to
//! a topic that has a schema, and back as it reads it. A value is written in Avro's
//! single-object encoding: the marker `C3 01`, the 8-byte little-endian CRC-64-AVRO
//! fingerprint of the writer's schema, then the binary datum. A reader with only the
//! `.avsc` files picks the schema by that fingerprint.
//!
//! The schemas use no `logicalType`: this crate's parsing canonical form keeps it where
//! the specification (and Java, fastavro) drop it, so the fingerprints would differ.
//!
//! A field that holds a free-form JSON document (an event's `data`, a claim's
//! `metadata`) is an Avro `string` of JSON text, marked `"json": true` in its schema.
//!
//! Evolution: every released version of a schema stays in `schemas/avro/history/`
//! (`<name>.<n>.avsc`). A record written with any of them is read into the current
//! schema by Avro's schema resolution, and a test checks that each current schema can
//! read every earlier version (backward compatibility).

use std::collections::HashMap;
use std::sync::OnceLock;

use apache_avro::headers::HeaderBuilder;
use apache_avro::rabin::Rabin;
use apache_avro::schema::{RecordField, Schema};
use apache_avro::types::Value as Avro;
use apache_avro::GenericSingleObjectReader;
use serde_json::Value as Json;

mod binary;

/// The single-object encoding's marker.
pub const MAGIC: [u8; 2] = [0xC3, 0x01];

/// A record that does not fit its schema, or bytes that are not one of its versions.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct AvroError(String);

fn err(m: impl Into<String>) -> AvroError {
    AvroError(m.into())
}

/// The schema of one value type: `schemas/avro/<name>.avsc`.
pub struct TopicSchema {
    pub name: &'static str,
    pub avsc: &'static str,
    /// Every released version, oldest first (the last is the current one).
    pub history: &'static [&'static str],
    codec: OnceLock<Codec>,
}

impl TopicSchema {
    const fn new(name: &'static str, avsc: &'static str, history: &'static [&'static str]) -> Self {
        Self {
            name,
            avsc,
            history,
            codec: OnceLock::new(),
        }
    }

    /// The codec, parsed on first use. The schemas are part of the build and checked by
    /// its tests, so one that does not parse is a defect of the build.
    pub fn codec(&self) -> &Codec {
        self.codec.get_or_init(|| {
            Codec::new(self.avsc, self.history)
                .unwrap_or_else(|e| panic!("schema {}: {e}", self.name))
        })
    }
}

impl std::fmt::Debug for TopicSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for TopicSchema {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for TopicSchema {}

impl std::hash::Hash for TopicSchema {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}

macro_rules! topic_schema {
    ($static:ident, $name:literal, [$($version:literal),*]) => {
        pub static $static: TopicSchema = TopicSchema::new(
            $name,
            include_str!(concat!("../../avro/", $name, ".avsc")),
            &[$(include_str!(concat!("../../avro/history/", $name, ".", $version, ".avsc"))),*],
        );
    };
}

topic_schema!(DOMAIN_EVENT, "domain-event", ["1"]);
topic_schema!(REJECTED, "rejected", ["1"]);
topic_schema!(CLAIM_SUBMITTED, "claim-submitted", ["1", "2", "3"]);
topic_schema!(CLAIM_IN_PROCESS, "claim-in-process", ["1", "2", "3", "4"]);
topic_schema!(DECISION, "decision", ["1", "2", "3", "4", "5"]);
topic_schema!(PROVIDER_STATS, "provider-stats", ["1"]);
topic_schema!(MEMBER_STATE, "member-state", ["1", "2"]);
topic_schema!(SUBMISSION, "submission", ["1", "2", "3"]);
topic_schema!(OFFICER_DECISION, "officer-decision", ["1"]);
topic_schema!(UPLOAD, "upload", ["1"]);
topic_schema!(ACCUMULATOR, "accumulator", ["1"]);
topic_schema!(PAYMENT, "payment", ["1"]);
topic_schema!(X12_ACK, "x12-ack", ["1"]);

/// Every value schema, for listings and tests.
pub static ALL: [&TopicSchema; 13] = [
    &DOMAIN_EVENT,
    &REJECTED,
    &SUBMISSION,
    &CLAIM_SUBMITTED,
    &CLAIM_IN_PROCESS,
    &DECISION,
    &OFFICER_DECISION,
    &PROVIDER_STATS,
    &MEMBER_STATE,
    &ACCUMULATOR,
    &UPLOAD,
    &PAYMENT,
    &X12_ACK,
];

/// The schema of every key: plain UTF-8 text.
pub const KEY_AVSC: &str = include_str!("../../avro/key.avsc");

/// The schema a value was written with, as a schema registry hands it out by id.
#[derive(Debug)]
pub struct WriterSchema(Version);

impl WriterSchema {
    pub fn parse(avsc: &str) -> Result<Self, AvroError> {
        let schema = Schema::parse_str(avsc).map_err(|e| err(e.to_string()))?;
        Version::new(schema).map(Self)
    }
}

/// Encodes and decodes one topic's values.
///
/// A value of the current schema is written from JSON and read into JSON text directly
/// ([`binary`]); a value of an earlier version is read by apache-avro's single-object
/// reader, which resolves a schema's named types once, and resolved into the current
/// schema. Each record crosses the codec once each way on every topic
/// (docs/decisions.md, "Avro on Kafka").
#[derive(Debug)]
pub struct Codec {
    schema: Schema,
    /// Named types of the current schema, for `Ref`s to them.
    names: HashMap<String, Schema>,
    header: [u8; 10],
    /// Every version this codec reads, by fingerprint.
    writers: HashMap<[u8; 8], Version>,
}

/// A schema values were written with, with its reader of bare datums.
struct Version {
    reader: GenericSingleObjectReader,
    fingerprint: [u8; 8],
}

impl Version {
    fn new(schema: Schema) -> Result<Self, AvroError> {
        let fingerprint = fingerprint(&schema);
        let reader = GenericSingleObjectReader::new_with_header_builder(schema, Header(Vec::new()))
            .map_err(|e| err(e.to_string()))?;
        Ok(Self {
            reader,
            fingerprint,
        })
    }
}

impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Version")
            .field("fingerprint", &hex(&self.fingerprint))
            .finish_non_exhaustive()
    }
}

/// No header, for a reader of bare datums: the single-object header is read before it,
/// by [`Codec::decode`].
struct Header(Vec<u8>);

impl HeaderBuilder for Header {
    fn build_header(&self) -> Vec<u8> {
        self.0.clone()
    }
}

/// Where in a value a part is, for errors: built on the stack as the value is walked,
/// and written out only when the part does not fit.
#[derive(Clone, Copy)]
enum At<'a> {
    Root,
    Field(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
    Key(&'a At<'a>, &'a str),
}

impl At<'_> {
    /// `error.message`, `lines[2].code`; "the value" for the whole.
    fn path(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        if out.is_empty() {
            "the value".into()
        } else {
            out
        }
    }

    fn write(&self, out: &mut String) {
        match self {
            At::Root => {}
            At::Field(at, name) => {
                at.write(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            At::Index(at, i) => {
                at.write(out);
                out.push_str(&format!("[{i}]"));
            }
            At::Key(at, key) => {
                at.write(out);
                out.push('.');
                out.push_str(key);
            }
        }
    }
}

/// JSON's null, for a field given no value and no default.
static NULL: Json = Json::Null;

impl Codec {
    pub fn new(avsc: &str, history: &[&str]) -> Result<Self, AvroError> {
        let schema = Schema::parse_str(avsc).map_err(|e| err(e.to_string()))?;
        let mut names = HashMap::new();
        collect_names(&schema, &mut names);
        let mut writers = HashMap::new();
        for old in history {
            let s = Schema::parse_str(old).map_err(|e| err(e.to_string()))?;
            let old = Version::new(s)?;
            writers.insert(old.fingerprint, old);
        }
        let current = Version::new(schema.clone())?;
        let fp = current.fingerprint;
        writers.insert(fp, current);
        let mut header = [0; 10];
        header[..2].copy_from_slice(&MAGIC);
        header[2..].copy_from_slice(&fp);
        Ok(Self {
            schema,
            names,
            header,
            writers,
        })
    }

    /// The current schema's fingerprint, as the single-object header carries it.
    pub fn fingerprint(&self) -> [u8; 8] {
        let mut fp = [0; 8];
        fp.copy_from_slice(&self.header[2..]);
        fp
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// A JSON document as a single-object encoded value of the current schema.
    pub fn encode(&self, json: &Json) -> Result<Vec<u8>, AvroError> {
        let mut out = Vec::new();
        self.write_single(json, &mut out)?;
        Ok(out)
    }

    /// Appends a JSON document as a binary datum of the current schema, with no header
    /// (the Confluent wire format puts its own before it). Nothing is appended when it
    /// does not fit.
    pub fn write_datum(&self, json: &Json, out: &mut Vec<u8>) -> Result<(), AvroError> {
        let start = out.len();
        self.write(json, &self.schema, &At::Root, out)
            .inspect_err(|_| out.truncate(start))
    }

    /// Appends a JSON document single-object encoded: header, then datum.
    fn write_single(&self, json: &Json, out: &mut Vec<u8>) -> Result<(), AvroError> {
        let start = out.len();
        out.extend_from_slice(&self.header);
        self.write(json, &self.schema, &At::Root, out)
            .inspect_err(|_| out.truncate(start))
    }

    /// [`Codec::encode`] from JSON text.
    pub fn encode_text(&self, text: &[u8]) -> Result<Vec<u8>, AvroError> {
        let json: Json = serde_json::from_slice(text).map_err(|e| err(e.to_string()))?;
        self.encode(&json)
    }

    /// A single-object encoded value, of the current schema or an earlier version, as
    /// a JSON document of the current schema.
    pub fn decode(&self, bytes: &[u8]) -> Result<Json, AvroError> {
        let text = self.decode_text(bytes)?;
        serde_json::from_slice(&text).map_err(|e| err(e.to_string()))
    }

    /// [`Codec::decode`] into JSON text, as the stages read records.
    pub fn decode_text(&self, bytes: &[u8]) -> Result<Vec<u8>, AvroError> {
        if bytes.len() < 10 || bytes[..2] != MAGIC {
            return Err(err("not an Avro single-object encoded value"));
        }
        let mut fp = [0; 8];
        fp.copy_from_slice(&bytes[2..10]);
        let version = self
            .writers
            .get(&fp)
            .ok_or_else(|| err(format!("unknown schema fingerprint {}", hex(&fp))))?;
        self.read(version, &bytes[10..])
    }

    /// A binary datum written with `writer` (this schema, an earlier version, or any
    /// schema Avro's resolution can read into this one) as a JSON document of the
    /// current schema.
    pub fn read_datum(&self, writer: &WriterSchema, datum: &[u8]) -> Result<Json, AvroError> {
        let text = self.read_datum_text(writer, datum)?;
        serde_json::from_slice(&text).map_err(|e| err(e.to_string()))
    }

    /// [`Codec::read_datum`] into JSON text, as the stages read records.
    pub fn read_datum_text(
        &self,
        writer: &WriterSchema,
        datum: &[u8],
    ) -> Result<Vec<u8>, AvroError> {
        self.read(&writer.0, datum)
    }

    /// A bare datum of `version` as JSON text: read directly when it is the current
    /// schema, else resolved into it by apache-avro.
    fn read(&self, version: &Version, datum: &[u8]) -> Result<Vec<u8>, AvroError> {
        let mut out = Vec::with_capacity(datum.len() * 2);
        if version.fingerprint == self.fingerprint() {
            self.read_text(&self.schema, &mut &datum[..], &mut out)?;
            return Ok(out);
        }
        let value = version
            .reader
            .read_value(&mut &datum[..])
            .map_err(|e| err(e.to_string()))?
            .resolve(&self.schema)
            .map_err(|e| err(e.to_string()))?;
        let json = self.to_json(value, &self.schema)?;
        serde_json::to_writer(&mut out, &json).map_err(|e| err(e.to_string()))?;
        Ok(out)
    }

    fn named<'a>(&'a self, name: &apache_avro::schema::Name) -> Result<&'a Schema, AvroError> {
        self.names
            .get(&name.fullname(None))
            .ok_or_else(|| err(format!("unknown type {}", name.fullname(None))))
    }

    /// An apache-avro value of an earlier version, resolved into the current schema.
    fn to_json(&self, v: Avro, s: &Schema) -> Result<Json, AvroError> {
        Ok(match (v, s) {
            (Avro::Null, _) => Json::Null,
            (Avro::Boolean(b), _) => Json::Bool(b),
            (Avro::Int(n), _) => Json::from(n),
            (Avro::Long(n) | Avro::TimestampMillis(n), _) => Json::from(n),
            (Avro::Float(x), _) => Json::from(f64::from(x)),
            (Avro::Double(x), _) => Json::from(x),
            (Avro::String(x) | Avro::Enum(_, x), _) => Json::String(x),
            (v, Schema::Ref { name }) => self.to_json(v, self.named(name)?)?,
            (Avro::Union(i, x), Schema::Union(u)) => {
                let branch = u
                    .variants()
                    .get(i as usize)
                    .ok_or_else(|| err("a union branch out of range"))?;
                self.to_json(*x, branch)?
            }
            (Avro::Array(xs), Schema::Array(a)) => Json::Array(
                xs.into_iter()
                    .map(|x| self.to_json(x, &a.items))
                    .collect::<Result<_, _>>()?,
            ),
            (Avro::Map(m), Schema::Map(ms)) => Json::Object(
                m.into_iter()
                    .map(|(k, x)| Ok((k, self.to_json(x, &ms.types)?)))
                    .collect::<Result<_, AvroError>>()?,
            ),
            (Avro::Record(fields), Schema::Record(r)) => {
                let mut obj = serde_json::Map::new();
                for (name, x) in fields {
                    let Some(f) = r.lookup.get(&name).map(|i| &r.fields[*i]) else {
                        continue;
                    };
                    let x = if is_json(f) {
                        json_text(x)?
                    } else {
                        self.to_json(x, &f.schema)?
                    };
                    // Absent rather than null: the Rust types skip their empty options.
                    if !x.is_null() {
                        obj.insert(name, x);
                    }
                }
                Json::Object(obj)
            }
            (v, s) => return Err(err(format!("{v:?} does not fit {}", kind(s)))),
        })
    }
}

/// The document of a field of JSON text (a string, or a nullable one).
fn json_text(v: Avro) -> Result<Json, AvroError> {
    match v {
        Avro::Union(_, inner) => json_text(*inner),
        Avro::String(text) => serde_json::from_str(&text).map_err(|e| err(e.to_string())),
        _ => Ok(Json::Null),
    }
}

fn is_json(f: &RecordField) -> bool {
    f.custom_attributes.get("json") == Some(&Json::Bool(true))
}

fn collect_names(s: &Schema, names: &mut HashMap<String, Schema>) {
    match s {
        Schema::Record(r) => {
            names.insert(r.name.fullname(None), s.clone());
            for f in &r.fields {
                collect_names(&f.schema, names);
            }
        }
        Schema::Enum(e) => {
            names.insert(e.name.fullname(None), s.clone());
        }
        Schema::Array(a) => collect_names(&a.items, names),
        Schema::Map(m) => collect_names(&m.types, names),
        Schema::Union(u) => u.variants().iter().for_each(|b| collect_names(b, names)),
        _ => {}
    }
}

/// The CRC-64-AVRO fingerprint of a schema's parsing canonical form, little-endian.
pub fn fingerprint(s: &Schema) -> [u8; 8] {
    let mut fp = [0; 8];
    fp.copy_from_slice(&s.fingerprint::<Rabin>().bytes);
    fp
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn kind(s: &Schema) -> String {
    match s {
        Schema::Record(r) => format!("record {}", r.name.name),
        Schema::Enum(e) => format!("enum {}", e.name.name),
        Schema::Ref { name } => name.name.clone(),
        other => format!("{:?}", apache_avro::schema::SchemaKind::from(other)).to_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_schema_parses() {
        for s in ALL {
            let c = s.codec();
            assert_eq!(c.fingerprint(), fingerprint(c.schema()), "{}", s.name);
        }
        Schema::parse_str(KEY_AVSC).unwrap();
    }

    #[test]
    fn a_value_that_does_not_fit_is_refused_with_its_path() {
        let e = REJECTED
            .codec()
            .encode(&json!({"error": {"code": "X", "message": 5}, "source": {}}))
            .unwrap_err();
        assert!(e.to_string().contains("error.message"), "{e}");
        assert!(CLAIM_SUBMITTED
            .codec()
            .decode(b"{\"tenant_id\": 1}")
            .is_err());
    }

    #[test]
    fn the_path_of_a_misfit_names_its_fields_items_and_keys() {
        let codec = Codec::new(
            r#"{"type": "record", "name": "R", "fields": [
                {"name": "items", "type": {"type": "array", "items": {"type": "record",
                    "name": "Item", "fields": [{"name": "n", "type": "int"}]}}},
                {"name": "m", "type": {"type": "map", "values": "long"}}]}"#,
            &[],
        )
        .unwrap();
        let misfit = |v: serde_json::Value| codec.encode(&v).unwrap_err().to_string();
        assert_eq!(
            misfit(json!({"items": [{"n": 1}, {"n": "x"}], "m": {}})),
            "items[1].n: \"x\" is not a int"
        );
        assert_eq!(
            misfit(json!({"items": [], "m": {"k": true}})),
            "m.k: true is not a long"
        );
        assert_eq!(misfit(json!(7)), "the value: 7 is not a record R");
        let fits = json!({"items": [{"n": 1}], "m": {"k": 2}});
        assert_eq!(codec.decode(&codec.encode(&fits).unwrap()).unwrap(), fits);
        let mut datum = Vec::new();
        codec.write_datum(&fits, &mut datum).unwrap();
        assert_eq!(datum, codec.encode(&fits).unwrap()[10..]);
    }

    #[test]
    fn a_value_of_an_unknown_schema_is_refused() {
        let mut bytes = DOMAIN_EVENT
            .codec()
            .encode(
                &json!({"id": "e", "event": "x", "tenant_id": "t", "timestamp": "", "data": {}}),
            )
            .unwrap();
        bytes[5] ^= 0xff;
        let e = DOMAIN_EVENT.codec().decode(&bytes).unwrap_err();
        assert!(e.to_string().contains("unknown schema fingerprint"), "{e}");
    }

    #[test]
    fn an_older_version_is_read_into_the_current_schema() {
        // A version 0 of the rejects schema without `claim_id` and `error.field`.
        let old = r#"{"type": "record", "name": "Rejected", "namespace": "claims", "fields": [
            {"name": "tenant_id", "type": ["null", "string"], "default": null},
            {"name": "error", "type": {"type": "record", "name": "RejectError", "fields": [
                {"name": "code", "type": "string"}, {"name": "message", "type": "string"}]}},
            {"name": "source", "type": {"type": "record", "name": "Source", "fields": [
                {"name": "topic", "type": "string"}, {"name": "partition", "type": "int"},
                {"name": "offset", "type": "long"}]}}]}"#;
        let writer = Codec::new(old, &[]).unwrap();
        let reader = Codec::new(REJECTED.avsc, &[old]).unwrap();
        let value = json!({"tenant_id": "acme", "error": {"code": "BAD_REQUEST", "message": "no"},
            "source": {"topic": "claims.submissions", "partition": 2, "offset": 7}});
        let bytes = writer.encode(&value).unwrap();
        assert_eq!(reader.decode(&bytes).unwrap(), value);
        assert!(
            REJECTED.codec().decode(&bytes).is_err(),
            "not a known version"
        );
    }
}
