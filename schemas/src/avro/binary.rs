//! Avro's binary encoding written straight from a JSON document, and read straight into
//! JSON text, walking the schema: no apache-avro `Value` in between.
//!
//! Every record on Kafka crosses the codec once each way, and through apache-avro's
//! generic values it cost more than everything else the Kafka service did together:
//! a `Value` tree built per record, validated against the schema by its writer (with a
//! map of each record's fields made for the check), encoded; and on reading, a tree
//! decoded, turned into a `serde_json::Value` tree, then into text. Here a value is
//! checked as it is written, with the same messages (its path, its type), and read into
//! the text the stages parse. The encoding is the specification's, byte for byte what
//! apache-avro wrote (the golden files of `schemas/avro/examples` pin it; fastavro reads
//! it in the Kafka suite). Values of an earlier version of a schema still go through
//! apache-avro, whose schema resolution reads them into the current one.

use std::io::Write as _;

use apache_avro::schema::{Schema, UnionSchema};
use serde_json::value::RawValue;
use serde_json::Value as Json;

use super::{err, is_json, kind, At, AvroError, Codec, NULL};

impl Codec {
    /// Appends `v` as a binary datum of `s`: the first branch of a union that it fits,
    /// the default of a field it leaves out (or null), the text of a JSON field.
    pub(super) fn write(
        &self,
        v: &Json,
        s: &Schema,
        at: &At<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), AvroError> {
        let wrong = || err(format!("{}: {v} is not a {}", at.path(), kind(s)));
        match s {
            Schema::Null if v.is_null() => {}
            Schema::Boolean => out.push(u8::from(v.as_bool().ok_or_else(wrong)?)),
            Schema::Int => {
                let n = v.as_i64().and_then(|n| i32::try_from(n).ok());
                long(i64::from(n.ok_or_else(wrong)?), out);
            }
            Schema::Long | Schema::TimestampMillis => long(v.as_i64().ok_or_else(wrong)?, out),
            Schema::Float => {
                out.extend_from_slice(&(v.as_f64().ok_or_else(wrong)? as f32).to_le_bytes())
            }
            Schema::Double => out.extend_from_slice(&v.as_f64().ok_or_else(wrong)?.to_le_bytes()),
            Schema::String => string(v.as_str().ok_or_else(wrong)?, out),
            Schema::Enum(e) => {
                let sym = v.as_str().ok_or_else(wrong)?;
                let i = e.symbols.iter().position(|s| s == sym).ok_or_else(wrong)?;
                long(i as i64, out);
            }
            Schema::Array(a) => {
                let items = v.as_array().ok_or_else(wrong)?;
                if !items.is_empty() {
                    long(items.len() as i64, out);
                    for (i, x) in items.iter().enumerate() {
                        self.write(x, &a.items, &At::Index(at, i), out)?;
                    }
                }
                out.push(0);
            }
            Schema::Map(m) => {
                let entries = v.as_object().ok_or_else(wrong)?;
                if !entries.is_empty() {
                    long(entries.len() as i64, out);
                    for (k, x) in entries {
                        string(k, out);
                        self.write(x, &m.types, &At::Key(at, k), out)?;
                    }
                }
                out.push(0);
            }
            Schema::Union(u) => {
                // null for null; otherwise the first branch the value fits, with what
                // a branch that did not fit wrote taken back. The message is made only
                // for a value that fits none: it writes the value out, and most values
                // of a nullable field fit its first branch that is not null.
                let mut last = None;
                let start = out.len();
                for (i, branch) in u.variants().iter().enumerate() {
                    if v.is_null() != matches!(branch, Schema::Null) {
                        continue;
                    }
                    long(i as i64, out);
                    match self.write(v, branch, at, out) {
                        Ok(()) => return Ok(()),
                        Err(e) => {
                            out.truncate(start);
                            last = Some(e);
                        }
                    }
                }
                return Err(last.unwrap_or_else(wrong));
            }
            Schema::Record(r) => {
                let obj = v.as_object().ok_or_else(wrong)?;
                for f in &r.fields {
                    let given = obj.get(&f.name).filter(|x| !x.is_null());
                    let text;
                    let x = match (given, &f.default) {
                        (Some(x), _) if is_json(f) => {
                            text = Json::String(x.to_string());
                            &text
                        }
                        (Some(x), _) => x,
                        (None, Some(d)) => d,
                        (None, None) => &NULL,
                    };
                    self.write(x, &f.schema, &At::Field(at, &f.name), out)?;
                }
            }
            Schema::Ref { name } => return self.write(v, self.named(name)?, at, out),
            _ => return Err(wrong()),
        }
        Ok(())
    }

    /// Reads a binary datum of `s` from `input`, appending it to `out` as JSON text: a
    /// record's fields in the schema's order, those that are null left out (the Rust
    /// types skip their empty options), a JSON field's text as the document it holds.
    /// Answers whether the value was null.
    pub(super) fn read_text(
        &self,
        s: &Schema,
        input: &mut &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool, AvroError> {
        match s {
            Schema::Null => {
                out.extend_from_slice(b"null");
                return Ok(true);
            }
            Schema::Boolean => match take(input, 1)? {
                [0] => out.extend_from_slice(b"false"),
                [1] => out.extend_from_slice(b"true"),
                _ => return Err(err("a boolean that is neither 0 nor 1")),
            },
            Schema::Int | Schema::Long | Schema::TimestampMillis => {
                let n = read_long(input)?;
                if matches!(s, Schema::Int) && i32::try_from(n).is_err() {
                    return Err(err(format!("{n} does not fit an int")));
                }
                // Writing into a vector cannot fail.
                let _ = write!(out, "{n}");
            }
            Schema::Float => {
                let bytes = take(input, 4)?;
                let x = f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                number(f64::from(x), out);
            }
            Schema::Double => {
                let mut b = [0; 8];
                b.copy_from_slice(take(input, 8)?);
                number(f64::from_le_bytes(b), out);
            }
            Schema::String => {
                let text = read_str(input)?;
                json_string(text, out);
            }
            Schema::Enum(e) => {
                let i = read_long(input)?;
                let sym = usize::try_from(i)
                    .ok()
                    .and_then(|i| e.symbols.get(i))
                    .ok_or_else(|| err(format!("enum {} has no symbol {i}", e.name.name)))?;
                json_string(sym, out);
            }
            Schema::Array(a) => {
                out.push(b'[');
                let mut first = true;
                blocks(input, |input| {
                    if !std::mem::take(&mut first) {
                        out.push(b',');
                    }
                    self.read_text(&a.items, input, out).map(drop)
                })?;
                out.push(b']');
            }
            Schema::Map(m) => {
                out.push(b'{');
                let mut first = true;
                blocks(input, |input| {
                    if !std::mem::take(&mut first) {
                        out.push(b',');
                    }
                    json_string(read_str(input)?, out);
                    out.push(b':');
                    self.read_text(&m.types, input, out).map(drop)
                })?;
                out.push(b'}');
            }
            Schema::Union(u) => return self.read_text(branch(u, input)?, input, out),
            Schema::Record(r) => {
                out.push(b'{');
                let mut first = true;
                for f in &r.fields {
                    let start = out.len();
                    if !first {
                        out.push(b',');
                    }
                    json_string(&f.name, out);
                    out.push(b':');
                    let null = if is_json(f) {
                        self.read_json_field(&f.schema, input, out)?
                    } else {
                        self.read_text(&f.schema, input, out)?
                    };
                    if null {
                        out.truncate(start);
                    } else {
                        first = false;
                    }
                }
                out.push(b'}');
            }
            Schema::Ref { name } => return self.read_text(self.named(name)?, input, out),
            other => return Err(err(format!("{} is not read here", kind(other)))),
        }
        Ok(false)
    }

    /// A field of JSON text (a string, or a nullable one): the document it holds, which
    /// must be JSON. Answers whether it is null.
    fn read_json_field(
        &self,
        s: &Schema,
        input: &mut &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool, AvroError> {
        match s {
            Schema::String => {
                let text = read_str(input)?;
                let doc: &RawValue = serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
                if doc.get() == "null" {
                    return Ok(true);
                }
                out.extend_from_slice(doc.get().as_bytes());
                Ok(false)
            }
            Schema::Union(u) => self.read_json_field(branch(u, input)?, input, out),
            Schema::Ref { name } => self.read_json_field(self.named(name)?, input, out),
            // Not text: read past, and left out as the generic reader left it.
            other => {
                let mut ignored = Vec::new();
                self.read_text(other, input, &mut ignored)?;
                Ok(true)
            }
        }
    }
}

/// A long as Avro writes it: zig-zag, then 7 bits a byte, least significant first.
fn long(n: i64, out: &mut Vec<u8>) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn string(s: &str, out: &mut Vec<u8>) {
    long(s.len() as i64, out);
    out.extend_from_slice(s.as_bytes());
}

fn read_long(input: &mut &[u8]) -> Result<i64, AvroError> {
    let mut z: u64 = 0;
    for shift in (0..64).step_by(7) {
        let [b, rest @ ..] = *input else {
            return Err(err("the datum ends inside a number"));
        };
        *input = rest;
        z |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok((z >> 1) as i64 ^ -((z & 1) as i64));
        }
    }
    Err(err("a number longer than a long"))
}

/// The branch of `u` a union's value names.
fn branch<'s>(u: &'s UnionSchema, input: &mut &[u8]) -> Result<&'s Schema, AvroError> {
    let i = read_long(input)?;
    usize::try_from(i)
        .ok()
        .and_then(|i| u.variants().get(i))
        .ok_or_else(|| err(format!("a union branch out of range: {i}")))
}

fn take<'a>(input: &mut &'a [u8], n: usize) -> Result<&'a [u8], AvroError> {
    if input.len() < n {
        return Err(err("the datum ends inside a value"));
    }
    let (taken, rest) = input.split_at(n);
    *input = rest;
    Ok(taken)
}

fn read_str<'a>(input: &mut &'a [u8]) -> Result<&'a str, AvroError> {
    let n = usize::try_from(read_long(input)?).map_err(|_| err("a negative length"))?;
    std::str::from_utf8(take(input, n)?).map_err(|e| err(e.to_string()))
}

/// The items of an array or the entries of a map: blocks of a count (negative when the
/// block's size in bytes follows it) and that many items, until a count of 0. A count
/// larger than the bytes left is refused before any item is read: every item of these
/// schemas takes at least a byte, and a damaged count must not spin.
fn blocks(
    input: &mut &[u8],
    mut item: impl FnMut(&mut &[u8]) -> Result<(), AvroError>,
) -> Result<(), AvroError> {
    loop {
        let count = read_long(input)?;
        if count == 0 {
            return Ok(());
        }
        if count < 0 {
            read_long(input)?;
        }
        let count = count.unsigned_abs();
        if count > input.len() as u64 {
            return Err(err("a block of more items than the datum has bytes"));
        }
        for _ in 0..count {
            item(input)?;
        }
    }
}

fn json_string(s: &str, out: &mut Vec<u8>) {
    // Writing a string into a vector cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// A number as `serde_json` writes one (null for what JSON cannot hold).
fn number(x: f64, out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(&mut *out, &Json::from(x));
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{Version, ALL};
    use super::*;

    /// Each schema's example, as written by this codec.
    fn examples() -> Vec<(&'static super::super::TopicSchema, Json, Vec<u8>)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("avro/examples");
        ALL.iter()
            .map(|s| {
                let text = std::fs::read_to_string(dir.join(format!("{}.json", s.name)))
                    .unwrap_or_else(|e| panic!("{}: {e}", s.name));
                let json: Json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
                let bytes = s.codec().encode(&json).unwrap_or_else(|e| panic!("{e}"));
                (*s, json, bytes)
            })
            .collect()
    }

    /// The text read directly is the document apache-avro's generic reader reads from
    /// the same bytes, for every schema.
    #[test]
    fn values_read_directly_are_those_the_generic_reader_reads() {
        for (s, json, bytes) in examples() {
            let codec = s.codec();
            let text = codec.decode_text(&bytes).unwrap_or_else(|e| panic!("{e}"));
            let direct: Json = serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{e}"));
            let version = Version::new(codec.schema().clone()).unwrap_or_else(|e| panic!("{e}"));
            let value = version
                .reader
                .read_value(&mut &bytes[10..])
                .unwrap_or_else(|e| panic!("{e}"));
            let generic = codec
                .to_json(value, codec.schema())
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(direct, generic, "{}", s.name);
            assert_eq!(direct, json, "{}", s.name);
        }
    }

    /// A datum cut short, or with a count or a length that runs past its end, is
    /// refused with an error: never a panic, never a loop over items that are not
    /// there.
    #[test]
    fn a_damaged_datum_is_refused() {
        for (s, _, bytes) in examples() {
            for end in 10..bytes.len() {
                assert!(
                    s.codec().decode_text(&bytes[..end]).is_err(),
                    "{} cut at {end}",
                    s.name
                );
            }
            for i in 10..bytes.len() {
                let mut damaged = bytes.clone();
                damaged[i] = 0xff;
                // Anything but a panic: some damage still reads as a value.
                let _ = s.codec().decode_text(&damaged);
            }
        }
        let array = Codec::new(r#"{"type": "array", "items": "long"}"#, &[])
            .unwrap_or_else(|e| panic!("{e}"));
        let mut huge = array.header.to_vec();
        long(i64::MAX, &mut huge);
        huge.extend_from_slice(&[2, 4, 0]);
        let e = array.decode_text(&huge).unwrap_err();
        assert!(e.to_string().contains("more items"), "{e}");
    }

    /// Longs at the edges of their range and of their bytes, as the specification
    /// writes them.
    #[test]
    fn longs_are_zig_zag_varints() {
        let cases: [(i64, &[u8]); 6] = [
            (0, &[0]),
            (-1, &[1]),
            (1, &[2]),
            (-64, &[0x7f]),
            (64, &[0x80, 1]),
            (
                i64::MIN,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1],
            ),
        ];
        for (n, bytes) in cases {
            let mut out = Vec::new();
            long(n, &mut out);
            assert_eq!(out, bytes, "{n}");
            assert_eq!(
                read_long(&mut &out[..]).unwrap_or_else(|e| panic!("{e}")),
                n
            );
        }
        let mut max = Vec::new();
        long(i64::MAX, &mut max);
        assert_eq!(
            read_long(&mut &max[..]).unwrap_or_else(|e| panic!("{e}")),
            i64::MAX
        );
        assert!(read_long(&mut &[0x80u8; 11][..]).is_err());
    }
}
