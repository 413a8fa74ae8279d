//! Supporting documents (contract: Uploads): receiving a file into the object store,
//! the at-once refusals (malware found while receiving, over the size limit), reads,
//! and isolation between tenants.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::claims::{claim, ready_tenant};
use crate::pipeline::events;
use crate::support::clamd::EICAR;
use crate::support::{Backend, Reply, Session, TestApp};

crate::all_backends!(
    a_document_is_stored_and_queued_for_scanning,
    the_eicar_test_file_is_refused_at_once_and_announced,
    a_file_over_the_tenants_limit_is_413_and_nothing_is_kept,
    bad_requests_are_refused_and_tenants_are_isolated,
);

/// A multipart body with one file field; answers its content type and bytes.
pub fn multipart(
    field: &str,
    filename: &str,
    content_type: &str,
    data: &[u8],
) -> (String, Vec<u8>) {
    let boundary = "----claims-test-boundary-7MA4YWxkTrZu0gW";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{filename}\"\r\n\
         Content-Type: {content_type}\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(data);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Posts `data` as the `file` of an upload to `claim_id`.
pub async fn upload(
    app: &TestApp,
    token: &str,
    claim_id: &str,
    filename: &str,
    content_type: &str,
    data: &[u8],
) -> Reply {
    let (ct, body) = multipart("file", filename, content_type, data);
    let res = app
        .client
        .post(app.url(&format!("/claims/{claim_id}/uploads")))
        .bearer_auth(token)
        .header("content-type", ct)
        .body(body)
        .send()
        .await
        .unwrap();
    Reply::from(res).await
}

/// A tenant ready for claims, with one claim submitted.
pub async fn with_claim(app: &TestApp, tenant: &str, claim_id: &str) -> Session {
    let s = ready_tenant(app, tenant).await;
    let r = app
        .call(
            Method::POST,
            "/claims/intake",
            Some(&s.access),
            Some(claim(claim_id)),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    s
}

/// Every file under the object store, staging included.
fn stored_files(app: &TestApp) -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&app.config.api.upload_dir, &mut out);
    out
}

async fn a_document_is_stored_and_queued_for_scanning(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = with_claim(&app, "acme", "CLM-1").await;
    let data = b"%PDF-1.4 a small bill for CLM-1".repeat(100);

    let r = upload(
        &app,
        &s.access,
        "CLM-1",
        "../bill.pdf",
        "application/pdf",
        &data,
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let id = r.body["upload_id"].as_str().unwrap().to_owned();
    let sha = hex::encode(Sha256::digest(&data));
    assert_eq!(
        r.body,
        json!({"upload_id": id, "claim_id": "CLM-1", "status": "pending", "size_bytes": data.len(),
               "sha256": sha, "content_type": "application/pdf"})
    );
    assert_eq!(
        r.header("location"),
        Some(format!("/api/v1/uploads/{id}").as_str())
    );

    let r = app.get(&format!("/uploads/{id}"), &s.access).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["filename"], "bill.pdf", "the path is dropped");
    assert_eq!(r.body["sha256"], sha);
    // The stages may have begun on it already.
    assert_ne!(r.body["scan"]["verdict"], "infected");
    let listed = app.get("/claims/CLM-1/uploads", &s.access).await;
    assert_eq!(listed.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(listed.body["data"][0]["upload_id"], id.as_str());

    // The file is durable under its key, byte for byte; nothing is left in staging.
    let files = stored_files(&app);
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(std::fs::read(&files[0]).unwrap(), data);
    assert!(files[0].ends_with(format!("acme/{id}")));

    // Its command is on the uploads topic for the scan stage.
    let queued = app.records_of(&app.state.topics.uploads, 1).await;
    assert_eq!(queued.len(), 1);
    let command: Value = serde_json::from_slice(&queued[0].value).unwrap();
    assert_eq!(command["upload_id"], id.as_str());
    assert_eq!(command["sha256"], sha);
}

async fn the_eicar_test_file_is_refused_at_once_and_announced(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = with_claim(&app, "acme", "CLM-1").await;
    // EICAR inside a larger file, across the reader's chunks.
    let mut data = vec![b' '; 200_000];
    data.extend_from_slice(EICAR);
    data.extend(vec![b' '; 1000]);

    let r = upload(
        &app,
        &s.access,
        "CLM-1",
        "eicar.com",
        "application/octet-stream",
        &data,
    )
    .await;
    let field = r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "UPLOAD_VIRUS_DETECTED");
    assert_eq!(field.as_deref(), Some("file"));
    assert!(stored_files(&app).is_empty(), "nothing of the file is kept");

    let listed = app.get("/claims/CLM-1/uploads", &s.access).await;
    let failed = &listed.body["data"][0];
    assert_eq!(failed["status"], "failed");
    assert_eq!(
        failed["scan"],
        json!({"verdict": "infected", "signature": "Eicar-Test-Signature"})
    );
    assert_eq!(failed["failure"]["code"], "virus_detected");

    let events = events(&app, "acme", "CLM-1").await;
    let announced: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "upload.failed")
        .collect();
    assert_eq!(announced.len(), 1, "{events:?}");
    let data = &announced[0]["data"];
    assert_eq!(data["upload_id"], failed["upload_id"]);
    assert_eq!(data["claim_id"], "CLM-1");
    assert_eq!(data["status"], "failed");
    assert_eq!(data["reason"], "virus_detected");
    assert_eq!(data["error_code"], "UPLOAD_VIRUS_DETECTED");
    assert!(app
        .state
        .bus
        .scan(&app.state.topics.uploads)
        .await
        .unwrap()
        .is_empty());
}

async fn a_file_over_the_tenants_limit_is_413_and_nothing_is_kept(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = with_claim(&app, "acme", "CLM-1").await;
    let r = app
        .call(
            Method::PATCH,
            "/tenant/settings",
            Some(&s.access),
            Some(json!({"max_upload_bytes": 4096})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    app.state.config_cache.invalidate_tenant("acme").await;

    let at_limit = upload(
        &app,
        &s.access,
        "CLM-1",
        "a.txt",
        "text/plain",
        &[b'a'; 4096],
    )
    .await;
    assert_eq!(at_limit.status, StatusCode::ACCEPTED, "{}", at_limit.body);
    let over = upload(
        &app,
        &s.access,
        "CLM-1",
        "b.txt",
        "text/plain",
        &[b'b'; 4097],
    )
    .await;
    over.assert_error(StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE");
    let big = upload(
        &app,
        &s.access,
        "CLM-1",
        "c.txt",
        "text/plain",
        &vec![b'c'; 3 << 20],
    )
    .await;
    big.assert_error(StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE");
    // Refused before its end: the connection closes, so the next request takes another.
    assert_eq!(big.headers["connection"], "close");

    let listed = app.get("/claims/CLM-1/uploads", &s.access).await;
    assert_eq!(
        listed.body["data"].as_array().unwrap().len(),
        1,
        "only the file at the limit"
    );
    assert_eq!(stored_files(&app).len(), 1, "{:?}", stored_files(&app));
}

async fn bad_requests_are_refused_and_tenants_are_isolated(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = with_claim(&app, "acme", "CLM-1").await;
    let other = with_claim(&app, "globex", "CLM-2").await;

    // Another tenant's claim and upload do not exist for this one.
    upload(&app, &s.access, "CLM-2", "a.txt", "text/plain", b"x")
        .await
        .assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");
    let theirs = upload(&app, &other.access, "CLM-2", "a.txt", "text/plain", b"x").await;
    assert_eq!(theirs.status, StatusCode::ACCEPTED, "{}", theirs.body);
    let id = theirs.body["upload_id"].as_str().unwrap();
    app.get(&format!("/uploads/{id}"), &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    app.get("/claims/CLM-2/uploads", &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");

    // Without `uploads:write`, or without a multipart body or its `file` field.
    let reader = app.session("acme", "claims:read").await;
    upload(&app, &reader.access, "CLM-1", "a.txt", "text/plain", b"x")
        .await
        .assert_error(StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
    app.call(
        Method::POST,
        "/claims/CLM-1/uploads",
        Some(&s.access),
        Some(json!({"file": "x"})),
    )
    .await
    .assert_error(StatusCode::BAD_REQUEST, "BAD_REQUEST");
    let (ct, body) = multipart("attachment", "a.txt", "text/plain", b"x");
    let res = app
        .client
        .post(app.url("/claims/CLM-1/uploads"))
        .bearer_auth(&s.access)
        .header("content-type", ct)
        .body(body)
        .send()
        .await
        .unwrap();
    let field = Reply::from(res)
        .await
        .assert_error(StatusCode::BAD_REQUEST, "BAD_REQUEST");
    assert_eq!(field.as_deref(), Some("file"));
    // A media type longer than any real one.
    let long_type = format!("application/{}", "x".repeat(300));
    let field = upload(&app, &s.access, "CLM-1", "a.txt", &long_type, b"x")
        .await
        .assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
    assert_eq!(field.as_deref(), Some("file"));
    let listed = app.get("/claims/CLM-1/uploads", &s.access).await;
    assert!(listed.body["data"].as_array().unwrap().is_empty());

    // A name that a right-to-left override would show as `invoiceexe.pdf` is kept
    // without the override.
    let disguised = upload(
        &app,
        &s.access,
        "CLM-1",
        "invoice\u{202E}fdp.exe",
        "text/plain",
        b"x",
    )
    .await;
    assert_eq!(disguised.status, StatusCode::ACCEPTED, "{}", disguised.body);
    let id = disguised.body["upload_id"].as_str().unwrap();
    let stored = app.get(&format!("/uploads/{id}"), &s.access).await;
    assert_eq!(stored.body["filename"], "invoicefdp.exe");
}
