//! The line adjudicator. Each line, in the contract's order:
//!
//! 1. the fee schedule caps the line at its maximum per unit times the units; the
//!    excess is `CO-45` and what is left is the allowed amount;
//! 2. a `deny_line` rule that matched the line denies it (`CO`, the rule's CARC);
//! 3. the member's plan: a visit limit reached denies the line (`CO-119`); then the
//!    member pays the copay (`PR-3`), what is left of the deductible (`PR-1`) and the
//!    coinsurance share of the rest (`PR-2`), each only as far as the out-of-pocket
//!    maximum leaves room; the plan pays the rest up to what the annual maximum leaves
//!    (the excess is `CO-119`).
//!
//! Each line sees the year as the lines before it left it. Then a claim-level cap (an
//! `adjust` rule) cuts the plan's payment from the last line backwards (`CO-45`, or the
//! rule's CARC). A claim that is blocked, declined or refused denies every line whole.
//!
//! Every cut is an adjustment, so `amount = approved_amount + Σ adjustments` holds for
//! every line by construction; the tests check it over generated claims.

use std::collections::BTreeMap;

use schemas::adjudication::{
    carc, Adjustment, Group, LineAdjudication, LineStatus, LineView, MemberResponsibility,
};
use schemas::plan::Benefits;

use super::usage::{Usage, Visits};

/// One service line as the adjudicator reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineIn<'a> {
    pub procedure_code: Option<&'a str>,
    pub units: i64,
    pub amount: i64,
    /// Set when a `deny_line` rule matched the line.
    pub denial: Option<Denial>,
}

/// Why a line or a whole claim is not paid: a `CO` adjustment with this CARC.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Denial {
    pub carc: String,
    pub rarc: Option<String>,
}

/// A claim-level cap on what the plan pays (an `adjust` rule).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cap {
    pub total: i64,
    pub carc: String,
    pub rarc: Option<String>,
}

/// What the claim's outcome lets the adjudicator do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pay {
        cap: Option<Cap>,
    },
    /// Blocked, declined or refused: every line denied.
    Deny(Denial),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adjudicated {
    pub lines: Vec<LineAdjudication>,
    /// What the claim adds to the member's year, should it be paid.
    pub usage: Usage,
}

impl Adjudicated {
    /// What the plan pays for the claim: the sum of its lines'.
    pub fn approved_amount(&self) -> i64 {
        self.lines.iter().map(|l| l.approved_amount).sum()
    }
}

/// Adjudicates `lines` against the fee schedule, the member's plan (none for a member
/// not on the roster) and `year`, what the member used this year before this claim.
pub fn adjudicate(
    lines: &[LineIn],
    fee_schedule: &BTreeMap<String, i64>,
    benefits: Option<&Benefits>,
    year: &Usage,
    verdict: &Verdict,
) -> Adjudicated {
    let cap = match verdict {
        Verdict::Deny(d) => return denied(lines, d),
        Verdict::Pay { cap } => cap,
    };
    let mut used = year.clone();
    let mut usage = Usage::default();
    let mut out: Vec<LineAdjudication> = lines
        .iter()
        .map(|line| {
            let mut line_out = Line::allowed(line, fee_schedule);
            if let Some(d) = &line.denial {
                line_out.deny(d.carc.clone(), d.rarc.clone());
            } else if let Some(b) = benefits {
                line_out.apply_benefits(line.procedure_code, b, &mut used, &mut usage);
            } else {
                usage.paid += line_out.approved;
            }
            line_out.finish(line.amount)
        })
        .collect();
    if let Some(cap) = cap {
        let billed: i64 = lines.iter().map(|l| l.amount).sum();
        let total: i64 = out.iter().map(|l| l.approved_amount).sum();
        let target = cap.total.clamp(0, billed);
        if target < total {
            cut_from_the_end(&mut out, total - target, cap, &mut usage);
        } else if target > total && benefits.is_none() {
            // Part 1 of the contract: the adjust rule's value stands up to the billed
            // amount, above the fee schedule's caps; those cuts are given back.
            give_back_fee_cuts(&mut out, lines, target - total, &mut usage);
        }
    }
    Adjudicated { lines: out, usage }
}

/// A claim-level cap: the plan's payment cut from the last line backwards.
fn cut_from_the_end(out: &mut [LineAdjudication], mut cut: i64, cap: &Cap, usage: &mut Usage) {
    for line in out.iter_mut().rev() {
        let c = cut.min(line.approved_amount);
        if c == 0 {
            continue;
        }
        line.approved_amount -= c;
        line.adjustments.push(Adjustment {
            group: Group::CO,
            carc: cap.carc.clone(),
            rarc: cap.rarc.clone(),
            amount: c,
        });
        line.status = LineStatus::Adjusted;
        usage.paid -= c;
        cut -= c;
    }
}

/// An `adjust` value above the fee-capped total (no plan): the fee-schedule cuts are
/// given back from the last line backwards until the plan pays `more` besides.
fn give_back_fee_cuts(
    out: &mut [LineAdjudication],
    lines: &[LineIn],
    mut more: i64,
    usage: &mut Usage,
) {
    for (line, billed) in out.iter_mut().zip(lines).rev() {
        if more == 0 {
            break;
        }
        if line.status == LineStatus::Denied {
            continue;
        }
        let Some(fee) = line
            .adjustments
            .iter_mut()
            .find(|a| a.group == Group::CO && a.carc == carc::FEE_SCHEDULE)
        else {
            continue;
        };
        let give = more.min(fee.amount);
        fee.amount -= give;
        line.adjustments.retain(|a| a.amount > 0);
        line.approved_amount += give;
        line.allowed_amount += give;
        usage.paid += give;
        more -= give;
        if line.approved_amount == billed.amount {
            line.status = LineStatus::Approved;
        }
    }
}

fn denied(lines: &[LineIn], d: &Denial) -> Adjudicated {
    let lines = lines
        .iter()
        .map(|l| LineAdjudication {
            status: LineStatus::Denied,
            allowed_amount: 0,
            approved_amount: 0,
            member_responsibility: MemberResponsibility::default(),
            adjustments: vec![Adjustment {
                group: Group::CO,
                carc: d.carc.clone(),
                rarc: d.rarc.clone(),
                amount: l.amount,
            }],
        })
        .collect();
    Adjudicated {
        lines,
        usage: Usage::default(),
    }
}

/// One line while it is being adjudicated.
struct Line {
    allowed: i64,
    approved: i64,
    share: MemberResponsibility,
    adjustments: Vec<Adjustment>,
    denied: bool,
}

impl Line {
    /// Step 1: the fee schedule.
    fn allowed(line: &LineIn, fee_schedule: &BTreeMap<String, i64>) -> Self {
        let mut l = Line {
            allowed: line.amount,
            approved: line.amount,
            share: MemberResponsibility::default(),
            adjustments: Vec::new(),
            denied: false,
        };
        let max = line
            .procedure_code
            .and_then(|c| fee_schedule.get(c))
            .map(|per_unit| per_unit.saturating_mul(line.units.max(1)));
        if let Some(max) = max.filter(|&m| line.amount > m) {
            l.cut(Group::CO, carc::FEE_SCHEDULE, line.amount - max);
            l.allowed = max;
        }
        l
    }

    fn cut(&mut self, group: Group, code: &str, amount: i64) {
        if amount > 0 {
            self.adjustments.push(Adjustment {
                group,
                carc: code.to_owned(),
                rarc: None,
                amount,
            });
            self.approved -= amount;
        }
    }

    /// The rest of the line is not paid.
    fn deny(&mut self, code: String, rarc: Option<String>) {
        let rest = self.approved;
        self.cut(Group::CO, &code, rest);
        if let Some(a) = self.adjustments.last_mut().filter(|_| rest > 0) {
            a.rarc = rarc;
        }
        self.denied = true;
    }

    /// Step 3: the plan, against the year as the lines before left it.
    fn apply_benefits(
        &mut self,
        code: Option<&str>,
        b: &Benefits,
        used: &mut Usage,
        usage: &mut Usage,
    ) {
        let limit = code.and_then(|c| Some((c, *b.visit_limits.get(c)?)));
        if let Some((c, limit)) = limit {
            if used.visits(c) >= limit {
                self.deny(carc::BENEFIT_MAXIMUM.to_owned(), None);
                return;
            }
        }
        let mut room = (b.out_of_pocket_max - used.out_of_pocket).max(0);
        let mut take = |want: i64, rest: i64| {
            let t = want.min(rest).min(room).max(0);
            room -= t;
            t
        };
        let copay = take(
            code.and_then(|c| b.copays.get(c)).copied().unwrap_or(0),
            self.approved,
        );
        self.cut(Group::PR, carc::COPAY, copay);
        let deductible = take(b.deductible - used.deductible, self.approved);
        self.cut(Group::PR, carc::DEDUCTIBLE, deductible);
        // Half a cent and up rounds up: the member's share of 12.345 is 12.35.
        let coinsurance = take(
            (self.approved * b.coinsurance_pct + 50) / 100,
            self.approved,
        );
        self.cut(Group::PR, carc::COINSURANCE, coinsurance);
        self.share = MemberResponsibility {
            deductible,
            coinsurance,
            copay,
        };
        if let Some(max) = b.annual_max {
            let left = (max - used.paid).max(0);
            self.cut(Group::CO, carc::BENEFIT_MAXIMUM, self.approved - left);
        }
        let line_usage = Usage {
            deductible,
            out_of_pocket: self.share.total(),
            paid: self.approved,
            visits: code.map(Visits::one).unwrap_or_default(),
        };
        used.add(&line_usage);
        usage.add(&line_usage);
    }

    fn finish(self, amount: i64) -> LineAdjudication {
        let status = if self.denied {
            LineStatus::Denied
        } else if self.approved == amount {
            LineStatus::Approved
        } else {
            LineStatus::Adjusted
        };
        LineAdjudication {
            status,
            allowed_amount: if self.denied { 0 } else { self.allowed },
            approved_amount: self.approved,
            member_responsibility: self.share,
            adjustments: self.adjustments,
        }
    }
}

/// What the plan pays for adjudicated lines: the sum of their approved amounts.
pub fn approved_total(lines: &[LineView]) -> i64 {
    lines
        .iter()
        .filter_map(|l| l.adjudication.as_ref())
        .map(|a| a.approved_amount)
        .sum()
}

/// Adjudicates a claim's lines as reads show them and writes each line's adjudication
/// into it; answers what the claim adds to the member's year. `denials` are the lines'
/// own (a `deny_line` rule), by position, and may be shorter than the lines.
pub fn adjudicate_lines(
    lines: &mut [LineView],
    fee_schedule: &BTreeMap<String, i64>,
    denials: &[Option<Denial>],
    benefits: Option<&Benefits>,
    year: &Usage,
    verdict: &Verdict,
) -> Usage {
    let done = {
        let inputs: Vec<LineIn> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| LineIn {
                procedure_code: l.procedure_code.as_deref(),
                units: l.units,
                amount: l.amount,
                denial: denials.get(i).cloned().flatten(),
            })
            .collect();
        adjudicate(&inputs, fee_schedule, benefits, year, verdict)
    };
    for (line, a) in lines.iter_mut().zip(done.lines) {
        line.adjudication = Some(a);
    }
    done.usage
}

/// [`adjudicate_lines`] without a plan: the decision's lines before members' benefits
/// apply.
pub fn adjudicate_views(
    lines: &mut [LineView],
    fee_schedule: &BTreeMap<String, i64>,
    denials: &[Option<Denial>],
    verdict: &Verdict,
) {
    adjudicate_lines(
        lines,
        fee_schedule,
        denials,
        None,
        &Usage::default(),
        verdict,
    );
}

/// An officer's amount on lines adjudicated before: the plan pays `target` (at most
/// the billed total). A lower amount is cut from the last line backwards (`CO-45`); a
/// higher one gives adjustments back, the last line's last adjustment first. The lines
/// still balance.
pub fn settle(lines: &mut [LineView], target: i64) {
    let billed: i64 = lines.iter().map(|l| l.amount).sum();
    let target = target.clamp(0, billed);
    let mut done: Vec<LineAdjudication> = lines
        .iter()
        .map(|l| {
            l.adjudication
                .clone()
                .unwrap_or_else(|| unadjudicated(l.amount))
        })
        .collect();
    let total: i64 = done.iter().map(|l| l.approved_amount).sum();
    if target < total {
        let cap = Cap {
            total: target,
            carc: carc::FEE_SCHEDULE.to_owned(),
            rarc: None,
        };
        cut_from_the_end(&mut done, total - target, &cap, &mut Usage::default());
    } else {
        let mut more = target - total;
        for line in done.iter_mut().rev() {
            while more > 0 {
                let Some(last) = line.adjustments.last_mut() else {
                    break;
                };
                let give = more.min(last.amount);
                last.amount -= give;
                if last.group == Group::PR {
                    let share = &mut line.member_responsibility;
                    match last.carc.as_str() {
                        carc::DEDUCTIBLE => share.deductible -= give,
                        carc::COINSURANCE => share.coinsurance -= give,
                        carc::COPAY => share.copay -= give,
                        _ => {}
                    }
                }
                if last.amount == 0 {
                    line.adjustments.pop();
                }
                line.approved_amount += give;
                line.allowed_amount = line.allowed_amount.max(line.approved_amount);
                more -= give;
            }
        }
    }
    for (line, d) in lines.iter_mut().zip(done) {
        let status = if d.approved_amount == line.amount {
            LineStatus::Approved
        } else if d.approved_amount == 0 && d.status == LineStatus::Denied {
            LineStatus::Denied
        } else {
            LineStatus::Adjusted
        };
        line.adjudication = Some(LineAdjudication { status, ..d });
    }
}

fn unadjudicated(amount: i64) -> LineAdjudication {
    LineAdjudication {
        status: LineStatus::Approved,
        allowed_amount: amount,
        approved_amount: amount,
        member_responsibility: MemberResponsibility::default(),
        adjustments: Vec::new(),
    }
}
