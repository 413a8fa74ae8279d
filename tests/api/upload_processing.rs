//! Uploads through the scan and OCR stages, against a real `clamd` and real Tesseract
//! and poppler: documents complete with their text, a file only `clamd` knows fails
//! asynchronously, an unreachable `clamd` makes uploads wait, and a document that is
//! malformed or over a limit fails with `processing_error`.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

use crate::pipeline::events;
use crate::support::clamd::Clamd;
use crate::support::documents::{pdf, png_of, scanned_pdf_of};
use crate::support::{Backend, Session, TestApp};
use crate::uploads::{upload, with_claim};

crate::all_backends!(
    a_pdf_and_a_scanned_png_complete_with_their_text,
    a_scanned_pdf_without_a_text_layer_is_read_by_ocr,
    a_file_only_clamd_knows_fails_after_acceptance,
    uploads_wait_while_clamd_is_down_and_complete_when_it_returns,
    an_upload_whose_file_vanished_fails_instead_of_blocking_the_stage,
    a_malformed_or_overlong_pdf_fails_with_processing_error,
);

/// Content that only the test `clamd`'s own signature calls malware.
const CUSTOM_MALWARE: &[u8] = b"claims-service test file: harmless, but clamd is told otherwise";

/// A service using this `clamd`, reading at most 2 pages a document, with a tenant
/// `acme` ready and its claim `CLM-1` submitted.
async fn service(b: Backend, clamd: &Clamd) -> (TestApp, Session) {
    let address = clamd.address.clone();
    let app = TestApp::spawn_with(b, move |s| {
        s.clamd_address = Some(address);
        s.ocr_max_pages = 2;
    })
    .await;
    let s = with_claim(&app, "acme", "CLM-1").await;
    (app, s)
}

/// What OCR kept of upload `id`, amounts and dates included.
async fn extraction(app: &TestApp, id: &str) -> pipeline::store::Extraction {
    let found = app.store.upload_extraction("acme", id).await.unwrap();
    found.expect("the upload has an extraction")
}

/// Polls the upload until it is `completed` or `failed`.
async fn finished(app: &TestApp, s: &Session, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = app.get(&format!("/uploads/{id}"), &s.access).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        if r.body["status"] == "completed" || r.body["status"] == "failed" {
            return r.body;
        }
        assert!(
            Instant::now() < deadline,
            "upload {id} did not finish: {}",
            r.body
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn accepted(app: &TestApp, s: &Session, name: &str, ct: &str, data: &[u8]) -> String {
    let r = upload(app, &s.access, "CLM-1", name, ct, data).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    r.body["upload_id"].as_str().unwrap().to_owned()
}

/// The events of kind `kind` about upload `id`, once there are any: a stage changes the
/// upload's row before its batch's events are published.
async fn announced(app: &TestApp, kind: &str, id: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = upload_events(app, kind, id).await;
        if !found.is_empty() || Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The events of kind `kind` about upload `id`, now.
async fn upload_events(app: &TestApp, kind: &str, id: &str) -> Vec<Value> {
    events(app, "acme", "CLM-1")
        .await
        .into_iter()
        .filter(|e| e["event"] == kind && e["data"]["upload_id"] == id)
        .collect()
}

async fn a_pdf_and_a_scanned_png_complete_with_their_text(b: Backend) {
    let clamd = Clamd::start(&[]);
    let (app, s) = service(b, &clamd).await;
    let bill = pdf(&[&["INVOICE 2026-11-01", "Total due $1,234.56"]]);

    let from_pdf = accepted(&app, &s, "bill.pdf", "application/pdf", &bill).await;
    let from_png = accepted(&app, &s, "scan.png", "image/png", &png_of(&bill)).await;
    for id in [&from_pdf, &from_png] {
        let u = finished(&app, &s, id).await;
        assert_eq!(u["status"], "completed", "{u}");
        assert_eq!(u["scan"]["verdict"], "clean");
        assert_eq!(u["ocr"]["pages"], 1);
        let excerpt = u["ocr"]["excerpt"].as_str().unwrap();
        assert!(excerpt.contains("INVOICE 2026-11-01"), "{excerpt}");
        assert!(excerpt.contains("1,234.56"), "{excerpt}");
        assert!(u["ocr"]["text_chars"].as_i64().unwrap() >= 30);

        // Amounts and dates are kept for the fraud stage.
        let found = extraction(&app, id).await;
        assert_eq!(found.amounts, [123_456]);
        assert_eq!(found.dates, ["2026-11-01"]);

        let said = announced(&app, "upload.completed", id).await;
        assert_eq!(said.len(), 1);
        let data = &said[0]["data"];
        assert_eq!(data["status"], "completed");
        assert_eq!(data["pages"], 1);
        assert_eq!(data["sha256"], u["sha256"]);
        assert_eq!(data["claim_id"], "CLM-1");
    }
}

async fn a_scanned_pdf_without_a_text_layer_is_read_by_ocr(b: Backend) {
    let clamd = Clamd::start(&[]);
    let (app, s) = service(b, &clamd).await;
    let scan = scanned_pdf_of(&pdf(&[&["RECEIPT 2026-10-05", "Amount paid 87.50"]]));

    let id = accepted(&app, &s, "scan.pdf", "application/pdf", &scan).await;
    let u = finished(&app, &s, &id).await;
    assert_eq!(u["status"], "completed", "{u}");
    assert_eq!(u["ocr"]["pages"], 1);
    let excerpt = u["ocr"]["excerpt"].as_str().unwrap();
    assert!(excerpt.contains("RECEIPT 2026-10-05"), "{excerpt}");
    let found = extraction(&app, &id).await;
    assert_eq!(found.amounts, [8_750]);
    assert_eq!(found.dates, ["2026-10-05"]);
}

async fn a_file_only_clamd_knows_fails_after_acceptance(b: Backend) {
    let clamd = Clamd::start(&[("Claims-Test-Malware", CUSTOM_MALWARE)]);
    let (app, s) = service(b, &clamd).await;

    // The screen on receipt does not know it: accepted, then refused by clamd.
    let id = accepted(&app, &s, "note.txt", "text/plain", CUSTOM_MALWARE).await;
    let u = finished(&app, &s, &id).await;
    assert_eq!(u["status"], "failed", "{u}");
    assert_eq!(u["scan"]["verdict"], "infected");
    assert!(
        u["scan"]["signature"]
            .as_str()
            .unwrap()
            .starts_with("Claims-Test-Malware"),
        "{u}"
    );
    assert_eq!(u["failure"]["code"], "virus_detected");
    assert!(u.get("ocr").is_none(), "an infected file is not read: {u}");

    let said = announced(&app, "upload.failed", &id).await;
    assert_eq!(said.len(), 1);
    assert_eq!(said[0]["data"]["reason"], "virus_detected");
    assert_eq!(said[0]["data"]["error_code"], "UPLOAD_VIRUS_DETECTED");
    // The infected file is gone from the object store.
    let key = app.config.api.upload_dir.join("acme").join(&id);
    assert!(!key.exists(), "{} is still stored", key.display());
}

async fn uploads_wait_while_clamd_is_down_and_complete_when_it_returns(b: Backend) {
    let mut clamd = Clamd::start(&[]);
    clamd.stop();
    let (app, s) = service(b, &clamd).await;

    let id = accepted(
        &app,
        &s,
        "note.txt",
        "text/plain",
        b"Paid 12/31/2025: 40.00",
    )
    .await;
    // Without clamd it is never called clean; it waits in `scanning`.
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let r = app.get(&format!("/uploads/{id}"), &s.access).await;
        seen.push(r.body["status"].as_str().unwrap().to_owned());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        seen.iter().all(|st| st == "pending" || st == "scanning"),
        "{seen:?}"
    );
    assert_eq!(
        seen.last().map(String::as_str),
        Some("scanning"),
        "{seen:?}"
    );
    assert!(upload_events(&app, "upload.completed", &id)
        .await
        .is_empty());

    clamd.resume();
    let u = finished(&app, &s, &id).await;
    assert_eq!(u["status"], "completed", "{u}");
    assert_eq!(u["scan"]["verdict"], "clean");
    let found = extraction(&app, &id).await;
    assert_eq!(found.amounts, [4_000]);
    assert_eq!(found.dates, ["2025-12-31"]);
    assert_eq!(announced(&app, "upload.completed", &id).await.len(), 1);
}

async fn an_upload_whose_file_vanished_fails_instead_of_blocking_the_stage(b: Backend) {
    let mut clamd = Clamd::start(&[]);
    clamd.stop();
    let (app, s) = service(b, &clamd).await;
    let id = accepted(&app, &s, "note.txt", "text/plain", b"a note").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while app.get(&format!("/uploads/{id}"), &s.access).await.body["status"] != "scanning" {
        assert!(
            Instant::now() < deadline,
            "the upload never reached scanning"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Removed from the object store behind the service's back while clamd is away.
    std::fs::remove_file(app.config.api.upload_dir.join("acme").join(&id)).unwrap();

    let u = finished(&app, &s, &id).await;
    assert_eq!(u["status"], "failed", "{u}");
    assert_eq!(u["failure"]["code"], "processing_error");
    assert!(
        u["failure"]["message"]
            .as_str()
            .unwrap()
            .contains("missing"),
        "{u}"
    );
    assert_eq!(announced(&app, "upload.failed", &id).await.len(), 1);
    // The stage goes on with the next upload once clamd is back.
    clamd.resume();
    let next = accepted(&app, &s, "next.txt", "text/plain", b"next").await;
    assert_eq!(finished(&app, &s, &next).await["status"], "completed");
}

async fn a_malformed_or_overlong_pdf_fails_with_processing_error(b: Backend) {
    let clamd = Clamd::start(&[]);
    let (app, s) = service(b, &clamd).await;

    let broken = accepted(
        &app,
        &s,
        "broken.pdf",
        "application/pdf",
        b"%PDF-1.4\nnot a pdf",
    )
    .await;
    // The test service reads at most 2 pages.
    let long = pdf(&[&["one"], &["two"], &["three"]]);
    let overlong = accepted(&app, &s, "long.pdf", "application/pdf", &long).await;
    for (id, says) in [(&broken, "pdfinfo"), (&overlong, "3 pages")] {
        let u = finished(&app, &s, id).await;
        assert_eq!(u["status"], "failed", "{u}");
        assert_eq!(u["scan"]["verdict"], "clean");
        assert_eq!(u["failure"]["code"], "processing_error");
        let message = u["failure"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
        let said = announced(&app, "upload.failed", id).await;
        assert_eq!(said.len(), 1);
        assert_eq!(said[0]["data"]["reason"], "processing_error");
    }
}
