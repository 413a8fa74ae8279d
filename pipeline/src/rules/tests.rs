//! Unit tests of the rule engine: each action, fee-schedule caps, the trace, compile
//! errors with their field paths, runaway expressions and evaluation errors.

use std::collections::BTreeMap;

use schemas::rulebook::{Rule, RuleAction};

use super::*;

fn rule(id: &str, when: &str, action: RuleAction) -> Rule {
    Rule {
        rule_id: id.into(),
        description: format!("rule {id}"),
        when: when.into(),
        action,
        reason_code: format!("R_{}", id.to_uppercase()),
        approved_amount: None,
        carc: None,
        rarc: None,
    }
}

fn adjust(id: &str, when: &str, amount: &str) -> Rule {
    Rule {
        approved_amount: Some(amount.into()),
        ..rule(id, when, RuleAction::Adjust)
    }
}

fn sample() -> EvalInput {
    EvalInput {
        claim: ClaimFacts {
            claim_id: "CLM-1".into(),
            member_id: "MBR-1".into(),
            provider_id: "PRV-1".into(),
            claim_amount: 50_000,
            service_date: "2026-11-01".into(),
            lines: vec![
                LineFacts {
                    line_no: 1,
                    procedure_code: "99213".into(),
                    units: 1,
                    amount: 20_000,
                    modifiers: vec!["25".into()],
                },
                LineFacts {
                    line_no: 2,
                    procedure_code: "80053".into(),
                    units: 2,
                    amount: 30_000,
                    modifiers: Vec::new(),
                },
            ],
            diagnosis_codes: vec!["E11.9".into()],
            metadata: BTreeMap::from([("channel".into(), serde_json::json!("edi"))]),
        },
        provider: ProviderFacts {
            provider_id: "PRV-1".into(),
            name: "Clinic".into(),
            npi: Some("1234567893".into()),
            specialty: Some("cardiology".into()),
        },
        contract: ContractFacts {
            contract_id: "CTR-1".into(),
            fee_schedule: BTreeMap::from([("80053".into(), 12_000)]),
        },
        member_history: MemberHistory {
            claims_last_24h: 3,
            amount_last_30d: 120_000,
        },
        member: Some(MemberFacts {
            age: 46,
            sex: "F".into(),
            plan_id: "PPO".into(),
        }),
        line: None,
    }
}

#[test]
fn a_deny_line_rule_denies_each_line_it_matches_and_sees_the_member() {
    let mut deny = rule(
        "lab",
        "line.procedure_code == '80053' && line.units > 1 && member.age > 40",
        RuleAction::DenyLine,
    );
    deny.carc = Some("B7".into());
    let modifier = rule("mod25", "'25' in line.modifiers", RuleAction::DenyLine);
    let book = compile(&[deny, modifier]).unwrap();
    let ev = book.evaluate(&sample());
    let denied: Vec<(i64, &str, Option<&str>)> = ev
        .line_denials
        .iter()
        .map(|d| (d.line_no, &*d.rule.rule_id, d.rule.carc.as_deref()))
        .collect();
    assert_eq!(denied, [(2, "lab", Some("B7")), (1, "mod25", None)]);
    assert_eq!(ev.trace[0].detail, "denied lines 2");
    assert!(ev.blocks.is_empty() && ev.declines.is_empty() && ev.flags.is_empty());
    // A member not on the roster: `member.age` fails, and the rule is an error.
    let mut unknown = sample();
    unknown.member = None;
    let ev = book.evaluate(&unknown);
    assert_eq!(ev.errors.len(), 1, "{ev:?}");
    assert!(ev.trace[0].error);
}

#[test]
fn line_is_refused_outside_deny_line_rules() {
    let e = compile(&[rule("x", "line.amount > 5", RuleAction::Flag)]).unwrap_err();
    assert_eq!(e.field, "rules[0].when");
    assert!(e.message.contains("deny_line"), "{}", e.message);
    let e = compile(&[rule("x", "line.amout > 5", RuleAction::DenyLine)]).unwrap_err();
    assert!(e.message.contains("no field `amout`"), "{}", e.message);
}

#[test]
fn a_rulebook_with_every_action_evaluates_to_the_expected_result_and_trace() {
    let book = compile(&[
        rule("big", "claim.claim_amount > 100000", RuleAction::Block),
        rule(
            "cardio",
            "provider.specialty == 'cardiology' && claim.claim_amount > 40000",
            RuleAction::Flag,
        ),
        rule(
            "diag",
            "'Z00.0' in claim.diagnosis_codes",
            RuleAction::Decline,
        ),
        adjust(
            "discount",
            "member_history.claims_last_24h >= 3",
            "claim.claim_amount * 9 / 10",
        ),
        rule(
            "frequent",
            "member_history.claims_last_24h > 2",
            RuleAction::Block,
        ),
    ])
    .unwrap();
    let ev = book.evaluate(&sample());

    assert_eq!(
        ev.blocks.iter().map(|h| &*h.rule_id).collect::<Vec<_>>(),
        ["frequent"]
    );
    assert_eq!(&*ev.blocks[0].reason_code, "R_FREQUENT");
    assert_eq!(
        ev.flags.iter().map(|h| &*h.rule_id).collect::<Vec<_>>(),
        ["cardio"]
    );
    assert!(ev.declines.is_empty());
    assert!(ev.errors.is_empty());
    // Caps: 99213 uncapped 20 000; 80053 capped at 12 000 × 2 units = 24 000.
    assert_eq!(ev.capped_amount, 44_000);
    // Then the adjust rule: 50 000 × 9 / 10.
    assert_eq!(ev.approved_amount, 45_000);

    let trace: Vec<(&str, bool)> = ev.trace.iter().map(|t| (&*t.rule_id, t.matched)).collect();
    assert_eq!(
        trace,
        [
            ("big", false),
            ("cardio", true),
            ("diag", false),
            ("discount", true),
            ("frequent", true)
        ]
    );
    assert_eq!(ev.trace[0].detail, "when evaluated to false");
    assert!(
        ev.trace[3].detail.contains("approved_amount = 45000"),
        "{}",
        ev.trace[3].detail
    );

    // On the wire a rule that did not match is only its id, action and `matched`; the
    // trace reads back the same.
    let wire = serde_json::to_value(&ev.trace).unwrap();
    assert_eq!(
        wire[0],
        serde_json::json!({"rule_id": "big", "action": "block", "matched": false})
    );
    assert!(wire[3]["detail"].is_string());
    let back: Vec<TraceEntry> = serde_json::from_value(wire).unwrap();
    assert_eq!(back, ev.trace);
}

#[test]
fn a_decline_rule_matches_on_diagnosis() {
    let book = compile(&[rule(
        "diag",
        "claim.diagnosis_codes.exists(d, d.startsWith('E11'))",
        RuleAction::Decline,
    )])
    .unwrap();
    let ev = book.evaluate(&sample());
    assert_eq!(ev.declines.len(), 1);
    assert_eq!(&*ev.declines[0].rule_id, "diag");
}

#[test]
fn fee_schedule_caps_apply_per_unit_and_only_to_scheduled_codes() {
    let book = compile(&[]).unwrap();
    let mut input = sample();
    assert_eq!(book.evaluate(&input).approved_amount, 44_000);
    input.contract.fee_schedule.insert("99213".into(), 5_000);
    assert_eq!(book.evaluate(&input).approved_amount, 29_000);
    input.contract.fee_schedule.clear();
    assert_eq!(book.evaluate(&input).approved_amount, 50_000);
    input.claim.lines.clear();
    input.contract.fee_schedule.insert("99213".into(), 1);
    assert_eq!(
        book.evaluate(&input).approved_amount,
        50_000,
        "no lines, nothing to cap"
    );
}

#[test]
fn the_last_matching_adjust_rule_wins_and_is_clamped_to_the_claim_amount() {
    let book = compile(&[
        adjust("a", "true", "1000"),
        adjust("b", "false", "2000"),
        adjust("c", "true", "claim.claim_amount * 2"),
    ])
    .unwrap();
    assert_eq!(book.evaluate(&sample()).approved_amount, 50_000);
    let book = compile(&[adjust("neg", "true", "-5")]).unwrap();
    assert_eq!(book.evaluate(&sample()).approved_amount, 0);
    let book = compile(&[adjust(
        "frac",
        "true",
        "int(double(claim.claim_amount) * 0.333)",
    )])
    .unwrap();
    assert_eq!(book.evaluate(&sample()).approved_amount, 16_650);
}

#[test]
fn contract_fields_and_metadata_are_visible_to_rules() {
    let book = compile(&[
        rule(
            "sched",
            "'80053' in contract.fee_schedule && contract.fee_schedule['80053'] < 20000",
            RuleAction::Flag,
        ),
        rule("meta", "claim.metadata.channel == 'edi'", RuleAction::Flag),
        rule(
            "lines",
            "claim.lines.all(l, l.units >= 1) && size(claim.lines) == 2",
            RuleAction::Flag,
        ),
        rule(
            "date",
            "claim.service_date.startsWith('2026-')",
            RuleAction::Flag,
        ),
    ])
    .unwrap();
    let ev = book.evaluate(&sample());
    assert_eq!(ev.flags.len(), 4, "{:?}", ev.trace);
}

#[test]
fn a_rule_that_fails_at_evaluation_is_reported_and_flags_without_stopping_the_rest() {
    let book = compile(&[
        rule(
            "missing",
            "claim.metadata.nonexistent == 'x'",
            RuleAction::Block,
        ),
        // `metadata` values are typed only at evaluation: this one is a string.
        rule("type", "claim.metadata.channel", RuleAction::Block),
        rule(
            "zero",
            "claim.claim_amount / (member_history.claims_last_24h - 3) > 0",
            RuleAction::Block,
        ),
        rule("fine", "claim.claim_amount > 0", RuleAction::Flag),
    ])
    .unwrap();
    let ev = book.evaluate(&sample());
    assert!(ev.blocks.is_empty());
    assert_eq!(
        ev.errors.iter().map(|h| &*h.rule_id).collect::<Vec<_>>(),
        ["missing", "type", "zero"]
    );
    assert!(
        ev.trace[0].error && ev.trace[0].detail.starts_with("when failed"),
        "{:?}",
        ev.trace[0]
    );
    assert_eq!(ev.trace[1].detail, "when must give a bool, gave a string");
    assert_eq!(ev.flags.len(), 1);
    assert!(ev.trace[3].matched && !ev.trace[3].error);
}

#[test]
fn an_expression_that_does_not_compile_names_its_field() {
    let err = compile(&[
        rule("ok", "true", RuleAction::Flag),
        rule("bad", "claim.claim_amount >", RuleAction::Flag),
    ])
    .unwrap_err();
    assert_eq!(err.field, "rules[1].when");
    assert!(
        err.message.starts_with("does not compile"),
        "{}",
        err.message
    );

    let err = compile(&[adjust("adj", "true", "claim.claim_amount *")]).unwrap_err();
    assert_eq!(err.field, "rules[0].approved_amount");
}

#[test]
fn unknown_variables_and_functions_are_refused_but_comprehension_variables_are_not() {
    let err = compile(&[rule("v", "patient.age > 3", RuleAction::Flag)]).unwrap_err();
    assert_eq!(err.field, "rules[0].when");
    assert!(
        err.message.contains("unknown variable `patient`"),
        "{}",
        err.message
    );

    let err = compile(&[rule("f", "exec(claim.claim_id)", RuleAction::Flag)]).unwrap_err();
    assert!(
        err.message.contains("unknown function `exec`"),
        "{}",
        err.message
    );

    assert!(compile(&[rule(
        "c",
        "claim.lines.exists(l, l.amount > 100)",
        RuleAction::Flag
    )])
    .is_ok());
}

#[test]
fn a_runaway_expression_is_refused_at_compile_time() {
    // Three nested comprehensions over a 100-element list would be 10^6 steps per
    // claim; deeper nesting grows without bound.
    let list = format!(
        "[{}]",
        (0..100)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    let runaway = format!("{list}.all(a, {list}.all(b, {list}.all(c, a + b + c >= 0)))");
    let err = compile(&[rule("slow", &runaway, RuleAction::Flag)]).unwrap_err();
    assert_eq!(err.field, "rules[0].when");
    assert!(err.message.contains("nest 3 deep"), "{}", err.message);

    let huge = (0..500)
        .map(|i| format!("claim.claim_amount != {i}"))
        .collect::<Vec<_>>()
        .join(" && ");
    let err = compile(&[rule("huge", &huge, RuleAction::Flag)]).unwrap_err();
    assert!(
        err.message.contains("too large") || err.message.contains("at most"),
        "{}",
        err.message
    );
}

#[test]
fn rule_fields_are_checked() {
    let err = compile(&[
        rule("a", "true", RuleAction::Flag),
        rule("a", "true", RuleAction::Flag),
    ])
    .unwrap_err();
    assert_eq!(err.field, "rules[1].rule_id");
    let err = compile(&[rule("a", "true", RuleAction::Adjust)]).unwrap_err();
    assert_eq!(err.field, "rules[0].approved_amount");
    let mut with_amount = rule("a", "true", RuleAction::Flag);
    with_amount.approved_amount = Some("1".into());
    assert_eq!(
        compile(&[with_amount]).unwrap_err().field,
        "rules[0].approved_amount"
    );
    let mut bad_code = rule("a", "true", RuleAction::Flag);
    bad_code.reason_code = "has space".into();
    assert_eq!(
        compile(&[bad_code]).unwrap_err().field,
        "rules[0].reason_code"
    );
    assert_eq!(
        compile(&[rule("a", "  ", RuleAction::Flag)])
            .unwrap_err()
            .field,
        "rules[0].when"
    );
}

#[test]
fn the_cache_compiles_once_per_rulebook() {
    let cache = RulebookCache::default();
    let rules = [rule("a", "true", RuleAction::Flag)];
    let first = cache.get_or_compile("acme", "rb-1", &rules).unwrap();
    let second = cache.get_or_compile("acme", "rb-1", &[]).unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &second));
    assert_eq!(second.len(), 1);
    // Another tenant's entry of the same id is its own.
    assert_eq!(
        cache.get_or_compile("globex", "rb-1", &[]).unwrap().len(),
        0
    );
}
