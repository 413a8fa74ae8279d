//! The 50-rule rulebook the rule-engine benchmark evaluates and the backtest benchmark
//! runs as its draft, so that their rates compare.

use schemas::rulebook::{Rule, RuleAction};

/// A realistic mix: amount thresholds, code lookups, list scans, string tests.
pub fn rulebook() -> Vec<Rule> {
    let templates = [
        ("claim.claim_amount > {n}00000", RuleAction::Flag),
        ("'Z{n}.0' in claim.diagnosis_codes", RuleAction::Decline),
        (
            "claim.lines.exists(l, l.procedure_code == '9{n}213' && l.units > 4)",
            RuleAction::Block,
        ),
        (
            "provider.specialty == 'specialty-{n}' && claim.claim_amount > 1000",
            RuleAction::Flag,
        ),
        (
            "member_history.claims_last_24h > {n} && member_history.amount_last_30d > 5000000",
            RuleAction::Flag,
        ),
    ];
    (0..50)
        .map(|i| {
            let (when, action) = templates[i % templates.len()];
            Rule {
                rule_id: format!("r{i}"),
                description: String::new(),
                when: when.replace("{n}", &(i + 10).to_string()),
                action,
                reason_code: format!("R{i}"),
                approved_amount: None,
                carc: None,
                rarc: None,
            }
        })
        .collect()
}
