//! The interpreter: walks the parsed (macro-expanded) AST, counting cel-go's
//! runtime cost as it goes so that a per-call limit stops runaway rules.

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr, LiteralValue};

use crate::EvalError;
use crate::functions::{self, CallContext, call_cost};
use crate::value::{EvalValue, Key};

/// Namespaces of global functions written as `ns.fn(...)`.
pub(crate) const NAMESPACES: &[&str] = &["optional", "sets", "format", "ip", "strings"];

/// Type identifiers usable as values (`type(x) == int`).
pub(crate) const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "list",
    "map",
    "null_type",
    "type",
];

/// `google.protobuf.Duration` and `google.protobuf.Timestamp` as type values.
pub(crate) fn qualified_type(e: &IdedExpr) -> Option<&'static str> {
    let Expr::Select(s) = &e.expr else {
        return None;
    };
    let Expr::Select(p) = &s.operand.expr else {
        return None;
    };
    let Expr::Ident(g) = &p.operand.expr else {
        return None;
    };
    if g != "google" || p.field != "protobuf" || p.test {
        return None;
    }
    match s.field.as_str() {
        "Duration" => Some("google.protobuf.Duration"),
        "Timestamp" => Some("google.protobuf.Timestamp"),
        _ => None,
    }
}

/// The deepest the interpreter recurses; the parser bounds nesting well
/// below this, so it is a second guard for the stack.
const MAX_DEPTH: usize = 1000;

/// cel-go's costs for creating aggregates.
pub(crate) const LIST_CREATE_COST: u64 = 10;
pub(crate) const MAP_CREATE_COST: u64 = 30;

/// Variables for an evaluation.
#[derive(Debug, Clone, Default)]
pub struct Activation {
    vars: BTreeMap<String, EvalValue>,
}

impl Activation {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, name: impl Into<String>, value: EvalValue) -> &mut Self {
        self.vars.insert(name.into(), value);
        self
    }

    pub fn get(&self, name: &str) -> Option<&EvalValue> {
        self.vars.get(name)
    }
}

pub(crate) struct Interp<'a> {
    vars: &'a Activation,
    /// Comprehension variables. cel-go's accumulators can hold an error (an
    /// `exists` step that failed on one element), so a slot is a result.
    scopes: Vec<(String, Result<EvalValue, EvalError>)>,
    pub(crate) cost: u64,
    limit: u64,
    cx: CallContext,
    depth: usize,
}

impl<'a> Interp<'a> {
    pub(crate) fn new(vars: &'a Activation, limit: u64) -> Self {
        Interp {
            vars,
            scopes: Vec::new(),
            cost: 0,
            limit,
            cx: CallContext::default(),
            depth: 0,
        }
    }

    fn charge(&mut self, c: u64) -> Result<(), EvalError> {
        self.cost = self.cost.saturating_add(c);
        if self.cost > self.limit {
            return Err(EvalError::CostLimitExceeded);
        }
        Ok(())
    }

    fn lookup(&self, name: &str) -> Option<Result<EvalValue, EvalError>> {
        if let Some((_, v)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return Some(v.clone());
        }
        self.vars.get(name).cloned().map(Ok)
    }

    pub(crate) fn eval(&mut self, e: &IdedExpr) -> Result<EvalValue, EvalError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            self.depth -= 1;
            return Err(EvalError::Other("max recursion depth exceeded".into()));
        }
        let r = self.eval_inner(e);
        self.depth -= 1;
        r
    }

    fn eval_inner(&mut self, e: &IdedExpr) -> Result<EvalValue, EvalError> {
        match &e.expr {
            Expr::Literal(l) => Ok(literal(l)),
            Expr::Ident(name) => {
                self.charge(1)?;
                match self.lookup(name) {
                    Some(v) => v,
                    None if TYPE_NAMES.contains(&name.as_str()) => {
                        Ok(EvalValue::Type(Arc::from(name.as_str())))
                    }
                    None => Err(EvalError::Other(format!("no such attribute: {name}"))),
                }
            }
            Expr::Select(s) if !s.test && self.lookup("google").is_none() => {
                if let Some(t) = qualified_type(e) {
                    self.charge(1)?;
                    return Ok(EvalValue::Type(Arc::from(t)));
                }
                let operand = self.eval(&s.operand)?;
                self.charge(1)?;
                select(&operand, &s.field, s.test)
            }
            Expr::Select(s) => {
                let operand = self.eval(&s.operand)?;
                self.charge(1)?;
                select(&operand, &s.field, s.test)
            }
            Expr::Call(c) => self.eval_call(&c.func_name, c.target.as_deref(), &c.args),
            Expr::List(l) => {
                self.charge(LIST_CREATE_COST)?;
                let mut items = Vec::with_capacity(l.elements.len());
                for (i, el) in l.elements.iter().enumerate() {
                    let v = self.eval(el)?;
                    if l.optional_indices.contains(&i) {
                        match v {
                            EvalValue::Optional(Some(v)) => items.push(*v),
                            EvalValue::Optional(None) => {}
                            _ => return Err(functions::no_overload()),
                        }
                    } else {
                        items.push(v);
                    }
                }
                Ok(EvalValue::list(items))
            }
            Expr::Map(m) => {
                self.charge(MAP_CREATE_COST)?;
                let mut entries = BTreeMap::new();
                for entry in &m.entries {
                    let EntryExpr::MapEntry(me) = &entry.expr else {
                        return Err(EvalError::Other("unsupported map entry".into()));
                    };
                    let k = self.eval(&me.key)?;
                    let mut v = self.eval(&me.value)?;
                    if me.optional {
                        match v {
                            EvalValue::Optional(Some(inner)) => v = *inner,
                            EvalValue::Optional(None) => continue,
                            _ => return Err(functions::no_overload()),
                        }
                    }
                    let key = Key::from_value(&k).ok_or_else(|| {
                        EvalError::Other(format!("unsupported key type: {}", k.type_name()))
                    })?;
                    if entries.insert(key, v).is_some() {
                        return Err(EvalError::Other(format!("Failed with repeated key: {k}")));
                    }
                }
                Ok(EvalValue::map(entries))
            }
            Expr::Comprehension(c) => {
                let range = self.eval(&c.iter_range)?;
                let pairs: Vec<(EvalValue, EvalValue)> = match &range {
                    EvalValue::List(l) => l
                        .items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (EvalValue::Int(i as i64), v.clone()))
                        .collect(),
                    EvalValue::Map(m) => m
                        .entries
                        .iter()
                        .map(|(k, v)| (k.to_value(), v.clone()))
                        .collect(),
                    _ => return Err(functions::no_overload()),
                };
                let accu = self.eval(&c.accu_init)?;
                let base = self.scopes.len();
                self.scopes.push((c.accu_var.clone(), Ok(accu)));
                let r = self.run_loop(c, pairs, matches!(range, EvalValue::List(_)), base);
                self.scopes.truncate(base);
                r
            }
            Expr::Struct(_) => Err(EvalError::Other(
                "message construction is not supported".into(),
            )),
            Expr::Unspecified => Err(EvalError::Other("unspecified expression".into())),
        }
    }

    fn run_loop(
        &mut self,
        c: &cel::common::ast::ComprehensionExpr,
        pairs: Vec<(EvalValue, EvalValue)>,
        is_list: bool,
        base: usize,
    ) -> Result<EvalValue, EvalError> {
        for (first, second) in pairs {
            self.scopes.truncate(base + 1);
            match &c.iter_var2 {
                // Two-variable comprehensions: (index, value) or (key, value).
                Some(v2) => {
                    self.scopes.push((c.iter_var.clone(), Ok(first)));
                    self.scopes.push((v2.clone(), Ok(second)));
                }
                None => {
                    let v = if is_list { second } else { first };
                    self.scopes.push((c.iter_var.clone(), Ok(v)));
                }
            }
            match self.eval(&c.loop_cond)? {
                EvalValue::Bool(true) => {}
                EvalValue::Bool(false) => break,
                _ => return Err(functions::no_overload()),
            }
            let step = self.eval(&c.loop_step);
            if let Err(EvalError::CostLimitExceeded) = step {
                return step;
            }
            self.scopes[base].1 = step;
        }
        self.scopes.truncate(base + 1);
        self.eval(&c.result)
    }

    fn eval_call(
        &mut self,
        name: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Result<EvalValue, EvalError> {
        match (name, args) {
            ("_&&_", [a, b]) => return self.logic(a, b, false),
            ("_||_", [a, b]) => return self.logic(a, b, true),
            ("_?_:_", [c, t, f]) => {
                return match self.eval(c)? {
                    EvalValue::Bool(true) => self.eval(t),
                    EvalValue::Bool(false) => self.eval(f),
                    _ => Err(functions::no_overload()),
                };
            }
            ("@not_strictly_false", [a]) => {
                return Ok(EvalValue::Bool(!matches!(
                    self.eval(a),
                    Ok(EvalValue::Bool(false))
                )));
            }
            ("_?._", [operand, field]) => {
                let v = self.eval(operand)?;
                let Expr::Literal(LiteralValue::String(f)) = &field.expr else {
                    return Err(functions::no_overload());
                };
                self.charge(1)?;
                return optional_select(&v, f.inner());
            }
            // The accumulator of map/filter grows in place: cel-go's mutable
            // list keeps these macros linear.
            ("_+_", [a, b]) if matches!(&a.expr, Expr::Ident(n) if n.starts_with('@')) => {
                if let Expr::Ident(n) = &a.expr
                    && let Some(slot) = self.scopes.iter().rposition(|(s, _)| s == n)
                {
                    let rhs = self.eval(b)?;
                    let mut lhs = std::mem::replace(&mut self.scopes[slot].1, Ok(EvalValue::Null))?;
                    if let (EvalValue::List(l), EvalValue::List(r)) = (&mut lhs, &rhs)
                        && l.list_type == crate::value::ListType::Atomic
                    {
                        self.charge(1 + (r.items.len() as u64).div_ceil(10))?;
                        Arc::make_mut(l).items.extend(r.items.iter().cloned());
                        return Ok(lhs);
                    }
                    let cost = call_cost(name, None, &[lhs.cost_size(), rhs.cost_size()]);
                    self.charge(cost)?;
                    return functions::call(name, None, &[lhs, rhs], &mut self.cx);
                }
            }
            _ => {}
        }
        // `ns.fn(...)`: a namespaced global function, unless `ns` is a variable.
        let mut qualified = None;
        if let Some(t) = target
            && let Expr::Ident(ns) = &t.expr
            && NAMESPACES.contains(&ns.as_str())
            && self.lookup(ns).is_none()
        {
            qualified = Some(format!("{ns}.{name}"));
        }
        let (name, target_val) = match (&qualified, target) {
            (Some(q), _) => (q.as_str(), None),
            (None, Some(t)) => (name, Some(self.eval(t)?)),
            (None, None) => (name, None),
        };
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            vals.push(self.eval(a)?);
        }
        let sizes: Vec<u64> = vals.iter().map(EvalValue::cost_size).collect();
        let cost = call_cost(name, target_val.as_ref().map(EvalValue::cost_size), &sizes);
        self.charge(cost)?;
        functions::call(name, target_val.as_ref(), &vals, &mut self.cx)
    }

    /// `&&` and `||` with CEL's commutative error handling: a decisive
    /// operand wins over an error in the other.
    fn logic(&mut self, a: &IdedExpr, b: &IdedExpr, or: bool) -> Result<EvalValue, EvalError> {
        let decisive = or;
        let lhs = self.eval(a);
        if let Ok(EvalValue::Bool(v)) = lhs
            && v == decisive
        {
            return Ok(EvalValue::Bool(decisive));
        }
        // Cost limits are never absorbed.
        if let Err(EvalError::CostLimitExceeded) = lhs {
            return lhs;
        }
        let rhs = self.eval(b);
        match (lhs, rhs) {
            (_, Ok(EvalValue::Bool(v))) if v == decisive => Ok(EvalValue::Bool(decisive)),
            (Ok(EvalValue::Bool(_)), Ok(EvalValue::Bool(_))) => Ok(EvalValue::Bool(!decisive)),
            (Err(e), _) => Err(e),
            (_, Err(e)) => Err(e),
            _ => Err(functions::no_overload()),
        }
    }
}

fn literal(l: &LiteralValue) -> EvalValue {
    match l {
        LiteralValue::Boolean(b) => EvalValue::Bool(*b.inner()),
        LiteralValue::Bytes(b) => EvalValue::Bytes(b.inner().into()),
        LiteralValue::Double(d) => EvalValue::Double(*d.inner()),
        LiteralValue::Int(i) => EvalValue::Int(*i.inner()),
        LiteralValue::Null => EvalValue::Null,
        LiteralValue::String(s) => EvalValue::string(s.inner()),
        LiteralValue::UInt(u) => EvalValue::Uint(*u.inner()),
    }
}

fn select(v: &EvalValue, field: &str, test: bool) -> Result<EvalValue, EvalError> {
    match v {
        EvalValue::Map(m) => {
            let f = m.get_str(field);
            if test {
                Ok(EvalValue::Bool(f.is_some()))
            } else {
                f.cloned()
                    .ok_or_else(|| EvalError::NoSuchKey(field.to_string()))
            }
        }
        // Selecting through an optional chains the optional (`a.?b.c`).
        EvalValue::Optional(o) => {
            if test {
                return Ok(EvalValue::Bool(match o {
                    Some(inner) => matches!(select(inner, field, true)?, EvalValue::Bool(true)),
                    None => false,
                }));
            }
            match o {
                Some(inner) => optional_select(inner, field),
                None => Ok(EvalValue::Optional(None)),
            }
        }
        EvalValue::Url(_) | EvalValue::Quantity(_) => Err(functions::no_overload()),
        _ => Err(EvalError::Other(format!(
            "type '{}' does not support field selection",
            v.type_name()
        ))),
    }
}

fn optional_select(v: &EvalValue, field: &str) -> Result<EvalValue, EvalError> {
    match v {
        EvalValue::Map(m) => Ok(EvalValue::Optional(
            m.get_str(field).map(|x| Box::new(x.clone())),
        )),
        EvalValue::Optional(None) => Ok(EvalValue::Optional(None)),
        EvalValue::Optional(Some(inner)) => optional_select(inner, field),
        _ => Err(functions::no_overload()),
    }
}
