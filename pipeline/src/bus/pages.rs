//! A topic read a page at a time, partition after partition, each in offset order,
//! outside any consumer group: what a rebuild and a webhook replay read, moving no live
//! group's offsets.

use super::{Bus, BusError, Record, TopicSpec};

/// The pages of a topic's partitions within their extent (see [`Bus::extent`]).
#[derive(Debug)]
pub struct Pages<'a> {
    bus: &'a Bus,
    topic: &'a TopicSpec,
    /// Partitions still to read, each with its next and end offsets.
    left: std::vec::IntoIter<(u32, i64, i64)>,
    /// The partition being read, with its next and end offsets.
    at: Option<(u32, i64, i64)>,
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
            left: extent.into_iter(),
            at: None,
            size: size.max(1),
        }
    }
}

impl Pages<'_> {
    /// The next page; none once every partition is read.
    pub async fn next(&mut self) -> Result<Option<Vec<Record>>, BusError> {
        loop {
            let Some((partition, next, end)) = self.at.take().or_else(|| self.left.next()) else {
                return Ok(None);
            };
            if next >= end {
                continue;
            }
            let to = end.min(next + self.size);
            let page = self.bus.read(self.topic, partition, next, to).await?;
            self.at = Some((partition, to, end));
            return Ok(Some(page));
        }
    }
}
