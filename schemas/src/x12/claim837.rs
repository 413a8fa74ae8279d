//! An 837P (005010X222A1) or 837I (005010X223A2) interchange read in one pass into the
//! claims it carries, as the contract maps them (Standard formats). Each claim keeps the
//! segment that made it unusable, if one did, for the 999 and the 277CA.

use super::envelope::Parties;
use super::segments::{cents, syntax, Segment, Segments, SyntaxError};
use crate::claim::{ClaimLine, Frequency};
use crate::date::Date;

pub const PROFESSIONAL: &str = "005010X222A1";
pub const INSTITUTIONAL: &str = "005010X223A2";

/// HI qualifiers of diagnoses (ICD-10 and ICD-9: principal, other, admitting, reason
/// for visit, external cause); the other HI codes (occurrence, value, condition,
/// procedure) are not diagnoses.
const DIAGNOSIS_QUALIFIERS: &[&str] = &[
    "ABK", "ABF", "ABJ", "APR", "ABN", "BK", "BF", "BJ", "PR", "BN",
];

/// Where in a transaction set a problem is: what the 999's IK3 and IK4 name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentNote {
    pub segment_id: String,
    /// From 1 at the ST.
    pub position_in_set: usize,
    /// The loop the segment is in (`2300`, `2400`).
    pub loop_id: &'static str,
    /// The element, from 1, with its data element number; 0 when the segment is missing.
    pub element: usize,
    pub element_ref: &'static str,
    /// IK4's code: 1 required element missing, 6 invalid character, 7 invalid code
    /// value, 8 invalid date.
    pub code: &'static str,
    /// The API field the element maps to, and what is wrong, for the claim's result.
    pub field: &'static str,
    pub message: String,
}

/// One claim of the interchange.
#[derive(Debug, Clone)]
pub struct Claim837 {
    /// CLM01.
    pub claim_id: String,
    /// ST02 of its transaction set.
    pub set_control: String,
    pub billing_name: String,
    pub billing_npi: String,
    pub patient_last: String,
    pub patient_first: String,
    /// The subscriber's NM1*IL id.
    pub member_id: String,
    /// CLM02, in cents.
    pub amount: i64,
    pub amount_text: String,
    pub service_date: Option<Date>,
    /// The last service date of the lines or of the statement period.
    pub service_to: Option<Date>,
    pub lines: Vec<ClaimLine>,
    pub diagnosis_codes: Vec<String>,
    pub frequency: Frequency,
    pub replaces_claim_id: Option<String>,
    /// CLM05-1 and CLM05-2: place of service or facility type, and its qualifier.
    pub facility_code: String,
    pub facility_qualifier: String,
    /// Why the claim cannot be taken as sent; the first problem found.
    pub problem: Option<SegmentNote>,
}

/// One transaction set: its claims, or why all of it is rejected.
#[derive(Debug, Clone)]
pub struct Set837 {
    pub control: String,
    pub claims: Vec<Claim837>,
    /// Set-level problem (IK5 R with this code): `4` segment count, `3` control number.
    pub rejected: Option<(&'static str, String)>,
}

/// An interchange read.
#[derive(Debug, Clone)]
pub struct Read837 {
    pub parties: Parties,
    /// GS06 and GS08.
    pub group_control: String,
    pub version: String,
    pub sets: Vec<Set837>,
    /// The received sets (ST/SE pairs).
    pub received: usize,
}

impl Read837 {
    pub fn claims(&self) -> impl Iterator<Item = &Claim837> {
        self.sets.iter().flat_map(|s| s.claims.iter())
    }

    pub fn is_institutional(&self) -> bool {
        self.version == INSTITUTIONAL
    }
}

/// An interchange the service cannot read at all: answered 400 with a 999 rejecting it.
#[derive(Debug, Clone)]
pub struct Unreadable {
    /// AK9's reason: `1` group not supported, `2` version not supported, `3` the
    /// interchange or group is cut short or malformed.
    pub code: &'static str,
    pub parties: Option<Box<Parties>>,
    /// GS06 and GS08 when the GS was read.
    pub group: Option<(String, String)>,
    pub error: SyntaxError,
}

#[derive(Default)]
struct Context {
    billing_name: String,
    billing_npi: String,
    sub_last: String,
    sub_first: String,
    member_id: String,
    pat_last: String,
    pat_first: String,
    in_patient: bool,
}

struct OpenSet {
    control: String,
    start: usize,
    claims: Vec<Claim837>,
    claim: Option<Claim837>,
    in_line: bool,
    line_date: Option<Date>,
}

fn note(
    seg: &Segment<'_>,
    set_start: usize,
    loop_id: &'static str,
    (element, element_ref, code): (usize, &'static str, &'static str),
    field: &'static str,
    message: String,
) -> SegmentNote {
    SegmentNote {
        segment_id: seg.id.to_owned(),
        position_in_set: seg.position - set_start + 1,
        loop_id,
        element,
        element_ref,
        code,
        field,
        message,
    }
}

/// X12 dates: `D8` `CCYYMMDD` or `RD8` `CCYYMMDD-CCYYMMDD`, as (from, to).
fn dates(qualifier: &str, value: &str) -> Option<(Date, Date)> {
    match qualifier {
        "D8" => Date::parse_ccyymmdd(value).map(|d| (d, d)),
        "RD8" => {
            let (a, b) = value.split_once('-')?;
            Some((Date::parse_ccyymmdd(a)?, Date::parse_ccyymmdd(b)?))
        }
        _ => None,
    }
}

/// Whole units: `3`, or `3.0`; X12 allows decimals, the API counts whole units.
fn units(text: &str) -> Option<i64> {
    let (w, f) = text.split_once('.').unwrap_or((text, ""));
    if w.is_empty() || !w.bytes().all(|b| b.is_ascii_digit()) || !f.bytes().all(|b| b == b'0') {
        return None;
    }
    w.parse().ok()
}

fn frequency(code: &str) -> Option<Frequency> {
    match code {
        "1" => Some(Frequency::Original),
        "7" => Some(Frequency::Replacement),
        "8" => Some(Frequency::Void),
        _ => None,
    }
}

impl OpenSet {
    fn finish_claim(&mut self) {
        self.in_line = false;
        if let Some(mut c) = self.claim.take() {
            if c.problem.is_none() && c.service_date.is_none() {
                c.problem = Some(SegmentNote {
                    segment_id: "DTP".into(),
                    position_in_set: 0,
                    loop_id: "2400",
                    element: 0,
                    element_ref: "",
                    code: "1",
                    field: "service_date",
                    message: "no service date (DTP*472, or DTP*434 on an 837I)".into(),
                });
            }
            if c.problem.is_none()
                && c.frequency != Frequency::Original
                && c.replaces_claim_id.is_none()
            {
                c.problem = Some(SegmentNote {
                    segment_id: "REF".into(),
                    position_in_set: 0,
                    loop_id: "2300",
                    element: 0,
                    element_ref: "",
                    code: "1",
                    field: "replaces_claim_id",
                    message: "a replacement or a void (CLM05-3 7 or 8) needs REF*F8 with the claim it replaces".into(),
                });
            }
            self.claims.push(c);
        }
    }

    fn problem(&mut self, n: SegmentNote) {
        if let Some(c) = self.claim.as_mut() {
            c.problem.get_or_insert(n);
        }
    }
}

/// Reads an interchange in one pass over its segments.
pub fn read_837(text: &str) -> Result<Read837, Unreadable> {
    let mut parties: Option<Parties> = None;
    let mut group: Option<(String, String)> = None;
    let fail = |parties: &Option<Parties>, group: &Option<(String, String)>, error| Unreadable {
        code: "3",
        parties: parties.clone().map(Box::new),
        group: group.clone(),
        error,
    };
    let segments = Segments::new(text).map_err(|e| fail(&None, &None, e))?;
    let mut isa_control = String::new();
    let mut sets: Vec<Set837> = Vec::new();
    let mut received = 0usize;
    let mut open: Option<OpenSet> = None;
    let mut ctx = Context::default();
    let mut ended = false;
    let mut groups = 0usize;
    let mut group_open = false;
    for seg in segments {
        let seg = seg.map_err(|e| fail(&parties, &group, e))?;
        if ended {
            return Err(fail(
                &parties,
                &group,
                syntax(seg.position, "segments after the IEA"),
            ));
        }
        match seg.id {
            "ISA" => {
                if seg.position != 1 {
                    return Err(fail(
                        &parties,
                        &group,
                        syntax(seg.position, "one interchange per request"),
                    ));
                }
                parties = Some(Parties {
                    sender_qualifier: seg.el(5).trim().to_owned(),
                    sender_id: seg.el(6).trim().to_owned(),
                    receiver_qualifier: seg.el(7).trim().to_owned(),
                    receiver_id: seg.el(8).trim().to_owned(),
                    app_sender: String::new(),
                    app_receiver: String::new(),
                    usage: seg.el(15).trim().to_owned(),
                });
                isa_control = seg.el(13).to_owned();
                if seg.el(12) != "00501" {
                    return Err(fail(
                        &parties,
                        &group,
                        syntax(1, "ISA12 must be 00501 (version 5010)"),
                    ));
                }
            }
            "GS" => {
                if group_open || groups > 0 {
                    return Err(fail(
                        &parties,
                        &group,
                        syntax(seg.position, "one functional group per interchange"),
                    ));
                }
                group_open = true;
                groups += 1;
                group = Some((seg.el(6).to_owned(), seg.el(8).to_owned()));
                if let Some(p) = parties.as_mut() {
                    p.app_sender = seg.el(2).to_owned();
                    p.app_receiver = seg.el(3).to_owned();
                }
                if seg.el(1) != "HC" || ![PROFESSIONAL, INSTITUTIONAL].contains(&seg.el(8)) {
                    let why = syntax(seg.position, format!(
                        "the group must be health care claims (GS01 HC) of {PROFESSIONAL} or {INSTITUTIONAL}"
                    ));
                    return Err(Unreadable {
                        code: if seg.el(1) != "HC" { "1" } else { "2" },
                        ..fail(&parties, &group, why)
                    });
                }
            }
            "GE" => {
                if !group_open || open.is_some() {
                    return Err(fail(
                        &parties,
                        &group,
                        syntax(
                            seg.position,
                            "GE without its GS, or inside a transaction set",
                        ),
                    ));
                }
                group_open = false;
                let control = group.as_ref().map(|g| g.0.as_str()).unwrap_or("");
                if seg.el(2) != control || seg.el(1) != received.to_string() {
                    return Err(fail(
                        &parties,
                        &group,
                        syntax(
                            seg.position,
                            format!(
                                "GE says {} sets of group {}; the group {control} has {received}",
                                seg.el(1),
                                seg.el(2)
                            ),
                        ),
                    ));
                }
            }
            "IEA" => {
                if group_open || seg.el(2) != isa_control || seg.el(1) != groups.to_string() {
                    return Err(fail(
                        &parties,
                        &group,
                        syntax(
                            seg.position,
                            "IEA does not close the interchange its ISA opened",
                        ),
                    ));
                }
                ended = true;
            }
            "ST" => {
                if !group_open || open.is_some() {
                    return Err(fail(
                        &parties,
                        &group,
                        syntax(
                            seg.position,
                            "ST outside a functional group or inside another set",
                        ),
                    ));
                }
                if seg.el(1) != "837" {
                    return Err(fail(
                        &parties,
                        &group,
                        syntax(seg.position, "only 837 transaction sets are taken here"),
                    ));
                }
                received += 1;
                ctx = Context::default();
                open = Some(OpenSet {
                    control: seg.el(2).to_owned(),
                    start: seg.position,
                    claims: Vec::new(),
                    claim: None,
                    in_line: false,
                    line_date: None,
                });
            }
            "SE" => {
                let Some(mut set) = open.take() else {
                    return Err(fail(
                        &parties,
                        &group,
                        syntax(seg.position, "SE without its ST"),
                    ));
                };
                set.finish_claim();
                let count = seg.position - set.start + 1;
                let rejected = if seg.el(1) != count.to_string() {
                    Some((
                        "4",
                        format!("SE01 counts {} segments; the set has {count}", seg.el(1)),
                    ))
                } else if seg.el(2) != set.control {
                    Some((
                        "3",
                        format!("SE02 {} does not match ST02 {}", seg.el(2), set.control),
                    ))
                } else {
                    None
                };
                sets.push(Set837 {
                    control: set.control,
                    claims: set.claims,
                    rejected,
                });
            }
            _ => {
                let Some(set) = open.as_mut() else {
                    return Err(fail(
                        &parties,
                        &group,
                        syntax(
                            seg.position,
                            format!("{} outside a transaction set", seg.id),
                        ),
                    ));
                };
                body_segment(&seg, set, &mut ctx);
            }
        }
    }
    if !ended {
        return Err(fail(
            &parties,
            &group,
            syntax(0, "the interchange has no IEA: it is cut short"),
        ));
    }
    let (group_control, version) = group.unwrap_or_default();
    Ok(Read837 {
        parties: parties.unwrap_or_else(Parties::unknown),
        group_control,
        version,
        sets,
        received,
    })
}

/// A segment inside an 837 transaction set.
fn body_segment(seg: &Segment<'_>, set: &mut OpenSet, ctx: &mut Context) {
    let start = set.start;
    let line_loop = if set.in_line { "2400" } else { "2300" };
    match (seg.id, seg.el(1)) {
        ("HL", _) => {
            set.finish_claim();
            match seg.el(3) {
                "20" => *ctx = Context::default(),
                "22" => {
                    ctx.sub_last.clear();
                    ctx.sub_first.clear();
                    ctx.member_id.clear();
                    ctx.in_patient = false;
                }
                "23" => ctx.in_patient = true,
                _ => {}
            }
        }
        ("NM1", "85") => {
            ctx.billing_name = seg.el(3).to_owned();
            ctx.billing_npi = if seg.el(8) == "XX" {
                seg.el(9).to_owned()
            } else {
                String::new()
            };
        }
        ("NM1", "IL") => {
            ctx.sub_last = seg.el(3).to_owned();
            ctx.sub_first = seg.el(4).to_owned();
            ctx.member_id = seg.el(9).to_owned();
        }
        ("NM1", "QC") => {
            ctx.pat_last = seg.el(3).to_owned();
            ctx.pat_first = seg.el(4).to_owned();
        }
        ("CLM", _) => {
            set.finish_claim();
            let (last, first) = if ctx.in_patient {
                (ctx.pat_last.clone(), ctx.pat_first.clone())
            } else {
                (ctx.sub_last.clone(), ctx.sub_first.clone())
            };
            let mut claim = Claim837 {
                claim_id: seg.el(1).to_owned(),
                set_control: set.control.clone(),
                billing_name: ctx.billing_name.clone(),
                billing_npi: ctx.billing_npi.clone(),
                patient_last: last,
                patient_first: first,
                member_id: ctx.member_id.clone(),
                amount: 0,
                amount_text: seg.el(2).to_owned(),
                service_date: None,
                service_to: None,
                lines: Vec::new(),
                diagnosis_codes: Vec::new(),
                frequency: Frequency::Original,
                replaces_claim_id: None,
                facility_code: seg.comp(5, 1).to_owned(),
                facility_qualifier: seg.comp(5, 2).to_owned(),
                problem: None,
            };
            let n = |e, r, c, f, m: String| note(seg, start, "2300", (e, r, c), f, m);
            if claim.claim_id.is_empty() {
                claim.problem = Some(n(
                    1,
                    "1028",
                    "1",
                    "claim_id",
                    "CLM01, the claim's id, is missing".into(),
                ));
            } else if ctx.billing_npi.is_empty() {
                claim.problem = Some(SegmentNote {
                    loop_id: "2010AA",
                    ..n(
                        0,
                        "",
                        "1",
                        "provider_id",
                        "the billing provider has no NPI (NM1*85 with XX)".into(),
                    )
                });
            } else if ctx.member_id.is_empty() {
                claim.problem = Some(SegmentNote {
                    loop_id: "2010BA",
                    ..n(
                        0,
                        "",
                        "1",
                        "member_id",
                        "the subscriber has no id (NM1*IL, NM109)".into(),
                    )
                });
            }
            match cents(seg.el(2)) {
                Some(c) => claim.amount = c,
                None => {
                    claim.problem.get_or_insert(n(
                        2,
                        "782",
                        "6",
                        "claim_amount",
                        format!("CLM02 `{}` is not an amount in dollars", seg.el(2)),
                    ));
                }
            }
            match frequency(seg.comp(5, 3)) {
                Some(f) => claim.frequency = f,
                None => {
                    claim.problem.get_or_insert(n(5, "C023", "7", "frequency", format!(
                        "CLM05-3 `{}` is not a frequency the service takes (1 original, 7 replacement, 8 void)",
                        seg.comp(5, 3)
                    )));
                }
            }
            set.claim = Some(claim);
        }
        ("REF", "F8") if !set.in_line => {
            if let Some(c) = set.claim.as_mut() {
                c.replaces_claim_id = Some(seg.el(2).to_owned());
            }
        }
        ("HI", _) if !set.in_line => {
            if let Some(c) = set.claim.as_mut() {
                for e in 1..=seg.len() {
                    if DIAGNOSIS_QUALIFIERS.contains(&seg.comp(e, 1)) && !seg.comp(e, 2).is_empty()
                    {
                        c.diagnosis_codes.push(seg.comp(e, 2).to_owned());
                    }
                }
            }
        }
        ("DTP", "434") if !set.in_line => {
            if let (Some(c), Some((from, to))) = (set.claim.as_mut(), dates(seg.el(2), seg.el(3))) {
                c.service_date.get_or_insert(from);
                c.service_to.get_or_insert(to);
            }
        }
        ("LX", _) => {
            set.in_line = true;
            set.line_date = None;
        }
        ("SV1" | "SV2", _) => {
            let professional = seg.id == "SV1";
            let (proc_el, amount_el, units_el) = if professional { (1, 2, 4) } else { (2, 3, 5) };
            let mut procedure = seg.comp(proc_el, 2).to_owned();
            if procedure.is_empty() && !professional {
                // An institutional line may carry only its revenue code.
                procedure = seg.el(1).to_owned();
            }
            let modifiers: Vec<String> = seg
                .comps(proc_el)
                .skip(2)
                .filter(|m| !m.is_empty())
                .map(str::to_owned)
                .collect();
            let n = |e, r, c, f, m: String| note(seg, start, "2400", (e, r, c), f, m);
            let amount = cents(seg.el(amount_el));
            let count = units(seg.el(units_el));
            if set.claim.is_none() {
                return;
            }
            match (amount, count) {
                (None, _) => set.problem(n(
                    amount_el,
                    "782",
                    "6",
                    "lines.amount",
                    format!(
                        "{}{amount_el:02} `{}` is not an amount in dollars",
                        seg.id,
                        seg.el(amount_el)
                    ),
                )),
                (_, None) => set.problem(n(
                    units_el,
                    "380",
                    "6",
                    "lines.units",
                    format!(
                        "{}{units_el:02} `{}` is not a whole number of units",
                        seg.id,
                        seg.el(units_el)
                    ),
                )),
                (Some(amount), Some(units)) => {
                    if let Some(c) = set.claim.as_mut() {
                        c.lines.push(ClaimLine {
                            procedure_code: procedure,
                            units,
                            amount,
                            modifiers,
                        });
                    }
                }
            }
        }
        ("DTP", "472") => {
            let parsed = dates(seg.el(2), seg.el(3));
            let Some(c) = set.claim.as_mut() else { return };
            match parsed {
                Some((from, to)) => {
                    c.service_date = Some(c.service_date.map_or(from, |d| d.min(from)));
                    c.service_to = Some(c.service_to.map_or(to, |d| d.max(to)));
                }
                None => {
                    let n = note(
                        seg,
                        start,
                        line_loop,
                        (3, "1251", "8"),
                        "service_date",
                        format!(
                            "DTP*472 `{}` is not a date of its format {}",
                            seg.el(3),
                            seg.el(2)
                        ),
                    );
                    set.problem(n);
                }
            }
        }
        _ => {}
    }
}
