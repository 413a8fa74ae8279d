//! A topic read a page at a time outside any consumer group: what a rebuild and a
//! webhook replay read, moving no live group's offsets.
//!
//! A page takes an equal share of its records from every partition not yet read to
//! its end, each share in offset order, so the pages go through the partitions side by
//! side rather than one after the other. Records of one key share a partition, so
//! each key's records still come in their order; and records written at about the
//! same time come in about the same page. That is what a rebuild's writes want: a
//! page of claims or of decisions touches a narrow stretch of the store's rows and
//! keys (whose ids grow with time) rather than the whole table once per partition.

use super::{Bus, BusError, Record, TopicSpec};

/// The pages of a topic's partitions within their extent (see [`Bus::extent`]).
#[derive(Debug)]
pub struct Pages<'a> {
    bus: &'a Bus,
    topic: &'a TopicSpec,
    /// Each partition with its next and end offsets; those read to the end are gone.
    left: Vec<(u32, i64, i64)>,
    size: i64,
}

impl Bus {
    /// `topic`'s records of `extent` (per partition: the first offset and the end), in
    /// pages of up to `size` records.
    pub fn pages<'a>(
        &'a self,
        topic: &'a TopicSpec,
        extent: Vec<(u32, i64, i64)>,
        size: i64,
    ) -> Pages<'a> {
        Pages {
            bus: self,
            topic,
            left: extent.into_iter().filter(|(_, lo, hi)| hi > lo).collect(),
            size: size.max(1),
        }
    }
}

impl Pages<'_> {
    /// The next page: a share of each partition not read to its end; none once every
    /// partition is.
    pub async fn next(&mut self) -> Result<Option<Vec<Record>>, BusError> {
        if self.left.is_empty() {
            return Ok(None);
        }
        let share = (self.size / self.left.len() as i64).max(1);
        let mut ranges = Vec::with_capacity(self.left.len());
        for (partition, next, end) in &mut self.left {
            let to = (*end).min(*next + share);
            ranges.push((*partition, *next, to));
            *next = to;
        }
        self.left.retain(|(_, next, end)| next < end);
        self.bus.read_ranges(self.topic, ranges).await.map(Some)
    }
}
