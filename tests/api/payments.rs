//! Payment runs and the 835 (contract part 2, Standard formats), end to end: 837s with
//! several providers, members, lines with modifiers, a replacement and a void go in;
//! the run pays every payable claim once, per provider; each 835 passes pyx12 and
//! balances against the claims, line by line.

use std::collections::{BTreeMap, BTreeSet};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::benefits::plan_and_member;
use crate::claims::ready_tenant;
use crate::pipeline::{decided, events};
use crate::support::x12gen;
use crate::support::{Backend, Session, TestApp};
use crate::x12::{post_x12, pyx12};

crate::all_backends!(a_payment_run_pays_each_payable_claim_once_with_balanced_835s,);

/// Providers with NPIs; the first caps 99213 at 80.00 by its fee schedule.
async fn providers(app: &TestApp, s: &Session) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in 1..=3u32 {
        let npi = x12gen::npi(500 + i);
        let id = format!("PRV-P{i}");
        let r = app
            .call(
                Method::POST,
                "/providers",
                Some(&s.access),
                Some(json!({"provider_id": id, "name": format!("Payee {i}"), "npi": npi})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let schedule = if i == 1 {
            json!({"99213": 8000})
        } else {
            json!({})
        };
        let r = app
            .call(
                Method::POST,
                &format!("/providers/{id}/contracts"),
                Some(&s.access),
                Some(json!({"effective_from": "2020-01-01", "fee_schedule": schedule})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        out.push((format!("PAYEE {i}"), npi));
    }
    out
}

/// X12 money as cents.
fn cents(s: &str) -> i64 {
    schemas::x12::segments::cents(s.trim_start_matches('-'))
        .map(|c| if s.starts_with('-') { -c } else { c })
        .unwrap_or_else(|| panic!("not money: {s}"))
}

/// A CAS adjustment: group, CARC, amount.
type Cas = (String, String, i64);

/// One claim of an 835: its CLP, the claim-level CAS, and per SVC its CAS.
#[derive(Debug, Default)]
struct Remitted {
    charge: i64,
    paid: i64,
    member: i64,
    claim_cas: Vec<Cas>,
    /// (procedure with modifiers, charge, paid, its CAS).
    lines: Vec<(String, i64, i64, Vec<Cas>)>,
}

fn cas_of(el: &[&str]) -> Vec<Cas> {
    el[2..]
        .chunks(3)
        .map(|c| (el[1].to_owned(), c[0].to_owned(), cents(c[1])))
        .collect()
}

/// The 835 read: BPR02 and the claims by CLP01.
fn read_835(doc: &str) -> (i64, BTreeMap<String, Remitted>) {
    let mut total = 0;
    let mut claims: BTreeMap<String, Remitted> = BTreeMap::new();
    let mut current: Option<String> = None;
    for seg in doc.split('~').map(str::trim).filter(|s| !s.is_empty()) {
        let el: Vec<&str> = seg.split('*').collect();
        match el[0] {
            "BPR" => total = cents(el[2]),
            "CLP" => {
                current = Some(el[1].to_owned());
                claims.insert(
                    el[1].to_owned(),
                    Remitted {
                        charge: cents(el[3]),
                        paid: cents(el[4]),
                        member: cents(el[5]),
                        ..Default::default()
                    },
                );
            }
            "SVC" => {
                let c = claims.get_mut(current.as_ref().unwrap()).unwrap();
                c.lines
                    .push((el[1].to_owned(), cents(el[2]), cents(el[3]), Vec::new()));
            }
            "CAS" => {
                let c = claims.get_mut(current.as_ref().unwrap()).unwrap();
                match c.lines.last_mut() {
                    Some(line) => line.3.extend(cas_of(&el)),
                    None => c.claim_cas.extend(cas_of(&el)),
                }
            }
            _ => {}
        }
    }
    (total, claims)
}

async fn a_payment_run_pays_each_payable_claim_once_with_balanced_835s(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = ready_tenant(&app, "acme").await;
    let members: Vec<String> = (1..=4).map(|i| format!("M-{i}")).collect();
    for m in &members {
        plan_and_member(&app, &s, m, json!([{"from": "2026-01-01"}])).await;
    }
    let provs = providers(&app, &s).await;
    let claims = x12gen::claims("R", 30, &provs, &members, "20260301");
    let dir = tempfile::tempdir().unwrap();
    let doc = x12gen::interchange(&claims, 30, false, 21);
    pyx12(dir.path(), &[("claims.837", &doc)]);
    let r = post_x12(&app, &s.access, &doc).await;
    assert_eq!(r.body["accepted"], 30, "{}", r.body);
    for c in &claims {
        decided(&app, &s, &c.claim_id).await;
    }
    // A replacement of R000003 with one line fewer, and a void of R000004.
    let mut replacement = claims[3].clone();
    replacement.claim_id = "R000003-R".into();
    replacement.frequency = '7';
    replacement.replaces = Some("R000003".into());
    replacement.lines[0].cents += 1000;
    let mut void = claims[4].clone();
    void.claim_id = "R000004-V".into();
    void.frequency = '8';
    void.replaces = Some("R000004".into());
    let doc = x12gen::interchange(&[replacement, void], 10, false, 22);
    pyx12(dir.path(), &[("corrections.837", &doc)]);
    let r = post_x12(&app, &s.access, &doc).await;
    assert_eq!(r.body["accepted"], 2, "{}", r.body);
    decided(&app, &s, "R000003-R").await;
    decided(&app, &s, "R000004-V").await;

    // What should be paid: every ADJUDICATED claim not superseded.
    let mut payable: BTreeMap<String, Value> = BTreeMap::new();
    let ids = claims
        .iter()
        .map(|c| c.claim_id.clone())
        .chain(["R000003-R".to_owned(), "R000004-V".to_owned()]);
    for id in ids {
        let c = decided(&app, &s, &id).await;
        if c["outcome"] == "ADJUDICATED" && c["superseded_by"].is_null() {
            payable.insert(id, c);
        }
    }
    assert_eq!(
        payable.len(),
        29,
        "30 originals, two superseded, one replacement"
    );
    assert!(!payable.contains_key("R000003") && !payable.contains_key("R000004-V"));

    let today = schemas::Date::today_utc().to_string();
    let r = app
        .call(
            Method::POST,
            "/payments/runs",
            Some(&s.access),
            Some(json!({"through": today})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let payments = r.body["payments"].as_array().unwrap().clone();
    assert_eq!(payments.len(), 3, "one payment per provider: {}", r.body);
    let mut paid_claims = BTreeSet::new();
    for p in &payments {
        let pid = p["payment_id"].as_str().unwrap();
        let got = app.get(&format!("/payments/{pid}"), &s.access).await;
        assert_eq!(got.status, StatusCode::OK);
        assert_eq!(got.body["amount"], p["amount"]);
        let res = app
            .client
            .get(app.url(&format!("/payments/{pid}/835")))
            .bearer_auth(&s.access)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let remit = res.text().await.unwrap();
        pyx12(dir.path(), &[(&format!("{pid}.835"), &remit)]);
        assert!(remit.contains(&format!("TRN*1*{}*", p["trace_number"].as_str().unwrap())));
        let (total, remitted) = read_835(&remit);
        assert_eq!(total, p["amount"].as_i64().unwrap(), "BPR02 is the payment");
        assert_eq!(total, remitted.values().map(|c| c.paid).sum::<i64>());
        let mut expected_total = 0;
        for (id, r) in &remitted {
            assert!(paid_claims.insert(id.clone()), "{id} paid twice");
            let claim = &payable[id];
            assert_eq!(claim["provider_id"], p["provider_id"]);
            assert_eq!(r.charge, claim["claim_amount"].as_i64().unwrap());
            assert_eq!(r.paid, claim["approved_amount"].as_i64().unwrap());
            expected_total += r.paid;
            // Balanced: charged − paid is every CAS of the claim and its lines.
            let all_cas: i64 = r.claim_cas.iter().map(|c| c.2).sum::<i64>()
                + r.lines
                    .iter()
                    .flat_map(|l| l.3.iter())
                    .map(|c| c.2)
                    .sum::<i64>();
            assert_eq!(r.charge - r.paid, all_cas, "{id}");
            let mut member = 0;
            let lines = claim["lines"].as_array().unwrap();
            assert_eq!(r.lines.len(), lines.len());
            for (sent, line) in r.lines.iter().zip(lines) {
                let adj = &line["adjudication"];
                let mut procedure = format!("HC:{}", line["procedure_code"].as_str().unwrap());
                for m in line["modifiers"].as_array().unwrap() {
                    procedure.push(':');
                    procedure.push_str(m.as_str().unwrap());
                }
                assert_eq!(sent.0, procedure);
                assert_eq!(sent.1, line["amount"].as_i64().unwrap());
                assert_eq!(sent.2, adj["approved_amount"].as_i64().unwrap());
                assert_eq!(sent.1 - sent.2, sent.3.iter().map(|c| c.2).sum::<i64>());
                let mut want: Vec<Cas> = adj["adjustments"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| {
                        (
                            a["group"].as_str().unwrap().to_owned(),
                            a["carc"].as_str().unwrap().to_owned(),
                            a["amount"].as_i64().unwrap(),
                        )
                    })
                    .filter(|a| a.2 != 0)
                    .collect();
                let mut got = sent.3.clone();
                want.sort();
                got.sort();
                assert_eq!(got, want, "{id} line {}", line["line_no"]);
                member += want
                    .iter()
                    .filter(|a| a.0 == "PR")
                    .map(|a| a.2)
                    .sum::<i64>();
            }
            assert_eq!(r.member, member, "{id}: CLP05 is the member's share");
        }
        assert_eq!(total, expected_total);
        let evs = events(&app, "acme", pid).await;
        assert_eq!(evs.len(), 1, "{evs:?}");
        assert_eq!(evs[0]["event"], "payment.issued");
    }
    assert_eq!(
        paid_claims,
        payable.keys().cloned().collect::<BTreeSet<_>>()
    );
    // Some lines were cut by the fee schedule and some left to the member.
    let all: String = payable.values().map(|c| c.to_string()).collect();
    assert!(all.contains("\"carc\":\"45\"") && all.contains("\"group\":\"PR\""));

    // Paid once, ever: a second run finds nothing to pay.
    let r = app
        .call(
            Method::POST,
            "/payments/runs",
            Some(&s.access),
            Some(json!({"through": today})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["payments"], json!([]));
    // Another tenant sees none of it.
    let other = app.session("other", "claims:read").await;
    let pid = payments[0]["payment_id"].as_str().unwrap();
    let r = app.get(&format!("/payments/{pid}"), &other.access).await;
    r.assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
}
