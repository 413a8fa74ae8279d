//! Facts many claims share, read once for them all. A page of decided claims repeats
//! the same provider, contract, member and plan across its claims, and parsing each
//! copy anew was a sixth of a backtest's parsing. Inside [`reading_shared`], such a
//! field is taken as its raw JSON text first and parsed only the first time that text
//! is seen; later copies are clones of the first (a plan's benefits are an `Arc`).

use std::any::Any;
use std::cell::RefCell;

use rustc_hash::FxHashMap;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// Values by the raw text they were read from.
type Seen = FxHashMap<Box<str>, Box<dyn Any>>;

thread_local! {
    /// The values read, while [`reading_shared`] runs on this thread.
    static SEEN: RefCell<Option<Seen>> = const { RefCell::new(None) };
}

/// Runs `read`, which must read JSON text with `serde_json::from_str` or
/// `Deserializer::from_str` (whose fields can be borrowed as raw text), sharing the
/// values of the fields marked with [`deserialize`] among everything it reads.
pub fn reading_shared<R>(read: impl FnOnce() -> R) -> R {
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            SEEN.with(|s| s.borrow_mut().take());
        }
    }
    SEEN.with(|s| *s.borrow_mut() = Some(FxHashMap::default()));
    let _done = Done;
    read()
}

/// For `#[serde(default, deserialize_with = "shared::deserialize")]` on an optional
/// field: parsed as usual, except inside [`reading_shared`] (see there).
pub fn deserialize<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Clone + 'static,
{
    if !SEEN.with(|s| s.borrow().is_some()) {
        return Option::<T>::deserialize(d);
    }
    let Some(raw) = Option::<&'de RawValue>::deserialize(d)? else {
        return Ok(None);
    };
    let text = raw.get();
    let seen = SEEN.with(|s| {
        s.borrow()
            .as_ref()
            .and_then(|m| m.get(text))
            .and_then(|v| v.downcast_ref::<T>())
            .cloned()
    });
    if let Some(value) = seen {
        return Ok(Some(value));
    }
    let value: T = serde_json::from_str(text).map_err(D::Error::custom)?;
    SEEN.with(|s| {
        if let Some(m) = s.borrow_mut().as_mut() {
            m.entry(text.into())
                .or_insert_with(|| Box::new(value.clone()));
        }
    });
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Deserialize)]
    struct Plan {
        id: String,
        limits: Arc<Vec<i64>>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Row {
        #[serde(default, deserialize_with = "deserialize")]
        plan: Option<Plan>,
        n: i64,
    }

    const TEXT: &str = r#"{"plan":{"id":"P","limits":[1,2]},"n":1}
{"plan":{"id":"P","limits":[1,2]},"n":2}
{"plan":null,"n":3}
{"n":4}
{"plan":{"id":"Q","limits":[3]},"n":5}"#;

    fn rows() -> Vec<Row> {
        serde_json::Deserializer::from_str(TEXT)
            .into_iter::<Row>()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// Read shared or not, the values are the same; shared, equal texts are one parse.
    #[test]
    fn shared_fields_read_as_unshared_ones_do_and_are_parsed_once() {
        let plain = rows();
        let shared = reading_shared(rows);
        assert_eq!(plain, shared);
        let limits = |r: &Row| r.plan.as_ref().map(|p| p.limits.clone());
        assert!(!Arc::ptr_eq(
            &limits(&plain[0]).unwrap(),
            &limits(&plain[1]).unwrap()
        ));
        assert!(Arc::ptr_eq(
            &limits(&shared[0]).unwrap(),
            &limits(&shared[1]).unwrap()
        ));
        assert!(!Arc::ptr_eq(
            &limits(&shared[0]).unwrap(),
            &limits(&shared[4]).unwrap()
        ));
        assert_eq!(shared[2].plan, None);
        assert_eq!(shared[3].plan, None);
        assert!(SEEN.with(|s| s.borrow().is_none()), "forgotten after");
    }

    /// A bad shared field fails the read, as it would unshared.
    #[test]
    fn a_bad_shared_field_fails_the_read() {
        let bad = r#"{"plan":{"id":7,"limits":[]},"n":1}"#;
        assert!(reading_shared(|| serde_json::from_str::<Row>(bad)).is_err());
    }
}
