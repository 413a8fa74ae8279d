//! The sender: makes the attempts of due deliveries and records how each ended.
//!
//! - A failure is a non-2xx answer, a refused connection or no answer within 5 s; the
//!   retry schedule is in [`super::schedule`], kept in the delivery's row.
//! - Isolation: at most `per_endpoint` attempts in flight per subscription and
//!   `max_in_flight` in all. A sender holds at most `DEPTH × per_endpoint` deliveries of
//!   one subscription and claims more only once it is down to half that, so a slow or
//!   dead endpoint holds only its own slots, and claims come in large batches.
//! - A claim is a lease; an attempt starts only while the lease has room for its
//!   time-out and its record, so two senders never attempt one delivery at once.
//! - Claims look up subscriptions with due deliveries, then take each one's oldest due
//!   through an index on (subscription, state, due time): a long backlog at one endpoint
//!   costs the others nothing.
//! - One HTTP client for all deliveries, so connections are reused; it follows no
//!   redirect and resolves names through the SSRF guard.
//! - Outcomes are written in batches by one recorder task, so the store sees a few
//!   transactions per second rather than one per attempt.
//! - The webhook stage (and the fused chain) of this process hand deliveries over
//!   already leased, through a [`Handoff`], within the same per-subscription depth:
//!   they start without waiting for a claim.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch, Notify, Semaphore};

use super::guard::{check_literal, GuardedResolver};
use super::health::Health;
use super::schedule::after_failure;
use super::signing::sign;
use crate::clock::{now_ms, Clock};
use crate::retry::backoff;
use crate::store::{AttemptOutcome, DueDelivery, Store};

/// The receiver's time to answer (spec: Limits).
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Deliveries a sender holds per subscription, in flight or waiting for a slot, as a
/// multiple of `per_endpoint`: enough to keep a fast endpoint busy between claims. A
/// claim is a write, and on SQLite every write waits its turn at the one writer; at 8
/// a fast local receiver drained its share before the next claim came back.
const DEPTH: usize = 32;
/// How long a claimed delivery is held by its sender. An attempt starts only while at
/// least the time-out and [`RECORD_MARGIN`] of its lease are left (see [`leased`]), so
/// it ends and is recorded before another sender may claim the delivery again. A
/// delivery that waited longer behind a slow endpoint is let go unattempted and
/// claimed afresh once its lease runs out; a sender that dies mid-attempt releases its
/// deliveries after this.
pub const LEASE: Duration = Duration::from_secs(50);
/// Time left in a lease, beyond the time-out, for the outcome of an attempt to be
/// written: the recorder's linger and one write.
const RECORD_MARGIN: Duration = Duration::from_secs(10);
/// How often the sender looks for due deliveries when nothing wakes it: deliveries
/// queued by another process, and retries coming due.
const IDLE_POLL: Duration = Duration::from_millis(250);
/// Largest claim per round trip to the store.
const CLAIM_BATCH: usize = 500;
/// How long the recorder lets outcomes gather before writing them.
const RECORD_LINGER: Duration = Duration::from_millis(50);
/// Bytes of a receiver's answer read (and ignored) so that its connection can be reused.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, Copy)]
pub struct SenderSettings {
    /// Deliver to loopback and private addresses (`CLAIMS_WEBHOOK_ALLOW_PRIVATE`).
    pub allow_private: bool,
    /// Attempts in flight in all (`CLAIMS_WEBHOOK_MAX_IN_FLIGHT`).
    pub max_in_flight: usize,
    /// Attempts in flight per subscription (`CLAIMS_WEBHOOK_PER_ENDPOINT`).
    pub per_endpoint: usize,
    /// Waits before the three retries (`CLAIMS_WEBHOOK_RETRY_WAITS_MS`).
    pub retry_waits: [Duration; 3],
}

impl Default for SenderSettings {
    fn default() -> Self {
        Self {
            allow_private: false,
            max_in_flight: 256,
            per_endpoint: 16,
            retry_waits: super::schedule::RETRY_WAITS,
        }
    }
}

#[derive(Debug)]
pub struct Sender {
    store: Store,
    /// Woken when deliveries are queued or an attempt ends.
    wake: Arc<Notify>,
    health: Health,
    attempts: Arc<Attempts>,
    done: mpsc::UnboundedReceiver<AttemptOutcome>,
}

/// Where attempts start, whether their deliveries were claimed by the sender or handed
/// over by the webhook stage: the HTTP client, the slots and what each subscription holds.
#[derive(Debug)]
struct Attempts {
    client: reqwest::Client,
    settings: SenderSettings,
    /// When attempts happen and deliveries are due: the wall clock, moved by tests.
    clock: Clock,
    /// Attempts in flight in all.
    global: Arc<Semaphore>,
    endpoints: Mutex<HashMap<String, Endpoint>>,
    /// To the recorder.
    done: mpsc::UnboundedSender<AttemptOutcome>,
    wake: Arc<Notify>,
}

impl Sender {
    pub fn new(
        store: Store,
        settings: SenderSettings,
        wake: Arc<Notify>,
        health: Health,
    ) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .connect_timeout(TIMEOUT)
            .dns_resolver(Arc::new(GuardedResolver {
                allow_private: settings.allow_private,
            }))
            .pool_max_idle_per_host(settings.per_endpoint)
            .user_agent(concat!("claims-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the webhook HTTP client: {e}"))?;
        let (done_tx, done) = mpsc::unbounded_channel();
        let attempts = Arc::new(Attempts {
            client,
            settings,
            clock: health.clock.clone(),
            global: Arc::new(Semaphore::new(settings.max_in_flight)),
            endpoints: Mutex::default(),
            done: done_tx,
            wake: wake.clone(),
        });
        Ok(Self {
            store,
            wake,
            health,
            attempts,
            done,
        })
    }

    /// The handle through which the webhook stage of this process gives the sender the
    /// deliveries it queues, already claimed; it lapses when the sender stops.
    pub fn handoff(&self) -> Handoff {
        Handoff(Arc::downgrade(&self.attempts))
    }

    /// Delivers until `shutdown` turns true. Attempts in flight then are abandoned;
    /// their leases bring them back after a restart.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let Sender {
            store,
            wake,
            health,
            attempts,
            done,
        } = self;
        let recorder = tokio::spawn(record(store.clone(), done, wake.clone(), health));
        let mut turn = 0usize;
        let mut failures = 0u32;
        loop {
            if *shutdown.borrow() {
                break;
            }
            let claimed = match claim(&store, &attempts, turn).await {
                Ok(c) => {
                    failures = 0;
                    c
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(error = %e, "Cannot claim webhook deliveries; retrying.");
                    tokio::time::sleep(backoff(failures)).await;
                    continue;
                }
            };
            // The next round starts with another endpoint, so none waits on the others.
            turn = turn.wrapping_add(1);
            for d in claimed.deliveries {
                attempts.hold(&d.endpoint.webhook_id, 1);
                attempts.start(d);
            }
            if claimed.more {
                continue;
            }
            // Sleep until woken, until the next retry is due, or for the idle poll.
            let nap = match store.next_delivery_due().await {
                Ok(Some(at)) => {
                    Duration::from_millis(u64::try_from(at - attempts.clock.now_ms()).unwrap_or(0))
                        .min(IDLE_POLL)
                }
                _ => IDLE_POLL,
            };
            tokio::select! {
                _ = wake.notified() => {}
                _ = tokio::time::sleep(nap.max(Duration::from_millis(5))) => {}
                _ = shutdown.changed() => {}
            }
        }
        // The recorder ends once the attempts in flight and the handoff let go of it.
        drop(attempts);
        let _ = recorder.await;
    }
}

/// One round of claims: for each endpoint with due deliveries that holds at most half
/// its depth, enough to fill it, within [`CLAIM_BATCH`] and the total bound of held
/// deliveries. Claiming only from half-empty endpoints keeps claims large: one store
/// write per half-depth of attempts rather than one per attempt.
async fn claim(
    store: &Store,
    attempts: &Attempts,
    turn: usize,
) -> Result<Claimed, crate::store::StoreError> {
    let now = attempts.clock.now_ms();
    let due = store.due_endpoints(now).await?;
    let depth = attempts.depth();
    let (wants, more) = {
        let map = attempts.endpoints();
        let total: usize = map.values().map(|e| e.held).sum();
        let room = (attempts.settings.max_in_flight * DEPTH).saturating_sub(total);
        let mut budget = CLAIM_BATCH.min(room);
        let mut wants = Vec::new();
        let mut more = false;
        for i in 0..due.len() {
            let e = &due[(turn + i) % due.len()];
            let held = map.get(&e.webhook_id).map_or(0, |x| x.held);
            if held > depth / 2 {
                continue;
            }
            if budget == 0 {
                // Out of this round's batch: go again at once. Out of total room:
                // wait for attempts to end.
                more = room > CLAIM_BATCH;
                break;
            }
            let want = (depth - held).min(budget);
            budget -= want;
            wants.push((Arc::new(e.clone()), want));
        }
        (wants, more)
    };
    if wants.is_empty() {
        return Ok(Claimed {
            deliveries: Vec::new(),
            more: false,
        });
    }
    let deliveries = store
        .claim_deliveries(now, now + LEASE.as_millis() as i64, &wants)
        .await?;
    Ok(Claimed { deliveries, more })
}

impl Attempts {
    /// Deliveries held per subscription, in flight or waiting for a slot.
    fn depth(&self) -> usize {
        self.settings.per_endpoint * DEPTH
    }

    fn endpoints(&self) -> std::sync::MutexGuard<'_, HashMap<String, Endpoint>> {
        self.endpoints.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts `n` more deliveries held for `webhook_id`.
    fn hold(&self, webhook_id: &str, n: usize) {
        let mut map = self.endpoints();
        let e = map
            .entry(webhook_id.to_owned())
            .or_insert_with(|| Endpoint {
                slots: Arc::new(Semaphore::new(self.settings.per_endpoint)),
                held: 0,
            });
        e.held += n;
    }

    /// Counts `n` deliveries of `webhook_id` no longer held; wakes the sender when the
    /// subscription is down to its refill mark, with room to claim a round's worth.
    fn let_go(&self, webhook_id: &str, n: usize) {
        let mut map = self.endpoints();
        let Some(e) = map.get_mut(webhook_id) else {
            return;
        };
        let before = e.held;
        e.held = before.saturating_sub(n);
        let left = e.held;
        if left == 0 {
            map.remove(webhook_id);
        }
        drop(map);
        let mark = self.depth() / 2;
        if (before > mark && left <= mark) || left == 0 {
            self.wake.notify_one();
        }
    }

    /// Attempts `d`, held already, once its subscription and the sender have a slot.
    fn start(self: &Arc<Self>, d: DueDelivery) {
        let slots = self
            .endpoints()
            .get(&d.endpoint.webhook_id)
            .map(|e| e.slots.clone());
        let this = self.clone();
        tokio::spawn(async move {
            // Endpoint first: a delivery waiting for its endpoint holds no global slot.
            if let Some(slots) = slots {
                if let Ok(_endpoint) = slots.acquire_owned().await {
                    if let Ok(_slot) = this.global.clone().acquire_owned().await {
                        if leased(d.lease_until, this.clock.now_ms()) {
                            let outcome =
                                attempt(&this.client, &d, &this.settings, &this.clock).await;
                            let _ = this.done.send(outcome);
                        }
                    }
                }
            }
            this.let_go(&d.endpoint.webhook_id, 1);
        });
    }
}

/// The webhook stage's way to the sender of its process: deliveries it queues already
/// claimed, with the sender's lease, start at once instead of waiting for the sender's
/// next claim (a second turn on the store's writer, and a wake-up). Room is reserved
/// before the rows are written and let go if they are not.
#[derive(Debug, Clone, Default)]
pub struct Handoff(std::sync::Weak<Attempts>);

/// Room reserved at the sender for some of a batch's deliveries. Each place is given to
/// a delivery ([`Reserved::take`]), whose row is written with the lease, and then
/// started once the row is committed ([`Reserved::start`]); places not started are let
/// go when this is dropped (rows not written, or written before by a redelivery).
#[derive(Debug)]
pub struct Reserved {
    attempts: Option<Arc<Attempts>>,
    /// Places per subscription not yet given to a delivery.
    free: HashMap<String, usize>,
    /// Places per subscription not yet started.
    held: HashMap<String, usize>,
    /// The lease the deliveries given a place are written with (Unix ms).
    pub lease_until: i64,
}

impl Handoff {
    /// Reserves room for up to `want` deliveries of each subscription, as a claim would
    /// take them: a subscription that holds more than half its depth gets none.
    pub fn reserve<'a>(&self, wants: impl IntoIterator<Item = (&'a str, usize)>) -> Reserved {
        let mut reserved = Reserved {
            attempts: self.0.upgrade(),
            free: HashMap::new(),
            held: HashMap::new(),
            lease_until: 0,
        };
        let Some(attempts) = &reserved.attempts else {
            return reserved;
        };
        let depth = attempts.depth();
        for (webhook_id, want) in wants {
            let now = attempts.endpoints().get(webhook_id).map_or(0, |e| e.held);
            if now > depth / 2 {
                continue;
            }
            let n = want.min(depth - now);
            if n > 0 {
                attempts.hold(webhook_id, n);
                *reserved.free.entry(webhook_id.to_owned()).or_default() += n;
                *reserved.held.entry(webhook_id.to_owned()).or_default() += n;
            }
        }
        reserved.lease_until = attempts.clock.now_ms() + LEASE.as_millis() as i64;
        reserved
    }
}

impl Reserved {
    /// Gives a place to a delivery of `webhook_id`, if one is left: write it with
    /// [`Self::lease_until`].
    pub fn take(&mut self, webhook_id: &str) -> bool {
        taken(&mut self.free, webhook_id)
    }

    /// Starts the attempt of a delivery that took a place and whose row, written with
    /// the lease, is committed; the place is its own until the attempt ends.
    pub fn start(&mut self, d: DueDelivery) {
        if let Some(attempts) = &self.attempts {
            if taken(&mut self.held, &d.endpoint.webhook_id) {
                attempts.start(d);
            }
        }
    }
}

/// Takes one of the places counted for `webhook_id`, if any is left.
fn taken(places: &mut HashMap<String, usize>, webhook_id: &str) -> bool {
    match places.get_mut(webhook_id) {
        Some(n) if *n > 0 => {
            *n -= 1;
            true
        }
        _ => false,
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        if let Some(attempts) = &self.attempts {
            for (webhook_id, n) in &self.held {
                if *n > 0 {
                    attempts.let_go(webhook_id, *n);
                }
            }
        }
    }
}

/// What a round of claims got, and whether endpoints were left out for want of room.
struct Claimed {
    deliveries: Vec<DueDelivery>,
    more: bool,
}

/// A subscription's share of the sender.
#[derive(Debug)]
struct Endpoint {
    /// Attempts in flight, at most `per_endpoint`.
    slots: Arc<Semaphore>,
    /// Deliveries claimed and not finished.
    held: usize,
}

/// Whether an attempt may start at `now` on a lease that runs to `lease_until`: only
/// if it can time out and be recorded before the lease ends, so that no other sender
/// can claim the delivery while this attempt might still be made.
fn leased(lease_until: i64, now: i64) -> bool {
    now + (TIMEOUT + RECORD_MARGIN).as_millis() as i64 <= lease_until
}

/// One attempt of `d`.
async fn attempt(
    client: &reqwest::Client,
    d: &DueDelivery,
    settings: &SenderSettings,
    clock: &Clock,
) -> AttemptOutcome {
    let (allow_private, retry_waits) = (settings.allow_private, &settings.retry_waits);
    let number = d.attempts + 1;
    let started = Instant::now();
    let result = send(client, d, allow_private).await;
    let at = clock.now_ms();
    let duration_ms = started.elapsed().as_millis() as i64;
    let (status_code, error) = match result {
        Ok(status) if (200..300).contains(&status) => (Some(status), None),
        Ok(status) => (
            Some(status),
            Some(format!("the receiver answered {status}")),
        ),
        Err(e) => (None, Some(e)),
    };
    // A failure counts against the schedule, which says when (or whether) to try again.
    let (failures, next_attempt_at) = match &error {
        None => (d.failures, None),
        Some(error) => {
            tracing::debug!(delivery_id = %d.delivery_id, attempt = number, %error, "Webhook attempt failed.");
            let failures = d.failures + 1;
            let next = after_failure(retry_waits, u32::try_from(failures).unwrap_or(u32::MAX))
                .map(|wait| at + wait.as_millis() as i64);
            (failures, next)
        }
    };
    AttemptOutcome {
        delivery_id: d.delivery_id.clone(),
        webhook_id: d.endpoint.webhook_id.clone(),
        replay: d.replay,
        attempt: number,
        status_code,
        error,
        duration_ms,
        at,
        next_attempt_at,
        failures,
    }
}

/// Sends the signed body; answers the receiver's status, or why there was none.
async fn send(
    client: &reqwest::Client,
    d: &DueDelivery,
    allow_private: bool,
) -> Result<i64, String> {
    let url =
        reqwest::Url::parse(&d.endpoint.url).map_err(|e| format!("the URL is invalid: {e}"))?;
    check_literal(&url, allow_private)?;
    let signed = sign(
        d.endpoint.secret.as_bytes(),
        &d.event_id,
        d.payload.as_bytes(),
        now_ms() / 1000,
    );
    let mut request = client.post(url);
    if d.replay {
        request = request.header("x-service-replay", "true");
    }
    let response = request
        .header("content-type", "application/json")
        .header("x-service-signature", &signed.service_signature)
        .header("x-service-event", &d.event)
        .header("x-service-event-id", &d.event_id)
        .header("x-service-delivery", &d.delivery_id)
        .header("webhook-id", &d.event_id)
        .header("webhook-timestamp", signed.webhook_timestamp.to_string())
        .header("webhook-signature", &signed.webhook_signature)
        .body(signed.body)
        .send()
        .await
        .map_err(describe)?;
    let status = i64::from(response.status().as_u16());
    // Read a bounded part of the answer so the connection can go back to the pool.
    let mut response = response;
    let mut read = 0;
    while read < MAX_ANSWER_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => read += chunk.len(),
            Ok(None) => break,
            Err(e) => return Err(describe(e)),
        }
    }
    Ok(status)
}

/// A short, secret-free account of a failed request.
fn describe(e: reqwest::Error) -> String {
    use std::error::Error as _;
    if e.is_timeout() {
        return format!("no answer within {} s", TIMEOUT.as_secs());
    }
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// Writes outcomes in batches: whatever has arrived since the last write.
async fn record(
    store: Store,
    mut done: mpsc::UnboundedReceiver<AttemptOutcome>,
    wake: Arc<Notify>,
    mut health: Health,
) {
    let mut batch = Vec::new();
    while done.recv_many(&mut batch, CLAIM_BATCH).await > 0 {
        // Let outcomes gather for a moment: each write is a commit (an fsync on
        // SQLite), and a few per second serve thousands of attempts. Retry times were
        // fixed when the attempt ended, so the wait does not move them.
        if batch.len() < CLAIM_BATCH {
            tokio::time::sleep(RECORD_LINGER).await;
            while batch.len() < CLAIM_BATCH {
                match done.try_recv() {
                    Ok(o) => batch.push(o),
                    Err(_) => break,
                }
            }
        }
        let mut failures = 0u32;
        while let Err(e) = store.record_attempts(&batch).await {
            failures += 1;
            tracing::warn!(error = %e, "Cannot record webhook attempts; retrying.");
            tokio::time::sleep(backoff(failures)).await;
        }
        // A health check that fails is made again with the subscription's next failure.
        if let Err(e) = health.after(&batch).await {
            tracing::warn!(error = %e, "Cannot check the health of webhook subscriptions.");
        }
        batch.clear();
        // A retry may now be due sooner than the sender's nap.
        wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempts(per_endpoint: usize) -> Arc<Attempts> {
        let settings = SenderSettings {
            per_endpoint,
            ..SenderSettings::default()
        };
        Arc::new(Attempts {
            client: reqwest::Client::new(),
            settings,
            clock: Clock::default(),
            global: Arc::new(Semaphore::new(settings.max_in_flight)),
            endpoints: Mutex::default(),
            done: mpsc::unbounded_channel().0,
            wake: Arc::default(),
        })
    }

    fn held(attempts: &Attempts, webhook_id: &str) -> usize {
        attempts.endpoints().get(webhook_id).map_or(0, |e| e.held)
    }

    #[test]
    fn a_handoff_takes_no_more_than_a_claim_would_and_lets_go_what_it_does_not_start() {
        let attempts = attempts(2);
        let depth = attempts.depth();
        let handoff = Handoff(Arc::downgrade(&attempts));
        let mut reserved = handoff.reserve([("wh_a", depth + 5), ("wh_b", 3)]);
        assert_eq!(held(&attempts, "wh_a"), depth, "never beyond the depth");
        assert_eq!(held(&attempts, "wh_b"), 3);
        assert!(reserved.lease_until >= attempts.clock.now_ms() + LEASE.as_millis() as i64 - 1_000);
        assert!(reserved.take("wh_b") && reserved.take("wh_b") && reserved.take("wh_b"));
        assert!(!reserved.take("wh_b"), "three places, three deliveries");
        assert!(
            !reserved.take("wh_c"),
            "no place for a subscription not asked for"
        );
        // A subscription past half its depth gets nothing more, as with a claim.
        let more = handoff.reserve([("wh_a", 1)]);
        assert!(more.held.is_empty());
        drop((reserved, more));
        assert_eq!(held(&attempts, "wh_a"), 0, "places not started are let go");
        assert_eq!(held(&attempts, "wh_b"), 0);
        assert!(attempts.endpoints().is_empty());
    }

    #[test]
    fn a_handoff_without_its_sender_reserves_nothing() {
        let attempts = attempts(2);
        let handoff = Handoff(Arc::downgrade(&attempts));
        drop(attempts);
        let mut reserved = handoff.reserve([("wh_a", 4)]);
        assert!(!reserved.take("wh_a"), "deliveries are queued due instead");
    }

    #[test]
    fn an_attempt_starts_only_with_room_for_its_time_out_and_its_record() {
        let claimed = 1_000_000;
        let until = claimed + LEASE.as_millis() as i64;
        assert!(leased(until, claimed), "a fresh claim is attempted");
        let last = until - (TIMEOUT + RECORD_MARGIN).as_millis() as i64;
        assert!(leased(until, last));
        assert!(!leased(until, last + 1), "too late: let go for a new claim");
        assert!(!leased(until, until + 1));
    }
}
