//! The rule engine: a pure library. A rulebook's CEL expressions are compiled once per
//! version ([`compile`]), then each claim is evaluated against them ([`evaluate`]),
//! which yields the matched hard stops, flags and declines, the approved amount after
//! fee-schedule caps and `adjust` rules, and a trace of every rule.
//!
//! Bounds: an expression is limited in size and in comprehension nesting at compile
//! time (see [`analysis`]), and the data it iterates over is bounded by intake, so the
//! work of one evaluation is bounded; an expression that fails at evaluation is a
//! reported rule error, never a panic.

pub mod analysis;
pub mod cache;
pub mod compile;
pub mod evaluate;
mod facts;
pub mod input;
mod plan;
pub mod types;

pub use cache::RulebookCache;
pub use compile::{compile, CompileError, CompiledRulebook};
pub use evaluate::{Evaluation, LineDenial, RuleHit, TraceEntry, Tracing};
pub use input::{
    ClaimFacts, ContractFacts, EvalInput, LineFacts, MemberFacts, MemberHistory, ProviderFacts,
};

#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod tests;
