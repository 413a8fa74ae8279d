//! The 999 implementation acknowledgment (005010X231A1) of an 837 interchange: per
//! transaction set accepted, accepted with errors noted, or rejected, and the group as a
//! whole.

use super::claim837::{Read837, Unreadable, PROFESSIONAL};
use super::envelope::{Envelope, Parties, Stamp};

pub const VERSION: &str = "005010X231A1";

/// The 999 of an interchange that was read.
pub fn accepting(read: &Read837, stamp: Stamp, control: u32) -> String {
    let mut e = Envelope::open(
        &read.parties.reversed(),
        stamp,
        control,
        "FA",
        "999",
        VERSION,
    );
    e.seg("AK1", &["HC", &read.group_control, &read.version]);
    let mut accepted = 0usize;
    let mut rejected = 0usize;
    let mut noted = 0usize;
    for set in &read.sets {
        e.seg("AK2", &["837", &set.control, &read.version]);
        if let Some((code, _)) = &set.rejected {
            e.seg("IK5", &["R", code]);
            rejected += 1;
            continue;
        }
        let mut notes = 0;
        for p in set.claims.iter().filter_map(|c| c.problem.as_ref()) {
            if p.position_in_set == 0 {
                // A segment the claim lacks is reported in the 277CA only.
                continue;
            }
            let pos = p.position_in_set.to_string();
            e.seg("IK3", &[&p.segment_id, &pos, p.loop_id, "8"]);
            if p.element > 0 {
                let el = p.element.to_string();
                e.seg("IK4", &[&el, p.element_ref, p.code]);
            }
            notes += 1;
        }
        accepted += 1;
        if notes > 0 {
            noted += 1;
            e.seg("IK5", &["E"]);
        } else {
            e.seg("IK5", &["A"]);
        }
    }
    let status = match (accepted, rejected, noted) {
        (0, _, _) => "R",
        (_, r, _) if r > 0 => "P",
        (_, _, n) if n > 0 => "E",
        _ => "A",
    };
    let received = read.received.to_string();
    let acc = accepted.to_string();
    e.seg("AK9", &[status, &received, &received, &acc]);
    e.close()
}

/// The 999 rejecting an interchange that could not be read.
pub fn rejecting(bad: &Unreadable, stamp: Stamp, control: u32) -> String {
    let parties = bad
        .parties
        .as_ref()
        .map(|p| p.reversed())
        .unwrap_or_else(Parties::unknown);
    let mut e = Envelope::open(&parties, stamp, control, "FA", "999", VERSION);
    let (group_control, version) = bad
        .group
        .clone()
        .unwrap_or_else(|| ("0".into(), PROFESSIONAL.into()));
    let group_control = if group_control.is_empty() {
        "0".into()
    } else {
        group_control
    };
    e.seg("AK1", &["HC", &group_control, &version]);
    e.seg("AK9", &["R", "0", "0", "0", bad.code]);
    e.close()
}
