//! Operations endpoints (contract: Operations).

use reqwest::StatusCode;

use crate::support::{Backend, TestApp};

crate::both_backends!(
    live_and_ready_answer_without_auth,
    metrics_count_requests_by_route
);

async fn live_and_ready_answer_without_auth(b: Backend) {
    let app = TestApp::spawn(b).await;
    for path in ["/health/live", "/health/ready"] {
        let r = app.call(reqwest::Method::GET, path, None, None).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
        assert_eq!(r.body["status"], "ok");
    }
}

async fn metrics_count_requests_by_route(b: Backend) {
    let app = TestApp::spawn(b).await;
    app.call(reqwest::Method::GET, "/health/live", None, None)
        .await;
    let text = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("claims_http_requests_total{")
                && l.contains("route=\"/api/v1/health/live\"")
                && l.contains("status=\"200\"")),
        "{text}"
    );
}
