//! Prometheus metrics of the front end, served as text at `GET /metrics`.

use std::time::Duration;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder,
};

#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "claims_http_requests_total",
                "HTTP requests served, by route and status",
            ),
            &["route", "method", "status"],
        )
        .expect("valid metric definition");
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "claims_http_request_duration_seconds",
                "Time to serve an HTTP request",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            ]),
            &["route", "method"],
        )
        .expect("valid metric definition");
        registry
            .register(Box::new(requests.clone()))
            .expect("metric registered once");
        registry
            .register(Box::new(latency.clone()))
            .expect("metric registered once");
        Self {
            registry,
            requests,
            latency,
        }
    }

    pub fn observe(&self, route: &str, method: &str, status: u16, elapsed: Duration) {
        let status = status.to_string();
        self.requests
            .with_label_values(&[route, method, status.as_str()])
            .inc();
        self.latency
            .with_label_values(&[route, method])
            .observe(elapsed.as_secs_f64());
    }

    /// The registry in Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
