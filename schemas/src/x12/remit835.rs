//! The 835 remittance advice (005010X221A1) of one payment: per claim a CLP with what
//! was charged, paid and left to the member, per line an SVC with its CAS adjustments
//! (group, CARC, amount) exactly as the line's adjudication has them, balanced as the
//! guide requires: for each line and each claim, charged − paid = the sum of its CAS,
//! and the BPR's total is the sum of the CLPs' payments.

use super::envelope::{Envelope, Parties, Stamp};
use super::segments::{clean, money};
use crate::adjudication::{Adjustment, Group};
use crate::claim::ClaimView;
use crate::payment::PaymentView;

pub const VERSION: &str = "005010X221A1";

/// Who pays and who is paid, as the 835 names them.
#[derive(Debug, Clone)]
pub struct Remittance<'a> {
    /// The payer: the tenant.
    pub payer_id: &'a str,
    pub payee_name: &'a str,
    pub payee_npi: Option<&'a str>,
}

fn group(g: Group) -> &'static str {
    match g {
        Group::CO => "CO",
        Group::PR => "PR",
        Group::OA => "OA",
        Group::PI => "PI",
    }
}

/// CAS segments of `adjustments`: one per group, at most six reasons each, as the
/// segment holds.
fn cas(e: &mut Envelope, adjustments: &[(Group, String, i64)]) {
    for g in [Group::CO, Group::PR, Group::OA, Group::PI] {
        let mine: Vec<&(Group, String, i64)> = adjustments
            .iter()
            .filter(|a| a.0 == g && a.2 != 0)
            .collect();
        for chunk in mine.chunks(6) {
            let mut els: Vec<String> = vec![group(g).to_owned()];
            for (_, carc, amount) in chunk {
                els.push(clean(carc, 5));
                els.push(money(*amount));
                els.push(String::new());
            }
            els.pop();
            let refs: Vec<&str> = els.iter().map(String::as_str).collect();
            e.seg("CAS", &refs);
        }
    }
}

fn as_tuples(adjustments: &[Adjustment]) -> Vec<(Group, String, i64)> {
    adjustments
        .iter()
        .map(|a| (a.group, a.carc.clone(), a.amount))
        .collect()
}

/// The 835 of `payment`, whose claims are `claims`.
pub fn render(
    payment: &PaymentView,
    who: &Remittance<'_>,
    claims: &[ClaimView],
    stamp: Stamp,
    control: u32,
) -> String {
    let payee_id = who.payee_npi.unwrap_or(&payment.provider_id);
    let parties = Parties {
        sender_qualifier: "ZZ".into(),
        sender_id: who.payer_id.to_owned(),
        receiver_qualifier: "ZZ".into(),
        receiver_id: payee_id.to_owned(),
        app_sender: who.payer_id.to_owned(),
        app_receiver: payee_id.to_owned(),
        usage: "P".into(),
    };
    let mut e = Envelope::open(&parties, stamp, control, "HP", "835", VERSION);
    let date = stamp.date();
    let paid: i64 = claims.iter().map(|c| c.approved_amount.unwrap_or(0)).sum();
    let total = money(paid);
    let (handling, method) = if paid > 0 { ("I", "CHK") } else { ("H", "NON") };
    e.seg(
        "BPR",
        &[
            handling, &total, "C", method, "", "", "", "", "", "", "", "", "", "", "", &date,
        ],
    );
    // TRN03: "1" and the payer's tax id; the service has none of its own to give.
    e.seg(
        "TRN",
        &["1", &clean(&payment.trace_number, 50), "1000000000"],
    );
    e.seg("DTM", &["405", &date]);
    let payer = clean(who.payer_id, 60);
    e.seg("N1", &["PR", &payer]);
    e.seg("N3", &["CLAIMS SERVICE"]);
    e.seg("N4", &["NONE", "NY", "10001"]);
    e.seg("PER", &["BL", "CLAIMS SERVICE", "EM", "remittance@invalid"]);
    let payee = clean(who.payee_name, 60);
    match who.payee_npi {
        Some(npi) => e.seg("N1", &["PE", &payee, "XX", &clean(npi, 80)]),
        None => e.seg(
            "N1",
            &["PE", &payee, "PI", &clean(&payment.provider_id, 80)],
        ),
    }
    e.seg("LX", &["1"]);
    for c in claims {
        let s = &c.submission;
        let approved = c.approved_amount.unwrap_or(0);
        let adjudicated: Vec<_> = c
            .lines
            .iter()
            .filter_map(|l| Some((l, l.adjudication.as_ref()?)))
            .collect();
        let member_share: i64 = adjudicated
            .iter()
            .flat_map(|(_, a)| a.adjustments.iter())
            .filter(|a| a.group == Group::PR)
            .map(|a| a.amount)
            .sum();
        let claim_id = clean(s.claim_id.as_str(), 38);
        e.seg(
            "CLP",
            &[
                &claim_id,
                "1",
                &money(s.claim_amount),
                &money(approved),
                &money(member_share),
                "12",
                &claim_id,
            ],
        );
        // Lines without a procedure code cannot be an SVC: their adjustments go on the
        // claim, as does any difference between the lines' payments and the claim's (an
        // officer's amount).
        let mut claim_level: Vec<(Group, String, i64)> = Vec::new();
        let lines_paid: i64 = adjudicated.iter().map(|(_, a)| a.approved_amount).sum();
        for (l, a) in &adjudicated {
            if l.procedure_code.is_none() {
                claim_level.extend(as_tuples(&a.adjustments));
            }
        }
        if lines_paid != approved {
            claim_level.push((Group::CO, "45".into(), lines_paid - approved));
        }
        cas(&mut e, &claim_level);
        e.seg(
            "NM1",
            &[
                "QC",
                "1",
                "",
                "",
                "",
                "",
                "",
                "MI",
                &clean(s.member_id.as_str(), 80),
            ],
        );
        for (l, a) in &adjudicated {
            let Some(code) = &l.procedure_code else {
                continue;
            };
            let mut procedure = format!("HC:{}", clean(code, 48));
            for m in &l.modifiers {
                procedure.push(':');
                procedure.push_str(&clean(m, 2));
            }
            let units = l.units.to_string();
            e.seg(
                "SVC",
                &[
                    &procedure,
                    &money(l.amount),
                    &money(a.approved_amount),
                    "",
                    &units,
                ],
            );
            e.seg("DTM", &["472", &s.service_date.ccyymmdd()]);
            cas(&mut e, &as_tuples(&a.adjustments));
            e.seg("REF", &["6R", &l.line_no.to_string()]);
        }
    }
    e.close()
}
