//! The type check of a rule's expression, at create time, against the variables the
//! contract gives CEL (`claim`, `provider`, `contract`, `member_history`) and their
//! fields' types. A rule that misspells a field, mixes types (`claim.claim_amount >
//! "100"`), asks `size` of a number, or whose `when` is not a condition would fail on
//! every claim and flag it `RULE_ERROR`; refused here, its author learns why at once.
//!
//! The `cel` crate parses and interprets but has no type checker, so this is our own,
//! over its AST. It is gradual, as CEL's own checker is with `dyn`: a value whose type
//! is not known before evaluation (a `metadata` entry, `provider.npi`, which may be
//! null, anything passed through `dyn()`) is `Dyn` and passes every check, so the check
//! refuses only what must fail, never an expression that can work. What it accepts
//! matches what cel's interpreter does at run time: comparisons across int, uint and
//! double are allowed, arithmetic across them is not.

use std::fmt;

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, LiteralValue, SelectExpr};
use cel::IdedExpr;

/// The type of a value, as far as it is known before evaluation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Type {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    List(Box<Type>),
    Map(Box<Type>, Box<Type>),
    /// One of the contract's records (`claim`, a claim's line, …), with known fields.
    Record(&'static Record),
    /// Known only at evaluation.
    Dyn,
}

/// A record with named, typed fields.
#[derive(Debug, PartialEq, Eq)]
pub struct Record {
    pub name: &'static str,
    pub fields: &'static [(&'static str, Field)],
}

/// The type of a record's field, as a constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Int,
    String,
    /// A string, or null when absent.
    OptionalString,
    Lines,
    Strings,
    /// A JSON object of the client's.
    Metadata,
    FeeSchedule,
}

impl Field {
    fn ty(self) -> Type {
        match self {
            Field::Int => Type::Int,
            Field::String => Type::String,
            // A string or null: which one is known only at evaluation.
            Field::OptionalString => Type::Dyn,
            Field::Metadata => Type::Map(Box::new(Type::String), Box::new(Type::Dyn)),
            Field::Lines => Type::List(Box::new(Type::Record(&LINE))),
            Field::Strings => Type::List(Box::new(Type::String)),
            Field::FeeSchedule => Type::Map(Box::new(Type::String), Box::new(Type::Int)),
        }
    }

    /// The type's name, as the OpenAPI document and error messages give it.
    pub fn describe(self) -> &'static str {
        match self {
            Field::Int => "int",
            Field::String => "string",
            Field::OptionalString => "string or null",
            Field::Lines => "list of line",
            Field::Strings => "list of string",
            Field::Metadata => "map of string to any",
            Field::FeeSchedule => "map of string to int",
        }
    }
}

pub static CLAIM: Record = Record {
    name: "claim",
    fields: &[
        ("claim_id", Field::String),
        ("member_id", Field::String),
        ("provider_id", Field::String),
        ("claim_amount", Field::Int),
        ("service_date", Field::String),
        ("lines", Field::Lines),
        ("diagnosis_codes", Field::Strings),
        ("metadata", Field::Metadata),
    ],
};

pub static LINE: Record = Record {
    name: "line",
    fields: &[
        ("line_no", Field::Int),
        ("procedure_code", Field::String),
        ("units", Field::Int),
        ("amount", Field::Int),
        ("modifiers", Field::Strings),
    ],
};

/// The claim's member; `null` for a member not on the roster.
pub static MEMBER: Record = Record {
    name: "member",
    fields: &[
        ("age", Field::Int),
        ("sex", Field::String),
        ("plan_id", Field::String),
    ],
};

pub static PROVIDER: Record = Record {
    name: "provider",
    fields: &[
        ("provider_id", Field::String),
        ("name", Field::String),
        ("npi", Field::OptionalString),
        ("specialty", Field::OptionalString),
    ],
};

pub static CONTRACT: Record = Record {
    name: "contract",
    fields: &[
        ("contract_id", Field::String),
        ("fee_schedule", Field::FeeSchedule),
    ],
};

pub static MEMBER_HISTORY: Record = Record {
    name: "member_history",
    fields: &[
        ("claims_last_24h", Field::Int),
        ("amount_last_30d", Field::Int),
    ],
};

/// The variables a rule sees, each a record. `line` only in a `deny_line` rule (the
/// compiler checks), `member` may be `null`.
pub static VARIABLES: [&Record; 6] = [
    &CLAIM,
    &PROVIDER,
    &CONTRACT,
    &MEMBER_HISTORY,
    &MEMBER,
    &LINE,
];

impl Record {
    fn field(&self, name: &str) -> Result<Type, String> {
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| f.ty())
            .ok_or_else(|| {
                let names: Vec<&str> = self.fields.iter().map(|(n, _)| *n).collect();
                format!(
                    "`{}` has no field `{name}`; its fields are {}",
                    self.name,
                    names.join(", ")
                )
            })
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Bool => f.write_str("bool"),
            Type::Int => f.write_str("int"),
            Type::Uint => f.write_str("uint"),
            Type::Double => f.write_str("double"),
            Type::String => f.write_str("string"),
            Type::Bytes => f.write_str("bytes"),
            Type::Null => f.write_str("null"),
            Type::List(t) => write!(f, "list of {t}"),
            Type::Map(k, v) => write!(f, "map of {k} to {v}"),
            Type::Record(r) => f.write_str(r.name),
            Type::Dyn => f.write_str("dyn"),
        }
    }
}

impl Type {
    fn is_numeric(&self) -> bool {
        matches!(self, Type::Int | Type::Uint | Type::Double)
    }

    /// Whether a value of this type may be of type `want` at evaluation.
    fn may_be(&self, want: &Type) -> bool {
        self == want || *self == Type::Dyn
    }

    /// The type of a value that is either `self` or `other`.
    fn join(self, other: Type) -> Type {
        match (self, other) {
            (a, b) if a == b => a,
            (Type::List(a), Type::List(b)) => Type::List(Box::new(a.join(*b))),
            _ => Type::Dyn,
        }
    }
}

/// What a rule expression must give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// `when`: a condition.
    Bool,
    /// `approved_amount`: an amount in minor units.
    Int,
}

/// Checks `expr` and that it gives what `expected` says; the error is a sentence for
/// the rule's author.
pub fn check(expr: &IdedExpr, expected: Expected) -> Result<(), String> {
    let ty = Checker::default().infer(expr)?;
    let ok = match expected {
        Expected::Bool => ty.may_be(&Type::Bool),
        // uint is an integer too, and the evaluator takes it.
        Expected::Int => ty.may_be(&Type::Int) || ty == Type::Uint,
    };
    if ok {
        return Ok(());
    }
    Err(match expected {
        Expected::Bool => format!("must be a condition (bool), but gives {ty}"),
        Expected::Int => format!(
            "must give an integer amount in minor units, but gives {ty}{}",
            if ty == Type::Double {
                "; wrap it in int(…)"
            } else {
                ""
            }
        ),
    })
}

#[derive(Default)]
struct Checker {
    /// Comprehension variables in scope, innermost last.
    bound: Vec<(String, Type)>,
}

impl Checker {
    fn infer(&mut self, e: &IdedExpr) -> Result<Type, String> {
        match &e.expr {
            Expr::Unspecified | Expr::Struct(_) => Ok(Type::Dyn),
            Expr::Literal(lit) => Ok(match lit {
                LiteralValue::Boolean(_) => Type::Bool,
                LiteralValue::Bytes(_) => Type::Bytes,
                LiteralValue::Double(_) => Type::Double,
                LiteralValue::Int(_) => Type::Int,
                LiteralValue::Null => Type::Null,
                LiteralValue::String(_) => Type::String,
                LiteralValue::UInt(_) => Type::Uint,
            }),
            Expr::Ident(name) => Ok(self.ident(name)),
            Expr::Select(sel) => self.select(sel),
            Expr::List(list) => {
                let mut elem: Option<Type> = None;
                for el in &list.elements {
                    let t = self.infer(el)?;
                    elem = Some(match elem {
                        None => t,
                        Some(prev) => prev.join(t),
                    });
                }
                Ok(Type::List(Box::new(elem.unwrap_or(Type::Dyn))))
            }
            Expr::Map(map) => {
                let (mut key, mut value): (Option<Type>, Option<Type>) = (None, None);
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        let (k, v) = (self.infer(&m.key)?, self.infer(&m.value)?);
                        key = Some(key.map_or(k.clone(), |p| p.join(k)));
                        value = Some(value.map_or(v.clone(), |p| p.join(v)));
                    }
                }
                Ok(Type::Map(
                    Box::new(key.unwrap_or(Type::Dyn)),
                    Box::new(value.unwrap_or(Type::Dyn)),
                ))
            }
            Expr::Call(call) => self.call(call),
            Expr::Comprehension(c) => self.comprehension(c),
        }
    }

    fn ident(&self, name: &str) -> Type {
        if let Some((_, t)) = self.bound.iter().rev().find(|(n, _)| n == name) {
            return t.clone();
        }
        VARIABLES
            .iter()
            .find(|r| r.name == name)
            .map_or(Type::Dyn, |r| Type::Record(r))
    }

    fn select(&mut self, sel: &SelectExpr) -> Result<Type, String> {
        let operand = self.infer(&sel.operand)?;
        let field_type = match &operand {
            Type::Record(r) => r.field(&sel.field)?,
            Type::Map(k, v) if k.may_be(&Type::String) => (**v).clone(),
            Type::Dyn => Type::Dyn,
            other => return Err(format!("cannot select `{}` of {other}", sel.field)),
        };
        // `has(x.f)` asks whether the field is set.
        Ok(if sel.test { Type::Bool } else { field_type })
    }

    fn call(&mut self, call: &CallExpr) -> Result<Type, String> {
        // A method's receiver is its first operand: `s.size()` is `size(s)`.
        let mut operands = Vec::with_capacity(call.args.len() + 1);
        if let Some(t) = &call.target {
            operands.push(self.infer(t)?);
        }
        for a in &call.args {
            operands.push(self.infer(a)?);
        }
        let f = call.func_name.as_str();
        let mismatch = || {
            let names: Vec<String> = operands.iter().map(ToString::to_string).collect();
            Err(format!(
                "{} cannot be applied to {}",
                describe_function(f),
                names.join(" and ")
            ))
        };
        let all = |want: &Type| operands.iter().all(|t| t.may_be(want));
        match (f, operands.as_slice()) {
            ("_&&_" | "_||_", _) | ("!_", _) => {
                if all(&Type::Bool) {
                    Ok(Type::Bool)
                } else {
                    mismatch()
                }
            }
            ("@not_strictly_false", _) => Ok(Type::Bool),
            ("_==_" | "_!=_", [a, b]) => {
                if comparable(a, b) {
                    Ok(Type::Bool)
                } else {
                    mismatch()
                }
            }
            ("_<_" | "_<=_" | "_>_" | "_>=_", [a, b]) => {
                let orderable =
                    |t: &Type| t.is_numeric() || matches!(t, Type::String | Type::Bool | Type::Dyn);
                let same_kind = a == b
                    || (a.is_numeric() && b.is_numeric())
                    || *a == Type::Dyn
                    || *b == Type::Dyn;
                if orderable(a) && orderable(b) && same_kind {
                    Ok(Type::Bool)
                } else {
                    mismatch()
                }
            }
            ("_+_", [a, b]) => match (a, b) {
                (Type::Dyn, t) | (t, Type::Dyn) if addable(t) => Ok(Type::Dyn),
                (a, b) if a == b && addable(a) => Ok(a.clone()),
                (Type::List(x), Type::List(y)) => {
                    Ok(Type::List(Box::new((**x).clone().join((**y).clone()))))
                }
                _ => mismatch(),
            },
            ("_-_" | "_*_" | "_/_" | "_%_", [a, b]) => match (a, b) {
                (Type::Dyn, t) | (t, Type::Dyn) if t.is_numeric() || *t == Type::Dyn => {
                    Ok(Type::Dyn)
                }
                (a, b) if a == b && a.is_numeric() && !(f == "_%_" && *a == Type::Double) => {
                    Ok(a.clone())
                }
                _ => mismatch(),
            },
            ("-_", [a]) => match a {
                Type::Int | Type::Double | Type::Dyn => Ok(a.clone()),
                _ => mismatch(),
            },
            ("_?_:_", [c, t, e]) => {
                if c.may_be(&Type::Bool) {
                    Ok(t.clone().join(e.clone()))
                } else {
                    mismatch()
                }
            }
            ("_[_]" | "_[?_]", [container, index]) => index_type(container, index)
                .map(|t| if f == "_[?_]" { Type::Dyn } else { t })
                .map_or_else(mismatch, Ok),
            ("@in", [elem, container]) => {
                let fits = match container {
                    Type::List(t) => comparable(elem, t),
                    Type::Map(k, _) => comparable(elem, k),
                    Type::Dyn => true,
                    _ => false,
                };
                if fits {
                    Ok(Type::Bool)
                } else {
                    mismatch()
                }
            }
            ("size", [t]) => match t {
                Type::String | Type::Bytes | Type::List(_) | Type::Map(..) | Type::Dyn => {
                    Ok(Type::Int)
                }
                _ => mismatch(),
            },
            ("contains" | "startsWith" | "endsWith" | "matches", [s, p]) => {
                if s.may_be(&Type::String) && p.may_be(&Type::String) {
                    Ok(Type::Bool)
                } else {
                    mismatch()
                }
            }
            ("int" | "uint" | "double" | "string" | "bool", [t]) => {
                let target = match f {
                    "int" => Type::Int,
                    "uint" => Type::Uint,
                    "double" => Type::Double,
                    "string" => Type::String,
                    _ => Type::Bool,
                };
                let convertible = match &target {
                    Type::Bool => matches!(t, Type::Bool | Type::String | Type::Dyn),
                    Type::String => !matches!(t, Type::List(_) | Type::Map(..) | Type::Record(_)),
                    _ => t.is_numeric() || matches!(t, Type::String | Type::Dyn),
                };
                if convertible {
                    Ok(target)
                } else {
                    mismatch()
                }
            }
            // `_?._` (optional selection), `dyn`, `type`, and anything the analysis
            // refuses already.
            _ => Ok(Type::Dyn),
        }
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Result<Type, String> {
        let range = self.infer(&c.iter_range)?;
        let (first, second) = match &range {
            Type::List(t) => (Type::Int, (**t).clone()),
            Type::Map(k, v) => ((**k).clone(), (**v).clone()),
            Type::Dyn => (Type::Dyn, Type::Dyn),
            other => return Err(format!("cannot iterate over {other}")),
        };
        // One variable: the list's elements or the map's keys. Two: index or key, then
        // the element or value.
        let iter = if c.iter_var2.is_some() {
            first.clone()
        } else if matches!(range, Type::List(_)) {
            second.clone()
        } else {
            first.clone()
        };
        let before = self.bound.len();
        self.bound.push((c.iter_var.clone(), iter));
        if let Some(v2) = &c.iter_var2 {
            self.bound.push((v2.clone(), second));
        }
        // The accumulator starts as its initial value's type; a step that gives another
        // type widens it once (`map` starts from an empty list).
        let mut accu = self.infer(&c.accu_init)?;
        let result = (|| {
            for _ in 0..2 {
                self.bound.push((c.accu_var.clone(), accu.clone()));
                let step = self.infer(&c.loop_step);
                self.bound.pop();
                let step = step?;
                if step == accu {
                    break;
                }
                accu = accu.clone().join(step);
            }
            self.bound.push((c.accu_var.clone(), accu.clone()));
            let cond = self.infer(&c.loop_cond)?;
            if !cond.may_be(&Type::Bool) {
                return Err(format!("a loop condition must be bool, but gives {cond}"));
            }
            self.infer(&c.result)
        })();
        self.bound.truncate(before);
        result
    }
}

/// Whether `==` between the two may be true: the same type, numbers of any kind, null
/// against anything, or a type known only at evaluation.
fn comparable(a: &Type, b: &Type) -> bool {
    match (a, b) {
        (Type::Dyn, _) | (_, Type::Dyn) | (Type::Null, _) | (_, Type::Null) => true,
        (a, b) if a.is_numeric() && b.is_numeric() => true,
        (Type::List(x), Type::List(y)) => comparable(x, y),
        (Type::Map(k1, v1), Type::Map(k2, v2)) => comparable(k1, k2) && comparable(v1, v2),
        (a, b) => a == b,
    }
}

fn addable(t: &Type) -> bool {
    t.is_numeric() || matches!(t, Type::String | Type::Bytes | Type::List(_) | Type::Dyn)
}

/// `container[index]`'s type, if the index fits the container.
fn index_type(container: &Type, index: &Type) -> Option<Type> {
    match container {
        Type::List(t) if matches!(index, Type::Int | Type::Uint | Type::Dyn) => Some((**t).clone()),
        Type::Map(k, v) if comparable(k, index) => Some((**v).clone()),
        Type::Record(_) if matches!(index, Type::String | Type::Dyn) => Some(Type::Dyn),
        Type::Dyn => Some(Type::Dyn),
        _ => None,
    }
}

fn describe_function(f: &str) -> String {
    let op = match f {
        "_&&_" => "&&",
        "_||_" => "||",
        "!_" => "!",
        "_==_" => "==",
        "_!=_" => "!=",
        "_<_" => "<",
        "_<=_" => "<=",
        "_>_" => ">",
        "_>=_" => ">=",
        "_+_" => "+",
        "_-_" => "-",
        "_*_" => "*",
        "_/_" => "/",
        "_%_" => "%",
        "-_" => "unary -",
        "_?_:_" => "?:",
        "_[_]" | "_[?_]" => "indexing",
        "@in" => "in",
        other => return format!("`{other}`"),
    };
    format!("`{op}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(src: &str, expected: Expected) -> Result<(), String> {
        let program = cel::Program::compile(src).unwrap();
        check(program.expression(), expected)
    }

    #[track_caller]
    fn refused(src: &str, expected: Expected, says: &str) {
        let e = checked(src, expected).expect_err(src);
        assert!(e.contains(says), "{src}: {e}");
    }

    #[test]
    fn expressions_that_can_work_pass() {
        for src in [
            "claim.claim_amount > 10000",
            "claim.claim_amount > 100.5",
            "'E11.9' in claim.diagnosis_codes",
            "provider.npi == null || provider.npi.startsWith('12')",
            "provider.specialty == 'cardiology'",
            "claim.metadata.channel == 'edi'",
            "claim.metadata['channel'] == 'edi'",
            "has(claim.metadata.channel)",
            "has(provider.npi)",
            "'80053' in contract.fee_schedule && contract.fee_schedule['80053'] < 20000",
            "claim.lines.all(l, l.units >= 1) && size(claim.lines) == 2",
            "claim.lines.exists(l, claim.diagnosis_codes.exists(c, c == l.procedure_code))",
            "claim.lines.exists(claim, claim.units > 3)",
            "claim.lines.exists_one(l, l.units > 1)",
            "claim.lines.map(l, l.amount).exists(a, a > 10)",
            "claim.lines.filter(l, l.amount > 10).size() > 1",
            "size(claim.claim_id) > 3 && claim.claim_id.matches('^CLM')",
            "claim.claim_amount > 0 ? true : false",
            "dyn(claim.claim_amount) == '5'",
            "claim.service_date >= '2026-01-01'",
            "double(claim.claim_amount) * 0.5 > 100.0",
            "member_history.claims_last_24h > 2 && member_history.amount_last_30d > 5000",
            "claim.diagnosis_codes[0] == 'E11.9'",
            "claim.claim_amount in [100, 12500, 20000]",
            "string(claim.claim_amount) + 'x' == '1x'",
        ] {
            assert_eq!(checked(src, Expected::Bool), Ok(()), "{src}");
        }
        for src in [
            "claim.claim_amount / 2",
            "int(double(claim.claim_amount) * 0.333)",
            "claim.metadata.cap",
            "claim.claim_amount > 100 ? 100 : claim.claim_amount",
            "1u",
        ] {
            assert_eq!(checked(src, Expected::Int), Ok(()), "{src}");
        }
    }

    #[test]
    fn an_unknown_field_is_named_with_the_fields_there_are() {
        refused(
            "claim.claim_amout > 5",
            Expected::Bool,
            "`claim` has no field `claim_amout`; its fields are claim_id",
        );
        refused(
            "claim.lines.exists(l, l.modifier == 'x')",
            Expected::Bool,
            "`line` has no field `modifier`",
        );
        refused("has(provider.phone)", Expected::Bool, "no field `phone`");
        refused(
            "member_history.claims_last_7d > 1",
            Expected::Bool,
            "no field `claims_last_7d`",
        );
    }

    #[test]
    fn mixed_types_are_named() {
        refused(
            "claim.claim_amount > \"100\"",
            Expected::Bool,
            "`>` cannot be applied to int and string",
        );
        refused(
            "size(claim.claim_amount) > 1",
            Expected::Bool,
            "`size` cannot be applied to int",
        );
        refused(
            "claim.claim_amount == '5'",
            Expected::Bool,
            "`==` cannot be applied to int and string",
        );
        refused(
            "claim.claim_amount * 0.5 > 10.0",
            Expected::Bool,
            "`*` cannot be applied to int and double",
        );
        refused(
            "claim.claim_id.startsWith(1)",
            Expected::Bool,
            "`startsWith` cannot be applied to string and int",
        );
        refused(
            "'E11' in claim.lines",
            Expected::Bool,
            "`in` cannot be applied",
        );
        refused(
            "claim.claim_amount.exists(x, x > 1)",
            Expected::Bool,
            "cannot iterate over int",
        );
        refused("claim.claim_amount && true", Expected::Bool, "`&&`");
    }

    #[test]
    fn a_condition_must_be_bool_and_an_amount_an_integer() {
        refused(
            "claim.claim_amount",
            Expected::Bool,
            "must be a condition (bool), but gives int",
        );
        refused("claim.claim_id", Expected::Bool, "gives string");
        refused(
            "double(claim.claim_amount) * 0.5",
            Expected::Int,
            "must give an integer amount in minor units, but gives double; wrap it in int(…)",
        );
        refused("claim.claim_amount > 5", Expected::Int, "but gives bool");
        refused("'100'", Expected::Int, "but gives string");
    }
}
