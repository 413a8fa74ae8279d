//! Evaluating a compiled rulebook against one claim. Rules run in rulebook order; each
//! leaves a trace entry saying whether it matched and why. A rule whose expression
//! fails (a missing key, a type mismatch) does not match, is reported as an error in
//! the trace, and flags the claim for review: the service cannot tell whether the rule
//! would have stopped it.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::sync::{Arc, LazyLock};

use cel::{Context, Env, Program, Value};
use schemas::rulebook::RuleAction;
use serde::{Deserialize, Serialize};

use super::analysis::MAX_COMPREHENSION_DEPTH;
use super::compile::{CompiledRule, CompiledRulebook};
use super::facts::Facts;
use super::input::EvalInput;
use super::plan::{Bound, Defer};

/// The standard environment, built once: building it per claim would dominate.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(Env::stdlib()));

/// A rule that matched. Shares the rule's strings: evaluation allocates no copies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleHit {
    pub rule_id: Arc<str>,
    pub reason_code: Arc<str>,
    pub description: Arc<str>,
    /// The rule's CARC and RARC, when it names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carc: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rarc: Option<Arc<str>>,
}

/// A line a `deny_line` rule matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineDenial {
    pub line_no: i64,
    pub rule: RuleHit,
}

/// What one rule did. Most rules of most claims do not match, so the common case is
/// kept short on the wire: `detail` is left out when it is [`NOT_MATCHED`], `error`
/// when false. A trace rides on every record after the rules stage and in every audit
/// record, so its size is throughput.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceEntry {
    pub rule_id: Arc<str>,
    pub action: RuleAction,
    pub matched: bool,
    /// Why: the value `when` produced, the amount an adjust rule set, or the error.
    #[serde(default = "not_matched", skip_serializing_if = "is_not_matched")]
    pub detail: Cow<'static, str>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub error: bool,
}

/// The detail of a rule whose `when` was false.
pub const NOT_MATCHED: &str = "when evaluated to false";

fn not_matched() -> Cow<'static, str> {
    Cow::Borrowed(NOT_MATCHED)
}

fn is_not_matched(detail: &str) -> bool {
    detail == NOT_MATCHED
}

/// The result of evaluating a rulebook on one claim.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Evaluation {
    pub blocks: Vec<RuleHit>,
    pub declines: Vec<RuleHit>,
    pub flags: Vec<RuleHit>,
    /// Rules whose expressions failed; they flag the claim too.
    pub errors: Vec<RuleHit>,
    /// Adjust rules that matched and gave an amount, in rulebook order: the last one's
    /// amount applies, and each contributes its reason code.
    #[serde(default)]
    pub adjusts: Vec<RuleHit>,
    /// Per line, the `deny_line` rules that matched it, in rulebook order.
    #[serde(default)]
    pub line_denials: Vec<LineDenial>,
    /// The claim amount after fee-schedule caps, then the last matching adjust rule,
    /// never above the claim amount nor below zero.
    pub approved_amount: i64,
    /// The amount after fee-schedule caps alone.
    pub capped_amount: i64,
    pub trace: Vec<TraceEntry>,
}

/// How much of a rulebook's run its [`Evaluation::trace`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracing {
    /// Every rule, as a decision records it (its audit record, its receipt).
    Full,
    /// The rules that matched or failed alone: what a backtest shows of a claim. Most
    /// rules of most claims do not match, and their entries, made and dropped, were a
    /// sixth of a backtest's deciding.
    Matched,
}

impl CompiledRulebook {
    /// Every rule on `input`, with the full trace.
    pub fn evaluate(&self, input: &EvalInput) -> Evaluation {
        self.evaluate_traced(input, Tracing::Full)
    }

    /// Every rule on `input`, the trace kept as `tracing` says.
    pub fn evaluate_traced(&self, input: &EvalInput, tracing: Tracing) -> Evaluation {
        let capped = capped_amount(input);
        let mut ev = Evaluation {
            approved_amount: capped,
            capped_amount: capped,
            trace: Vec::with_capacity(self.rules.len()),
            ..Evaluation::default()
        };
        let interpreter = Interpreter::new(input, &self.names);
        let mut bound = Bound::with_capacity(MAX_COMPREHENSION_DEPTH);
        // A deny_line rule's inputs, one per line, built for the first such rule.
        let lines: OnceCell<Vec<EvalInput>> = OnceCell::new();
        for r in &self.rules {
            if r.rule.action == RuleAction::DenyLine {
                let lines = lines.get_or_init(|| line_inputs(input));
                self.deny_lines(r, lines, &mut bound, tracing, &mut ev);
                continue;
            }
            let when = when_of(r, input, &interpreter, &mut bound);
            let (matched, detail, error) = match when {
                Ok(Value::Bool(true)) => (true, Cow::Borrowed("when evaluated to true"), false),
                Ok(Value::Bool(false)) => (false, Cow::Borrowed(NOT_MATCHED), false),
                Ok(other) => (
                    false,
                    format!("when must give a bool, gave {}", kind(&other)).into(),
                    true,
                ),
                Err(e) => (false, format!("when failed: {e}").into(), true),
            };
            if error {
                ev.errors.push(hit(r));
                ev.trace.push(entry(r, false, detail, true));
                continue;
            }
            if !matched {
                if tracing == Tracing::Full {
                    ev.trace.push(entry(r, false, detail, false));
                }
                continue;
            }
            match r.rule.action {
                RuleAction::DenyLine => {}
                RuleAction::Block => ev.blocks.push(hit(r)),
                RuleAction::Decline => ev.declines.push(hit(r)),
                RuleAction::Flag => ev.flags.push(hit(r)),
                RuleAction::Adjust => {
                    let amount = r.amount.as_ref().map(|p| interpreter.run(p));
                    match amount.map(|v| v.map(|v| as_amount(&v))) {
                        Some(Ok(Some(a))) => {
                            let clamped = a.clamp(0, input.claim.claim_amount);
                            ev.approved_amount = clamped;
                            ev.adjusts.push(hit(r));
                            ev.trace.push(entry(
                                r,
                                true,
                                format!("when evaluated to true; approved_amount = {clamped}")
                                    .into(),
                                false,
                            ));
                        }
                        Some(Ok(None)) => {
                            ev.errors.push(hit(r));
                            ev.trace.push(entry(
                                r,
                                true,
                                "approved_amount must give a number".into(),
                                true,
                            ));
                        }
                        Some(Err(e)) => {
                            ev.errors.push(hit(r));
                            ev.trace.push(entry(
                                r,
                                true,
                                format!("approved_amount failed: {e}").into(),
                                true,
                            ));
                        }
                        None => ev.trace.push(entry(r, true, detail, false)),
                    }
                    continue;
                }
            }
            ev.trace.push(entry(r, true, detail, false));
        }
        ev
    }
}

impl CompiledRulebook {
    /// A `deny_line` rule: `when` once per line; each line it matches is denied. A line
    /// whose evaluation fails makes the rule an error, which sends the claim to review.
    fn deny_lines<'a>(
        &self,
        r: &CompiledRule,
        lines: &'a [EvalInput],
        bound: &mut Bound<'a>,
        tracing: Tracing,
        ev: &mut Evaluation,
    ) {
        let mut denied = Vec::new();
        for li in lines {
            let interpreter = Interpreter::new(li, &self.names);
            let line_no = li.line.as_ref().map_or(0, |l| l.line_no);
            match when_of(r, li, &interpreter, bound) {
                Ok(Value::Bool(true)) => denied.push(line_no),
                Ok(Value::Bool(false)) => {}
                other => {
                    let detail = match other {
                        Ok(v) => {
                            format!("when must give a bool, gave {} on line {line_no}", kind(&v))
                        }
                        Err(e) => format!("when failed on line {line_no}: {e}"),
                    };
                    ev.errors.push(hit(r));
                    ev.trace.push(entry(r, false, detail.into(), true));
                    return;
                }
            }
        }
        if denied.is_empty() {
            if tracing == Tracing::Full {
                ev.trace
                    .push(entry(r, false, Cow::Borrowed(NOT_MATCHED), false));
            }
            return;
        }
        let list: Vec<String> = denied.iter().map(i64::to_string).collect();
        ev.trace.push(entry(
            r,
            true,
            format!("denied lines {}", list.join(", ")).into(),
            false,
        ));
        ev.line_denials
            .extend(denied.into_iter().map(|line_no| LineDenial {
                line_no,
                rule: hit(r),
            }));
    }
}

/// A rule's `when` on `input`: by its plan when the plan decides, else by cel's
/// interpreter, which gives the exact value or error.
fn when_of<'a>(
    r: &CompiledRule,
    input: &'a EvalInput,
    interpreter: &Interpreter<'_>,
    bound: &mut Bound<'a>,
) -> Result<Value, String> {
    match r.plan.as_ref().map(|plan| plan.eval(input, bound)) {
        Some(Ok(b)) => Ok(Value::Bool(b)),
        Some(Err(Defer)) | None => {
            bound.clear();
            interpreter.run(&r.when)
        }
    }
}

/// The input once per line of the claim, each with its `line`. A claim submitted
/// without lines has one: line 1, no procedure code (an empty string), its whole amount.
fn line_inputs(input: &EvalInput) -> Vec<EvalInput> {
    let claim = &input.claim;
    let lines = if claim.lines.is_empty() {
        vec![super::input::LineFacts {
            line_no: 1,
            procedure_code: String::new(),
            units: 1,
            amount: claim.claim_amount,
            modifiers: Vec::new(),
        }]
    } else {
        claim.lines.clone()
    };
    lines
        .into_iter()
        .map(|line| EvalInput {
            line: Some(line),
            ..input.clone()
        })
        .collect()
}

/// cel's interpreter for the expressions no plan decides. The values it reads are
/// prepared on first use: a claim whose rules are all planned never builds them.
struct Interpreter<'a> {
    input: &'a EvalInput,
    names: &'a [String],
    facts: OnceCell<Result<Facts, String>>,
}

impl<'a> Interpreter<'a> {
    fn new(input: &'a EvalInput, names: &'a [String]) -> Self {
        Self {
            input,
            names,
            facts: OnceCell::new(),
        }
    }

    fn run(&self, program: &Program) -> Result<Value, String> {
        let facts = self
            .facts
            .get_or_init(|| Facts::prepare(self.input, self.names).map_err(|e| e.to_string()));
        // Cannot fail for well-formed input; reported rather than panicking.
        let facts = facts
            .as_ref()
            .map_err(|e| format!("the input could not be prepared: {e}"))?;
        let mut ctx = Context::with_env(ENV.clone());
        ctx.set_variable_resolver(facts);
        program.execute(&ctx).map_err(|e| e.to_string())
    }
}

/// Each line's amount capped at the fee schedule's maximum per unit times its units;
/// a claim without lines is not capped (the schedule is per procedure).
fn capped_amount(input: &EvalInput) -> i64 {
    let claim = &input.claim;
    if claim.lines.is_empty() {
        return claim.claim_amount;
    }
    let schedule = &input.contract.fee_schedule;
    let total: i64 = claim
        .lines
        .iter()
        .map(|l| match schedule.get(&l.procedure_code) {
            Some(max) => l.amount.min(max.saturating_mul(l.units.max(1))),
            None => l.amount,
        })
        .fold(0i64, i64::saturating_add);
    total.min(claim.claim_amount)
}

fn as_amount(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::UInt(u) => Some(i64::try_from(*u).unwrap_or(i64::MAX)),
        Value::Float(f) if f.is_finite() => Some(f.round() as i64),
        _ => None,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Int(_) | Value::UInt(_) => "an int",
        Value::Float(_) => "a double",
        Value::String(_) => "a string",
        Value::Null => "null",
        Value::List(_) => "a list",
        Value::Map(_) => "a map",
        _ => "another type",
    }
}

fn hit(r: &CompiledRule) -> RuleHit {
    RuleHit {
        rule_id: r.rule_id.clone(),
        reason_code: r.reason_code.clone(),
        description: r.description.clone(),
        carc: r.carc.clone(),
        rarc: r.rarc.clone(),
    }
}

fn entry(r: &CompiledRule, matched: bool, detail: Cow<'static, str>, error: bool) -> TraceEntry {
    TraceEntry {
        rule_id: r.rule_id.clone(),
        action: r.rule.action,
        matched,
        detail,
        error,
    }
}
