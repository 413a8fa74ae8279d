//! The plans against cel's interpreter: for every expression of the planned subset and
//! a spread of claims (empty lists, `null` fields, overflowing amounts), a rulebook
//! evaluated with plans gives exactly the evaluation, trace included, that the
//! interpreter alone gives.

use std::collections::BTreeMap;

use schemas::rulebook::{Rule, RuleAction};

use super::*;

/// Every node kind the planner knows, alone and combined.
const PLANNED: &[&str] = &[
    "true",
    "!false",
    "claim.claim_amount > 10000",
    "claim.claim_amount >= 10000 && claim.claim_amount <= 20000",
    "claim.claim_amount < 500 || claim.claim_amount == 123456",
    "claim.claim_amount != 7",
    "claim.claim_amount * 2 > 30000",
    "claim.claim_amount + member_history.amount_last_30d > 100000",
    "claim.claim_amount - 100 < 0",
    "claim.claim_amount / 3 == 4000",
    "claim.claim_amount % 2 == 0",
    "claim.claim_amount / member_history.claims_last_24h > 1000",
    "-claim.claim_amount < -1000",
    "member_history.claims_last_24h > 2 && member_history.amount_last_30d > 5000",
    "claim.claim_amount in [100, 12500, 20000]",
    "'E11.9' in claim.diagnosis_codes",
    "!('Z00.0' in claim.diagnosis_codes)",
    "claim.member_id in ['MBR-1', 'MBR-2']",
    "provider.specialty == 'cardiology'",
    "provider.specialty != 'cardiology'",
    "provider.npi == null",
    "provider.npi != null && provider.npi.startsWith('12')",
    "provider.name.contains('lin')",
    "provider.provider_id == claim.provider_id",
    "contract.contract_id.endsWith('-1')",
    "claim.claim_id.startsWith('CLM-')",
    "claim.service_date >= '2026-01-01' || claim.service_date == '2026-11-01'",
    "provider.specialty in ['cardiology', 'oncology']",
    "size(claim.lines) > 1",
    "claim.diagnosis_codes.size() == 0",
    "claim.lines.exists(l, l.procedure_code == '99213' && l.units > 1)",
    "claim.lines.all(l, l.amount <= 20000)",
    "claim.lines.exists(l, l.amount * l.units > claim.claim_amount)",
    "claim.diagnosis_codes.exists(c, c.startsWith('Z'))",
    "claim.diagnosis_codes.all(c, c != 'I10')",
    "claim.lines.exists(l, claim.diagnosis_codes.exists(c, c == l.procedure_code))",
    "claim.lines.exists(claim, claim.units > 3)",
    "member.age >= 65",
    "member.sex == 'F' && member.plan_id == 'PPO'",
];

/// Planned expressions of `deny_line` rules, which see `line`.
const PLANNED_LINE: &[&str] = &[
    "line.amount > 10000",
    "line.procedure_code == '99213' && line.units > 1",
    "line.line_no == 2 || line.amount * line.units > claim.claim_amount",
    "line.procedure_code in ['80053', 'I10'] && member.age > 40",
];

/// Shapes left to the interpreter, with the reason.
const NOT_PLANNED: &[&str] = &[
    "claim.claim_amount > 100.5",                     // a double
    "claim.metadata['channel'] == 'edi'",             // metadata
    "has(provider.npi)",                              // a presence test
    "claim.claim_amount > 0 ? true : false",          // a ternary
    "dyn(claim.claim_amount) == '5'",                 // mixed types
    "size(claim.claim_id) > 3",                       // size of a string
    "member != null && member.age < 18",              // a record against null
    "claim.lines.exists_one(l, l.units > 1)",         // exists_one
    "claim.lines.map(l, l.amount).exists(a, a > 10)", // map
    "claim.lines.exists(l, dyn(l).modifier == 'x')",  // no such line field
    "claim.diagnosis_codes[0] == 'E11.9'",            // indexing
    "contract.fee_schedule['99213'] > 100",           // the fee schedule
    "claim.claim_id.matches('^CLM')",                 // regular expressions
];

fn flag(i: usize, when: &str) -> Rule {
    Rule {
        rule_id: format!("r{i}"),
        description: String::new(),
        when: when.into(),
        action: RuleAction::Flag,
        reason_code: format!("R{i}"),
        approved_amount: None,
        carc: None,
        rarc: None,
    }
}

/// A small deterministic generator, so that a failure names a reproducible case.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.next(items.len() as u64) as usize]
    }
}

fn input(rng: &mut Lcg) -> EvalInput {
    let amounts = [
        0,
        1,
        7,
        500,
        12_000,
        12_500,
        20_000,
        123_456,
        i64::MAX,
        i64::MIN,
    ];
    let amount = amounts[rng.next(amounts.len() as u64) as usize];
    let codes = ["99213", "80053", "Z00.0", "I10"];
    let diagnoses = ["E11.9", "I10", "Z00.0", "99213"];
    let lines = (0..rng.next(4))
        .enumerate()
        .map(|(i, _)| LineFacts {
            line_no: i as i64 + 1,
            procedure_code: rng.pick(&codes).into(),
            units: rng.next(6) as i64,
            amount: [0, 5_000, 20_000, i64::MAX][rng.next(4) as usize],
            modifiers: Vec::new(),
        })
        .collect();
    let diagnosis_codes = (0..rng.next(4))
        .map(|_| rng.pick(&diagnoses).into())
        .collect();
    let optional = |rng: &mut Lcg, items: &[&str]| match rng.next(3) {
        0 => None,
        _ => Some(rng.pick(items).to_owned()),
    };
    EvalInput {
        claim: ClaimFacts {
            claim_id: rng.pick(&["CLM-1", "X-2"]).into(),
            member_id: rng.pick(&["MBR-1", "MBR-3"]).into(),
            provider_id: rng.pick(&["PRV-1", "PRV-2"]).into(),
            claim_amount: amount,
            service_date: rng.pick(&["2025-12-31", "2026-11-01"]).into(),
            lines,
            diagnosis_codes,
            metadata: BTreeMap::from([("channel".into(), serde_json::json!("edi"))]),
        },
        provider: ProviderFacts {
            provider_id: rng.pick(&["PRV-1", "PRV-2"]).into(),
            name: rng.pick(&["Clinic", "Lab"]).into(),
            npi: optional(rng, &["1234567893", "9876543210"]),
            specialty: optional(rng, &["cardiology", "oncology", "radiology"]),
        },
        contract: ContractFacts {
            contract_id: rng.pick(&["CTR-1", "CTR-2"]).into(),
            fee_schedule: BTreeMap::from([("99213".into(), 9_000)]),
        },
        member_history: MemberHistory {
            claims_last_24h: rng.next(4) as i64,
            amount_last_30d: [0, 40_000, i64::MAX][rng.next(3) as usize],
        },
        // Not on the roster in a third of the cases: `member.…` then fails.
        member: match rng.next(3) {
            0 => None,
            _ => Some(MemberFacts {
                age: [0, 17, 40, 70][rng.next(4) as usize],
                sex: rng.pick(&["F", "M", "U"]).into(),
                plan_id: rng.pick(&["PPO", "HMO"]).into(),
            }),
        },
        line: None,
    }
}

fn deny_line(i: usize, when: &str) -> Rule {
    Rule {
        action: RuleAction::DenyLine,
        rule_id: format!("line{i}"),
        ..flag(i, when)
    }
}

#[test]
fn every_expression_of_the_subset_is_planned_and_no_other() {
    for when in PLANNED {
        let book = compile(&[flag(0, when)]).unwrap();
        assert_eq!(book.planned(), 1, "`{when}` should be planned");
    }
    for when in PLANNED_LINE {
        let book = compile(&[deny_line(0, when)]).unwrap();
        assert_eq!(book.planned(), 1, "`{when}` should be planned");
    }
    for when in NOT_PLANNED {
        let book = compile(&[flag(0, when)]).unwrap();
        assert_eq!(
            book.planned(),
            0,
            "`{when}` should be left to the interpreter"
        );
    }
}

#[test]
fn plans_evaluate_exactly_as_the_interpreter_does() {
    let mut rules: Vec<Rule> = PLANNED
        .iter()
        .chain(NOT_PLANNED)
        .enumerate()
        .map(|(i, when)| flag(i, when))
        .collect();
    rules.push(Rule {
        rule_id: "discount".into(),
        description: String::new(),
        when: "claim.claim_amount > 10000".into(),
        action: RuleAction::Adjust,
        reason_code: "DISCOUNT".into(),
        approved_amount: Some("claim.claim_amount - 1000".into()),
        carc: None,
        rarc: None,
    });
    rules.extend(
        PLANNED_LINE
            .iter()
            .enumerate()
            .map(|(i, when)| deny_line(i, when)),
    );
    let planned = compile(&rules).unwrap();
    let interpreted = compile(&rules).unwrap().interpreted();
    assert_eq!(planned.planned(), PLANNED.len() + PLANNED_LINE.len() + 1);
    assert_eq!(interpreted.planned(), 0);

    let mut rng = Lcg(7);
    let (mut matched, mut errors, mut denied) = (0, 0, 0);
    for case in 0..3000 {
        let input = input(&mut rng);
        let ev = planned.evaluate(&input);
        assert_eq!(ev, interpreted.evaluate(&input), "case {case}: {input:?}");
        matched += ev.trace.iter().filter(|t| t.matched).count();
        errors += ev.errors.len();
        denied += ev.line_denials.len();
    }
    assert!(denied > 1_000, "{denied} lines denied");
    // The cases reach both answers and the deferred errors (overflow, a null string).
    assert!(matched > 10_000, "{matched} matches");
    assert!(errors > 1_000, "{errors} errors");
}
