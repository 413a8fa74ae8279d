//! The OpenAPI document (contract: Operations) describes every route the service
//! answers, with its scope, its error statuses and the shared headers.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::support::{Backend, TestApp};

crate::both_backends!(
    every_documented_operation_is_served_and_no_other_method_is,
    every_operation_declares_its_scope_errors_and_headers,
    the_docs_page_is_served_with_its_script,
);

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

async fn document(app: &TestApp) -> Value {
    let r = app.call(Method::GET, "/openapi.json", None, None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.body["openapi"].as_str().unwrap().starts_with("3.1"));
    assert_eq!(r.body["servers"][0]["url"], "/api/v1");
    r.body
}

async fn every_documented_operation_is_served_and_no_other_method_is(b: Backend) {
    let app = TestApp::spawn(b).await;
    let doc = document(&app).await;
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 10, "{:?}", paths.keys());
    for (path, item) in paths {
        let concrete = fill_params(path);
        for method in METHODS {
            let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let r = app.call(m, &concrete, None, None).await;
            if item.get(method).is_some() {
                assert_ne!(
                    r.body["error"]["code"], "NOT_FOUND",
                    "{method} {path} is documented but not routed"
                );
                assert_ne!(
                    r.status,
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{method} {path} is documented but not routed"
                );
            } else {
                assert_eq!(
                    r.status,
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{method} {path} answers but is not documented"
                );
            }
        }
    }
}

async fn every_operation_declares_its_scope_errors_and_headers(b: Backend) {
    let app = TestApp::spawn(b).await;
    let doc = document(&app).await;
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let responses = op["responses"].as_object().unwrap();
            for status in ["429", "500"] {
                assert!(
                    responses.contains_key(status),
                    "{method} {path} lacks {status}"
                );
            }
            for (status, response) in responses {
                for h in [
                    "X-Request-Id",
                    "X-RateLimit-Limit",
                    "X-RateLimit-Remaining",
                    "X-RateLimit-Reset",
                ] {
                    assert!(
                        response["headers"].get(h).is_some(),
                        "{method} {path} {status} lacks header {h}"
                    );
                }
            }
            let public = path.starts_with("/auth/")
                || path.starts_with("/health/")
                || path.starts_with("/.well-known/")
                || ["/openapi.json", "/docs", "/docs/redoc.js", "/metrics"]
                    .contains(&path.as_str());
            if public {
                continue;
            }
            let scopes = op["security"][0]["bearer"]
                .as_array()
                .unwrap_or_else(|| panic!("{method} {path} names no scope"));
            assert_eq!(scopes.len(), 1, "{method} {path}");
            for status in ["401", "403"] {
                assert!(
                    responses.contains_key(status),
                    "{method} {path} lacks {status}"
                );
            }
            // The declared scope is the one enforced: a token with every other scope is refused.
            let all_but: Vec<&str> = crate::support::ALL_SCOPES
                .split(' ')
                .filter(|s| *s != scopes[0].as_str().unwrap())
                .collect();
            let s = app.session("acme", &all_but.join(" ")).await;
            let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let r = app.call(m, &fill_params(path), Some(&s.access), None).await;
            r.assert_error(StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
        }
    }
}

async fn the_docs_page_is_served_with_its_script(b: Backend) {
    let app = TestApp::spawn(b).await;
    let page = app.client.get(app.url("/docs")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let html = page.text().await.unwrap();
    assert!(html.contains("/api/v1/openapi.json") && html.contains("/api/v1/docs/redoc.js"));
    let script = app
        .client
        .get(app.url("/docs/redoc.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), StatusCode::OK);
    assert!(script.bytes().await.unwrap().len() > 100_000);
}

/// `/webhooks/{webhook_id}` → `/webhooks/x`.
fn fill_params(path: &str) -> String {
    path.split('/')
        .map(|seg| if seg.starts_with('{') { "x" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}
