//! The retry schedule (spec: Delivery rules): a failed attempt is retried up to three
//! times, 1 s, 5 s and 30 s after the failure; after that the delivery has failed. The
//! waits are a setting (`CLAIMS_WEBHOOK_RETRY_WAITS_MS`) so that tests can run a whole
//! schedule in milliseconds; the service runs the spec's.

use std::time::Duration;

/// Waits before the retries, in order: the spec's.
pub const RETRY_WAITS: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(5),
    Duration::from_secs(30),
];

/// What follows a failure, given how many attempts of the current schedule have failed
/// (1 after the first): the wait before the next attempt, or `None` when the schedule is
/// spent and the delivery is marked failed.
pub fn after_failure(waits: &[Duration; 3], failures: u32) -> Option<Duration> {
    let i = usize::try_from(failures).ok()?.checked_sub(1)?;
    waits.get(i).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_retries_then_failed() {
        let w = &RETRY_WAITS;
        assert_eq!(after_failure(w, 1), Some(Duration::from_secs(1)));
        assert_eq!(after_failure(w, 2), Some(Duration::from_secs(5)));
        assert_eq!(after_failure(w, 3), Some(Duration::from_secs(30)));
        assert_eq!(after_failure(w, 4), None);
        assert_eq!(after_failure(w, 0), None);
    }
}
