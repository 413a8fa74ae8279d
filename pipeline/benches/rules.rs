//! Rule-engine throughput: claim evaluations per second of a 50-rule rulebook on one
//! core (issue 3 target: 100,000), with the rules' plans and with cel's interpreter
//! alone, in the same run. Run with `scripts/bench-rules`.
#![allow(clippy::print_stdout, clippy::unwrap_used)] // a benchmark prints its figures

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[path = "support/book.rs"]
mod book;
use book::rulebook;
use pipeline::rules::{
    compile, ClaimFacts, CompiledRulebook, ContractFacts, EvalInput, LineFacts, MemberHistory,
    ProviderFacts,
};

fn input(i: usize) -> EvalInput {
    EvalInput {
        claim: ClaimFacts {
            claim_id: format!("CLM-{i}"),
            member_id: format!("MBR-{}", i % 1000),
            provider_id: "PRV-1".into(),
            claim_amount: 12_500 + (i as i64 % 1000),
            service_date: "2026-11-01".into(),
            lines: vec![
                LineFacts {
                    line_no: 1,
                    procedure_code: "99213".into(),
                    units: 1,
                    amount: 7_500,
                    modifiers: Vec::new(),
                },
                LineFacts {
                    line_no: 2,
                    modifiers: Vec::new(),
                    procedure_code: "80053".into(),
                    units: 2,
                    amount: 5_000 + (i as i64 % 1000),
                },
            ],
            diagnosis_codes: vec!["E11.9".into(), "I10".into()],
            metadata: BTreeMap::new(),
        },
        provider: ProviderFacts {
            provider_id: "PRV-1".into(),
            name: "Clinic".into(),
            npi: Some("1234567893".into()),
            specialty: Some("cardiology".into()),
        },
        contract: ContractFacts {
            contract_id: "CTR-1".into(),
            fee_schedule: BTreeMap::from([("80053".into(), 4_000), ("99213".into(), 9_000)]),
        },
        member_history: MemberHistory {
            claims_last_24h: 2,
            amount_last_30d: 40_000,
        },
        member: None,
        line: None,
    }
}

/// Claim evaluations per second of `book` over `inputs`, on this one thread.
fn measure(book: &CompiledRulebook, inputs: &[EvalInput], budget: Duration) -> (u64, f64) {
    // Warm up, then run for a fixed time.
    for i in inputs.iter().take(200) {
        std::hint::black_box(book.evaluate(i));
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget {
        for i in inputs {
            std::hint::black_box(book.evaluate(i));
        }
        n += inputs.len() as u64;
    }
    (n, start.elapsed().as_secs_f64())
}

fn main() {
    let budget = Duration::from_secs(
        std::env::var("BENCH_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5),
    );
    let inputs: Vec<EvalInput> = (0..1000).map(input).collect();
    let planned = compile(&rulebook()).unwrap();
    let interpreted = compile(&rulebook()).unwrap().interpreted();
    let rules = planned.len();
    println!(
        "rules: {rules} rules, {} evaluated by a plan, the rest by cel's interpreter",
        planned.planned()
    );
    let mut figures = Vec::new();
    for (name, book) in [("planned", &planned), ("interpreter only", &interpreted)] {
        let (n, secs) = measure(book, &inputs, budget);
        let rate = n as f64 / secs;
        println!(
            "rules, {name}: {rate:.0} claim evaluations/s ({:.2} µs per claim, {:.0} ns per rule; {n} in {secs:.2} s)",
            secs * 1e6 / n as f64,
            secs * 1e9 / (n as f64 * rules as f64),
        );
        figures.push(rate);
    }
    println!(
        "rules: planned / interpreter only = {:.1}",
        figures[0] / figures[1]
    );
}
