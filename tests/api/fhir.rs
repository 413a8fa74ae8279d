//! FHIR (contract part 2, Standard formats): a decided claim as an R4 ClaimResponse and
//! ExplanationOfBenefit, validated by Python's fhir.resources, carrying exactly the
//! lines' adjudications.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::benefits::plan_and_member;
use crate::claims::{ready_tenant, submit};
use crate::pipeline::decided;
use crate::support::{check_with_python, Backend, Reply, TestApp};

crate::both_backends!(
    an_adjudicated_a_partly_denied_and_a_declined_claim_read_as_valid_fhir,
    fhir_of_an_unknown_claim_or_of_another_tenant_is_refused,
);

/// Runs fhir.resources over the resources; fails the test with its findings.
fn validate(resources: &[(&str, &Value)]) {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<(String, Vec<u8>)> = resources
        .iter()
        .map(|(name, r)| (format!("{name}.json"), serde_json::to_vec(r).unwrap()))
        .collect();
    check_with_python(
        "tests/fhir/validate.py",
        "fhir.resources",
        dir.path(),
        &files,
    );
}

async fn fhir(app: &TestApp, token: &str, path: &str) -> Value {
    let res = app
        .client
        .get(app.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "{path}");
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "application/fhir+json"
    );
    res.json().await.unwrap()
}

/// Cents as FHIR's decimal.
fn dollars(cents: &Value) -> Value {
    let c = cents.as_i64().unwrap();
    serde_json::from_str(&format!("{}.{:02}", c / 100, c % 100)).unwrap()
}

/// Each line's adjudication in the resource agrees with the claim's: the amounts per
/// category, and each adjustment as group, CARC and amount.
fn agrees(resource: &Value, claim: &Value, items_key: &str, seq_key: &str) {
    for line in claim["lines"].as_array().unwrap() {
        let Some(adj) = line.get("adjudication").filter(|a| !a.is_null()) else {
            continue;
        };
        let item = resource[items_key]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i[seq_key] == line["line_no"])
            .unwrap_or_else(|| panic!("no item for line {line}: {resource}"));
        let cat = |code: &str| -> Value {
            item["adjudication"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["category"]["coding"][0]["code"] == code)
                .map(|a| a["amount"]["value"].clone())
                .unwrap_or(Value::Null)
        };
        assert_eq!(cat("submitted"), dollars(&line["amount"]));
        assert_eq!(cat("eligible"), dollars(&adj["allowed_amount"]));
        assert_eq!(cat("benefit"), dollars(&adj["approved_amount"]));
        let got: Vec<(String, String, Value)> = item["adjudication"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a.get("reason").is_some())
            .map(|a| {
                (
                    a["category"]["coding"][0]["code"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                    a["reason"]["coding"][0]["code"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                    a["amount"]["value"].clone(),
                )
            })
            .collect();
        let want: Vec<(String, String, Value)> = adj["adjustments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["group"].as_str().unwrap().to_owned(),
                    a["carc"].as_str().unwrap().to_owned(),
                    dollars(&a["amount"]),
                )
            })
            .collect();
        assert_eq!(got, want, "line {}", line["line_no"]);
    }
    let benefit = resource["total"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["category"]["coding"][0]["code"] == "benefit")
        .unwrap();
    assert_eq!(
        benefit["amount"]["value"],
        dollars(&claim["approved_amount"])
    );
}

async fn an_adjudicated_a_partly_denied_and_a_declined_claim_read_as_valid_fhir(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    plan_and_member(&app, &s, "M-1", json!([{"from": "2026-01-01"}])).await;
    app.publish_rulebook(
        &s.access,
        json!([
            {"rule_id": "no-rehab", "when": "line.procedure_code == '97110'",
             "action": "deny_line", "reason_code": "NOT_MEDICALLY_NECESSARY", "carc": "50", "rarc": "N130"},
            {"rule_id": "diabetes", "when": "'E11.9' in claim.diagnosis_codes",
             "action": "decline", "reason_code": "NOT_COVERED", "carc": "B7"}
        ]),
    )
    .await;
    let claim = |id: &str, dx: &str, lines: Value| {
        let total: i64 = lines
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["amount"].as_i64().unwrap())
            .sum();
        json!({"claim_id": id, "member_id": "M-1", "provider_id": "PRV-1", "claim_amount": total,
               "service_date": "2026-06-01", "diagnosis_codes": [dx], "lines": lines})
    };
    let visit =
        json!({"procedure_code": "99213", "units": 1, "amount": 60000, "modifiers": ["25"]});
    let rehab = json!({"procedure_code": "97110", "units": 2, "amount": 5000});
    for (id, dx, lines) in [
        ("C-PAID", "J02.0", json!([visit])),
        ("C-PART", "J02.0", json!([visit, rehab])),
        ("C-DECL", "E11.9", json!([visit])),
    ] {
        let r = submit(&app, &s, claim(id, dx, lines)).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
        decided(&app, &s, id).await;
    }
    let mut resources = Vec::new();
    for (id, outcome) in [
        ("C-PAID", "complete"),
        ("C-PART", "partial"),
        ("C-DECL", "error"),
    ] {
        let c = decided(&app, &s, id).await;
        let cr = fhir(&app, &s.access, &format!("/claims/{id}/fhir")).await;
        let eob = fhir(&app, &s.access, &format!("/claims/{id}/fhir?type=eob")).await;
        assert_eq!(cr["resourceType"], "ClaimResponse");
        assert_eq!(eob["resourceType"], "ExplanationOfBenefit");
        assert_eq!(cr["outcome"], outcome, "{id}: {c}");
        assert_eq!(eob["outcome"], outcome);
        assert_eq!(cr["request"]["identifier"]["value"], id);
        agrees(&cr, &c, "item", "itemSequence");
        agrees(&eob, &c, "item", "sequence");
        assert_eq!(eob["item"][0]["modifier"][0]["coding"][0]["code"], "25");
        resources.push((format!("{id}-cr"), cr));
        resources.push((format!("{id}-eob"), eob));
    }
    let part = &resources[3].1;
    assert!(
        part.to_string().contains("\"N130\""),
        "the RARC travels: {part}"
    );
    let named: Vec<(&str, &Value)> = resources.iter().map(|(n, r)| (n.as_str(), r)).collect();
    validate(&named);
}

async fn fhir_of_an_unknown_claim_or_of_another_tenant_is_refused(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let r: Reply = app.get("/claims/NOPE/fhir", &s.access).await;
    r.assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");
    let c = crate::claims::claim("C-1");
    submit(&app, &s, c).await;
    decided(&app, &s, "C-1").await;
    let r = app.get("/claims/C-1/fhir?type=bundle", &s.access).await;
    assert_eq!(
        r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
            .as_deref(),
        Some("type")
    );
    let other = app.session("other", "claims:read").await;
    let r = app.get("/claims/C-1/fhir", &other.access).await;
    r.assert_error(StatusCode::NOT_FOUND, "CLAIM_NOT_FOUND");
}
