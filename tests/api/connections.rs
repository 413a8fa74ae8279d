//! Idle and slow connections (`api::http::connections`): a flood of connections that
//! send nothing neither exhausts the service nor keeps the health checks from
//! answering, an idle connection is closed by its time-out, and at the cap the oldest
//! idle connection makes room for a new client.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::support::{Backend, TestApp};

/// Opens `n` connections that send nothing.
async fn idle_connections(app: &TestApp, n: usize) -> Vec<TcpStream> {
    let mut open = Vec::with_capacity(n);
    for _ in 0..n {
        open.push(TcpStream::connect(app.addr).await.unwrap());
    }
    open
}

/// `/health/ready` on a fresh connection, and how long it took.
async fn ready(app: &TestApp) -> (StatusCode, Duration) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let started = Instant::now();
    let r = client.get(app.url("/health/ready")).send().await.unwrap();
    (r.status(), started.elapsed())
}

/// Waits until the server closes `stream` (EOF or reset), up to `limit`.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 64];
    match tokio::time::timeout(limit, stream.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Some(started.elapsed()),
        Ok(Ok(_)) => panic!("the server sent bytes on a connection that asked nothing"),
        Err(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_idle_connections_leave_the_health_checks_answering_and_time_out() {
    // The test holds both ends of every connection.
    rlimit::increase_nofile_limit(u64::MAX).unwrap();
    let app = TestApp::spawn(Backend::Sqlite).await;
    let mut probe = TcpStream::connect(app.addr).await.unwrap();
    let flood = idle_connections(&app, 5000).await;
    let (status, took) = ready(&app).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        took < Duration::from_secs(1),
        "/health/ready took {took:?} beside 5,000 idle connections"
    );
    // The default header-read time-out (20 s) closes a connection that sends nothing.
    let closed = closed_within(&mut probe, Duration::from_secs(60)).await;
    assert!(
        closed.is_some(),
        "an idle connection was still open after 60 s"
    );
    drop(flood);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_the_oldest_idle_connection_makes_room() {
    let app = TestApp::spawn_with(Backend::Sqlite, |s| s.http_max_connections = 50).await;
    let mut oldest = TcpStream::connect(app.addr).await.unwrap();
    // Until the service has taken it, the oldest is not yet the oldest it knows.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let flood = idle_connections(&app, 200).await;
    for _ in 0..5 {
        let (status, took) = ready(&app).await;
        assert_eq!(status, StatusCode::OK);
        assert!(took < Duration::from_secs(1), "took {took:?} at the cap");
    }
    assert!(
        closed_within(&mut oldest, Duration::from_secs(5))
            .await
            .is_some(),
        "the oldest idle connection was not closed to make room"
    );
    drop(flood);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_headers_trickle_is_cut_off_by_the_header_time_out() {
    use tokio::io::AsyncWriteExt;
    let app = TestApp::spawn_with(Backend::Sqlite, |s| s.http_header_read_timeout_secs = 2).await;
    let mut slow = TcpStream::connect(app.addr).await.unwrap();
    let started = Instant::now();
    slow.write_all(b"GET /api/v1/health/ready HTTP/1.1\r\n")
        .await
        .unwrap();
    // One header byte a second: never a whole head within the time-out.
    let mut closed = false;
    for b in b"X-Slow: aaaaaaaaaaaaaaaaaaaa".iter() {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if slow.write_all(&[*b]).await.is_err() {
            closed = true;
            break;
        }
        if started.elapsed() > Duration::from_secs(8) {
            break;
        }
    }
    if !closed {
        closed = closed_within(&mut slow, Duration::from_secs(5))
            .await
            .is_some();
    }
    assert!(closed, "a trickling request head kept its connection");
    assert!(started.elapsed() < Duration::from_secs(10));
}
