//! A decision's trace of its rulebook: what each rule did, in rulebook order. It rides
//! on the decision's record on `claims.decided` and in its audit record, where the
//! store writes it as it is. A reader that only writes it on (`claims replay`, inside
//! [`reading_as_text`](super::reading_as_text)) keeps the JSON text it was written as
//! instead of building an entry per rule and writing them out again, which was a tenth
//! of what rebuilding a decision cost.

use serde::de::{Error as _, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::as_text;
use super::event::Json;
use crate::rules::TraceEntry;

/// The rules' trace of a decision.
#[derive(Debug, Clone, PartialEq)]
pub enum Trace {
    Entries(Vec<TraceEntry>),
    /// Read inside [`reading_as_text`](super::reading_as_text): the entries' JSON array
    /// as written, and how many entries it holds.
    Text {
        json: Json,
        len: usize,
    },
}

impl Trace {
    /// How many rules the trace accounts for.
    pub fn len(&self) -> usize {
        match self {
            Self::Entries(e) => e.len(),
            Self::Text { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries, unless the trace was kept as text.
    pub fn entries(&self) -> Option<&[TraceEntry]> {
        match self {
            Self::Entries(e) => Some(e),
            Self::Text { .. } => None,
        }
    }
}

impl Default for Trace {
    fn default() -> Self {
        Self::Entries(Vec::new())
    }
}

impl From<Vec<TraceEntry>> for Trace {
    fn from(entries: Vec<TraceEntry>) -> Self {
        Self::Entries(entries)
    }
}

impl Serialize for Trace {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Entries(e) => e.serialize(s),
            Self::Text { json, .. } => json.raw().serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Trace {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if !as_text() {
            return Vec::deserialize(d).map(Self::Entries);
        }
        let json = Json::deserialize(d)?;
        // Counted over the text again, without building anything: the text is a
        // record's and has been read whole once already.
        let Count(len) = serde_json::from_str(json.get()).map_err(D::Error::custom)?;
        Ok(Self::Text { json, len })
    }
}

/// The number of values in a JSON array, each passed over.
struct Count(usize);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Counter;
        impl<'de> Visitor<'de> for Counter {
            type Value = Count;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of trace entries")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
        }
        d.deserialize_seq(Counter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::reading_as_text;

    const WRITTEN: &str = r#"[{"rule_id":"a","action":"flag","matched":false},{"rule_id":"b","action":"decline","matched":true,"detail":"true \"quoted\""}]"#;

    #[test]
    fn a_trace_read_as_text_is_written_out_as_it_was_read_with_its_count() {
        let entries: Trace = serde_json::from_str(WRITTEN).unwrap_or_else(|e| panic!("{e}"));
        let text: Trace =
            reading_as_text(|| serde_json::from_str(WRITTEN)).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(entries, Trace::Entries(ref e) if e.len() == 2));
        assert!(matches!(text, Trace::Text { len: 2, .. }));
        let written = |t: &Trace| serde_json::to_string(t).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(written(&text), WRITTEN);
        assert_eq!(written(&text), written(&entries));
    }

    #[test]
    fn outside_reading_as_text_a_trace_is_built_again() {
        let _ = reading_as_text(|| serde_json::from_str::<Trace>(WRITTEN));
        let after: Trace = serde_json::from_str(WRITTEN).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(after, Trace::Entries(_)));
    }

    #[test]
    fn a_trace_that_is_not_an_array_does_not_read_either_way() {
        assert!(serde_json::from_str::<Trace>(r#"{"rule_id":"a"}"#).is_err());
        assert!(reading_as_text(|| serde_json::from_str::<Trace>(r#"{"rule_id":"a"}"#)).is_err());
    }
}
