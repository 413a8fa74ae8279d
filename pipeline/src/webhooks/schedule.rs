//! The retry schedule (spec: Delivery rules): a failed attempt is retried up to three
//! times, 1 s, 5 s and 30 s after the failure; after that the delivery has failed.

use std::time::Duration;

/// Waits before the retries, in order.
pub const RETRY_WAITS: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(5),
    Duration::from_secs(30),
];

/// What follows a failure, given how many attempts of the current schedule have failed
/// (1 after the first): the wait before the next attempt, or `None` when the schedule is
/// spent and the delivery is marked failed.
pub fn after_failure(failures: u32) -> Option<Duration> {
    let i = usize::try_from(failures).ok()?.checked_sub(1)?;
    RETRY_WAITS.get(i).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_retries_then_failed() {
        assert_eq!(after_failure(1), Some(Duration::from_secs(1)));
        assert_eq!(after_failure(2), Some(Duration::from_secs(5)));
        assert_eq!(after_failure(3), Some(Duration::from_secs(30)));
        assert_eq!(after_failure(4), None);
        assert_eq!(after_failure(0), None);
    }
}
