//! The 277CA claim acknowledgment (005010X214) of an 837 interchange: one status per
//! claim of the accepted transaction sets, under its billing provider, with the counts
//! and amounts accepted and rejected at each level.

use super::claim837::{Claim837, Read837};
use super::envelope::{Envelope, Stamp};
use super::segments::{clean, money};

pub const VERSION: &str = "005010X214";

/// What became of one claim at intake: accepted, or rejected with the reason.
pub type ClaimAck = Result<(), String>;

#[derive(Default)]
struct Tally {
    accepted: usize,
    rejected: usize,
    accepted_amount: i64,
    rejected_amount: i64,
}

impl Tally {
    fn add(&mut self, c: &Claim837, ack: &ClaimAck) {
        if ack.is_ok() {
            self.accepted += 1;
            self.accepted_amount += c.amount;
        } else {
            self.rejected += 1;
            self.rejected_amount += c.amount;
        }
    }

    /// QTY and AMT of a level: `qty` the qualifiers for accepted and rejected.
    fn write(&self, e: &mut Envelope, qty: (&str, &str)) {
        if self.accepted > 0 {
            e.seg("QTY", &[qty.0, &self.accepted.to_string()]);
        }
        if self.rejected > 0 {
            e.seg("QTY", &[qty.1, &self.rejected.to_string()]);
        }
        if self.accepted > 0 {
            e.seg("AMT", &["YU", &money(self.accepted_amount)]);
        }
        if self.rejected > 0 {
            e.seg("AMT", &["YY", &money(self.rejected_amount)]);
        }
    }
}

fn id_or(s: &str, fallback: &str) -> String {
    let v = clean(s, 50);
    if v.is_empty() {
        fallback.to_owned()
    } else {
        v
    }
}

/// `acks` has one entry per claim of `read.claims()`, in that order; claims of sets the
/// 999 rejected are left out, as the 999 answered for them.
pub fn render(
    read: &Read837,
    acks: &[ClaimAck],
    batch_ref: &str,
    stamp: Stamp,
    control: u32,
) -> String {
    let parties = read.parties.reversed();
    let mut e = Envelope::open(&parties, stamp, control, "HN", "277", VERSION);
    let date = stamp.date();
    e.seg(
        "BHT",
        &[
            "0085",
            "08",
            &clean(batch_ref, 50),
            &date,
            &stamp.time(),
            "TH",
        ],
    );
    let claims: Vec<(&Claim837, &ClaimAck)> = read
        .sets
        .iter()
        .flat_map(|s| s.claims.iter().map(move |c| (s, c)))
        .zip(acks)
        .filter(|((s, _), _)| s.rejected.is_none())
        .map(|((_, c), a)| (c, a))
        .collect();
    let mut total = Tally::default();
    for (c, a) in &claims {
        total.add(c, a);
    }
    // The payer, who answers: the 837's receiver.
    e.seg("HL", &["1", "", "20", "1"]);
    let payer = id_or(&parties.sender_id, "PAYER");
    e.seg("NM1", &["PR", "2", &payer, "", "", "", "", "PI", &payer]);
    e.seg("TRN", &["1", &clean(batch_ref, 50)]);
    e.seg("DTP", &["050", "D8", &date]);
    e.seg("DTP", &["009", "D8", &date]);
    // The submitter, who receives it.
    e.seg("HL", &["2", "1", "21", "1"]);
    let submitter = id_or(&parties.receiver_id, "SUBMITTER");
    e.seg(
        "NM1",
        &["41", "2", &submitter, "", "", "", "", "46", &submitter],
    );
    e.seg("TRN", &["2", &id_or(&read.group_control, "0")]);
    let status_amount = money(total.accepted_amount + total.rejected_amount);
    e.seg("STC", &["A1:19:PR", &date, "WQ", &status_amount]);
    total.write(&mut e, ("90", "AA"));
    // Billing providers in the order they first appear, each with its claims.
    let mut providers: Vec<&str> = Vec::new();
    for (c, _) in &claims {
        if !providers.contains(&c.billing_npi.as_str()) {
            providers.push(&c.billing_npi);
        }
    }
    let mut hl = 2usize;
    for npi in providers {
        hl += 1;
        let provider_hl = hl.to_string();
        let mine: Vec<&(&Claim837, &ClaimAck)> = claims
            .iter()
            .filter(|(c, _)| c.billing_npi == npi)
            .collect();
        let mut tally = Tally::default();
        for (c, a) in &mine {
            tally.add(c, a);
        }
        e.seg("HL", &[&provider_hl, "2", "19", "1"]);
        let name = id_or(&mine[0].0.billing_name, "PROVIDER");
        e.seg(
            "NM1",
            &[
                "85",
                "2",
                &name,
                "",
                "",
                "",
                "",
                "XX",
                &id_or(npi, "0000000000"),
            ],
        );
        e.seg("TRN", &["1", &id_or(npi, "0")]);
        let provider_amount = money(tally.accepted_amount + tally.rejected_amount);
        e.seg("STC", &["A1:19:85", "", "WQ", &provider_amount]);
        tally.write(&mut e, ("QA", "QC"));
        for (c, a) in mine {
            hl += 1;
            e.seg("HL", &[&hl.to_string(), &provider_hl, "PT"]);
            e.seg(
                "NM1",
                &[
                    "QC",
                    "1",
                    &id_or(&c.patient_last, "UNKNOWN"),
                    &clean(&c.patient_first, 35),
                    "",
                    "",
                    "",
                    "MI",
                    &id_or(&c.member_id, "UNKNOWN"),
                ],
            );
            let claim_id = id_or(&c.claim_id, "UNKNOWN");
            e.seg("TRN", &["2", &claim_id]);
            let amount = money(c.amount);
            match a {
                Ok(()) => {
                    e.seg("STC", &["A1:20", &date, "WQ", &amount]);
                    e.seg("REF", &["1K", &claim_id]);
                }
                Err(why) => {
                    let text = clean(why, 264);
                    e.seg(
                        "STC",
                        &[
                            "A3:21", &date, "U", &amount, "", "", "", "", "", "", "", &text,
                        ],
                    );
                }
            }
            if let Some(from) = c.service_date {
                let to = c.service_to.unwrap_or(from);
                if to == from {
                    e.seg("DTP", &["472", "D8", &from.ccyymmdd()]);
                } else {
                    let range = format!("{}-{}", from.ccyymmdd(), to.ccyymmdd());
                    e.seg("DTP", &["472", "RD8", &range]);
                }
            }
        }
    }
    e.close()
}
