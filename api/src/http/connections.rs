//! The HTTP/1 connections: accepted, capped, timed out and shut down here, so that a
//! flood of idle or trickling connections costs bounded descriptors and memory, and
//! the health checks and real clients keep getting answers.
//!
//! - **Header-read time-out.** A request's headers must arrive in full within
//!   `header_read_timeout` of the server starting to wait for them: on a new
//!   connection, and on a kept-alive one between requests. So it is also the keep-alive
//!   time-out of an idle connection (hyper starts its timer whenever it waits for a
//!   request head).
//! - **Idle time-out.** A connection on which no byte moves in either direction for
//!   `idle_timeout` is closed, whatever it is doing: a request body that stalls, a
//!   response the client does not read. No handler runs that long without I/O.
//! - **Cap.** At most `max_connections` are open (and never more than the process's
//!   descriptors allow, with room for the store and the files). A connection that
//!   arrives at the cap closes the oldest connection that has no request in flight,
//!   so that idle sockets cannot lock real clients out; when every connection is busy,
//!   new ones wait in the listen backlog until one ends. The permit is taken before the
//!   connection's task is spawned and returned when it ends (mini-redis' `Semaphore`).
//!
//! axum's own `serve` offers none of these settings, hence this loop; it is otherwise
//! what `axum::serve` does (connection info for the rate limiter, graceful shutdown).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};
use tokio::time::Instant;
use tower::ServiceExt as _;

/// How connections are bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// Most connections open at once.
    pub max_connections: usize,
    /// Time allowed for a request's headers, counted from when the server waits for
    /// them; also how long an idle kept-alive connection stays open.
    pub header_read_timeout: Duration,
    /// A connection with no byte moving either way for this long is closed.
    pub idle_timeout: Duration,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            header_read_timeout: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Descriptors kept for everything but client connections: the store's pools, the bus,
/// uploads being written, OCR tools, webhook deliveries.
const RESERVED_DESCRIPTORS: u64 = 512;

impl ConnectionSettings {
    /// The cap actually applied: the setting, lowered when the process may not open
    /// that many descriptors besides the ones it needs for everything else.
    pub fn effective_max(&self) -> usize {
        match open_files_limit() {
            Some(limit) => {
                let budget = limit.saturating_sub(RESERVED_DESCRIPTORS).max(16);
                self.max_connections
                    .min(usize::try_from(budget).unwrap_or(usize::MAX))
            }
            None => self.max_connections,
        }
    }
}

/// The soft limit on open files, from `/proc/self/limits` (Linux); `None` elsewhere or
/// when unlimited.
fn open_files_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Serves `app` on `listener` until `shutdown` completes, then lets in-flight requests
/// finish and closes every connection.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    settings: ConnectionSettings,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let max = settings.effective_max();
    if max < settings.max_connections {
        tracing::warn!(
            configured = settings.max_connections,
            applied = max,
            "The open-files limit is lower than CLAIMS_HTTP_MAX_CONNECTIONS needs; the cap is lowered."
        );
    }
    let open = Arc::new(Open::new(max));
    let (stop_tx, stop_rx) = watch::channel(());
    // Every connection task holds a receiver; `closed()` completes when all have ended.
    let (done_tx, done_rx) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let permit = match open.permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                open.evict_oldest_idle();
                tokio::select! {
                    p = open.permits.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                    () = &mut shutdown => break,
                }
            }
        };
        let conn = open.register();
        let task = Connection {
            stream,
            peer,
            app: app.clone(),
            settings,
            open: open.clone(),
            state: conn,
        };
        let stop = stop_rx.clone();
        let done = done_rx.clone();
        tokio::spawn(async move {
            task.run(stop).await;
            drop(permit);
            drop(done);
        });
    }
    drop(listener);
    drop(stop_rx);
    let _ = stop_tx.send(());
    drop(done_rx);
    done_tx.closed().await;
    Ok(())
}

/// A refused or reset connection is the client's business; anything else (out of
/// descriptors, say) is logged, and accepting pauses a moment so as not to spin.
async fn accept_failed(e: io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "Cannot accept a connection; pausing accepts for a second.");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// The open connections: their permits, and which of them may be closed to make room.
struct Open {
    permits: Arc<Semaphore>,
    next_id: AtomicU64,
    /// Oldest first.
    conns: Mutex<BTreeMap<u64, Arc<ConnState>>>,
    /// Activity times are milliseconds since this instant.
    epoch: Instant,
}

struct ConnState {
    id: u64,
    /// Requests whose handler is running on this connection.
    in_flight: AtomicUsize,
    /// Milliseconds since `Open::epoch` of the last byte read or written.
    last_activity: AtomicU64,
    evicted: AtomicBool,
    evict: Notify,
}

impl Open {
    fn new(max: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max)),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(BTreeMap::new()),
            epoch: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn register(&self) -> Arc<ConnState> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnState {
            id,
            in_flight: AtomicUsize::new(0),
            last_activity: AtomicU64::new(self.now_ms()),
            evicted: AtomicBool::new(false),
            evict: Notify::new(),
        });
        self.lock().insert(id, state.clone());
        state
    }

    fn forget(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Asks the oldest connection without a request in flight to close.
    fn evict_oldest_idle(&self) {
        let conns = self.lock();
        if let Some(victim) = conns.values().find(|c| {
            c.in_flight.load(Ordering::Acquire) == 0 && !c.evicted.load(Ordering::Acquire)
        }) {
            victim.evicted.store(true, Ordering::Release);
            // Stored as a permit when the task is not waiting yet.
            victim.evict.notify_one();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<ConnState>>> {
        // The map stays consistent whatever a panicking holder did: each operation is
        // one insert, remove or read.
        self.conns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One accepted connection and what it needs to be served.
struct Connection {
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    settings: ConnectionSettings,
    open: Arc<Open>,
    state: Arc<ConnState>,
}

impl Connection {
    async fn run(self, mut stop: watch::Receiver<()>) {
        let Connection {
            stream,
            peer,
            app,
            settings,
            open,
            state,
        } = self;
        let io = TokioIo::new(Tracked {
            inner: stream,
            open: open.clone(),
            state: state.clone(),
        });
        let service = {
            let state = state.clone();
            hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
                // The rate limiter reads the client address from here.
                req.extensions_mut().insert(ConnectInfo(peer));
                let busy = InFlight::new(state.clone());
                let app = app.clone();
                async move {
                    let res = app.oneshot(req.map(Body::new)).await;
                    drop(busy);
                    Ok::<_, Infallible>(res.unwrap_or_else(|e| match e {}))
                }
            })
        };
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(settings.header_read_timeout)
            .keep_alive(true);
        let mut conn = pin!(builder.serve_connection(io, service));
        let idle_ms = u64::try_from(settings.idle_timeout.as_millis()).unwrap_or(u64::MAX);
        let mut closing = false;
        // An evicted connection that does not close gracefully at once (a request
        // head half read, a response still being written) is dropped after this.
        let mut force_close: Option<Instant> = None;
        loop {
            let last = state.last_activity.load(Ordering::Acquire);
            let idle_deadline = open.epoch + Duration::from_millis(last.saturating_add(idle_ms));
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "Connection ended with an error.");
                    }
                    break;
                }
                () = state.evict.notified(), if !closing => {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                    force_close = Some(Instant::now() + EVICTION_GRACE);
                }
                () = sleep_until_some(force_close) => {
                    tracing::debug!(%peer, "Connection closed to make room for a new one.");
                    break;
                }
                _ = stop.changed(), if !closing => {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
                () = tokio::time::sleep_until(idle_deadline) => {
                    let since = open.now_ms().saturating_sub(state.last_activity.load(Ordering::Acquire));
                    if since >= idle_ms {
                        tracing::debug!(%peer, "Connection closed after its idle time-out.");
                        break;
                    }
                }
            }
        }
        open.forget(state.id);
    }
}

/// How long an evicted connection may take to close gracefully.
const EVICTION_GRACE: Duration = Duration::from_secs(1);

/// Sleeps until `at`, or forever when it is `None`.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Counts a request as in flight on its connection while its handler runs.
struct InFlight(Arc<ConnState>);

impl InFlight {
    fn new(state: Arc<ConnState>) -> Self {
        state.in_flight.fetch_add(1, Ordering::AcqRel);
        Self(state)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The socket, noting when bytes last moved.
struct Tracked {
    inner: TcpStream,
    open: Arc<Open>,
    state: Arc<ConnState>,
}

impl Tracked {
    fn touch(&self) {
        self.state
            .last_activity
            .store(self.open.now_ms(), Ordering::Release);
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.touch();
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_room_for_the_other_descriptors() {
        let s = ConnectionSettings {
            max_connections: usize::MAX,
            ..ConnectionSettings::default()
        };
        if let Some(limit) = open_files_limit() {
            assert_eq!(
                s.effective_max() as u64,
                limit.saturating_sub(RESERVED_DESCRIPTORS).max(16)
            );
        }
        let small = ConnectionSettings {
            max_connections: 10,
            ..ConnectionSettings::default()
        };
        assert_eq!(small.effective_max(), 10);
    }

    #[test]
    fn the_oldest_connection_without_a_request_in_flight_is_evicted() {
        let open = Open::new(3);
        let a = open.register();
        let b = open.register();
        let c = open.register();
        let busy = InFlight::new(a.clone());
        open.evict_oldest_idle();
        assert!(
            !a.evicted.load(Ordering::Acquire),
            "a request is in flight on a"
        );
        assert!(b.evicted.load(Ordering::Acquire));
        open.evict_oldest_idle();
        assert!(c.evicted.load(Ordering::Acquire));
        drop(busy);
        open.evict_oldest_idle();
        assert!(a.evicted.load(Ordering::Acquire));
    }
}
