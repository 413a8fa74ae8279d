//! A direct evaluation plan for the shapes most rules take: comparisons of the claim's
//! fields with constants, code look-ups, `exists`/`all` over the lines or the diagnosis
//! codes, string tests, integer arithmetic, joined by `&&`, `||` and `!`.
//!
//! Why: cel's interpreter resolves every name through its scopes and container
//! candidates, joins qualified names into new strings, and deep-copies a line's map for
//! each step of a comprehension; that put a 50-rule rulebook at about 30 µs per claim.
//! A plan reads the claim's fields in place and allocates nothing.
//!
//! The plan never decides anything the interpreter would decide differently: an
//! expression is planned only when every node is in the subset below and the types of
//! every operator's operands are known and agree; anything else (doubles, maps,
//! metadata, `has`, ternaries, mixed types…) stays with the interpreter. At evaluation,
//! whatever could fail in CEL (overflow, division by zero, a string test on `null`)
//! makes the plan [`Defer`] the whole expression to the interpreter, which then gives
//! the exact value or error. A differential test holds the two to the same answers.

use std::sync::Arc;

use cel::common::ast::{operators, ComprehensionExpr, Expr, LiteralValue};
use cel::IdedExpr;

use super::input::{EvalInput, LineFacts};

/// The plan cannot decide this evaluation: run the expression in the interpreter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Defer;

type Outcome<T> = Result<T, Defer>;

/// A planned boolean expression.
#[derive(Debug)]
pub(crate) enum BoolPlan {
    Const(bool),
    Not(Box<BoolPlan>),
    And(Box<BoolPlan>, Box<BoolPlan>),
    Or(Box<BoolPlan>, Box<BoolPlan>),
    Int(Cmp, IntPlan, IntPlan),
    /// `==` (or `!=` when negated) of two strings, either of which may be `null`.
    StrEq(bool, StrPlan, StrPlan),
    /// `<`, `<=`, `>`, `>=` of two strings: by code point, as CEL orders them.
    StrOrd(Cmp, StrPlan, StrPlan),
    StrTest(StrTest, StrPlan, StrPlan),
    StrIn(StrPlan, StrSet),
    IntIn(IntPlan, Vec<i64>),
    /// `list.exists(v, body)`, or `list.all(v, body)` when `all`.
    Each {
        all: bool,
        list: List,
        body: Box<BoolPlan>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    fn holds(self, order: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self {
            Cmp::Eq => order == Equal,
            Cmp::Ne => order != Equal,
            Cmp::Lt => order == Less,
            Cmp::Le => order != Greater,
            Cmp::Gt => order == Greater,
            Cmp::Ge => order != Less,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StrTest {
    StartsWith,
    EndsWith,
    Contains,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

/// A list a comprehension can range over, or `size` measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum List {
    Lines,
    DiagnosisCodes,
}

#[derive(Debug)]
pub(crate) enum IntPlan {
    Const(i64),
    ClaimAmount,
    ClaimsLast24h,
    AmountLast30d,
    /// `units` or `amount` of the line bound at this depth.
    LineUnits(usize),
    LineAmount(usize),
    /// Of the line a `deny_line` rule decides (`line.…`).
    RuleLineNo,
    RuleLineUnits,
    RuleLineAmount,
    /// `member.age`; defers for a member not on the roster (the interpreter's error).
    MemberAge,
    Size(List),
    Neg(Box<IntPlan>),
    Arith(Arith, Box<IntPlan>, Box<IntPlan>),
}

#[derive(Debug)]
pub(crate) enum StrPlan {
    Const(Arc<str>),
    Null,
    ClaimId,
    MemberId,
    ProviderId,
    ServiceDate,
    /// `provider.provider_id`, the provider's own record.
    ProvidersId,
    ProviderName,
    /// May be `null`.
    Npi,
    /// May be `null`.
    Specialty,
    ContractId,
    /// `procedure_code` of the line bound at this depth.
    LineCode(usize),
    /// `line.procedure_code` of a `deny_line` rule's line.
    RuleLineCode,
    /// `member.sex`, `member.plan_id`; defer for a member not on the roster.
    MemberSex,
    MemberPlan,
    /// The diagnosis code bound at this depth.
    Code(usize),
}

#[derive(Debug)]
pub(crate) enum StrSet {
    DiagnosisCodes,
    Literal(Vec<Arc<str>>),
}

/// What a comprehension variable is bound to while its body runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Elem<'a> {
    Line(&'a LineFacts),
    Code(&'a str),
}

/// The variables bound by enclosing comprehensions, innermost last.
pub(crate) type Bound<'a> = Vec<Elem<'a>>;

impl BoolPlan {
    /// Plans `expr`, if it is wholly in the planned subset and gives a bool.
    pub(crate) fn of(expr: &IdedExpr) -> Option<BoolPlan> {
        match Planner::default().node(expr)? {
            Node::Bool(plan) => Some(plan),
            _ => None,
        }
    }

    pub(crate) fn eval<'a>(&self, input: &'a EvalInput, bound: &mut Bound<'a>) -> Outcome<bool> {
        Ok(match self {
            BoolPlan::Const(b) => *b,
            BoolPlan::Not(p) => !p.eval(input, bound)?,
            BoolPlan::And(l, r) => l.eval(input, bound)? && r.eval(input, bound)?,
            BoolPlan::Or(l, r) => l.eval(input, bound)? || r.eval(input, bound)?,
            BoolPlan::Int(cmp, l, r) => {
                cmp.holds(l.eval(input, bound)?.cmp(&r.eval(input, bound)?))
            }
            BoolPlan::StrEq(negate, l, r) => {
                (l.eval(input, bound)? == r.eval(input, bound)?) != *negate
            }
            BoolPlan::StrOrd(cmp, l, r) => {
                let (Some(l), Some(r)) = (l.eval(input, bound)?, r.eval(input, bound)?) else {
                    return Err(Defer);
                };
                // UTF-8's byte order is code-point order.
                cmp.holds(l.cmp(r))
            }
            BoolPlan::StrTest(test, l, r) => {
                let (Some(l), Some(r)) = (l.eval(input, bound)?, r.eval(input, bound)?) else {
                    return Err(Defer);
                };
                match test {
                    StrTest::StartsWith => l.starts_with(r),
                    StrTest::EndsWith => l.ends_with(r),
                    StrTest::Contains => l.contains(r),
                }
            }
            BoolPlan::StrIn(needle, set) => {
                let Some(needle) = needle.eval(input, bound)? else {
                    return Err(Defer);
                };
                match set {
                    StrSet::DiagnosisCodes => {
                        input.claim.diagnosis_codes.iter().any(|c| c == needle)
                    }
                    StrSet::Literal(items) => items.iter().any(|c| &**c == needle),
                }
            }
            BoolPlan::IntIn(needle, items) => items.contains(&needle.eval(input, bound)?),
            BoolPlan::Each { all, list, body } => {
                let mut result = *all;
                let step = |elem: Elem<'a>, bound: &mut Bound<'a>| -> Outcome<bool> {
                    bound.push(elem);
                    let value = body.eval(input, bound);
                    bound.pop();
                    value
                };
                // Stops at the first element that decides, as CEL's loop condition does.
                match list {
                    List::Lines => {
                        for line in &input.claim.lines {
                            if step(Elem::Line(line), bound)? != *all {
                                result = !*all;
                                break;
                            }
                        }
                    }
                    List::DiagnosisCodes => {
                        for code in &input.claim.diagnosis_codes {
                            if step(Elem::Code(code), bound)? != *all {
                                result = !*all;
                                break;
                            }
                        }
                    }
                }
                result
            }
        })
    }
}

impl IntPlan {
    fn eval(&self, input: &EvalInput, bound: &Bound<'_>) -> Outcome<i64> {
        let line = |depth: usize| match bound.get(depth) {
            Some(Elem::Line(line)) => Ok(*line),
            _ => Err(Defer),
        };
        Ok(match self {
            IntPlan::Const(i) => *i,
            IntPlan::ClaimAmount => input.claim.claim_amount,
            IntPlan::ClaimsLast24h => input.member_history.claims_last_24h,
            IntPlan::AmountLast30d => input.member_history.amount_last_30d,
            IntPlan::LineUnits(depth) => line(*depth)?.units,
            IntPlan::LineAmount(depth) => line(*depth)?.amount,
            IntPlan::RuleLineNo => input.line.as_ref().ok_or(Defer)?.line_no,
            IntPlan::RuleLineUnits => input.line.as_ref().ok_or(Defer)?.units,
            IntPlan::RuleLineAmount => input.line.as_ref().ok_or(Defer)?.amount,
            IntPlan::MemberAge => input.member.as_ref().ok_or(Defer)?.age,
            IntPlan::Size(List::Lines) => {
                i64::try_from(input.claim.lines.len()).map_err(|_| Defer)?
            }
            IntPlan::Size(List::DiagnosisCodes) => {
                i64::try_from(input.claim.diagnosis_codes.len()).map_err(|_| Defer)?
            }
            IntPlan::Neg(p) => p.eval(input, bound)?.checked_neg().ok_or(Defer)?,
            IntPlan::Arith(op, l, r) => {
                let (l, r) = (l.eval(input, bound)?, r.eval(input, bound)?);
                match op {
                    Arith::Add => l.checked_add(r),
                    Arith::Sub => l.checked_sub(r),
                    Arith::Mul => l.checked_mul(r),
                    Arith::Div => l.checked_div(r),
                    Arith::Rem => l.checked_rem(r),
                }
                .ok_or(Defer)?
            }
        })
    }
}

impl StrPlan {
    /// The string, or `None` for `null`.
    fn eval<'a>(&'a self, input: &'a EvalInput, bound: &Bound<'a>) -> Outcome<Option<&'a str>> {
        let (c, p) = (&input.claim, &input.provider);
        Ok(Some(match self {
            StrPlan::Const(s) => s,
            StrPlan::Null => return Ok(None),
            StrPlan::ClaimId => &c.claim_id,
            StrPlan::MemberId => &c.member_id,
            StrPlan::ProviderId => &c.provider_id,
            StrPlan::ServiceDate => &c.service_date,
            StrPlan::ProvidersId => &p.provider_id,
            StrPlan::ProviderName => &p.name,
            StrPlan::Npi => return Ok(p.npi.as_deref()),
            StrPlan::Specialty => return Ok(p.specialty.as_deref()),
            StrPlan::ContractId => &input.contract.contract_id,
            StrPlan::RuleLineCode => &input.line.as_ref().ok_or(Defer)?.procedure_code,
            StrPlan::MemberSex => &input.member.as_ref().ok_or(Defer)?.sex,
            StrPlan::MemberPlan => &input.member.as_ref().ok_or(Defer)?.plan_id,
            StrPlan::LineCode(depth) => match bound.get(*depth) {
                Some(Elem::Line(line)) => &line.procedure_code,
                _ => return Err(Defer),
            },
            StrPlan::Code(depth) => match bound.get(*depth) {
                Some(Elem::Code(code)) => code,
                _ => return Err(Defer),
            },
        }))
    }
}

/// A planned node and its type.
enum Node {
    Bool(BoolPlan),
    Int(IntPlan),
    Str(StrPlan),
    List(List),
    StrList(Vec<Arc<str>>),
    IntList(Vec<i64>),
    /// A line bound by a comprehension, usable only through its fields.
    Line,
}

/// Translates an AST, tracking the comprehension variables in scope.
#[derive(Default)]
struct Planner {
    scope: Vec<(String, List)>,
}

impl Planner {
    fn node(&mut self, e: &IdedExpr) -> Option<Node> {
        match &e.expr {
            Expr::Literal(lit) => Some(match lit {
                LiteralValue::Boolean(b) => Node::Bool(BoolPlan::Const(*b.inner())),
                LiteralValue::Int(i) => Node::Int(IntPlan::Const(*i.inner())),
                LiteralValue::String(s) => Node::Str(StrPlan::Const(s.inner().into())),
                LiteralValue::Null => Node::Str(StrPlan::Null),
                _ => return None,
            }),
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) if !select.test => {
                let Expr::Ident(root) = &select.operand.expr else {
                    return None;
                };
                self.field(root, &select.field)
            }
            Expr::List(list) if list.optional_indices.is_empty() && !list.elements.is_empty() => {
                let nodes = list
                    .elements
                    .iter()
                    .map(|el| self.node(el))
                    .collect::<Option<Vec<_>>>()?;
                literal_list(nodes)
            }
            Expr::Call(call) => {
                let mut args = Vec::with_capacity(call.args.len() + 1);
                if let Some(target) = &call.target {
                    args.push(self.node(target)?);
                }
                for arg in &call.args {
                    args.push(self.node(arg)?);
                }
                call_node(&call.func_name, call.target.is_some(), args)
            }
            Expr::Comprehension(c) => self.comprehension(c),
            _ => None,
        }
    }

    /// The innermost comprehension variable named `name`, with its depth.
    fn bound(&self, name: &str) -> Option<(usize, List)> {
        self.scope
            .iter()
            .rposition(|(n, _)| n == name)
            .map(|depth| (depth, self.scope[depth].1))
    }

    fn ident(&self, name: &str) -> Option<Node> {
        match self.bound(name)? {
            (_, List::Lines) => Some(Node::Line),
            (depth, List::DiagnosisCodes) => Some(Node::Str(StrPlan::Code(depth))),
        }
    }

    fn field(&self, root: &str, field: &str) -> Option<Node> {
        if let Some(bound) = self.bound(root) {
            return match (bound, field) {
                ((depth, List::Lines), "procedure_code") => {
                    Some(Node::Str(StrPlan::LineCode(depth)))
                }
                ((depth, List::Lines), "units") => Some(Node::Int(IntPlan::LineUnits(depth))),
                ((depth, List::Lines), "amount") => Some(Node::Int(IntPlan::LineAmount(depth))),
                _ => None,
            };
        }
        Some(match (root, field) {
            ("claim", "claim_id") => Node::Str(StrPlan::ClaimId),
            ("claim", "member_id") => Node::Str(StrPlan::MemberId),
            ("claim", "provider_id") => Node::Str(StrPlan::ProviderId),
            ("claim", "service_date") => Node::Str(StrPlan::ServiceDate),
            ("claim", "claim_amount") => Node::Int(IntPlan::ClaimAmount),
            ("claim", "lines") => Node::List(List::Lines),
            ("claim", "diagnosis_codes") => Node::List(List::DiagnosisCodes),
            ("provider", "provider_id") => Node::Str(StrPlan::ProvidersId),
            ("provider", "name") => Node::Str(StrPlan::ProviderName),
            ("provider", "npi") => Node::Str(StrPlan::Npi),
            ("provider", "specialty") => Node::Str(StrPlan::Specialty),
            ("contract", "contract_id") => Node::Str(StrPlan::ContractId),
            ("member_history", "claims_last_24h") => Node::Int(IntPlan::ClaimsLast24h),
            ("member_history", "amount_last_30d") => Node::Int(IntPlan::AmountLast30d),
            ("line", "line_no") => Node::Int(IntPlan::RuleLineNo),
            ("line", "units") => Node::Int(IntPlan::RuleLineUnits),
            ("line", "amount") => Node::Int(IntPlan::RuleLineAmount),
            ("line", "procedure_code") => Node::Str(StrPlan::RuleLineCode),
            ("member", "age") => Node::Int(IntPlan::MemberAge),
            ("member", "sex") => Node::Str(StrPlan::MemberSex),
            ("member", "plan_id") => Node::Str(StrPlan::MemberPlan),
            _ => return None,
        })
    }

    /// `exists` and `all`, recognised by the shape cel's macros expand them to.
    fn comprehension(&mut self, c: &ComprehensionExpr) -> Option<Node> {
        if c.iter_var2.is_some() || !is_ident(&c.result, &c.accu_var) {
            return None;
        }
        let Expr::Literal(LiteralValue::Boolean(init)) = &c.accu_init.expr else {
            return None;
        };
        let all = *init.inner();
        let Expr::Call(step) = &c.loop_step.expr else {
            return None;
        };
        let fold = if all {
            operators::LOGICAL_AND
        } else {
            operators::LOGICAL_OR
        };
        let [accu, body] = step.args.as_slice() else {
            return None;
        };
        if step.func_name != fold || step.target.is_some() || !is_ident(accu, &c.accu_var) {
            return None;
        }
        let Node::List(list) = self.node(&c.iter_range)? else {
            return None;
        };
        // The accumulator name cannot be written in a rule, so the body cannot read it;
        // checked anyway, as a body that did would not be planned correctly.
        if c.iter_var == c.accu_var {
            return None;
        }
        self.scope.push((c.iter_var.clone(), list));
        let body = self.node(body);
        self.scope.pop();
        let Node::Bool(body) = body? else {
            return None;
        };
        Some(Node::Bool(BoolPlan::Each {
            all,
            list,
            body: Box::new(body),
        }))
    }
}

fn is_ident(e: &IdedExpr, name: &str) -> bool {
    matches!(&e.expr, Expr::Ident(n) if n == name)
}

/// A list literal of string or integer constants (the right side of `in`).
fn literal_list(nodes: Vec<Node>) -> Option<Node> {
    if nodes
        .iter()
        .all(|n| matches!(n, Node::Str(StrPlan::Const(_))))
    {
        let items = nodes.into_iter().map(|n| match n {
            Node::Str(StrPlan::Const(s)) => Some(s),
            _ => None,
        });
        return items.collect::<Option<Vec<_>>>().map(Node::StrList);
    }
    if nodes
        .iter()
        .all(|n| matches!(n, Node::Int(IntPlan::Const(_))))
    {
        let items = nodes.into_iter().map(|n| match n {
            Node::Int(IntPlan::Const(i)) => Some(i),
            _ => None,
        });
        return items.collect::<Option<Vec<_>>>().map(Node::IntList);
    }
    None
}

/// A call whose arguments (target first, when `method`) are all planned.
fn call_node(func: &str, method: bool, args: Vec<Node>) -> Option<Node> {
    let mut args = args.into_iter();
    let (a, b) = (args.next(), args.next());
    if args.next().is_some() {
        return None;
    }
    Some(Node::Bool(match (func, a, b) {
        (operators::LOGICAL_NOT, Some(Node::Bool(p)), None) => BoolPlan::Not(Box::new(p)),
        (operators::LOGICAL_AND, Some(Node::Bool(l)), Some(Node::Bool(r))) => {
            BoolPlan::And(Box::new(l), Box::new(r))
        }
        (operators::LOGICAL_OR, Some(Node::Bool(l)), Some(Node::Bool(r))) => {
            BoolPlan::Or(Box::new(l), Box::new(r))
        }
        (operators::NEGATE, Some(Node::Int(p)), None) => {
            return Some(Node::Int(IntPlan::Neg(Box::new(p))))
        }
        (func, Some(Node::Int(l)), Some(Node::Int(r))) => {
            if let Some(op) = arith(func) {
                return Some(Node::Int(IntPlan::Arith(op, Box::new(l), Box::new(r))));
            }
            BoolPlan::Int(cmp(func)?, l, r)
        }
        (operators::EQUALS, Some(Node::Str(l)), Some(Node::Str(r))) => BoolPlan::StrEq(false, l, r),
        (operators::NOT_EQUALS, Some(Node::Str(l)), Some(Node::Str(r))) => {
            BoolPlan::StrEq(true, l, r)
        }
        (operators::IN, Some(Node::Str(l)), Some(Node::List(List::DiagnosisCodes))) => {
            BoolPlan::StrIn(l, StrSet::DiagnosisCodes)
        }
        (operators::IN, Some(Node::Str(l)), Some(Node::StrList(items))) => {
            BoolPlan::StrIn(l, StrSet::Literal(items))
        }
        (operators::IN, Some(Node::Int(l)), Some(Node::IntList(items))) => {
            BoolPlan::IntIn(l, items)
        }
        ("size", Some(Node::List(list)), None) => return Some(Node::Int(IntPlan::Size(list))),
        (
            func @ (operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS),
            Some(Node::Str(l)),
            Some(Node::Str(r)),
        ) => BoolPlan::StrOrd(cmp(func)?, l, r),
        (func, Some(Node::Str(l)), Some(Node::Str(r))) if method => {
            let test = match func {
                "startsWith" => StrTest::StartsWith,
                "endsWith" => StrTest::EndsWith,
                "contains" => StrTest::Contains,
                _ => return None,
            };
            BoolPlan::StrTest(test, l, r)
        }
        _ => return None,
    }))
}

fn arith(func: &str) -> Option<Arith> {
    Some(match func {
        operators::ADD => Arith::Add,
        operators::SUBSTRACT => Arith::Sub,
        operators::MULTIPLY => Arith::Mul,
        operators::DIVIDE => Arith::Div,
        operators::MODULO => Arith::Rem,
        _ => return None,
    })
}

fn cmp(func: &str) -> Option<Cmp> {
    Some(match func {
        operators::EQUALS => Cmp::Eq,
        operators::NOT_EQUALS => Cmp::Ne,
        operators::LESS => Cmp::Lt,
        operators::LESS_EQUALS => Cmp::Le,
        operators::GREATER => Cmp::Gt,
        operators::GREATER_EQUALS => Cmp::Ge,
        _ => return None,
    })
}
