//! Compiling a rulebook: every `when` and `approved_amount` expression is parsed,
//! analysed and type-checked once, when the rulebook is created; a failure names the
//! field (`rules[1].when`). The result is immutable and shared by every evaluation.

use std::collections::HashSet;

use cel::Program;
use schemas::rulebook::{is_code, Rule, RuleAction};
use schemas::ClientId;

use super::analysis::Analysis;
use super::plan::BoolPlan;
use super::types::{self, Expected};

/// The longest expression accepted, in bytes.
pub const MAX_EXPRESSION_LEN: usize = 4096;
/// The most rules a rulebook may hold.
pub const MAX_RULES: usize = 1000;

/// Why a rulebook cannot be used: the offending field and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct CompileError {
    pub field: String,
    pub message: String,
}

#[derive(Debug)]
pub(crate) struct CompiledRule {
    pub rule: Rule,
    pub rule_id: std::sync::Arc<str>,
    pub reason_code: std::sync::Arc<str>,
    pub description: std::sync::Arc<str>,
    pub carc: Option<std::sync::Arc<str>>,
    pub rarc: Option<std::sync::Arc<str>>,
    pub when: Program,
    /// `when` planned for direct evaluation, when its shape allows (see `plan`).
    pub plan: Option<BoolPlan>,
    pub amount: Option<Program>,
}

/// A rulebook ready to evaluate claims.
#[derive(Debug)]
pub struct CompiledRulebook {
    pub(crate) rules: Vec<CompiledRule>,
    /// Every name the rules resolve (`claim.claim_amount`, `provider`, …): only these
    /// are prepared for each claim.
    pub(crate) names: Vec<String>,
}

impl CompiledRulebook {
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether any rule reads the variable `root` (`member`, `line`, …).
    pub fn reads(&self, root: &str) -> bool {
        self.names
            .iter()
            .any(|n| n == root || n.strip_prefix(root).is_some_and(|r| r.starts_with('.')))
    }

    /// How many rules' `when` is evaluated by a plan rather than the interpreter.
    pub fn planned(&self) -> usize {
        self.rules.iter().filter(|r| r.plan.is_some()).count()
    }

    /// The same rulebook evaluated by cel's interpreter alone: the reference the
    /// plans are tested against, and the benchmark's comparison.
    pub fn interpreted(mut self) -> Self {
        for r in &mut self.rules {
            r.plan = None;
        }
        self
    }
}

/// Checks and compiles the rules, in order; the first problem is reported.
pub fn compile(rules: &[Rule]) -> Result<CompiledRulebook, CompileError> {
    if rules.len() > MAX_RULES {
        return Err(CompileError {
            field: "rules".into(),
            message: format!("a rulebook holds at most {MAX_RULES} rules"),
        });
    }
    let mut seen = HashSet::new();
    let mut names = std::collections::BTreeSet::new();
    let mut compiled = Vec::with_capacity(rules.len());
    for (i, rule) in rules.iter().enumerate() {
        let at = |name: &str| format!("rules[{i}].{name}");
        let fail = |name: &str, message: String| CompileError {
            field: at(name),
            message,
        };
        if let Err(e) = ClientId::parse(rule.rule_id.clone()) {
            return Err(fail("rule_id", e.to_string()));
        }
        if !seen.insert(rule.rule_id.as_str()) {
            return Err(fail(
                "rule_id",
                format!("`{}` is used by an earlier rule", rule.rule_id),
            ));
        }
        if let Err(e) = ClientId::parse(rule.reason_code.clone()) {
            return Err(fail("reason_code", e.to_string()));
        }
        if rule.carc.as_deref().is_some_and(|c| !is_code(c, 1, 3)) {
            return Err(fail(
                "carc",
                "must be a CARC: 1-3 capital letters or digits, e.g. 45 or A1".into(),
            ));
        }
        if rule.rarc.as_deref().is_some_and(|c| !is_code(c, 2, 5)) {
            return Err(fail(
                "rarc",
                "must be a RARC: 2-5 capital letters or digits, e.g. N130".into(),
            ));
        }
        if rule.description.len() > 1000 {
            return Err(fail(
                "description",
                "must be at most 1000 characters".into(),
            ));
        }
        let mut own = std::collections::BTreeSet::new();
        let when = expression(&rule.when, Expected::Bool, &mut own).map_err(|m| fail("when", m))?;
        let reads_line = |names: &std::collections::BTreeSet<String>| {
            names.iter().any(|n| n == "line" || n.starts_with("line."))
        };
        if rule.action != RuleAction::DenyLine && reads_line(&own) {
            return Err(fail(
                "when",
                "`line` is defined only in deny_line rules, whose `when` is evaluated once per line"
                    .into(),
            ));
        }
        names.extend(own);
        let amount = match (rule.action, &rule.approved_amount) {
            (RuleAction::Adjust, Some(src)) => Some({
                let mut own = std::collections::BTreeSet::new();
                let program = expression(src, Expected::Int, &mut own)
                    .map_err(|m| fail("approved_amount", m))?;
                if reads_line(&own) {
                    return Err(fail(
                        "approved_amount",
                        "`line` is defined only in deny_line rules".into(),
                    ));
                }
                names.extend(own);
                program
            }),
            (RuleAction::Adjust, None) => {
                return Err(fail(
                    "approved_amount",
                    "an adjust rule needs an approved_amount expression".into(),
                ))
            }
            (_, Some(_)) => {
                return Err(fail(
                    "approved_amount",
                    "only adjust rules take an approved_amount".into(),
                ))
            }
            (_, None) => None,
        };
        let plan = BoolPlan::of(when.expression());
        compiled.push(CompiledRule {
            plan,
            rule_id: rule.rule_id.as_str().into(),
            reason_code: rule.reason_code.as_str().into(),
            description: rule.description.as_str().into(),
            carc: rule.carc.as_deref().map(Into::into),
            rarc: rule.rarc.as_deref().map(Into::into),
            rule: rule.clone(),
            when,
            amount,
        });
    }
    Ok(CompiledRulebook {
        rules: compiled,
        names: names.into_iter().collect(),
    })
}

fn expression(
    src: &str,
    expected: Expected,
    names: &mut std::collections::BTreeSet<String>,
) -> Result<Program, String> {
    if src.trim().is_empty() {
        return Err("must be a CEL expression".into());
    }
    if src.len() > MAX_EXPRESSION_LEN {
        return Err(format!("must be at most {MAX_EXPRESSION_LEN} bytes"));
    }
    let program = Program::compile(src)
        .map_err(|e| format!("does not compile: {}", first_line(&e.to_string())))?;
    let analysis = Analysis::of(program.expression());
    if let Some(problem) = analysis.problem() {
        return Err(problem);
    }
    types::check(program.expression(), expected)?;
    names.extend(analysis.names);
    Ok(program)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or(s).chars().take(300).collect()
}
