//! Prometheus metrics of the front end, served as text at `GET /metrics`.
//!
//! Every label takes values from a fixed set, so that no client can grow the series
//! without bound: the route is the matched route template or `unmatched`, the method
//! one of the standard ones or `other`, the status a number below 600.

use std::time::Duration;

use axum::http::Method;

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

    pub fn observe(&self, route: Option<&str>, method: &Method, status: u16, elapsed: Duration) {
        let route = route.unwrap_or("unmatched");
        let method = method_label(method);
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

/// The label of a request method: a made-up method name folds into `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_methods_add_no_series() {
        let m = Metrics::new();
        m.observe(None, &Method::GET, 404, Duration::ZERO);
        let before = m.render().len();
        for i in 0..200 {
            let method = Method::from_bytes(format!("X{i}").as_bytes()).unwrap();
            m.observe(None, &method, 404, Duration::ZERO);
        }
        m.observe(None, &Method::GET, 404, Duration::ZERO);
        let after = m.render();
        // The `other` series appear once, whatever the number of made-up names.
        assert!(after.len() < before * 3, "{before} -> {}", after.len());
        assert!(after.contains(r#"method="other""#));
        assert!(!after.contains("X17"));
    }
}
