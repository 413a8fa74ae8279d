//! The webhook deliveries' part of `/metrics` (contract part 2: Endpoint health): per
//! subscription, attempts by result and a histogram of their durations, read from the
//! store (each batch of attempts adds to its subscription's totals, whichever process
//! sent it).
//!
//! Label cardinality is bounded: the [`MAX_SERIES`] subscriptions with the most
//! attempts have series of their own, labelled by tenant and subscription id; the rest
//! add up under `tenant_id="other", webhook_id="other"`. A subscription that enters or
//! leaves the named set moves its counts between series, which Prometheus's `rate`
//! reads as a counter reset.

use std::fmt::Write;

use pipeline::store::{AttemptTotals, LATENCY_BUCKETS_MS};

/// Subscriptions with series of their own.
pub const MAX_SERIES: usize = 100;

/// Renders the totals (tenant id, subscription id, totals) in Prometheus text format.
pub fn render(rows: Vec<(String, String, AttemptTotals)>) -> String {
    let mut rows = rows;
    rows.sort_by_key(|(t, w, totals)| {
        (
            std::cmp::Reverse(totals.succeeded + totals.failed),
            t.clone(),
            w.clone(),
        )
    });
    let mut series: Vec<(String, String, AttemptTotals)> = Vec::new();
    let mut other: Option<AttemptTotals> = None;
    for (i, row) in rows.into_iter().enumerate() {
        if i < MAX_SERIES {
            series.push(row);
        } else {
            other.get_or_insert_with(Default::default).add(&row.2);
        }
    }
    if let Some(o) = other {
        series.push(("other".into(), "other".into(), o));
    }
    let mut out = String::new();
    out.push_str(
        "# HELP claims_webhook_attempts_total Webhook delivery attempts, by subscription and result.\n\
         # TYPE claims_webhook_attempts_total counter\n",
    );
    for (t, w, totals) in &series {
        for (result, n) in [("succeeded", totals.succeeded), ("failed", totals.failed)] {
            let _ = writeln!(
                out,
                "claims_webhook_attempts_total{{tenant_id=\"{t}\",webhook_id=\"{w}\",result=\"{result}\"}} {n}"
            );
        }
    }
    out.push_str(
        "# HELP claims_webhook_attempt_duration_seconds Time from sending a webhook delivery to its answer, by subscription.\n\
         # TYPE claims_webhook_attempt_duration_seconds histogram\n",
    );
    for (t, w, totals) in &series {
        let labels = format!("tenant_id=\"{t}\",webhook_id=\"{w}\"");
        for (bound, n) in LATENCY_BUCKETS_MS.iter().zip(totals.le) {
            let _ = writeln!(
                out,
                "claims_webhook_attempt_duration_seconds_bucket{{{labels},le=\"{}\"}} {n}",
                *bound as f64 / 1000.0
            );
        }
        let count = totals.succeeded + totals.failed;
        let _ = writeln!(
            out,
            "claims_webhook_attempt_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(
            out,
            "claims_webhook_attempt_duration_seconds_sum{{{labels}}} {}",
            totals.ms_sum as f64 / 1000.0
        );
        let _ = writeln!(
            out,
            "claims_webhook_attempt_duration_seconds_count{{{labels}}} {count}"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(n: i64) -> AttemptTotals {
        AttemptTotals {
            succeeded: n,
            failed: 1,
            ms_sum: 30 * (n + 1),
            le: [n + 1; 8],
        }
    }

    #[test]
    fn the_busiest_subscriptions_have_series_and_the_rest_add_up_under_other() {
        let rows = (0..MAX_SERIES as i64 + 50)
            .map(|i| ("acme".to_owned(), format!("wh_{i:04}"), totals(i)))
            .collect();
        let text = render(rows);
        let named = |w: &str| text.contains(&format!("webhook_id=\"{w}\""));
        // The 50 least busy (wh_0000…wh_0049) fold into `other`.
        assert!(named("wh_0149") && named("wh_0050") && !named("wh_0049"));
        let succeeded_other: i64 = (0..50).sum();
        assert!(text.contains(&format!(
            "claims_webhook_attempts_total{{tenant_id=\"other\",webhook_id=\"other\",result=\"succeeded\"}} {succeeded_other}"
        )));
        let series = text
            .lines()
            .filter(|l| l.starts_with("claims_webhook_attempt_duration_seconds_count"))
            .count();
        assert_eq!(
            series,
            MAX_SERIES + 1,
            "bounded, whatever the subscriptions"
        );
        assert!(text.contains(
            "claims_webhook_attempt_duration_seconds_bucket{tenant_id=\"acme\",webhook_id=\"wh_0149\",le=\"+Inf\"} 150"
        ));
    }
}
