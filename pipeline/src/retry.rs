//! The one retry schedule of the pipeline: a failing batch, a bus write that did not
//! go through, or a webhook sender's store work waits `backoff(attempt)` before trying
//! again, so that a failing dependency is asked less often the longer it fails.

use std::time::Duration;

/// Backoff before retry number `attempt` (from 0): 100 ms doubling to 5 s.
pub fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << attempt.min(6))).min(Duration::from_secs(5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_100_ms_up_to_5_s() {
        let waits: Vec<u64> = (0..9).map(|a| backoff(a).as_millis() as u64).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
    }
}
