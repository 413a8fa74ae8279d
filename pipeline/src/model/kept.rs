//! A member of a decision that a reader which only writes it on keeps as the JSON text
//! it was written as: `claims replay` reading a decision the store wrote (see
//! [`reading_as_text`](super::reading_as_text)), whose facts and pricing
//! it writes into the store's copy of the claim exactly as it read them. Building each
//! and serialising it again gave back the text it started from, for about a fifteenth
//! of a rebuild's CPU.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::event::Json;

/// A value, or, read inside [`reading_as_text`](super::reading_as_text), its
/// JSON text as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Kept<T> {
    Value(T),
    Text(Json),
}

impl<T> Kept<T> {
    /// The value, unless it was kept as text.
    pub fn value(&self) -> Option<&T> {
        match self {
            Self::Value(v) => Some(v),
            Self::Text(_) => None,
        }
    }

    pub fn value_mut(&mut self) -> Option<&mut T> {
        match self {
            Self::Value(v) => Some(v),
            Self::Text(_) => None,
        }
    }
}

impl<T> From<T> for Kept<T> {
    fn from(value: T) -> Self {
        Self::Value(value)
    }
}

impl<T: Serialize> Serialize for Kept<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Value(v) => v.serialize(s),
            Self::Text(json) => json.raw().serialize(s),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Kept<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if super::as_text() {
            Json::deserialize(d).map(Self::Text)
        } else {
            T::deserialize(d).map(Self::Value)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::reading_as_text;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Facts {
        year: i32,
        note: String,
    }

    const WRITTEN: &str = r#"{"year":2026,"note":"a \"quoted\" note"}"#;

    #[test]
    fn a_member_read_as_text_is_written_out_as_it_was_read_and_as_its_value_would_be() {
        let value: Kept<Facts> = serde_json::from_str(WRITTEN).unwrap_or_else(|e| panic!("{e}"));
        let text: Kept<Facts> =
            reading_as_text(|| serde_json::from_str(WRITTEN)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(value.value().map(|f| f.year), Some(2026));
        assert!(text.value().is_none());
        let written = |k: &Kept<Facts>| serde_json::to_string(k).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(written(&text), WRITTEN);
        assert_eq!(written(&value), WRITTEN);
    }
}
