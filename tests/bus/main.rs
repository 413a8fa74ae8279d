//! The bus: the embedded log against each store (ordering per key, commit and resume,
//! redelivery of uncommitted records, prompt wake-ups, the consumer-group lease,
//! compaction and trimming, concurrent publishers), and the Kafka bus against a real
//! broker for what the two share (`kafka::…`).

// A test reports failure by panicking; unwrapping is the idiom here.
#![allow(clippy::unwrap_used)]

#[path = "../api/support/backend.rs"]
mod backend;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use backend::{Backend, Database};
use pipeline::bus::{
    pack_all, Bus, Consumer, EmbeddedLog, KafkaBus, KafkaSettings, Message, Packed, TopicSpec,
};
use pipeline::store::{Store, StoreOptions};

/// `shared` tests run on the embedded log over each store and on Kafka (`sqlite::…`,
/// `postgres::…`, `kafka::…`); `embedded` tests only on the embedded log.
macro_rules! buses {
    (shared: [$($shared:ident),+ $(,)?], embedded: [$($embedded:ident),+ $(,)?] $(,)?) => {
        mod sqlite { $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $shared() { super::$shared(super::Backend::Sqlite).await }
        )+ $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $embedded() { super::$embedded(super::Backend::Sqlite).await }
        )+ }
        mod postgres { $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $shared() { super::$shared(super::Backend::Postgres).await }
        )+ $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $embedded() { super::$embedded(super::Backend::Postgres).await }
        )+ }
        mod kafka { $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $shared() { super::$shared(super::Backend::Kafka).await }
        )+ }
    };
}

buses!(
    shared: [
        records_come_back_in_order_per_key_with_their_offsets,
        a_consumer_resumes_after_its_commit_and_uncommitted_records_come_again,
        a_waiting_consumer_wakes_as_soon_as_a_record_is_published,
        a_closed_consumer_hands_its_partitions_over_at_once_and_a_static_one_keeps_them,
        pages_go_through_the_partitions_side_by_side_each_in_offset_order,
    ],
    embedded: [
        one_process_at_a_time_consumes_a_group_and_another_takes_over_from_the_commit,
        compaction_keeps_the_latest_record_per_key_and_trim_drops_consumed_ones,
        trim_keeps_records_younger_than_retention_and_removes_a_long_run_in_chunks,
        concurrent_publishers_get_distinct_gapless_offsets,
        outputs_and_the_commit_of_their_inputs_land_together,
        a_poll_that_finds_a_few_records_takes_what_publishes_add_until_it_holds_enough,
        a_poll_whose_read_fails_part_way_hands_out_nothing_and_passes_nothing_by,
        upkeep_compacts_a_topic_once_it_took_as_many_records_again_as_it_held,
        large_values_are_stored_compressed_and_read_back_as_published,
        values_packed_ahead_are_stored_as_the_turn_packs_them,
    ],
);

struct Fixture {
    store: Store,
    backend: Backend,
    db: Database,
    _dir: tempfile::TempDir,
}

impl Fixture {
    /// The bus under test: the embedded log in the store, or Kafka with groups of this
    /// test's own.
    fn bus(&self) -> Bus {
        self.bus_of(None, &format!("g{}.", uuid::Uuid::new_v4().simple()))
    }

    /// The bus as a process named `instance_id` sees it, with groups `group_prefix`…
    fn bus_of(&self, instance_id: Option<&str>, group_prefix: &str) -> Bus {
        match self.backend {
            Backend::Kafka => Bus::Kafka(
                KafkaBus::connect(
                    KafkaSettings {
                        brokers: backend::kafka_brokers(),
                        replication: 1,
                        group_prefix: group_prefix.to_owned(),
                        instance_id: instance_id.map(str::to_owned),
                        schema_registry: None,
                    },
                    self.store.clone(),
                )
                .unwrap(),
            ),
            _ => Bus::Embedded(EmbeddedLog::new(self.store.clone())),
        }
    }
}

async fn fixture(b: Backend) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(b, dir.path()).await;
    let store = Store::open(&db.url, &StoreOptions::default())
        .await
        .unwrap();
    Fixture {
        store,
        backend: b,
        db,
        _dir: dir,
    }
}

fn msg(key: &str, value: &str) -> Message {
    Message {
        key: key.into(),
        value: value.as_bytes().to_vec(),
    }
}

/// Records `topic` holds over its partitions.
async fn records_held(log: &EmbeddedLog, topic: &TopicSpec) -> i64 {
    let ends = log.partition_ends(&topic.name).await.unwrap();
    ends.iter().map(|(_, _, held)| held).sum()
}

/// The (key, value) pairs a new group reads from `topic`, sorted.
async fn held_by_key(bus: &Bus, topic: &TopicSpec) -> Vec<(String, String)> {
    let mut c = bus
        .consumer("restore", std::slice::from_ref(topic))
        .await
        .unwrap();
    let mut held: Vec<(String, String)> = c
        .poll(100, Duration::from_secs(1))
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.key, String::from_utf8(r.value).unwrap()))
        .collect();
    held.sort();
    held
}

/// A topic of this test's own (a broker is shared by the tests).
fn topic(name: &str, compacted: bool) -> TopicSpec {
    TopicSpec::new(
        format!("{name}.{}", uuid::Uuid::new_v4().simple()),
        4,
        compacted,
    )
}

async fn records_come_back_in_order_per_key_with_their_offsets(b: Backend) {
    let f = fixture(b).await;
    let bus = f.bus();
    let t = topic("claims.intake", false);
    let msgs: Vec<Message> = (0..30)
        .map(|i| msg(&format!("k{}", i % 5), &format!("v{i}")))
        .collect();
    bus.publish(&t, &msgs).await.unwrap();
    let mut c = bus.consumer("g", std::slice::from_ref(&t)).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 30 {
        let batch = c.poll(7, Duration::from_secs(20)).await.unwrap();
        assert!(!batch.is_empty() && batch.len() <= 7);
        got.extend(batch);
    }
    for k in 0..5 {
        let key = format!("k{k}");
        let values: Vec<String> = got
            .iter()
            .filter(|r| r.key == key)
            .map(|r| String::from_utf8(r.value.clone()).unwrap())
            .collect();
        let expected: Vec<String> = (0..30)
            .filter(|i| i % 5 == k)
            .map(|i| format!("v{i}"))
            .collect();
        assert_eq!(values, expected, "records of one key keep their order");
        let partitions: std::collections::HashSet<u32> = got
            .iter()
            .filter(|r| r.key == key)
            .map(|r| r.partition)
            .collect();
        assert_eq!(partitions.len(), 1, "one key, one partition");
    }
    for p in 0..4 {
        let offsets: Vec<i64> = got
            .iter()
            .filter(|r| r.partition == p)
            .map(|r| r.offset)
            .collect();
        assert_eq!(
            offsets,
            (0..offsets.len() as i64).collect::<Vec<_>>(),
            "offsets count from 0 without gaps"
        );
    }
    assert!(c
        .poll(10, Duration::from_millis(50))
        .await
        .unwrap()
        .is_empty());
}

/// What `claims replay` reads: every record once, each partition in offset order, and
/// each page a share of every partition not read to its end, so that records written
/// at about the same time are rebuilt at about the same time.
async fn pages_go_through_the_partitions_side_by_side_each_in_offset_order(b: Backend) {
    let f = fixture(b).await;
    let bus = f.bus();
    let t = topic("claims.decided", false);
    let msgs: Vec<Message> = (0..48)
        .map(|i| msg(&format!("k{}", i % 8), &format!("v{i}")))
        .collect();
    bus.publish(&t, &msgs).await.unwrap();
    let extent = bus.extent(&t).await.unwrap();
    let partitions: std::collections::BTreeSet<u32> = extent.iter().map(|e| e.0).collect();
    assert!(partitions.len() > 1, "{extent:?}");
    let mut pages = bus.pages(&t, extent, 8);
    let mut read = Vec::new();
    let mut first = true;
    while let Some(page) = pages.next().await.unwrap() {
        assert!(!page.is_empty() && page.len() <= 8, "{}", page.len());
        if first {
            let of_page: std::collections::BTreeSet<u32> =
                page.iter().map(|r| r.partition).collect();
            assert_eq!(
                of_page, partitions,
                "the first page takes from every partition"
            );
            first = false;
        }
        read.extend(page);
    }
    let mut values: Vec<String> = read
        .iter()
        .map(|r| String::from_utf8(r.value.clone()).unwrap())
        .collect();
    values.sort_by_key(|v| v[1..].parse::<u32>().unwrap());
    let sent: Vec<String> = (0..48).map(|i| format!("v{i}")).collect();
    assert_eq!(values, sent, "every record once");
    for p in &partitions {
        let offsets: Vec<i64> = read
            .iter()
            .filter(|r| r.partition == *p)
            .map(|r| r.offset)
            .collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{p}: {offsets:?}");
    }
}

async fn a_consumer_resumes_after_its_commit_and_uncommitted_records_come_again(b: Backend) {
    let f = fixture(b).await;
    let t = topic("t", false);
    let bus = f.bus();
    bus.publish(
        &t,
        &(0..10)
            .map(|i| msg("same-key", &i.to_string()))
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    let mut c = bus.consumer("g", std::slice::from_ref(&t)).await.unwrap();
    let first = c.poll(4, Duration::from_secs(20)).await.unwrap();
    assert_eq!(first.len(), 4);
    c.commit(&first).await.unwrap();
    let second = c.poll(4, Duration::from_secs(20)).await.unwrap();
    assert_eq!(second[0].offset, 4);
    drop(c); // crashed before committing `second`

    // The same process restarts its consumer: it resumes after the commit.
    let mut again = bus.consumer("g", std::slice::from_ref(&t)).await.unwrap();
    let redelivered = again.poll(100, Duration::from_secs(20)).await.unwrap();
    assert_eq!(
        redelivered.iter().map(|r| r.offset).collect::<Vec<_>>(),
        (4..10).collect::<Vec<_>>()
    );
    // Another group reads from the beginning.
    let mut other = bus.consumer("other", &[t]).await.unwrap();
    assert_eq!(
        other
            .poll(100, Duration::from_secs(20))
            .await
            .unwrap()
            .len(),
        10
    );
}

async fn a_waiting_consumer_wakes_as_soon_as_a_record_is_published(b: Backend) {
    let f = fixture(b).await;
    let t = topic("t", false);
    let bus = f.bus();
    let mut c = bus.consumer("g", std::slice::from_ref(&t)).await.unwrap();
    let publisher = bus.clone();
    let t2 = t.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        publisher.publish(&t2, &[msg("k", "hello")]).await.unwrap();
    });
    let started = Instant::now();
    let got = c.poll(10, Duration::from_secs(30)).await.unwrap();
    let waited = started.elapsed();
    assert_eq!(got.len(), 1);
    // Woken by the publish, not by the end of the 30 s wait.
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
}

/// On the embedded log a poll that finds fewer than 125 records (a quarter of its batch
/// when that is less) goes on taking what each publish adds until it holds that many
/// or the linger ends (`bus::embedded::LINGER`, made long here so that timing cannot
/// decide the test): a trickle reaches a stage in larger batches, each one turn on the
/// writer, whatever the stage's batch size.
async fn a_poll_that_finds_a_few_records_takes_what_publishes_add_until_it_holds_enough(
    b: Backend,
) {
    let f = fixture(b).await;
    let t = topic("t", false);
    let linger = Duration::from_secs(3);
    let bus = Bus::Embedded(EmbeddedLog::new(f.store.clone()).with_linger(linger));
    let mut c = bus.consumer("g", std::slice::from_ref(&t)).await.unwrap();
    bus.publish(&t, &[msg("a", "1")]).await.unwrap();
    let publisher = bus.clone();
    let t2 = t.clone();
    // 1 + 70 + 54 records: 125 after the third publish, for a poll of 500 (an eighth of
    // which, 62, the second publish passes).
    let later = tokio::spawn(async move {
        for (prefix, n) in [("b", 70), ("c", 54)] {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let records: Vec<Message> = (0..n).map(|i| msg(&format!("{prefix}{i}"), "v")).collect();
            publisher.publish(&t2, &records).await.unwrap();
        }
    });
    let started = Instant::now();
    let got = c.poll(500, Duration::from_secs(30)).await.unwrap();
    let waited = started.elapsed();
    later.await.unwrap();
    let keys: HashSet<&str> = got.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(
        keys.len(),
        125,
        "one batch holds all three publishes: {keys:?}"
    );
    // Handed out when the third publish made 125, not at the end of the linger.
    assert!(waited < Duration::from_secs(2), "waited {waited:?}");

    // With nothing more published, what it found comes out when the linger ends.
    bus.publish(&t, &[msg("c", "3")]).await.unwrap();
    let started = Instant::now();
    let got = c.poll(500, Duration::from_secs(30)).await.unwrap();
    let waited = started.elapsed();
    assert_eq!(got.len(), 1);
    assert!(
        waited >= linger && waited < Duration::from_secs(20),
        "waited {waited:?}"
    );

    // A poll of 100 waits for a quarter of it, not for 125: 25 are handed out at once.
    let many: Vec<Message> = (0..25).map(|i| msg(&format!("k{i}"), "v")).collect();
    bus.publish(&t, &many).await.unwrap();
    let started = Instant::now();
    let got = c.poll(100, Duration::from_secs(30)).await.unwrap();
    assert_eq!(got.len(), 25);
    assert!(started.elapsed() < linger, "waited {:?}", started.elapsed());
}

/// A poll that has read some records and then fails to read (the store went away)
/// answers the error and hands nothing out; the next poll starts where the failed one
/// did, so the records it had read are handed out then, not passed by.
async fn a_poll_whose_read_fails_part_way_hands_out_nothing_and_passes_nothing_by(b: Backend) {
    let f = fixture(b).await;
    let t = topic("t", false);
    let linger = Duration::from_secs(2);
    let bus = Bus::Embedded(EmbeddedLog::new(f.store.clone()).with_linger(linger));
    let mut c = bus.consumer("g", std::slice::from_ref(&t)).await.unwrap();
    bus.publish(&t, &[msg("a", "1")]).await.unwrap();
    sqlx::any::install_default_drivers();
    let admin = sqlx::AnyPool::connect(&f.db.url).await.unwrap();
    // The poll reads the record, lingers for more, and its next read finds the log's
    // table gone.
    let polling = tokio::spawn(async move {
        let polled = c.poll(100, Duration::from_secs(30)).await;
        (c, polled)
    });
    tokio::time::sleep(linger / 4).await;
    sqlx::query("ALTER TABLE bus_records RENAME TO bus_records_away")
        .execute(&admin)
        .await
        .unwrap();
    let (mut c, polled) = polling.await.unwrap();
    sqlx::query("ALTER TABLE bus_records_away RENAME TO bus_records")
        .execute(&admin)
        .await
        .unwrap();
    assert!(polled.is_err(), "the failed read is reported: {polled:?}");
    let got = c.poll(100, Duration::from_secs(30)).await.unwrap();
    assert_eq!(
        got.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        ["a"],
        "the record read before the failure comes again"
    );
}

/// The log's upkeep leaves a compacted topic alone until it took as many new records
/// as it held (and at least 10,000), then keeps the latest record of each key.
async fn upkeep_compacts_a_topic_once_it_took_as_many_records_again_as_it_held(b: Backend) {
    let f = fixture(b).await;
    let log = EmbeddedLog::new(f.store.clone());
    let state = topic("state", true);
    let versions = |n: usize| -> Vec<Message> {
        (0..n)
            .map(|i| msg(&format!("k{}", i % 3), &i.to_string()))
            .collect()
    };
    log.publish(&state, &versions(30)).await.unwrap();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let every = Duration::from_millis(100);
    let upkeep = tokio::spawn(pipeline::bus::embedded::maintain(
        log.clone(),
        vec![state.clone()],
        every,
        Duration::from_secs(3600),
        stopped,
    ));
    // Its first look only notes the topic; fewer than 10,000 more leave it whole.
    tokio::time::sleep(every * 10).await;
    log.publish(&state, &versions(9_000)).await.unwrap();
    tokio::time::sleep(every * 5).await;
    assert_eq!(records_held(&log, &state).await, 9_030);

    log.publish(&state, &versions(1_000)).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while records_held(&log, &state).await > 3 {
        assert!(Instant::now() < deadline, "not compacted within 30 s");
        tokio::time::sleep(every).await;
    }
    stop.send(true).unwrap();
    upkeep.await.unwrap();
    assert_eq!(
        held_by_key(&Bus::Embedded(log), &state).await,
        [("k0", "999"), ("k1", "997"), ("k2", "998")].map(|(k, v)| (k.to_owned(), v.to_owned()))
    );
}

async fn a_closed_consumer_hands_its_partitions_over_at_once_and_a_static_one_keeps_them(
    b: Backend,
) {
    let f = fixture(b).await;
    let bus = f.bus();
    let t = topic("t", false);
    let records: Vec<Message> = (0..8).map(|i| msg(&format!("k{i}"), "v")).collect();
    bus.publish(&t, &records).await.unwrap();
    // Joined, then closed without serving its events, at every point of the group's
    // assignment: before the broker answered the join, while it did, and after the
    // assignment waited in the queue. An assignment that comes to a closing consumer is
    // what hangs a plain close on Kafka.
    for pause in [0, 20, 50, 100, 200, 400, 800, 1600, 3000] {
        let idle = bus.consumer("g", std::slice::from_ref(&t)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let closing = tokio::time::timeout(Duration::from_secs(40), idle.close()).await;
        assert!(
            matches!(closing, Ok(Ok(()))),
            "the consumer closes {pause} ms after joining: {closing:?}"
        );
    }

    // The group's next member reads every record (nothing was committed on the closed
    // ones' behalf), and at once: not after a closed member's session ran out (10 s).
    let mut next = bus.consumer("g", std::slice::from_ref(&t)).await.unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    while got.len() < records.len() && started.elapsed() < Duration::from_secs(30) {
        got.extend(next.poll(100, Duration::from_secs(1)).await.unwrap());
    }
    assert_eq!(got.len(), records.len());
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "handed over after {waited:?}"
    );
    drop(next);

    // A static member (a process with `CLAIMS_INSTANCE_ID`) closes without leaving: its
    // partitions wait for its restart rather than move to the other member, and the
    // restart takes them back at once. (On the embedded log a group has one consumer
    // at a time; the part applies to Kafka.)
    if !matches!(b, Backend::Kafka) {
        return;
    }
    let t = topic("t", false);
    let groups = format!("s{}.", uuid::Uuid::new_v4().simple());
    let mut p1 = f
        .bus_of(Some("p1"), &groups)
        .consumer("g", std::slice::from_ref(&t))
        .await
        .unwrap();
    let mut p2 = f
        .bus_of(Some("p2"), &groups)
        .consumer("g", std::slice::from_ref(&t))
        .await
        .unwrap();
    // Both serve the group until its assignment settles, on records published for the
    // purpose: one member may hold every partition for a while before the other has
    // joined (the broker delays a new group's first rebalance), and a partition that
    // moves is read again from the start (nothing is committed), so each reads some.
    let warm_up: Vec<Message> = (0..40).map(|i| msg(&format!("w{i}"), "v")).collect();
    bus.publish(&t, &warm_up).await.unwrap();
    read_until_quiet(&mut p1, &mut p2, "w").await;
    // Then the settled assignment shares these between them.
    let records: Vec<Message> = (0..40).map(|i| msg(&format!("k{i}"), "v")).collect();
    bus.publish(&t, &records).await.unwrap();
    let seen_by_p2 = read_until_quiet(&mut p1, &mut p2, "k").await;
    assert!(
        !seen_by_p2.is_empty() && seen_by_p2.len() < records.len(),
        "the two members share the partitions: p2 read {} keys",
        seen_by_p2.len()
    );
    let closing = tokio::time::timeout(Duration::from_secs(40), p1.close()).await;
    assert!(
        matches!(closing, Ok(Ok(()))),
        "the static member closes: {closing:?}"
    );
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(4) {
        let moved = p2.poll(100, Duration::from_millis(200)).await.unwrap();
        assert!(
            moved.is_empty(),
            "p1's partitions went to p2: {} records",
            moved.len()
        );
    }
    let mut restarted = f
        .bus_of(Some("p1"), &groups)
        .consumer("g", std::slice::from_ref(&t))
        .await
        .unwrap();
    let started = Instant::now();
    let mut taken_back = HashSet::new();
    while seen_by_p2.len() + taken_back.len() < records.len()
        && started.elapsed() < Duration::from_secs(30)
    {
        for r in restarted.poll(100, Duration::from_secs(1)).await.unwrap() {
            if r.key.starts_with('k') {
                taken_back.insert(r.key);
            }
        }
    }
    assert!(taken_back.is_disjoint(&seen_by_p2));
    assert_eq!(seen_by_p2.len() + taken_back.len(), records.len());
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "taken back after {waited:?}"
    );
}

/// Polls both members until each has read a record and then neither has for 2 s (at
/// most 40 s); answers the keys starting with `prefix` that `b` read.
async fn read_until_quiet(
    a: &mut pipeline::bus::Consumer,
    b: &mut pipeline::bus::Consumer,
    prefix: &str,
) -> HashSet<String> {
    let mut read_by_b = HashSet::new();
    let (started, mut last_read) = (Instant::now(), Instant::now());
    let (mut a_read, mut b_read) = (false, false);
    while started.elapsed() < Duration::from_secs(40)
        && (!a_read || !b_read || last_read.elapsed() < Duration::from_secs(2))
    {
        let by_a = a.poll(100, Duration::from_millis(100)).await.unwrap();
        let by_b = b.poll(100, Duration::from_millis(100)).await.unwrap();
        if !by_a.is_empty() || !by_b.is_empty() {
            last_read = Instant::now();
        }
        a_read |= !by_a.is_empty();
        b_read |= !by_b.is_empty();
        read_by_b.extend(
            by_b.into_iter()
                .map(|r| r.key)
                .filter(|k| k.starts_with(prefix)),
        );
    }
    read_by_b
}

async fn one_process_at_a_time_consumes_a_group_and_another_takes_over_from_the_commit(b: Backend) {
    let f = fixture(b).await;
    let t = topic("t", false);
    // Two logs on one store stand for two processes.
    let first = Bus::Embedded(EmbeddedLog::new(f.store.clone()));
    let second = Bus::Embedded(EmbeddedLog::new(f.store.clone()));
    first
        .publish(
            &t,
            &(0..6)
                .map(|i| msg(&format!("k{i}"), "v"))
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();

    let mut a = first.consumer("g", std::slice::from_ref(&t)).await.unwrap();
    let mut b2 = second
        .consumer("g", std::slice::from_ref(&t))
        .await
        .unwrap();
    let got_a = a.poll(3, Duration::from_secs(1)).await.unwrap();
    assert!(!got_a.is_empty());
    a.commit(&got_a).await.unwrap();
    assert!(
        b2.poll(10, Duration::from_millis(300))
            .await
            .unwrap()
            .is_empty(),
        "the lease holder alone consumes"
    );
    drop(a); // the first process dies without committing more

    let deadline = Instant::now() + pipeline::bus::embedded::LEASE + Duration::from_secs(5);
    let taken = loop {
        let got = b2.poll(100, Duration::from_millis(500)).await.unwrap();
        if !got.is_empty() {
            break got;
        }
        assert!(
            Instant::now() < deadline,
            "no takeover after the lease expired"
        );
    };
    let first_offsets: std::collections::HashSet<(u32, i64)> =
        got_a.iter().map(|r| (r.partition, r.offset)).collect();
    assert!(
        taken
            .iter()
            .all(|r| !first_offsets.contains(&(r.partition, r.offset))),
        "committed records are not consumed twice"
    );
    assert_eq!(got_a.len() + taken.len(), 6, "nothing lost");
}

async fn compaction_keeps_the_latest_record_per_key_and_trim_drops_consumed_ones(b: Backend) {
    let f = fixture(b).await;
    let log = EmbeddedLog::new(f.store.clone());
    let state = topic("state", true);
    log.publish(
        &state,
        &[
            msg("a", "1"),
            msg("b", "1"),
            msg("a", "2"),
            msg("a", "3"),
            msg("b", "2"),
        ],
    )
    .await
    .unwrap();
    assert_eq!(log.compact(&state).await.unwrap(), 3);
    let bus = Bus::Embedded(log.clone());
    assert_eq!(
        held_by_key(&bus, &state).await,
        [
            ("a".to_owned(), "3".to_owned()),
            ("b".to_owned(), "2".to_owned())
        ]
    );

    let events = topic("events", false);
    log.publish(
        &events,
        &(0..5).map(|i| msg("k", &i.to_string())).collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    let mut g = bus
        .consumer("g", std::slice::from_ref(&events))
        .await
        .unwrap();
    let got = g.poll(3, Duration::from_secs(1)).await.unwrap();
    g.commit(&got).await.unwrap();
    assert_eq!(
        log.trim(&events, Duration::ZERO).await.unwrap(),
        3,
        "only what the group consumed"
    );
    let rest = g.poll(100, Duration::from_secs(1)).await.unwrap();
    assert_eq!(rest.iter().map(|r| r.offset).collect::<Vec<_>>(), [3, 4]);
}

/// Trim removes a partition's consumed, old records from its start, in statements of
/// a bounded size: a run longer than one statement goes whole, and records younger than
/// the retention stay however consumed.
async fn trim_keeps_records_younger_than_retention_and_removes_a_long_run_in_chunks(b: Backend) {
    let f = fixture(b).await;
    let log = EmbeddedLog::new(f.store.clone());
    let bus = Bus::Embedded(log.clone());
    let events = TopicSpec::new(
        format!("events.{}", uuid::Uuid::new_v4().simple()),
        1,
        false,
    );
    let records = 25_000;
    for chunk in (0..records).collect::<Vec<_>>().chunks(5_000) {
        let msgs: Vec<Message> = chunk.iter().map(|i| msg("k", &i.to_string())).collect();
        log.publish(&events, &msgs).await.unwrap();
    }
    let mut g = bus
        .consumer("g", std::slice::from_ref(&events))
        .await
        .unwrap();
    let mut consumed = 0;
    while consumed < records - 10 {
        let got = g.poll(5_000, Duration::from_secs(1)).await.unwrap();
        let take = got.len().min(records - 10 - consumed);
        g.commit(&got[..take]).await.unwrap();
        consumed += take;
        if take < got.len() {
            break;
        }
    }
    assert_eq!(
        log.trim(&events, Duration::from_secs(3600)).await.unwrap(),
        0,
        "consumed, but younger than the retention"
    );
    assert_eq!(
        log.trim(&events, Duration::ZERO).await.unwrap(),
        (records - 10) as u64,
        "every consumed record, over several statements"
    );
    let ends = log.partition_ends(&events.name).await.unwrap();
    assert_eq!(ends, [(0, records as i64, 10)]);
}

async fn concurrent_publishers_get_distinct_gapless_offsets(b: Backend) {
    let f = fixture(b).await;
    let t = TopicSpec::new("t", 1, false);
    let bus = Bus::Embedded(EmbeddedLog::new(f.store.clone()));
    let tasks: Vec<_> = (0..8)
        .map(|w| {
            let bus = bus.clone();
            let t = t.clone();
            tokio::spawn(async move {
                for i in 0..10 {
                    bus.publish(
                        &t,
                        &[
                            msg(&format!("w{w}"), &i.to_string()),
                            msg(&format!("w{w}"), "x"),
                        ],
                    )
                    .await
                    .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let mut c = bus.consumer("g", &[t]).await.unwrap();
    let mut offsets = Vec::new();
    loop {
        let got = c.poll(1000, Duration::from_millis(200)).await.unwrap();
        if got.is_empty() {
            break;
        }
        offsets.extend(got.into_iter().map(|r| r.offset));
    }
    assert_eq!(offsets, (0..160).collect::<Vec<_>>());
}

async fn outputs_and_the_commit_of_their_inputs_land_together(b: Backend) {
    let f = fixture(b).await;
    let (input, output) = (topic("in", false), topic("out", false));
    let bus = Bus::Embedded(EmbeddedLog::new(f.store.clone()));
    bus.publish(&input, &[msg("k", "1"), msg("k", "2")])
        .await
        .unwrap();
    let mut c = bus
        .consumer("g", std::slice::from_ref(&input))
        .await
        .unwrap();
    let batch = c.poll(10, Duration::from_secs(1)).await.unwrap();
    assert_eq!(batch.len(), 2);

    // A record already sits where the next append to `clash` goes (as if the log were
    // damaged), so publishing there fails the whole transaction: neither the outputs
    // nor the commit land, and the batch comes again.
    let clash = TopicSpec::new("clash", 1, false);
    bus.publish(&clash, &[]).await.unwrap();
    let raw = sqlx::AnyPool::connect(&f.db.url).await.unwrap();
    sqlx::query(
        "INSERT INTO bus_partitions (topic, partition, next_offset) VALUES ('clash', 0, 0) ON CONFLICT DO NOTHING",
    )
    .execute(&raw)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO bus_records (topic, partition, \"offset\", record_key, value, timestamp_ms) \
         VALUES ('clash', 0, 0, 'k', $1, 0)",
    )
    .bind(b"squatter".to_vec())
    .execute(&raw)
    .await
    .unwrap();
    let poisoned = clash.clone();
    assert!(c
        .publish_and_commit(
            &[
                (output.clone(), vec![msg("k", "out-1")]),
                (poisoned, vec![msg("k", "never")])
            ],
            &batch
        )
        .await
        .is_err());
    let mut out = bus
        .consumer("reader", std::slice::from_ref(&output))
        .await
        .unwrap();
    assert!(out
        .poll(10, Duration::from_millis(50))
        .await
        .unwrap()
        .is_empty());
    let mut again = bus
        .consumer("g", std::slice::from_ref(&input))
        .await
        .unwrap();
    assert_eq!(
        again.poll(10, Duration::from_secs(1)).await.unwrap().len(),
        2
    );

    // Done properly, both land: the output is readable and the group has moved on.
    again
        .publish_and_commit(&[(output.clone(), vec![msg("k", "out-1")])], &batch)
        .await
        .unwrap();
    assert_eq!(out.poll(10, Duration::from_secs(1)).await.unwrap().len(), 1);
    let mut after = bus
        .consumer("g", std::slice::from_ref(&input))
        .await
        .unwrap();
    assert!(after
        .poll(10, Duration::from_millis(50))
        .await
        .unwrap()
        .is_empty());
}

/// A decision's record as large as a 60 rules' trace makes it.
fn large_record(claim_id: &str) -> String {
    let trace: Vec<String> = (0..60)
        .map(|i| format!(r#"{{"rule_id":"r{i}","action":"flag","matched":false}}"#))
        .collect();
    format!(
        r#"{{"claim_id":"{claim_id}","trace":[{}]}}"#,
        trace.join(",")
    )
}

/// The values `topic` holds, as a scan reads them back, in order.
async fn scanned(log: &EmbeddedLog, topic: &TopicSpec) -> Vec<Vec<u8>> {
    let mut values: Vec<Vec<u8>> = log
        .scan(topic)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.value)
        .collect();
    values.sort();
    values
}

/// The values of `published`, in order.
fn values(published: &[Message]) -> Vec<Vec<u8>> {
    let mut values: Vec<Vec<u8>> = published.iter().map(|m| m.value.clone()).collect();
    values.sort();
    values
}

/// A decision's record is a few KiB of JSON; the log keeps it compressed, and its reads
/// (a consumer's poll, a scan: all go through one row type) hand it back as published.
async fn large_values_are_stored_compressed_and_read_back_as_published(b: Backend) {
    let f = fixture(b).await;
    let t = topic("large", false);
    let log = EmbeddedLog::new(f.store.clone());
    let bus = Bus::Embedded(log.clone());
    let large = large_record("C-1");
    let published = [msg("C-1", &large), msg("C-2", r#"{"claim_id":"C-2"}"#)];
    bus.publish(&t, &published).await.unwrap();

    let mut c = bus.consumer("g", std::slice::from_ref(&t)).await.unwrap();
    let mut read: Vec<(String, Vec<u8>)> = c
        .poll(10, Duration::from_secs(1))
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.key, r.value))
        .collect();
    read.sort();
    let expected: Vec<(String, Vec<u8>)> = published
        .iter()
        .map(|m| (m.key.clone(), m.value.clone()))
        .collect();
    assert_eq!(read, expected);
    assert_eq!(scanned(&log, &t).await, values(&published));

    // As stored: the large value in under a third of its bytes, the small one as it was.
    let raw = sqlx::AnyPool::connect(&f.db.url).await.unwrap();
    let stored: Vec<(String, i64)> = sqlx::query_as(
        "SELECT record_key, LENGTH(value) FROM bus_records WHERE topic = $1 ORDER BY record_key",
    )
    .bind(&t.name)
    .fetch_all(&raw)
    .await
    .unwrap();
    assert_eq!(stored.len(), 2);
    assert!(
        stored[0].1 * 3 < large.len() as i64,
        "{} of {} bytes stored",
        stored[0].1,
        large.len()
    );
    assert_eq!(stored[1].1, published[1].value.len() as i64);
}

/// What the log stores of `topic`, by key: each record's codec and stored value.
async fn stored_rows(db: &Database, topic: &TopicSpec) -> Vec<(String, i64, Vec<u8>)> {
    let raw = sqlx::AnyPool::connect(&db.url).await.unwrap();
    sqlx::query_as(
        "SELECT record_key, codec, value FROM bus_records WHERE topic = $1 ORDER BY record_key",
    )
    .bind(&topic.name)
    .fetch_all(&raw)
    .await
    .unwrap()
}

/// The fused chain packs its outputs' values before it takes the store's writer: they
/// are stored as the log packs values in its own transaction, and read back as
/// published.
async fn values_packed_ahead_are_stored_as_the_turn_packs_them(b: Backend) {
    let f = fixture(b).await;
    let (input, ahead, inside) = (
        topic("in", false),
        topic("ahead", false),
        topic("inside", false),
    );
    let log = EmbeddedLog::new(f.store.clone());
    let bus = Bus::Embedded(log.clone());
    bus.publish(&input, &[msg("k", "1")]).await.unwrap();
    log.ensure_topic(&ahead).await.unwrap();
    let large = large_record("C-1");
    let published = vec![
        msg("C-1", &large),
        msg("C-2", r#"{"claim_id":"C-2"}"#),
        msg("C-3", &large_record("C-3")),
    ];
    bus.publish(&inside, &published).await.unwrap();

    let mut c = bus
        .consumer("g", std::slice::from_ref(&input))
        .await
        .unwrap();
    let batch = c.poll(10, Duration::from_secs(1)).await.unwrap();
    let Consumer::Embedded(c) = &c else {
        panic!("an embedded consumer")
    };
    let writer = c.writer();
    let outputs = vec![(ahead.clone(), published.clone())];
    let packed: Vec<Packed> = outputs
        .iter()
        .map(|(_, m)| pack_all(m.iter().map(|m| &m.value[..])))
        .collect();
    let mut tx = writer.begin().await.unwrap();
    writer
        .publish_packed_in(&mut tx, &outputs, &packed, &batch)
        .await
        .unwrap();
    writer.finish(tx, &outputs).await.unwrap();

    let (packed_ahead, packed_inside) = (
        stored_rows(&f.db, &ahead).await,
        stored_rows(&f.db, &inside).await,
    );
    assert_eq!(packed_ahead, packed_inside);
    assert_eq!(
        packed_ahead.iter().map(|r| r.1).collect::<Vec<_>>(),
        [1, 0, 1],
        "the large values packed, the small one as published"
    );
    assert_eq!(scanned(&log, &ahead).await, values(&published));
}
