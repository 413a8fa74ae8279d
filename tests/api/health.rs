//! Operations endpoints (contract: Operations).

use reqwest::StatusCode;

use crate::support::{Backend, TestApp};

crate::both_backends!(
    live_and_ready_answer_without_auth,
    metrics_count_requests_by_route,
    made_up_methods_and_paths_do_not_grow_the_metrics,
);

async fn live_and_ready_answer_without_auth(b: Backend) {
    let app = TestApp::spawn(b).await;
    for path in ["/health/live", "/health/ready"] {
        let r = app.call(reqwest::Method::GET, path, None, None).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
        assert_eq!(r.body["status"], "ok");
    }
}

/// The Prometheus text at `/metrics`.
async fn metrics(app: &TestApp) -> String {
    app.client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn metrics_count_requests_by_route(b: Backend) {
    let app = TestApp::spawn(b).await;
    app.call(reqwest::Method::GET, "/health/live", None, None)
        .await;
    let text = metrics(&app).await;
    assert!(
        text.lines()
            .any(|l| l.starts_with("claims_http_requests_total{")
                && l.contains("route=\"/api/v1/health/live\"")
                && l.contains("status=\"200\"")),
        "{text}"
    );
}

async fn made_up_methods_and_paths_do_not_grow_the_metrics(b: Backend) {
    let app = TestApp::spawn(b).await;
    let metrics = || metrics(&app);
    let odd = |i: usize| {
        let method = reqwest::Method::from_bytes(format!("M{i}").as_bytes()).unwrap();
        app.client
            .request(method, app.url(&format!("/nowhere/{i}")))
            .send()
    };
    // One of each kind first, so that the folded series exist.
    odd(0).await.unwrap();
    odd(1).await.unwrap();
    metrics().await; // and the series of `/metrics` itself
    let before = metrics().await;
    for i in 2..300 {
        odd(i).await.unwrap();
    }
    let after = metrics().await;
    let series = |text: &str| text.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(series(&before), series(&after), "{after}");
    assert!(after.contains(r#"method="other""#), "{after}");
    assert!(!after.contains("M17"), "{after}");
}
