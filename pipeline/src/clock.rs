//! Wall-clock time as the store keeps it: Unix milliseconds in a BIGINT, which both
//! SQLite and PostgreSQL index and compare natively.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

/// Wall-clock time that tests can move forward, for behaviour measured in hours (an
/// idempotency key's 24 h). Clones share the offset.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    pub fn now_ms(&self) -> i64 {
        now_ms() + self.offset_ms.load(Ordering::Relaxed)
    }

    /// Moves this clock (and its clones) forward.
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.offset_ms.fetch_add(by, Ordering::Relaxed);
    }
}

/// Sleeps `period` and answers true, or answers false as soon as `stop` changes: the
/// pace of the periodic tasks that run until the process stops
/// (`while sleep_unless_stopped(every, &mut stop).await { … }`).
pub async fn sleep_unless_stopped(
    period: Duration,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(period) => true,
        _ = stop.changed() => false,
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    to_ms(OffsetDateTime::now_utc())
}

pub fn to_ms(t: OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}

/// An RFC 3339 time (any offset) as Unix milliseconds.
pub fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let t = OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    Some(to_ms(t))
}

/// RFC 3339 UTC with millisecond precision, the contract's time format.
pub fn ms_to_rfc3339(ms: i64) -> String {
    let t = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    t.format(&fmt).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339_utc() {
        assert_eq!(ms_to_rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(ms_to_rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }

    /// A period goes by while nothing is stopped; a stop ends the wait at once.
    #[tokio::test]
    async fn a_periodic_wait_ends_early_when_stopped() {
        let (tx, mut stop) = tokio::sync::watch::channel(false);
        assert!(sleep_unless_stopped(Duration::from_millis(1), &mut stop).await);
        tx.send(true).unwrap();
        let started = std::time::Instant::now();
        assert!(!sleep_unless_stopped(Duration::from_secs(3600), &mut stop).await);
        assert!(started.elapsed() < Duration::from_secs(60));
    }
}
