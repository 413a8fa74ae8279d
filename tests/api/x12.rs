//! X12 intake (contract part 2, Standard formats): 837P and 837I interchanges that pass
//! pyx12 go in through batch intake's path; the 999 and the 277CA the service answers
//! with pass pyx12 too and say, per set and per claim, what was taken.

use std::path::Path;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::claims::ready_tenant;
use crate::pipeline::decided;
use crate::support::x12gen::{self, Claim};
use crate::support::{check_with_python, Backend, Reply, Session, TestApp};

crate::both_backends!(
    an_837p_of_a_thousand_claims_is_taken_and_acknowledged_per_claim,
    an_837i_is_taken_and_a_replacement_and_a_void_follow_in_an_837p,
    an_interchange_that_cannot_be_read_is_refused_with_a_999_and_changes_nothing,
    a_set_whose_trailer_is_wrong_is_rejected_alone,
);

/// Runs pyx12 over the documents, written to `dir`; fails the test with its findings.
pub fn pyx12(dir: &Path, docs: &[(&str, &str)]) {
    let files: Vec<(String, Vec<u8>)> = docs
        .iter()
        .map(|(name, text)| ((*name).to_owned(), text.as_bytes().to_vec()))
        .collect();
    check_with_python("tests/x12/validate.py", "pyx12", dir, &files);
}

/// Providers with NPIs, each contracted; answers (name, NPI) pairs.
async fn providers(app: &TestApp, s: &Session, n: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in 1..=n {
        let npi = x12gen::npi(100 + i);
        let id = format!("PRV-X{i}");
        let r = app
            .call(
                Method::POST,
                "/providers",
                Some(&s.access),
                Some(json!({"provider_id": id, "name": format!("Clinic {i}"), "npi": npi, "specialty": "family"})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let r = app
            .call(
                Method::POST,
                &format!("/providers/{id}/contracts"),
                Some(&s.access),
                Some(json!({"effective_from": "2020-01-01", "fee_schedule": {}})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        out.push((format!("CLINIC {i}"), npi));
    }
    out
}

pub async fn post_x12(app: &TestApp, token: &str, body: &str) -> Reply {
    let res = app
        .client
        .post(app.url("/claims/x12"))
        .bearer_auth(token)
        .header("content-type", "application/edi-x12")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    Reply::from(res).await
}

/// An acknowledgment as text, checked to be served as X12.
pub async fn ack(app: &TestApp, token: &str, batch_id: &str, which: &str) -> String {
    let res = app
        .client
        .get(app.url(&format!("/x12/batches/{batch_id}/{which}")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "application/edi-x12"
    );
    res.text().await.unwrap()
}

fn count(doc: &str, what: &str) -> usize {
    doc.matches(what).count()
}

fn members(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("MBR-{i}")).collect()
}

async fn an_837p_of_a_thousand_claims_is_taken_and_acknowledged_per_claim(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let provs = providers(&app, &s, 3).await;
    let mut claims = x12gen::claims("P", 1000, &provs, &members(40), "20260115");
    // A billing provider the tenant does not know.
    let mut stranger = claims[0].clone();
    stranger.claim_id = "P-STRANGER".into();
    stranger.npi = x12gen::npi(999);
    stranger.provider_name = "NOBODY".into();
    claims.push(stranger);
    let doc = x12gen::interchange(&claims, 400, false, 17);
    let dir = tempfile::tempdir().unwrap();
    pyx12(dir.path(), &[("in.837", &doc)]);

    let r = post_x12(&app, &s.access, &doc).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        (r.body["accepted"].as_u64(), r.body["rejected"].as_u64()),
        (Some(1000), Some(1))
    );
    let results = r.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 1001);
    assert_eq!(
        results[0],
        json!({"claim_id": "P000000", "status": "received"})
    );
    assert_eq!(results[1000]["claim_id"], "P-STRANGER");
    assert_eq!(results[1000]["error"]["field"], "provider_id");
    let batch = r.body["batch_id"].as_str().unwrap().to_owned();

    let a999 = ack(&app, &s.access, &batch, "999").await;
    let a277 = ack(&app, &s.access, &batch, "277ca").await;
    pyx12(dir.path(), &[("out.999", &a999), ("out.277", &a277)]);
    assert_eq!(count(&a999, "IK5*A~"), 3, "{a999}");
    // The acknowledgments are on their topic too.
    let records = app.records_of(&app.state.topics.x12_acks, 1).await;
    assert_eq!(records.len(), 1);
    let v: Value = serde_json::from_slice(&records[0].value).unwrap();
    assert_eq!(records[0].key, format!("acme/{batch}"));
    assert_eq!(
        (v["accepted"].as_i64(), v["ack_999"].as_str()),
        (Some(1000), Some(a999.as_str()))
    );
    assert_eq!(v["ack_277ca"].as_str(), Some(a277.as_str()));
    assert!(a999.contains("AK9*A*3*3*3~"), "{a999}");
    assert_eq!(count(&a277, "STC*A1:20*"), 1000);
    assert_eq!(count(&a277, "STC*A3:21*"), 1);
    assert!(a277.contains("TRN*2*P-STRANGER~"));
    assert!(a277.contains("QTY*90*1000~\nQTY*AA*1~"), "{a277}");
    let accepted_cents: i64 = claims[..1000].iter().map(Claim::cents).sum();
    let amount = schemas::x12::segments::money(accepted_cents);
    assert!(a277.contains(&format!("AMT*YU*{amount}~")), "{a277}");

    // The claims are the contract's mapping of the 837.
    let c = decided(&app, &s, "P000000").await;
    let sent = &claims[0];
    assert_eq!(c["claim_amount"], sent.cents());
    assert_eq!(c["provider_id"], "PRV-X1");
    assert_eq!(c["member_id"], "MBR-1");
    assert_eq!(c["service_date"], "2026-01-15");
    assert_eq!(c["diagnosis_codes"], json!(sent.diagnoses));
    assert_eq!(c["lines"][0]["procedure_code"], sent.lines[0].code);
    assert_eq!(c["lines"][0]["modifiers"], json!(sent.lines[0].modifiers));
    assert_eq!(c["lines"][0]["amount"], sent.lines[0].cents);
    assert_eq!(
        app.get("/claims/P-STRANGER", &s.access).await.status,
        StatusCode::NOT_FOUND
    );

    // The same interchange again: every claim is a duplicate, and says so.
    let again = post_x12(&app, &s.access, &doc).await;
    assert_eq!(again.body["accepted"], 0);
    assert_eq!(again.body["results"][5]["error"]["code"], "CLAIM_DUPLICATE");

    // Another tenant sees none of it.
    let other = app.session("other", "claims:read").await;
    let r = app
        .get(&format!("/x12/batches/{batch}/999"), &other.access)
        .await;
    r.assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
}

async fn an_837i_is_taken_and_a_replacement_and_a_void_follow_in_an_837p(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let provs = providers(&app, &s, 2).await;
    let claims = x12gen::claims("I", 100, &provs, &members(10), "20260210");
    let doc = x12gen::interchange(&claims, 100, true, 5);
    let dir = tempfile::tempdir().unwrap();
    pyx12(dir.path(), &[("in.837i", &doc)]);
    let r = post_x12(&app, &s.access, &doc).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["accepted"], 100, "{}", r.body);
    let batch = r.body["batch_id"].as_str().unwrap().to_owned();
    let a999 = ack(&app, &s.access, &batch, "999").await;
    let a277 = ack(&app, &s.access, &batch, "277ca").await;
    pyx12(dir.path(), &[("i.999", &a999), ("i.277", &a277)]);
    assert!(a999.contains("AK1*HC*5*005010X223A2~"), "{a999}");
    assert_eq!(count(&a277, "STC*A1:20*"), 100);
    let first = decided(&app, &s, "I000000").await;
    assert_eq!(first["lines"][0]["procedure_code"], claims[0].lines[0].code);
    decided(&app, &s, "I000001").await;

    // A replacement of I000000 and a void of I000001.
    let mut replacement = claims[0].clone();
    replacement.claim_id = "I000000-R".into();
    replacement.frequency = '7';
    replacement.replaces = Some("I000000".into());
    replacement.lines.truncate(1);
    let mut void = claims[1].clone();
    void.claim_id = "I000001-V".into();
    void.frequency = '8';
    void.replaces = Some("I000001".into());
    let doc = x12gen::interchange(&[replacement.clone(), void], 10, false, 6);
    pyx12(dir.path(), &[("corrections.837", &doc)]);
    let r = post_x12(&app, &s.access, &doc).await;
    assert_eq!(r.body["accepted"], 2, "{}", r.body);
    let rep = decided(&app, &s, "I000000-R").await;
    assert_eq!(rep["frequency"], "replacement");
    assert_eq!(rep["replaces_claim_id"], "I000000");
    assert_eq!(rep["claim_amount"], replacement.cents());
    let v = decided(&app, &s, "I000001-V").await;
    assert_eq!(v["outcome"], "DECLINED", "{v}");
    assert_eq!(v["approved_amount"], 0);
}

async fn an_interchange_that_cannot_be_read_is_refused_with_a_999_and_changes_nothing(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let provs = providers(&app, &s, 1).await;
    let claims = x12gen::claims("U", 3, &provs, &members(3), "20260115");
    let doc = x12gen::interchange(&claims, 10, false, 9);
    let cut = &doc[..doc.len() - 40];
    let r = post_x12(&app, &s.access, cut).await;
    r.assert_error(StatusCode::BAD_REQUEST, "BAD_REQUEST");
    let a999 = r.body["error"]["details"]["999"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(a999.contains("AK9*R*0*0*0*3~"), "{a999}");
    let dir = tempfile::tempdir().unwrap();
    pyx12(dir.path(), &[("reject.999", &a999)]);
    assert_eq!(
        app.get("/claims/U000000", &s.access).await.status,
        StatusCode::NOT_FOUND
    );

    // Not X12 at all, and X12 sent as something else.
    let r = post_x12(&app, &s.access, "{\"claim_id\": \"x\"}").await;
    r.assert_error(StatusCode::BAD_REQUEST, "BAD_REQUEST");
    let r = app
        .call(
            Method::POST,
            "/claims/x12",
            Some(&s.access),
            Some(Value::String(doc)),
        )
        .await;
    r.assert_error(StatusCode::BAD_REQUEST, "BAD_REQUEST");
    assert_eq!(
        app.get("/claims/U000000", &s.access).await.status,
        StatusCode::NOT_FOUND
    );
}

async fn a_set_whose_trailer_is_wrong_is_rejected_alone(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let provs = providers(&app, &s, 1).await;
    let claims = x12gen::claims("S", 4, &provs, &members(4), "20260115");
    let doc = x12gen::interchange(&claims, 2, false, 11);
    // The second set's trailer miscounts its segments.
    let at = doc.rfind("SE*").unwrap();
    let end = at + doc[at..].find('*').unwrap() + 1;
    let n: usize = doc[end..end + doc[end..].find('*').unwrap()]
        .parse()
        .unwrap();
    let bad = format!(
        "{}SE*{}{}",
        &doc[..at],
        n + 1,
        &doc[end + n.to_string().len()..]
    );
    let r = post_x12(&app, &s.access, &bad).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["accepted"], 2, "{}", r.body);
    assert_eq!(r.body["results"][2]["error"]["field"], "claim");
    let batch = r.body["batch_id"].as_str().unwrap().to_owned();
    let a999 = ack(&app, &s.access, &batch, "999").await;
    let a277 = ack(&app, &s.access, &batch, "277ca").await;
    assert!(a999.contains("IK5*R*4~"), "{a999}");
    assert!(a999.contains("AK9*P*2*2*1~"), "{a999}");
    assert_eq!(count(&a277, "STC*A1:20*"), 2, "{a277}");
    assert!(!a277.contains("S000002"), "{a277}");
    let dir = tempfile::tempdir().unwrap();
    pyx12(
        dir.path(),
        &[("partial.999", &a999), ("partial.277", &a277)],
    );
    assert_eq!(
        app.get("/claims/S000003", &s.access).await.status,
        StatusCode::NOT_FOUND
    );
}
