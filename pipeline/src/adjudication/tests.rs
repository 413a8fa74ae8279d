//! The adjudicator's examples, and its invariants over generated claims: the money
//! always balances, the member never pays past the out-of-pocket maximum, the plan
//! never pays past the annual maximum.

use std::collections::BTreeMap;

use proptest::prelude::*;
use schemas::adjudication::{Group, LineAdjudication, LineStatus};
use schemas::plan::Benefits;

use super::*;

fn plan(deductible: i64, coinsurance_pct: i64, out_of_pocket_max: i64) -> Benefits {
    Benefits {
        deductible,
        coinsurance_pct,
        out_of_pocket_max,
        ..Default::default()
    }
}

fn line(code: &str, amount: i64) -> LineIn<'_> {
    LineIn {
        procedure_code: Some(code),
        units: 1,
        amount,
        denial: None,
    }
}

const PAY: Verdict = Verdict::Pay { cap: None };

fn codes(l: &LineAdjudication) -> Vec<String> {
    l.adjustments
        .iter()
        .map(|a| format!("{:?}-{}:{}", a.group, a.carc, a.amount))
        .collect()
}

/// Claims of one member adjudicated in order, each counted into the year.
fn in_order(
    claims: &[Vec<LineIn>],
    fees: &BTreeMap<String, i64>,
    b: &Benefits,
) -> (Vec<Adjudicated>, MemberYear) {
    let mut year = MemberYear::default();
    let mut out = Vec::new();
    for (i, lines) in claims.iter().enumerate() {
        let a = adjudicate(lines, fees, Some(b), &year.totals, &PAY);
        year.count(&format!("C{i}"), a.usage.clone());
        out.push(a);
    }
    (out, year)
}

#[test]
fn a_deductible_is_met_across_claims_in_order_then_coinsurance_applies() {
    let b = plan(50_000, 20, 1_000_000);
    let claims = [
        vec![line("99213", 30_000)],
        vec![line("99213", 40_000)],
        vec![line("99213", 10_000)],
    ];
    let (done, year) = in_order(&claims, &BTreeMap::new(), &b);
    let approved: Vec<i64> = done.iter().map(Adjudicated::approved_amount).collect();
    assert_eq!(approved, [0, 16_000, 8_000]);
    assert_eq!(year.totals.deductible, 50_000);
    assert_eq!(year.totals.out_of_pocket, 30_000 + 24_000 + 2_000);
    assert_eq!(year.totals.paid, 24_000);
    assert_eq!(codes(&done[1].lines[0]), ["PR-1:20000", "PR-2:4000"]);
    assert_eq!(done[0].lines[0].status, LineStatus::Adjusted);
    assert_eq!(done[0].lines[0].member_responsibility.deductible, 30_000);
}

#[test]
fn the_order_is_fee_schedule_copay_deductible_coinsurance() {
    let b = Benefits {
        copays: [("99213".to_owned(), 2_000)].into(),
        ..plan(5_000, 10, 1_000_000)
    };
    let fees = [("99213".to_owned(), 15_000)].into();
    let a = adjudicate(
        &[line("99213", 20_000)],
        &fees,
        Some(&b),
        &Usage::default(),
        &PAY,
    );
    let l = &a.lines[0];
    // 20000 billed, 15000 allowed; copay 2000, deductible 5000, 10% of 8000 = 800.
    assert_eq!(
        codes(l),
        ["CO-45:5000", "PR-3:2000", "PR-1:5000", "PR-2:800"]
    );
    assert_eq!((l.allowed_amount, l.approved_amount), (15_000, 7_200));
}

#[test]
fn the_member_stops_paying_at_the_out_of_pocket_maximum() {
    let b = plan(10_000, 50, 12_000);
    let spent = Usage {
        deductible: 10_000,
        out_of_pocket: 11_000,
        ..Default::default()
    };
    let a = adjudicate(
        &[line("x", 10_000)],
        &BTreeMap::new(),
        Some(&b),
        &spent,
        &PAY,
    );
    assert_eq!(codes(&a.lines[0]), ["PR-2:1000"]);
    assert_eq!(a.approved_amount(), 9_000);
}

#[test]
fn a_visit_limit_reached_denies_the_line_and_an_annual_maximum_caps_the_plan() {
    let b = Benefits {
        visit_limits: [("97110".to_owned(), 2)].into(),
        annual_max: Some(25_000),
        ..plan(0, 0, 0)
    };
    let claims: Vec<Vec<LineIn>> = (0..3).map(|_| vec![line("97110", 10_000)]).collect();
    let (done, year) = in_order(&claims, &BTreeMap::new(), &b);
    assert_eq!(codes(&done[2].lines[0]), ["CO-119:10000"]);
    assert_eq!(done[2].lines[0].status, LineStatus::Denied);
    assert_eq!(year.totals.visits("97110"), 2);
    let more = adjudicate(
        &[line("99213", 10_000)],
        &BTreeMap::new(),
        Some(&b),
        &year.totals,
        &PAY,
    );
    assert_eq!(codes(&more.lines[0]), ["CO-119:5000"]);
    assert_eq!(more.approved_amount(), 5_000);
}

#[test]
fn a_denied_line_and_a_denied_claim_carry_their_rules_codes() {
    let mut lines = vec![line("a", 1_000), line("b", 2_000)];
    lines[1].denial = Some(Denial {
        carc: "204".into(),
        rarc: Some("N130".into()),
    });
    let a = adjudicate(&lines, &BTreeMap::new(), None, &Usage::default(), &PAY);
    assert_eq!(a.lines[0].status, LineStatus::Approved);
    assert_eq!(a.lines[1].status, LineStatus::Denied);
    assert_eq!(a.lines[1].adjustments[0].rarc.as_deref(), Some("N130"));
    assert_eq!(a.approved_amount(), 1_000);
    let blocked = Verdict::Deny(Denial {
        carc: "A1".into(),
        rarc: None,
    });
    let a = adjudicate(&lines, &BTreeMap::new(), None, &Usage::default(), &blocked);
    assert!(a.lines.iter().all(|l| l.status == LineStatus::Denied));
    assert_eq!(codes(&a.lines[1]), ["CO-A1:2000"]);
    assert!(a.usage.is_empty());
}

#[test]
fn a_claim_cap_cuts_the_last_lines_first() {
    let lines = [line("a", 1_000), line("b", 2_000), line("c", 3_000)];
    let cap = Verdict::Pay {
        cap: Some(Cap {
            total: 2_500,
            carc: "45".into(),
            rarc: None,
        }),
    };
    let a = adjudicate(&lines, &BTreeMap::new(), None, &Usage::default(), &cap);
    let approved: Vec<i64> = a.lines.iter().map(|l| l.approved_amount).collect();
    assert_eq!(approved, [1_000, 1_500, 0]);
    assert_eq!(a.usage.paid, 2_500);
    assert_eq!(a.lines[2].status, LineStatus::Adjusted);
}

#[test]
fn without_a_plan_an_adjust_value_above_the_fee_caps_stands_up_to_the_billed_amount() {
    let fees = [("a".to_owned(), 500)].into();
    let lines = [line("a", 1_000), line("a", 1_000)];
    let raise = |total| Verdict::Pay {
        cap: Some(Cap {
            total,
            carc: "45".into(),
            rarc: None,
        }),
    };
    let a = adjudicate(&lines, &fees, None, &Usage::default(), &raise(1_700));
    assert_eq!(a.approved_amount(), 1_700);
    assert_eq!(codes(&a.lines[1]), Vec::<String>::new());
    assert_eq!(a.lines[1].status, LineStatus::Approved);
    assert_eq!(codes(&a.lines[0]), ["CO-45:300"]);
    let a = adjudicate(&lines, &fees, None, &Usage::default(), &raise(5_000));
    assert_eq!(a.approved_amount(), 2_000);
    assert_eq!(a.usage.paid, 2_000);
}

fn benefits() -> impl Strategy<Value = Benefits> {
    (
        0i64..100_000,
        0i64..=100,
        0i64..300_000,
        proptest::option::of(0i64..400_000),
        proptest::collection::btree_map("[abc]", 0i64..5_000, 0..3),
        proptest::collection::btree_map("[abc]", 0i64..4, 0..3),
    )
        .prop_map(|(d, pct, oop, max, copays, visit_limits)| Benefits {
            deductible: d,
            coinsurance_pct: pct,
            out_of_pocket_max: oop,
            annual_max: max,
            copays,
            visit_limits,
        })
}

/// (code, units, amount, denied) per line; claims of one to four lines.
type GenLine = (Option<String>, i64, i64, bool);

fn claims() -> impl Strategy<Value = Vec<Vec<GenLine>>> {
    let line = (
        proptest::option::of("[abcd]"),
        1i64..4,
        1i64..200_000,
        proptest::bool::weighted(0.1),
    );
    proptest::collection::vec(proptest::collection::vec(line, 1..5), 1..8)
}

fn lines_of(gen: &[GenLine]) -> Vec<LineIn<'_>> {
    gen.iter()
        .map(|(code, units, amount, denied)| LineIn {
            procedure_code: code.as_deref(),
            units: *units,
            amount: *amount,
            denial: denied.then(|| Denial {
                carc: "96".into(),
                rarc: None,
            }),
        })
        .collect()
}

proptest! {
    #[test]
    fn the_money_balances_and_the_maximums_hold(
        b in benefits(),
        fees in proptest::collection::btree_map("[abcd]", 0i64..50_000, 0..4),
        gen in claims(),
        cap in proptest::option::of(0i64..300_000),
        with_plan in proptest::bool::weighted(0.8),
    ) {
        let mut year = MemberYear::default();
        let verdict = Verdict::Pay { cap: cap.map(|total| Cap { total, carc: "45".into(), rarc: None }) };
        for (i, claim) in gen.iter().enumerate() {
            let lines = lines_of(claim);
            let plan = with_plan.then_some(&b);
            let a = adjudicate(&lines, &fees, plan, &year.totals, &verdict);
            prop_assert_eq!(a.lines.len(), lines.len());
            let mut share = 0;
            for (l, out) in lines.iter().zip(&a.lines) {
                // Every cent of the line is paid or explained.
                prop_assert_eq!(l.amount, out.approved_amount + out.adjusted_total());
                prop_assert!(out.adjustments.iter().all(|adj| adj.amount > 0));
                prop_assert!(0 <= out.approved_amount && out.approved_amount <= out.allowed_amount.max(0));
                prop_assert!(out.allowed_amount <= l.amount);
                let pr: i64 = out.adjustments.iter().filter(|a| a.group == Group::PR).map(|a| a.amount).sum();
                prop_assert_eq!(pr, out.member_responsibility.total());
                share += pr;
                if l.denial.is_some() {
                    prop_assert_eq!(out.status, LineStatus::Denied);
                    prop_assert_eq!(out.approved_amount, 0);
                }
            }
            if let Verdict::Pay { cap: Some(c) } = &verdict {
                let billed: i64 = lines.iter().map(|l| l.amount).sum();
                if with_plan {
                    prop_assert!(a.approved_amount() <= c.total);
                } else {
                    // Without a plan the adjust value is what is paid, up to the bill,
                    // unless lines were denied.
                    let denied: i64 = lines.iter().filter(|l| l.denial.is_some()).map(|l| l.amount).sum();
                    prop_assert!(a.approved_amount() <= c.total.min(billed));
                    if denied == 0 {
                        prop_assert_eq!(a.approved_amount(), c.total.min(billed));
                    }
                }
            }
            prop_assert_eq!(a.usage.paid, a.approved_amount());
            prop_assert_eq!(a.usage.out_of_pocket, share);
            if with_plan {
                // What the lines show is what the year counts.
                let views: Vec<schemas::adjudication::LineView> = lines.iter().zip(&a.lines).enumerate().map(|(i, (l, out))| {
                    schemas::adjudication::LineView {
                        line_no: i as i64 + 1,
                        procedure_code: l.procedure_code.map(str::to_owned),
                        units: l.units,
                        amount: l.amount,
                        modifiers: Vec::new(),
                        adjudication: Some(out.clone()),
                    }
                }).collect();
                prop_assert_eq!(usage_of(&views), a.usage.clone());
            }
            year.count(&format!("C{i}"), a.usage.clone());
            if with_plan {
                prop_assert!(year.totals.out_of_pocket <= b.out_of_pocket_max);
                prop_assert!(year.totals.deductible <= b.deductible);
                if let Some(max) = b.annual_max {
                    prop_assert!(year.totals.paid <= max);
                }
                for (code, limit) in &b.visit_limits {
                    prop_assert!(year.totals.visits(code) <= *limit);
                }
            }
        }
        // Reversing every claim leaves the year as it began.
        for i in 0..gen.len() {
            year.reverse(&format!("C{i}"));
        }
        prop_assert!(year.totals.is_empty());
    }

    #[test]
    fn a_denied_claim_pays_nothing_and_uses_nothing(gen in claims(), b in benefits()) {
        let deny = Verdict::Deny(Denial { carc: "A1".into(), rarc: None });
        for claim in &gen {
            let lines = lines_of(claim);
            let a = adjudicate(&lines, &BTreeMap::new(), Some(&b), &Usage::default(), &deny);
            prop_assert_eq!(a.approved_amount(), 0);
            prop_assert!(a.usage.is_empty());
            for (l, out) in lines.iter().zip(&a.lines) {
                prop_assert_eq!(l.amount, out.adjusted_total());
            }
        }
    }
}
