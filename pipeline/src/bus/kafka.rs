//! The Kafka bus, through rdkafka: the same topics, keys, partitions and consumer
//! groups as the embedded log, on a broker that spreads them over processes and
//! machines.
//!
//! - The producer is idempotent (`enable.idempotence`): a retried produce is written
//!   once, and one key's records stay in order.
//! - A record's partition is [`partition_for`] its key, as on the embedded log, so a
//!   claim's records share a partition on every topic whichever backend wrote them.
//! - A consumer stores a batch's offsets only after every output of the batch was
//!   acknowledged by the broker (`enable.auto.offset.store=false`), then commits them.
//!   There are no Kafka transactions (not every Kafka-protocol broker has them): a
//!   crash between the outputs and the commit redelivers the batch, and the stages are
//!   idempotent (deterministic ids, version-guarded upserts), so nothing is doubled.
//! - Work that must commit with rows of the store (an accepted claim, an upload, an
//!   officer's decision) goes through the store's outbox ([`super::outbox`]).
//! - The service creates its topics at start; state topics get `cleanup.policy=compact`,
//!   and readers of them take the latest record per key, so the service stays correct on
//!   a broker that keeps every version.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::ClientContext;
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message as _;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use schemas::avro::TopicSchema;
use tokio::sync::{oneshot, Notify};

use super::record::{partition_for, Message, Record};
use super::registry::SchemaRegistry;
use super::topic::TopicSpec;
use super::{wire, BusError};
use crate::clock::now_ms;
use crate::store::Store;

/// How long a metadata or offsets request to the broker may take.
const BROKER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a consumer may go silent before the group gives its partitions to others.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a produced record may wait for the broker's acknowledgement.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long each step of closing a consumer (leaving the group, then the client's own
/// close) may take before the consumer is left to finish on its own.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the broker is and how topics are created on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSettings {
    /// `host:port[,host:port…]` (`CLAIMS_KAFKA_BROKERS`).
    pub brokers: String,
    /// Replicas of each topic the service creates (`CLAIMS_KAFKA_REPLICATION`).
    pub replication: u16,
    /// Put before each consumer group's name, as the topic prefix is before each
    /// topic's: deployments sharing a broker share neither topics nor groups.
    pub group_prefix: String,
    /// This process's stable name (`CLAIMS_INSTANCE_ID`): set, its consumers are static
    /// group members (`group.instance.id`), so a restarted process takes its partitions
    /// back at once instead of after the dead one's session times out.
    pub instance_id: Option<String>,
    /// A Confluent-compatible schema registry (`CLAIMS_SCHEMA_REGISTRY_URL`): set, Avro
    /// values use its wire format and registered ids ([`super::registry`]).
    pub schema_registry: Option<String>,
}

#[derive(Clone)]
pub struct KafkaBus {
    inner: Arc<Inner>,
}

struct Inner {
    settings: KafkaSettings,
    producer: FutureProducer,
    admin: AdminClient<DefaultClientContext>,
    store: Store,
    registry: Option<SchemaRegistry>,
    /// Wakes this process's outbox relay after a transaction wrote to the outbox.
    outbox: Notify,
}

impl std::fmt::Debug for KafkaBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaBus")
            .field("brokers", &self.inner.settings.brokers)
            .finish_non_exhaustive()
    }
}

fn broker(e: KafkaError) -> BusError {
    BusError::Broker(e.to_string())
}

impl KafkaBus {
    /// Clients for `settings.brokers`; nothing is sent until the first request. `store`
    /// holds the outbox.
    pub fn connect(settings: KafkaSettings, store: Store) -> Result<Self, BusError> {
        let base = client_config(&settings.brokers);
        let producer: FutureProducer = base
            .clone()
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "5")
            .set("compression.type", "lz4")
            .set(
                "message.timeout.ms",
                DELIVERY_TIMEOUT.as_millis().to_string(),
            )
            .create()
            .map_err(broker)?;
        let admin: AdminClient<DefaultClientContext> = base.create().map_err(broker)?;
        let registry = settings
            .schema_registry
            .as_deref()
            .map(SchemaRegistry::new)
            .transpose()?;
        Ok(Self {
            inner: Arc::new(Inner {
                settings,
                producer,
                admin,
                store,
                registry,
                outbox: Notify::new(),
            }),
        })
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// `messages` as this bus writes them to `topic` (see [`wire::encoded`]).
    pub(super) async fn encoded<'a>(
        &self,
        topic: &TopicSpec,
        messages: &'a [Message],
    ) -> Result<std::borrow::Cow<'a, [Message]>, BusError> {
        wire::encoded(topic, messages, self.inner.registry.as_ref()).await
    }

    /// Reads the values of `records` of a topic with `schema` back into JSON.
    async fn decoded(&self, schema: Option<&TopicSchema>, records: &mut [Record]) {
        for r in records {
            wire::decode(schema, self.inner.registry.as_ref(), r).await;
        }
    }

    /// Wakes the outbox relay: a transaction that wrote to the outbox committed.
    pub fn outbox_written(&self) {
        self.inner.outbox.notify_one();
    }

    pub(super) async fn outbox_notified(&self) {
        self.inner.outbox.notified().await;
    }

    /// Creates the topics that do not exist yet, compacted ones with
    /// `cleanup.policy=compact`, and registers their value schemas with the schema
    /// registry, if there is one.
    pub async fn ensure_topics(&self, topics: &[TopicSpec]) -> Result<(), BusError> {
        let replication = i32::from(self.inner.settings.replication.max(1));
        let retention_ms: Vec<Option<String>> = topics
            .iter()
            .map(|t| t.retention.map(|r| r.as_millis().to_string()))
            .collect();
        let new: Vec<NewTopic<'_>> = topics
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let n = NewTopic::new(
                    &t.name,
                    t.partitions as i32,
                    TopicReplication::Fixed(replication),
                );
                if t.compacted {
                    n.set("cleanup.policy", "compact")
                } else if t.kept {
                    // A topic of record: `claims replay` rebuilds the snapshots from it.
                    n.set("retention.ms", "-1").set("retention.bytes", "-1")
                } else if let Some(ms) = &retention_ms[i] {
                    n.set("retention.ms", ms)
                } else {
                    n
                }
            })
            .collect();
        let results = self
            .inner
            .admin
            .create_topics(
                &new,
                &AdminOptions::new().operation_timeout(Some(BROKER_TIMEOUT)),
            )
            .await
            .map_err(broker)?;
        for r in results {
            match r {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((name, code)) => {
                    return Err(BusError::Broker(format!(
                        "cannot create topic {name}: {code}"
                    )))
                }
            }
        }
        if let Some(registry) = &self.inner.registry {
            for t in topics {
                if let Some(schema) = t.schema {
                    registry.id_for(&t.name, schema).await?;
                }
            }
        }
        Ok(())
    }

    /// Produces `messages` to their key's partitions and waits until the broker has
    /// acknowledged every one.
    pub async fn publish(&self, topic: &TopicSpec, messages: &[Message]) -> Result<(), BusError> {
        let messages = self.encoded(topic, messages).await?;
        self.produce(placed(topic, &messages)).await
    }

    /// Produces (topic, partition, key, value, timestamp) records, all enqueued before
    /// any acknowledgement is awaited, so a batch costs one round of broker latency.
    pub(super) async fn produce<'a>(
        &self,
        records: impl Iterator<Item = (&'a str, u32, &'a str, &'a [u8], Option<i64>)>,
    ) -> Result<(), BusError> {
        let mut pending = Vec::new();
        for (topic, partition, key, value, timestamp) in records {
            let mut record = FutureRecord::to(topic)
                .partition(partition as i32)
                .key(key)
                .payload(value);
            if let Some(ts) = timestamp {
                record = record.timestamp(ts);
            }
            let mut record = Some(record);
            // A full local queue drains as acknowledgements arrive: wait and retry.
            loop {
                let Some(r) = record.take() else { break };
                match self.inner.producer.send_result(r) {
                    Ok(delivery) => pending.push(delivery),
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                        record = Some(r);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Err((e, _)) => return Err(broker(e)),
                }
            }
        }
        for delivery in pending {
            match delivery.await {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => return Err(broker(e)),
                Err(_) => return Err(BusError::Broker("the producer was closed".into())),
            }
        }
        Ok(())
    }

    /// Every record of `topic` from the beginning up to its end when called, in order per
    /// partition.
    pub async fn scan(&self, topic: &TopicSpec) -> Result<Vec<Record>, BusError> {
        let ends = self.watermarks(topic).await?;
        let from: Vec<(u32, i64, i64)> = ends.into_iter().filter(|(_, lo, hi)| hi > lo).collect();
        self.read_ranges(topic, from).await
    }

    /// The latest `limit` records of `topic` over all its partitions, oldest first.
    pub async fn latest(&self, topic: &TopicSpec, limit: usize) -> Result<Vec<Record>, BusError> {
        let ends = self.watermarks(topic).await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let ranges = ends
            .into_iter()
            .filter(|(_, lo, hi)| hi > lo)
            .map(|(p, lo, hi)| (p, lo.max(hi - limit), hi))
            .collect();
        let mut records = self.read_ranges(topic, ranges).await?;
        records.sort_by_key(|r| (r.timestamp_ms, r.partition, r.offset));
        let skip = records.len().saturating_sub(limit as usize);
        Ok(records.split_off(skip))
    }

    /// (partition, low, high) watermarks of each partition of `topic`.
    pub async fn watermarks(&self, topic: &TopicSpec) -> Result<Vec<(u32, i64, i64)>, BusError> {
        let consumer = self.reader()?;
        let (name, partitions) = (topic.name.clone(), topic.partitions);
        blocking(move || {
            (0..partitions)
                .map(|p| {
                    consumer
                        .fetch_watermarks(&name, p as i32, BROKER_TIMEOUT)
                        .map(|(lo, hi)| (p, lo, hi))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .await
    }

    /// Per group of `groups`: its committed next offset on each partition of `topics`
    /// that it ever committed, as (group, topic, partition, offset). One request per
    /// group.
    pub async fn group_offsets(
        &self,
        topics: &[TopicSpec],
        groups: &[String],
    ) -> Result<Vec<(String, String, u32, i64)>, BusError> {
        let brokers = self.inner.settings.brokers.clone();
        let (topics, groups) = (topics.to_vec(), groups.to_vec());
        blocking(move || {
            let mut out = Vec::new();
            for group in groups {
                let consumer: BaseConsumer = client_config(&brokers)
                    .set("group.id", &group)
                    .set("enable.auto.commit", "false")
                    .create()?;
                let mut tpl = TopicPartitionList::new();
                for t in &topics {
                    for p in 0..t.partitions {
                        tpl.add_partition(&t.name, p as i32);
                    }
                }
                let committed = consumer.committed_offsets(tpl, BROKER_TIMEOUT)?;
                for e in committed.elements() {
                    if let Offset::Offset(o) = e.offset() {
                        out.push((group.clone(), e.topic().to_owned(), e.partition() as u32, o));
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    /// The consumer groups of this deployment (named with its prefix) that the broker
    /// knows.
    pub async fn groups(&self) -> Result<Vec<String>, BusError> {
        let consumer = self.reader()?;
        let prefix = self.inner.settings.group_prefix.clone();
        blocking(move || {
            let list = consumer.fetch_group_list(None, BROKER_TIMEOUT)?;
            Ok(list
                .groups()
                .iter()
                .map(|g| g.name().to_owned())
                .filter(|g| g.starts_with(&prefix))
                .collect())
        })
        .await
    }

    /// A consumer outside any group, for reads by assignment.
    fn reader(&self) -> Result<BaseConsumer, BusError> {
        client_config(&self.inner.settings.brokers)
            .set("group.id", "claims-reader")
            .set("enable.auto.commit", "false")
            .create()
            .map_err(broker)
    }

    /// Reads `[from, to)` of each listed partition of `topic`, in order per partition,
    /// the partitions in number order.
    pub async fn read_ranges(
        &self,
        spec: &TopicSpec,
        ranges: Vec<(u32, i64, i64)>,
    ) -> Result<Vec<Record>, BusError> {
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        let consumer = self.reader()?;
        let topic = spec.name.clone();
        let mut records = blocking(move || {
            let mut tpl = TopicPartitionList::new();
            let mut until: HashMap<i32, i64> = HashMap::new();
            for (p, from, to) in &ranges {
                tpl.add_partition_offset(&topic, *p as i32, Offset::Offset(*from))?;
                until.insert(*p as i32, *to);
            }
            consumer.assign(&tpl)?;
            let mut out = Vec::new();
            let deadline = std::time::Instant::now() + BROKER_TIMEOUT * 3;
            while !until.is_empty() {
                if std::time::Instant::now() > deadline {
                    return Err(KafkaError::MessageConsumption(
                        RDKafkaErrorCode::RequestTimedOut,
                    ));
                }
                let Some(m) = consumer.poll(Duration::from_millis(200)) else {
                    continue;
                };
                let m = m?;
                let Some(end) = until.get(&m.partition()).copied() else {
                    continue;
                };
                if m.offset() < end {
                    out.push(to_record(&m));
                }
                if m.offset() + 1 >= end {
                    until.remove(&m.partition());
                }
            }
            out.sort_by_key(|r: &Record| (r.partition, r.offset));
            Ok(out)
        })
        .await?;
        self.decoded(spec.schema, &mut records).await;
        Ok(records)
    }

    /// Joins consumer group `group` on `topics`: the broker assigns this process its
    /// share of the partitions, and a new group starts from the beginning.
    pub async fn consumer(
        &self,
        group: &str,
        topics: &[TopicSpec],
    ) -> Result<KafkaConsumer, BusError> {
        self.ensure_topics(topics).await?;
        let group = format!("{}{group}", self.inner.settings.group_prefix);
        let mut config = client_config(&self.inner.settings.brokers);
        config
            .set("group.id", &group)
            .set("enable.auto.commit", "true")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            // A dead process's partitions move to the others after this long.
            .set(
                "session.timeout.ms",
                SESSION_TIMEOUT.as_millis().to_string(),
            );
        if let Some(id) = &self.inner.settings.instance_id {
            config.set("group.instance.id", format!("{id}.{group}"));
        }
        let assigned = Arc::new(AtomicU64::new(0));
        let consumer: StreamConsumer<Rebalances> = config
            .create_with_context(Rebalances(assigned.clone()))
            .map_err(broker)?;
        let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
        consumer.subscribe(&names).map_err(broker)?;
        Ok(KafkaConsumer {
            bus: self.clone(),
            consumer: Member(Some(consumer)),
            assigned,
            assignments: Default::default(),
            schemas: topics
                .iter()
                .filter_map(|t| Some((t.name.clone(), t.schema?)))
                .collect(),
        })
    }
}

/// `messages` as records for [`KafkaBus::produce`], each in its key's partition.
fn placed<'a>(
    topic: &'a TopicSpec,
    messages: &'a [Message],
) -> impl Iterator<Item = (&'a str, u32, &'a str, &'a [u8], Option<i64>)> {
    messages.iter().map(move |m| {
        (
            topic.name.as_str(),
            partition_for(&m.key, topic.partitions),
            m.key.as_str(),
            &m.value[..],
            None,
        )
    })
}

fn client_config(brokers: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", brokers)
        .set("client.id", "claims")
        // Keep librdkafka's own log lines at warnings and above.
        .set("log_level", "4");
    c
}

/// Runs a blocking librdkafka call off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, KafkaError> + Send + 'static,
) -> Result<T, BusError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BusError::Broker(e.to_string()))?
        .map_err(broker)
}

/// The record of a message as read; [`KafkaBus::decoded`] turns Avro values into JSON.
fn to_record<M: rdkafka::Message>(m: &M) -> Record {
    Record {
        topic: m.topic().to_owned(),
        partition: m.partition() as u32,
        offset: m.offset(),
        key: m
            .key()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .unwrap_or_default(),
        value: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
        timestamp_ms: m.timestamp().to_millis().unwrap_or_else(now_ms),
    }
}

/// This process's member of a consumer group.
/// Counts the rebalances that assigned this member partitions.
struct Rebalances(Arc<AtomicU64>);

impl ClientContext for Rebalances {}

impl ConsumerContext for Rebalances {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(partitions) = rebalance {
            if partitions.count() > 0 {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A member's client, closed on a thread of its own when it goes: librdkafka's close
/// serves the events still queued, and an assignment among them makes it wait forever
/// (librdkafka #4884), which must not take an async worker, or the process's shutdown,
/// with it. [`KafkaConsumer::close`] leaves the group first so that it does not happen.
struct Member(Option<StreamConsumer<Rebalances>>);

impl Deref for Member {
    type Target = StreamConsumer<Rebalances>;

    fn deref(&self) -> &Self::Target {
        self.0
            .as_ref()
            .expect("a member has its client until it is dropped")
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(closed_apart(client));
        }
    }
}

/// Drops `client` on a thread of its own; the receiver hears once its close finished.
fn closed_apart(client: StreamConsumer<Rebalances>) -> oneshot::Receiver<()> {
    let (done, closed) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("kafka-close".into())
        .spawn(move || {
            drop(client);
            // No one is listening when the consumer was dropped without `close`.
            let _ = done.send(());
        });
    if let Err(e) = spawned {
        // The closure, and the client with it, was dropped here.
        tracing::warn!(error = %e, "No thread to close a consumer on; closed in place.");
    }
    closed
}

pub struct KafkaConsumer {
    bus: KafkaBus,
    consumer: Member,
    assigned: Arc<AtomicU64>,
    assignments: super::Assignments,
    /// The value schema of each subscribed topic that has one.
    schemas: HashMap<String, &'static TopicSchema>,
}

impl std::fmt::Debug for KafkaConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaConsumer").finish_non_exhaustive()
    }
}

impl KafkaConsumer {
    /// Up to `max` records, waiting up to `wait` for the first; the rest are what the
    /// client has already fetched.
    pub async fn poll(&mut self, max: usize, wait: Duration) -> Result<Vec<Record>, BusError> {
        let mut out = Vec::new();
        match tokio::time::timeout(wait, self.consumer.recv()).await {
            Err(_) => return Ok(out),
            Ok(m) => {
                let m = m.map_err(broker)?;
                out.push(to_record(&m));
            }
        }
        // A zero timeout still polls once: it takes what is ready without waiting.
        while out.len() < max {
            match tokio::time::timeout(Duration::ZERO, self.consumer.recv()).await {
                Ok(Ok(m)) => out.push(to_record(&m)),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "A consumer error; the batch ends here.");
                    break;
                }
                Err(_) => break,
            }
        }
        for r in &mut out {
            let schema = self.schema_of(&r.topic);
            self.bus.decoded(schema, std::slice::from_mut(r)).await;
        }
        Ok(out)
    }

    /// See [`super::Consumer::lost`].
    pub fn lost(&self) -> Option<String> {
        self.consumer
            .client()
            .fatal_error()
            .map(|(code, reason)| format!("{code:?}: {reason}"))
    }

    /// See [`super::Consumer::reassigned`].
    pub fn reassigned(&mut self) -> bool {
        let count = self.assigned.load(Ordering::Relaxed);
        self.assignments.reassigned(count)
    }

    fn schema_of(&self, topic: &str) -> Option<&'static TopicSchema> {
        self.schemas.get(topic).copied()
    }

    /// Stores and commits, per partition, the offset after the last of `records`.
    pub async fn commit(&mut self, records: &[Record]) -> Result<(), BusError> {
        let mut next: HashMap<(&str, u32), i64> = HashMap::new();
        for r in records {
            let e = next.entry((r.topic.as_str(), r.partition)).or_insert(0);
            *e = (*e).max(r.offset + 1);
        }
        if next.is_empty() {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        for ((topic, p), o) in next {
            tpl.add_partition_offset(topic, p as i32, Offset::Offset(o))
                .map_err(broker)?;
        }
        // A partition taken away by a rebalance refuses the store: its new owner
        // redelivers those records, which the stages absorb.
        if let Err(e) = self.consumer.store_offsets(&tpl) {
            tracing::debug!(error = %e, "Offsets not stored (partition reassigned).");
            return Ok(());
        }
        if let Err(e) = self.consumer.commit(&tpl, CommitMode::Async) {
            tracing::debug!(error = %e, "Commit deferred to the next one.");
        }
        Ok(())
    }

    /// Leaves the group, then closes the client. Leaving first (unsubscribe, then serve
    /// the rebalance events until no partition is assigned and none is coming) means
    /// the close finds no assignment waiting, the one thing that hangs it. A static
    /// member (`CLAIMS_INSTANCE_ID`) keeps its partitions for its restart instead, as
    /// its close does: it stops fetching and serves the events already queued. Records
    /// fetched meanwhile are dropped: their offsets were never stored, so the
    /// partitions' next owner reads them. `Err` when a step ran out of time; the client
    /// then finishes closing on its own thread.
    pub async fn close(mut self) -> Result<(), BusError> {
        let leaves = self.bus.inner.settings.instance_id.is_none();
        if leaves {
            self.consumer.unsubscribe();
        } else {
            self.stop_fetching();
        }
        let deadline = tokio::time::Instant::now() + CLOSE_TIMEOUT;
        let mut quiet = 0;
        while quiet < 3 {
            if tokio::time::Instant::now() >= deadline {
                return Err(BusError::Broker(
                    "the consumer's events did not settle before closing".into(),
                ));
            }
            let served = tokio::time::timeout(Duration::from_millis(100), self.consumer.recv());
            let outcome = served.await;
            if let Ok(Err(e)) = &outcome {
                tracing::debug!(error = %e, "A consumer error while closing.");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            quiet = match outcome {
                Ok(Ok(_)) => {
                    if !leaves {
                        // From partitions assigned since: stop those too.
                        self.stop_fetching();
                    }
                    0
                }
                _ if leaves && self.consumer.assignment().is_ok_and(|a| a.count() > 0) => 0,
                _ => quiet + 1,
            };
        }
        let client = self
            .consumer
            .0
            .take()
            .expect("a member has its client until it is dropped");
        match tokio::time::timeout(CLOSE_TIMEOUT, closed_apart(client)).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(BusError::Broker(
                "the consumer's client did not finish closing in time".into(),
            )),
        }
    }

    /// Pauses every partition assigned: the client fetches nothing more for them.
    fn stop_fetching(&self) {
        let paused = self
            .consumer
            .assignment()
            .and_then(|assigned| self.consumer.pause(&assigned));
        if let Err(e) = paused {
            tracing::debug!(error = %e, "Fetching not paused before closing.");
        }
    }

    /// Produces `outputs`, waits for every acknowledgement, then commits `records`. Not
    /// atomic: a crash in between redelivers the batch, which idempotent stages absorb.
    pub async fn publish_and_commit(
        &mut self,
        outputs: &[(TopicSpec, Vec<Message>)],
        records: &[Record],
    ) -> Result<(), BusError> {
        let mut encoded = Vec::with_capacity(outputs.len());
        for (t, ms) in outputs {
            encoded.push((t, self.bus.encoded(t, ms).await?));
        }
        let outputs = encoded;
        self.bus
            .produce(outputs.iter().flat_map(|(t, ms)| placed(t, ms)))
            .await?;
        self.commit(records).await
    }
}
