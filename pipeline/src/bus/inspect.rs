//! What an operator sees of the bus (`claims topics`): each topic's size and each
//! consumer group's lag, and a topic's latest records.

use serde::Serialize;

use super::{Bus, BusError, Record, TopicSpec};

/// A topic, its end offsets and how far behind each consumer group is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopicInfo {
    pub topic: String,
    pub partitions: u32,
    pub compacted: bool,
    /// The Avro schema of its values on Kafka: `schemas/avro/<value_schema>.avsc`
    /// (none: JSON). `tail` prints values as JSON either way.
    pub value_schema: Option<&'static str>,
    /// Records ever written: the sum of the partitions' end offsets.
    pub end_offset_total: i64,
    /// Records still held (consumed ones are trimmed, compacted ones superseded).
    pub records_held: i64,
    pub groups: Vec<GroupLag>,
}

/// A consumer group's progress on one topic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupLag {
    pub group: String,
    /// Records written and not yet processed by the group, over all partitions.
    pub lag: i64,
    /// Committed next offset per partition (partitions it never committed are at 0).
    pub committed: Vec<i64>,
}

/// A record as `claims topics tail` prints it: the value as JSON when it is JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordView {
    pub topic: String,
    pub partition: u32,
    pub offset: i64,
    pub key: String,
    pub timestamp: String,
    pub value: serde_json::Value,
}

impl From<Record> for RecordView {
    fn from(r: Record) -> Self {
        let value = serde_json::from_slice(&r.value).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(&r.value).into_owned())
        });
        Self {
            topic: r.topic,
            partition: r.partition,
            offset: r.offset,
            key: r.key,
            timestamp: crate::clock::ms_to_rfc3339(r.timestamp_ms),
            value,
        }
    }
}

impl Bus {
    /// Size and consumer lag of each of `topics`.
    pub async fn describe(&self, topics: &[TopicSpec]) -> Result<Vec<TopicInfo>, BusError> {
        let mut out = Vec::with_capacity(topics.len());
        // On Kafka each group's offsets on every topic come in one request.
        let committed = match self {
            Bus::Embedded(_) => Vec::new(),
            Bus::Kafka(k) => k.group_offsets(topics, &k.groups().await?).await?,
        };
        for t in topics {
            let (ends, offsets) = match self {
                Bus::Embedded(log) => (
                    log.partition_ends(&t.name).await?,
                    log.group_offsets(&t.name).await?,
                ),
                Bus::Kafka(k) => {
                    let ends = k
                        .watermarks(t)
                        .await?
                        .into_iter()
                        .map(|(p, lo, hi)| (p, hi, hi - lo))
                        .collect::<Vec<_>>();
                    let offsets = committed
                        .iter()
                        .filter(|(_, topic, _, _)| *topic == t.name)
                        .map(|(g, _, p, o)| (g.clone(), *p, *o))
                        .collect::<Vec<_>>();
                    (ends, offsets)
                }
            };
            out.push(topic_info(t, &ends, &offsets));
        }
        Ok(out)
    }

    /// The latest `limit` records of `topic`, oldest first.
    pub async fn latest(&self, topic: &TopicSpec, limit: usize) -> Result<Vec<Record>, BusError> {
        match self {
            Bus::Embedded(log) => log.latest(&topic.name, limit).await,
            Bus::Kafka(k) => k.latest(topic, limit).await,
        }
    }
}

/// The pure part of [`Bus::describe`]: `ends` is (partition, end offset, records held),
/// `offsets` is (group, partition, committed next offset).
pub fn topic_info(
    t: &TopicSpec,
    ends: &[(u32, i64, i64)],
    offsets: &[(String, u32, i64)],
) -> TopicInfo {
    let end_of = |p: u32| ends.iter().find(|e| e.0 == p).map_or(0, |e| e.1);
    let mut groups: Vec<GroupLag> = Vec::new();
    for (group, partition, next) in offsets {
        let i = groups
            .iter()
            .position(|g| &g.group == group)
            .unwrap_or_else(|| {
                groups.push(GroupLag {
                    group: group.clone(),
                    lag: 0,
                    committed: vec![0; t.partitions as usize],
                });
                groups.len() - 1
            });
        let g = &mut groups[i];
        if let Some(slot) = g.committed.get_mut(*partition as usize) {
            *slot = *next;
        }
    }
    for g in &mut groups {
        g.lag = (0..t.partitions)
            .map(|p| (end_of(p) - g.committed[p as usize]).max(0))
            .sum();
    }
    TopicInfo {
        topic: t.name.clone(),
        partitions: t.partitions,
        compacted: t.compacted,
        value_schema: t.schema.map(|s| s.name),
        end_offset_total: ends.iter().map(|e| e.1).sum(),
        records_held: ends.iter().map(|e| e.2).sum(),
        groups,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_what_each_group_has_left_in_every_partition() {
        let t = TopicSpec::new("claims.intake", 3, false);
        let ends = [(0, 10, 4), (1, 5, 5), (2, 0, 0)];
        let offsets = [
            ("validate".to_owned(), 0, 10),
            ("validate".to_owned(), 1, 2),
            ("audit".to_owned(), 1, 5),
        ];
        let info = topic_info(&t, &ends, &offsets);
        assert_eq!((info.end_offset_total, info.records_held), (15, 9));
        let lag: Vec<(&str, i64, &[i64])> = info
            .groups
            .iter()
            .map(|g| (g.group.as_str(), g.lag, g.committed.as_slice()))
            .collect();
        // A partition a group never committed counts from 0.
        assert_eq!(
            lag,
            [
                ("validate", 3, &[10, 2, 0][..]),
                ("audit", 10, &[0, 5, 0][..])
            ]
        );
    }
}
