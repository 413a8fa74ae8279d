//! Static checks of a compiled CEL expression, on its AST: the variables it reads
//! freely (not bound by a comprehension), the functions it calls, how deeply its
//! comprehensions nest and how large it is. These are what make evaluation bounded
//! and what lets a rulebook with a typo be refused when it is created.

use std::collections::BTreeSet;

use cel::common::ast::{EntryExpr, Expr};
use cel::IdedExpr;

/// The variables a rule may read (contract: Rulebooks).
pub const VARIABLES: [&str; 6] = [
    "claim",
    "provider",
    "contract",
    "member_history",
    "member",
    "line",
];

/// The most nested comprehensions (`all`, `exists`, `exists_one`, `map`, `filter`) an
/// expression may have: with lists bounded by intake, two levels stay cheap, while deep
/// nesting multiplies work by the list size at each level.
pub const MAX_COMPREHENSION_DEPTH: usize = 2;
/// The most AST nodes an expression may have.
pub const MAX_NODES: usize = 400;

/// The functions and operators of standard CEL that rules may call.
const FUNCTIONS: &[&str] = &[
    // operators
    "_+_",
    "_-_",
    "_*_",
    "_/_",
    "_%_",
    "-_",
    "!_",
    "_==_",
    "_!=_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "_&&_",
    "_||_",
    "_?_:_",
    "_[_]",
    "@in",
    "@not_strictly_false",
    "_[?_]",
    "_?._",
    // functions and methods
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "int",
    "uint",
    "double",
    "string",
    "bool",
    "type",
    "dyn",
    "has",
];

/// The fields of each variable that evaluation can hand out directly, without
/// building the variable's whole map (see `facts`).
pub const FIELDS: &[&str] = &[
    "claim.claim_id",
    "claim.member_id",
    "claim.provider_id",
    "claim.claim_amount",
    "claim.service_date",
    "claim.lines",
    "claim.diagnosis_codes",
    "claim.metadata",
    "provider.provider_id",
    "provider.name",
    "provider.npi",
    "provider.specialty",
    "contract.contract_id",
    "contract.fee_schedule",
    "member_history.claims_last_24h",
    "member_history.amount_last_30d",
];

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Analysis {
    pub free_variables: BTreeSet<String>,
    /// The names evaluation must be able to resolve: a known `variable.field`, or the
    /// whole variable where the expression uses it otherwise.
    pub names: BTreeSet<String>,
    pub functions: BTreeSet<String>,
    pub max_comprehension_depth: usize,
    pub nodes: usize,
}

impl Analysis {
    pub fn of(expr: &IdedExpr) -> Self {
        let mut a = Analysis::default();
        let mut bound = Vec::new();
        walk(expr, &mut bound, 0, &mut a);
        a
    }

    /// The first reason this expression may not be used in a rule, if any.
    pub fn problem(&self) -> Option<String> {
        if let Some(v) = self
            .free_variables
            .iter()
            .find(|v| !VARIABLES.contains(&v.as_str()))
        {
            return Some(format!(
                "unknown variable `{v}`; rules may use {}",
                VARIABLES.join(", ")
            ));
        }
        if let Some(f) = self
            .functions
            .iter()
            .find(|f| !FUNCTIONS.contains(&f.as_str()))
        {
            return Some(format!("unknown function `{f}`"));
        }
        if self.max_comprehension_depth > MAX_COMPREHENSION_DEPTH {
            return Some(format!(
                "comprehensions nest {} deep; at most {MAX_COMPREHENSION_DEPTH} are allowed",
                self.max_comprehension_depth
            ));
        }
        if self.nodes > MAX_NODES {
            return Some(format!(
                "the expression is too large ({} nodes; at most {MAX_NODES})",
                self.nodes
            ));
        }
        None
    }
}

fn walk(e: &IdedExpr, bound: &mut Vec<String>, depth: usize, a: &mut Analysis) {
    a.nodes += 1;
    match &e.expr {
        Expr::Unspecified | Expr::Literal(_) => {}
        Expr::Ident(name) => {
            if !bound.iter().any(|b| b == name) {
                a.free_variables.insert(name.clone());
                a.names.insert(name.clone());
            }
        }
        Expr::Call(call) => {
            a.functions.insert(call.func_name.clone());
            if let Some(t) = &call.target {
                walk(t, bound, depth, a);
            }
            for arg in &call.args {
                walk(arg, bound, depth, a);
            }
        }
        Expr::Select(sel) => {
            if let Expr::Ident(root) = &sel.operand.expr {
                let path = format!("{root}.{}", sel.field);
                if !sel.test && !bound.iter().any(|b| b == root) && FIELDS.contains(&path.as_str())
                {
                    a.nodes += 1;
                    a.free_variables.insert(root.clone());
                    a.names.insert(path);
                    return;
                }
            }
            walk(&sel.operand, bound, depth, a)
        }
        Expr::List(list) => {
            for el in &list.elements {
                walk(el, bound, depth, a);
            }
        }
        Expr::Map(map) => walk_entries(map.entries.iter().map(|e| &e.expr), bound, depth, a),
        Expr::Struct(st) => walk_entries(st.entries.iter().map(|e| &e.expr), bound, depth, a),
        Expr::Comprehension(c) => {
            let inner = depth + 1;
            a.max_comprehension_depth = a.max_comprehension_depth.max(inner);
            walk(&c.iter_range, bound, depth, a);
            walk(&c.accu_init, bound, depth, a);
            let before = bound.len();
            bound.push(c.iter_var.clone());
            if let Some(v2) = &c.iter_var2 {
                bound.push(v2.clone());
            }
            bound.push(c.accu_var.clone());
            walk(&c.loop_cond, bound, inner, a);
            walk(&c.loop_step, bound, inner, a);
            walk(&c.result, bound, inner, a);
            bound.truncate(before);
        }
    }
}

fn walk_entries<'a>(
    entries: impl Iterator<Item = &'a EntryExpr>,
    bound: &mut Vec<String>,
    depth: usize,
    a: &mut Analysis,
) {
    for entry in entries {
        match entry {
            EntryExpr::MapEntry(m) => {
                walk(&m.key, bound, depth, a);
                walk(&m.value, bound, depth, a);
            }
            EntryExpr::StructField(f) => walk(&f.value, bound, depth, a),
        }
    }
}
