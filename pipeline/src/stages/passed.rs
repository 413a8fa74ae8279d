//! Progress over batches that ask nothing of the store, committed later: a stage on the
//! embedded log whose batch has no work (the fused chain did it already) would
//! otherwise take the store's one writer for a transaction of its offsets alone.
//!
//! With the chain in this process every batch it commits puts a batch of written
//! decisions on `claims.decided` and one of events on `claims.events`, whose deliveries
//! it queued itself; committing the snapshot and webhook stages' offsets past each
//! took the one writer for a transaction of its own, in the queue before the next
//! intake. Their progress is committed with the next batch that has work, or once
//! `PASSED_FOR` has gone by. A crash before then reads them again, and passes them
//! again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::bus::Record;

/// Per partition, the last record of batches passed without a commit.
#[derive(Debug, Clone, Default)]
pub struct Passed {
    /// Per partition, the last record passed, without its value.
    marks: HashMap<u32, Record>,
    /// When the first of them was passed.
    since: Option<Instant>,
}

/// How long progress over batches without work waits for a batch with work.
const PASSED_FOR: Duration = Duration::from_secs(1);

impl Passed {
    /// Notes `batch` passed; `false` when it is time to commit instead.
    pub fn defer(&mut self, batch: &[Record]) -> bool {
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() >= PASSED_FOR {
            return false;
        }
        for r in batch {
            self.marks.insert(r.partition, Self::mark(r));
        }
        true
    }

    /// The records to commit past for `batch`: its own, with those passed before it,
    /// which are forgotten.
    pub fn with<'a>(&mut self, batch: &'a [Record]) -> std::borrow::Cow<'a, [Record]> {
        let mut passed = self.take();
        if passed.is_empty() {
            return std::borrow::Cow::Borrowed(batch);
        }
        passed.extend(batch.iter().map(Self::mark));
        std::borrow::Cow::Owned(passed)
    }

    /// The records passed so far, to commit with the next batch; forgets them.
    fn take(&mut self) -> Vec<Record> {
        self.since = None;
        self.marks.drain().map(|(_, r)| r).collect()
    }

    /// What committing past `r` needs of it: where it is.
    fn mark(r: &Record) -> Record {
        Record {
            topic: r.topic.clone(),
            partition: r.partition,
            offset: r.offset,
            key: String::new(),
            value: Vec::new(),
            timestamp_ms: r.timestamp_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(partition: u32, offset: i64) -> Record {
        Record {
            topic: "claims.decided".into(),
            partition,
            offset,
            key: "acme/m1".into(),
            value: b"written".to_vec(),
            timestamp_ms: 0,
        }
    }

    #[test]
    fn batches_are_passed_then_committed_from_where_each_partition_stopped() {
        let mut passed = Passed::default();
        assert!(passed.defer(&[written(0, 4), written(0, 5), written(3, 9)]));
        assert!(passed.defer(&[written(0, 6)]));
        let mut marks: Vec<(u32, i64)> = passed
            .with(&[written(5, 1)])
            .iter()
            .map(|r| (r.partition, r.offset))
            .collect();
        marks.sort();
        assert_eq!(marks, [(0, 6), (3, 9), (5, 1)]);
        assert!(passed.take().is_empty(), "taken once");
    }

    #[test]
    fn batches_passed_long_enough_ago_are_committed() {
        let mut passed = Passed::default();
        assert!(passed.defer(&[written(1, 1)]));
        passed.since = Instant::now().checked_sub(PASSED_FOR);
        assert!(!passed.defer(&[written(1, 2)]), "time to commit");
    }
}
