//! A type checker and static cost estimator over the parsed AST: the part of
//! cel-go's checker that CRD authors meet (undeclared references, undefined
//! fields, mismatched overloads, non-bool rules) and an estimate of the worst
//! case cost in cel-go's units from the schema's size bounds.
//!
//! It is deliberately permissive: where a type is `dyn` (int-or-string,
//! admission objects) everything is accepted and left to runtime, so a rule
//! upstream accepts is never refused here; a rule upstream refuses may still
//! compile here when the refusal needs cel-go's full type inference.

use std::sync::Arc;

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr, LiteralValue};

use crate::eval::{LIST_CREATE_COST, MAP_CREATE_COST, NAMESPACES};
use crate::functions::call_cost;
use crate::schema::{DeclKind, DeclType};

pub(crate) const UNBOUNDED: u64 = u64::MAX;

/// A static type with the largest size a value of it can have (string bytes,
/// list items, map entries).
#[derive(Clone, Debug)]
pub(crate) struct T {
    pub ty: Ty,
    pub max: u64,
}

#[derive(Clone, Debug)]
pub(crate) enum Ty {
    Dyn,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    List(Box<T>),
    Map(Box<T>, Box<T>),
    Object(Arc<DeclType>),
    Type,
    Optional(Box<T>),
    Opaque(&'static str),
}

impl T {
    fn new(ty: Ty) -> T {
        T { ty, max: 1 }
    }
    pub(crate) fn dyn_() -> T {
        T {
            ty: Ty::Dyn,
            max: UNBOUNDED,
        }
    }
    fn sized(ty: Ty, max: u64) -> T {
        T { ty, max }
    }

    pub(crate) fn from_decl(d: &Arc<DeclType>) -> T {
        match &d.kind {
            DeclKind::Dyn => T::sized(Ty::Dyn, d.max_elements),
            DeclKind::Bool => T::new(Ty::Bool),
            DeclKind::Int => T::new(Ty::Int),
            DeclKind::Double => T::new(Ty::Double),
            DeclKind::String => T::sized(Ty::String, d.max_elements),
            DeclKind::Bytes => T::sized(Ty::Bytes, d.max_elements),
            DeclKind::Duration => T::new(Ty::Duration),
            DeclKind::Timestamp => T::new(Ty::Timestamp),
            DeclKind::List { elem, .. } => {
                T::sized(Ty::List(Box::new(T::from_decl(elem))), d.max_elements)
            }
            DeclKind::Map { elem } => T::sized(
                Ty::Map(
                    Box::new(T::sized(Ty::String, UNBOUNDED)),
                    Box::new(T::from_decl(elem)),
                ),
                d.max_elements,
            ),
            DeclKind::Object { .. } => T::sized(Ty::Object(d.clone()), 1),
        }
    }

    fn is_dyn(&self) -> bool {
        matches!(self.ty, Ty::Dyn)
    }

    /// cel-go's type name, as its error messages spell it.
    pub(crate) fn name(&self) -> String {
        match &self.ty {
            Ty::Dyn => "dyn".into(),
            Ty::Null => "null".into(),
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Uint => "uint".into(),
            Ty::Double => "double".into(),
            Ty::String => "string".into(),
            Ty::Bytes => "bytes".into(),
            Ty::Duration => "google.protobuf.Duration".into(),
            Ty::Timestamp => "google.protobuf.Timestamp".into(),
            Ty::List(e) => format!("list({})", e.name()),
            Ty::Map(k, v) => format!("map({}, {})", k.name(), v.name()),
            Ty::Object(d) => match &d.kind {
                DeclKind::Object { name, .. } => name.to_string(),
                _ => "object".into(),
            },
            Ty::Type => "type".into(),
            Ty::Optional(t) => format!("optional_type({})", t.name()),
            Ty::Opaque(n) => (*n).into(),
        }
    }
}

/// Whether two types can unify (`dyn` unifies with anything).
fn same(a: &T, b: &T) -> bool {
    match (&a.ty, &b.ty) {
        (Ty::Dyn, _) | (_, Ty::Dyn) => true,
        (Ty::List(x), Ty::List(y)) => same(x, y),
        (Ty::Map(k1, v1), Ty::Map(k2, v2)) => same(k1, k2) && same(v1, v2),
        (Ty::Optional(x), Ty::Optional(y)) => same(x, y),
        (Ty::Object(_), Ty::Object(_)) => true,
        (Ty::Opaque(x), Ty::Opaque(y)) => x == y,
        // `null` compares with messages, optionals and itself.
        (Ty::Null, Ty::Null | Ty::Object(_) | Ty::Optional(_)) => true,
        (Ty::Object(_) | Ty::Optional(_), Ty::Null) => true,
        (x, y) => std::mem::discriminant(x) == std::mem::discriminant(y),
    }
}

fn is_num(t: &T) -> bool {
    matches!(t.ty, Ty::Int | Ty::Uint | Ty::Double | Ty::Dyn)
}

pub(crate) struct CheckError {
    pub id: u64,
    pub msg: String,
}

/// Checks `e`, returning its type and estimated worst-case cost.
pub(crate) struct Checker<'a> {
    vars: &'a [(String, T)],
    scopes: Vec<(String, T)>,
    pub errors: Vec<CheckError>,
    /// Errors cel-go raises when building the program (constant regexes).
    pub instantiation_errors: Vec<String>,
    depth: usize,
}

impl<'a> Checker<'a> {
    pub(crate) fn new(vars: &'a [(String, T)]) -> Self {
        Checker {
            vars,
            scopes: Vec::new(),
            errors: Vec::new(),
            instantiation_errors: Vec::new(),
            depth: 0,
        }
    }

    fn err(&mut self, id: u64, msg: String) -> (T, u64) {
        self.errors.push(CheckError { id, msg });
        (T::dyn_(), 0)
    }

    fn lookup(&self, name: &str) -> Option<&T> {
        self.scopes
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
            .or_else(|| self.vars.iter().find(|(n, _)| n == name).map(|(_, t)| t))
    }

    pub(crate) fn check(&mut self, e: &IdedExpr) -> (T, u64) {
        self.depth += 1;
        let r = if self.depth > 1000 {
            (T::dyn_(), UNBOUNDED)
        } else {
            self.check_inner(e)
        };
        self.depth -= 1;
        r
    }

    fn check_inner(&mut self, e: &IdedExpr) -> (T, u64) {
        match &e.expr {
            Expr::Literal(l) => (
                match l {
                    LiteralValue::Boolean(_) => T::new(Ty::Bool),
                    LiteralValue::Bytes(b) => T::sized(Ty::Bytes, b.inner().len() as u64),
                    LiteralValue::Double(_) => T::new(Ty::Double),
                    LiteralValue::Int(_) => T::new(Ty::Int),
                    LiteralValue::Null => T::new(Ty::Null),
                    LiteralValue::String(s) => T::sized(Ty::String, s.inner().len() as u64),
                    LiteralValue::UInt(_) => T::new(Ty::Uint),
                },
                0,
            ),
            Expr::Ident(name) => match self.lookup(name) {
                Some(t) => (t.clone(), 1),
                None => match name.as_str() {
                    // Type identifiers (`type(x) == string`).
                    n if crate::eval::TYPE_NAMES.contains(&n) => (T::new(Ty::Type), 1),
                    _ => self.err(
                        e.id,
                        format!("undeclared reference to '{name}' (in container '')"),
                    ),
                },
            },
            Expr::Select(s) => {
                if !s.test
                    && self.lookup("google").is_none()
                    && crate::eval::qualified_type(e).is_some()
                {
                    return (T::new(Ty::Type), 1);
                }
                let (operand, cost) = self.check(&s.operand);
                let t = self.select(e.id, &operand, &s.field);
                let t = if s.test { T::new(Ty::Bool) } else { t };
                (t, cost.saturating_add(1))
            }
            Expr::Call(c) => self.call(e.id, &c.func_name, c.target.as_deref(), &c.args),
            Expr::List(l) => {
                let mut cost = LIST_CREATE_COST;
                let mut elem: Option<T> = None;
                for (i, el) in l.elements.iter().enumerate() {
                    let (mut t, c) = self.check(el);
                    cost = cost.saturating_add(c);
                    if l.optional_indices.contains(&i)
                        && let Ty::Optional(inner) = t.ty
                    {
                        t = *inner;
                    }
                    elem = Some(match elem {
                        None => t,
                        // Kubernetes enables HomogeneousAggregateLiterals.
                        Some(prev) if same(&prev, &t) => {
                            if prev.is_dyn() {
                                t
                            } else {
                                T::sized(prev.ty, prev.max.max(t.max))
                            }
                        }
                        Some(prev) => {
                            return self.err(
                                el.id,
                                format!("expected type '{}' but found '{}'", prev.name(), t.name()),
                            );
                        }
                    });
                }
                let n = l.elements.len() as u64;
                (
                    T::sized(Ty::List(Box::new(elem.unwrap_or_else(T::dyn_))), n),
                    cost,
                )
            }
            Expr::Map(m) => {
                let mut cost = MAP_CREATE_COST;
                let mut kt = None;
                let mut vt = None;
                for entry in &m.entries {
                    let EntryExpr::MapEntry(me) = &entry.expr else {
                        continue;
                    };
                    let (k, c1) = self.check(&me.key);
                    let (v, c2) = self.check(&me.value);
                    cost = cost.saturating_add(c1).saturating_add(c2);
                    kt.get_or_insert(k);
                    vt.get_or_insert(v);
                }
                (
                    T::sized(
                        Ty::Map(
                            Box::new(kt.unwrap_or_else(T::dyn_)),
                            Box::new(vt.unwrap_or_else(T::dyn_)),
                        ),
                        m.entries.len() as u64,
                    ),
                    cost,
                )
            }
            Expr::Struct(s) => self.err(e.id, format!("undeclared reference to '{}'", s.type_name)),
            Expr::Comprehension(c) => {
                let (range, rc) = self.check(&c.iter_range);
                let (iter_t, iter2_t) = match &range.ty {
                    Ty::List(el) => (T::new(Ty::Int), (**el).clone()),
                    Ty::Map(k, v) => ((**k).clone(), (**v).clone()),
                    Ty::Dyn => (T::dyn_(), T::dyn_()),
                    _ => {
                        return self.err(
                            c.iter_range.id,
                            format!(
                                "expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)",
                                range.name()
                            ),
                        );
                    }
                };
                let (mut accu, ac) = self.check(&c.accu_init);
                // map/filter accumulate at most one element per iteration.
                if let Ty::List(_) = accu.ty {
                    accu.max = range.max;
                }
                let base = self.scopes.len();
                match &c.iter_var2 {
                    Some(v2) => {
                        self.scopes.push((c.iter_var.clone(), iter_t));
                        self.scopes.push((v2.clone(), iter2_t));
                    }
                    None => {
                        let v = if matches!(range.ty, Ty::List(_)) {
                            iter2_t
                        } else {
                            iter_t
                        };
                        self.scopes.push((c.iter_var.clone(), v));
                    }
                }
                self.scopes.push((c.accu_var.clone(), accu.clone()));
                let (_, cc) = self.check(&c.loop_cond);
                let (mut step, sc) = self.check(&c.loop_step);
                if let Ty::List(_) = step.ty {
                    step.max = range.max;
                }
                // The accumulator takes the step's (better known) type.
                let accu_t = if accu.is_dyn() || matches!(&accu.ty, Ty::List(e) if e.is_dyn()) {
                    step
                } else {
                    accu
                };
                self.scopes.truncate(base);
                self.scopes.push((c.accu_var.clone(), accu_t));
                let (result, resc) = self.check(&c.result);
                self.scopes.truncate(base);
                let per_iter = cc.saturating_add(sc);
                let cost = rc
                    .saturating_add(ac)
                    .saturating_add(range.max.saturating_mul(per_iter))
                    .saturating_add(resc);
                (result, cost)
            }
            Expr::Unspecified => (T::dyn_(), 0),
        }
    }

    fn select(&mut self, id: u64, operand: &T, field: &str) -> T {
        match &operand.ty {
            Ty::Object(d) => match &d.kind {
                DeclKind::Object { fields, .. } => match fields.get(field) {
                    Some(f) => T::from_decl(f),
                    None => {
                        self.err(id, format!("undefined field '{field}'"));
                        T::dyn_()
                    }
                },
                _ => T::dyn_(),
            },
            Ty::Map(_, v) => (**v).clone(),
            Ty::Optional(inner) => {
                let t = self.select(id, inner, field);
                T::new(Ty::Optional(Box::new(t)))
            }
            Ty::Dyn => T::dyn_(),
            _ => {
                self.err(
                    id,
                    format!("type '{}' does not support field selection", operand.name()),
                );
                T::dyn_()
            }
        }
    }

    fn call(
        &mut self,
        id: u64,
        name: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> (T, u64) {
        // Namespaced global functions (`sets.contains(...)`).
        let mut qualified = None;
        if let Some(t) = target
            && let Expr::Ident(ns) = &t.expr
            && NAMESPACES.contains(&ns.as_str())
            && self.lookup(ns).is_none()
        {
            qualified = Some(format!("{ns}.{name}"));
        }
        if name == "_?._" {
            let (operand, c) = match args.first() {
                Some(a) => self.check(a),
                None => (T::dyn_(), 0),
            };
            let field = match args.get(1).map(|a| &a.expr) {
                Some(Expr::Literal(LiteralValue::String(s))) => s.inner().to_string(),
                _ => String::new(),
            };
            let inner = match &operand.ty {
                Ty::Optional(o) => (**o).clone(),
                _ => operand,
            };
            let t = self.select(id, &inner, &field);
            let t = match t.ty {
                Ty::Optional(_) => t,
                _ => T::new(Ty::Optional(Box::new(t))),
            };
            return (t, c.saturating_add(1));
        }
        let mut cost = 0u64;
        let target_t = match (&qualified, target) {
            (None, Some(t)) => {
                let (tt, c) = self.check(t);
                cost = cost.saturating_add(c);
                Some(tt)
            }
            _ => None,
        };
        let mut arg_ts = Vec::with_capacity(args.len());
        for a in args {
            let (t, c) = self.check(a);
            cost = cost.saturating_add(c);
            arg_ts.push(t);
        }
        let fname = qualified.as_deref().unwrap_or(name);
        // cel-go compiles constant patterns when building the program.
        if matches!(fname, "matches" | "find" | "findAll") {
            let pattern = if target.is_some() {
                args.first()
            } else {
                args.get(1)
            };
            if let Some(Expr::Literal(LiteralValue::String(p))) = pattern.map(|p| &p.expr)
                && let Err(e) = regex::Regex::new(p.inner())
            {
                let detail = e.to_string();
                let last = detail.lines().last().unwrap_or("").trim();
                let last = last.strip_prefix("error: ").unwrap_or(last);
                self.instantiation_errors
                    .push(format!("error parsing regexp: {last}: `{}`", p.inner()));
            }
        }
        let result = match signature(fname, target_t.as_ref(), &arg_ts) {
            Sig::Ok(t) => t,
            Sig::NoMatch => {
                let types: Vec<String> = arg_ts.iter().map(T::name).collect();
                let applied = match &target_t {
                    Some(t) => format!("{}.({})", t.name(), types.join(", ")),
                    None => format!("({})", types.join(", ")),
                };
                return self.err(
                    id,
                    format!("found no matching overload for '{fname}' applied to '{applied}'"),
                );
            }
            Sig::Undeclared => {
                return self.err(
                    id,
                    format!("undeclared reference to '{fname}' (in container '')"),
                );
            }
        };
        let this = match fname {
            // Only one branch of these runs.
            "_?_:_" | "_&&_" | "_||_" => 0,
            _ => call_cost(
                fname,
                target_t.as_ref().map(|t| t.max),
                &arg_ts.iter().map(|t| t.max).collect::<Vec<_>>(),
            ),
        };
        (result, cost.saturating_add(this))
    }
}

enum Sig {
    Ok(T),
    NoMatch,
    Undeclared,
}

/// The functions this environment declares: name, member-style, arities.
const DECLARED: &[(&str, bool, &[usize])] = &[
    ("size", true, &[0]),
    ("size", false, &[1]),
    ("contains", true, &[1]),
    ("startsWith", true, &[1]),
    ("endsWith", true, &[1]),
    ("matches", true, &[1]),
    ("matches", false, &[2]),
    ("int", false, &[1]),
    ("uint", false, &[1]),
    ("double", false, &[1]),
    ("string", false, &[1]),
    ("bytes", false, &[1]),
    ("bool", false, &[1]),
    ("dyn", false, &[1]),
    ("type", false, &[1]),
    ("duration", false, &[1]),
    ("timestamp", false, &[1]),
    ("getFullYear", true, &[0, 1]),
    ("getMonth", true, &[0, 1]),
    ("getDayOfMonth", true, &[0, 1]),
    ("getDate", true, &[0, 1]),
    ("getDayOfWeek", true, &[0, 1]),
    ("getDayOfYear", true, &[0, 1]),
    ("getHours", true, &[0, 1]),
    ("getMinutes", true, &[0, 1]),
    ("getSeconds", true, &[0, 1]),
    ("getMilliseconds", true, &[0, 1]),
    ("optional.of", false, &[1]),
    ("optional.ofNonZeroValue", false, &[1]),
    ("optional.none", false, &[0]),
    ("hasValue", true, &[0]),
    ("value", true, &[0]),
    ("orValue", true, &[1]),
    ("or", true, &[1]),
    ("charAt", true, &[1]),
    ("indexOf", true, &[1, 2]),
    ("lastIndexOf", true, &[1, 2]),
    ("lowerAscii", true, &[0]),
    ("upperAscii", true, &[0]),
    ("replace", true, &[2, 3]),
    ("split", true, &[1, 2]),
    ("substring", true, &[1, 2]),
    ("trim", true, &[0]),
    ("reverse", true, &[0]),
    ("format", true, &[1]),
    ("join", true, &[0, 1]),
    ("strings.quote", false, &[1]),
    ("isSorted", true, &[0]),
    ("sum", true, &[0]),
    ("min", true, &[0]),
    ("max", true, &[0]),
    ("slice", true, &[2]),
    ("flatten", true, &[0]),
    ("distinct", true, &[0]),
    ("find", true, &[1]),
    ("findAll", true, &[1, 2]),
    ("sets.contains", false, &[2]),
    ("sets.equivalent", false, &[2]),
    ("sets.intersects", false, &[2]),
    ("url", false, &[1]),
    ("isURL", false, &[1]),
    ("getScheme", true, &[0]),
    ("getHost", true, &[0]),
    ("getHostname", true, &[0]),
    ("getPort", true, &[0]),
    ("getEscapedPath", true, &[0]),
    ("getQuery", true, &[0]),
    ("quantity", false, &[1]),
    ("isQuantity", false, &[1]),
    ("sign", true, &[0]),
    ("isInteger", true, &[0]),
    ("asInteger", true, &[0]),
    ("asApproximateFloat", true, &[0]),
    ("add", true, &[1]),
    ("sub", true, &[1]),
    ("compareTo", true, &[1]),
    ("isGreaterThan", true, &[1]),
    ("isLessThan", true, &[1]),
    ("ip", false, &[1]),
    ("ip", true, &[0]),
    ("isIP", false, &[1]),
    ("ip.isCanonical", false, &[1]),
    ("family", true, &[0]),
    ("isUnspecified", true, &[0]),
    ("isLoopback", true, &[0]),
    ("isLinkLocalMulticast", true, &[0]),
    ("isLinkLocalUnicast", true, &[0]),
    ("isGlobalUnicast", true, &[0]),
    ("cidr", false, &[1]),
    ("isCIDR", false, &[1]),
    ("containsIP", true, &[1]),
    ("containsCIDR", true, &[1]),
    ("masked", true, &[0]),
    ("prefixLength", true, &[0]),
    ("format.named", false, &[1]),
    ("validate", true, &[1]),
];

const QUANTITY: &str = "kubernetes.Quantity";
const URL: &str = "kubernetes.URL";
const IP: &str = "net.IP";
const CIDR: &str = "net.CIDR";
const FORMAT: &str = "kubernetes.NamedFormat";

fn is(t: &T, want: fn(&Ty) -> bool) -> bool {
    t.is_dyn() || want(&t.ty)
}

fn signature(name: &str, target: Option<&T>, args: &[T]) -> Sig {
    use Ty as Y;
    let b = || Sig::Ok(T::new(Y::Bool));
    let int = || Sig::Ok(T::new(Y::Int));
    let string = |max: u64| Sig::Ok(T::sized(Y::String, max));
    let opaque = |n: &'static str| Sig::Ok(T::new(Y::Opaque(n)));
    let tmax = target.map_or(UNBOUNDED, |t| t.max);
    let is_str = |t: &T| is(t, |y| matches!(y, Y::String));
    let is_int = |t: &T| is(t, |y| matches!(y, Y::Int));
    let is_list = |t: &T| is(t, |y| matches!(y, Y::List(_)));
    let is_opaque = |t: &T, n: &str| t.is_dyn() || matches!(&t.ty, Y::Opaque(x) if *x == n);

    // Operators.
    match (name, args) {
        ("_==_" | "_!=_", [a, c]) => return if same(a, c) { b() } else { Sig::NoMatch },
        ("_<_" | "_<=_" | "_>_" | "_>=_", [a, c]) => {
            let ok = (is_num(a) && is_num(c))
                || (same(a, c)
                    && is(a, |y| {
                        matches!(
                            y,
                            Y::String | Y::Bytes | Y::Bool | Y::Duration | Y::Timestamp
                        )
                    }));
            return if ok { b() } else { Sig::NoMatch };
        }
        ("_&&_" | "_||_", [a, c]) => {
            let ok = is(a, |y| matches!(y, Y::Bool)) && is(c, |y| matches!(y, Y::Bool));
            return if ok { b() } else { Sig::NoMatch };
        }
        ("!_" | "@not_strictly_false", [a]) => {
            return if is(a, |y| matches!(y, Y::Bool)) {
                b()
            } else {
                Sig::NoMatch
            };
        }
        ("_?_:_", [c, t, f]) => {
            if !is(c, |y| matches!(y, Y::Bool)) || !same(t, f) {
                return Sig::NoMatch;
            }
            let mut r = if t.is_dyn() { f.clone() } else { t.clone() };
            r.max = t.max.max(f.max);
            return Sig::Ok(r);
        }
        ("-_", [a]) => {
            return if is(a, |y| matches!(y, Y::Int | Y::Double | Y::Duration)) {
                Sig::Ok(a.clone())
            } else {
                Sig::NoMatch
            };
        }
        ("_+_", [a, c]) => {
            return match (&a.ty, &c.ty) {
                (Y::Dyn, _) | (_, Y::Dyn) => Sig::Ok(T::sized(
                    if a.is_dyn() {
                        c.ty.clone()
                    } else {
                        a.ty.clone()
                    },
                    a.max.saturating_add(c.max),
                )),
                (Y::Timestamp, Y::Duration) | (Y::Duration, Y::Timestamp) => {
                    Sig::Ok(T::new(Y::Timestamp))
                }
                (Y::Int, Y::Int)
                | (Y::Uint, Y::Uint)
                | (Y::Double, Y::Double)
                | (Y::Duration, Y::Duration) => Sig::Ok(a.clone()),
                (Y::String, Y::String) | (Y::Bytes, Y::Bytes) => {
                    Sig::Ok(T::sized(a.ty.clone(), a.max.saturating_add(c.max)))
                }
                (Y::List(x), Y::List(y)) if same(x, y) => {
                    let el = if x.is_dyn() { y.clone() } else { x.clone() };
                    Sig::Ok(T::sized(Y::List(el), a.max.saturating_add(c.max)))
                }
                _ => Sig::NoMatch,
            };
        }
        ("_-_", [a, c]) => {
            return match (&a.ty, &c.ty) {
                (Y::Dyn, _) | (_, Y::Dyn) => Sig::Ok(T::dyn_()),
                (Y::Timestamp, Y::Timestamp) => Sig::Ok(T::new(Y::Duration)),
                (Y::Timestamp, Y::Duration) => Sig::Ok(T::new(Y::Timestamp)),
                (Y::Int, Y::Int)
                | (Y::Uint, Y::Uint)
                | (Y::Double, Y::Double)
                | (Y::Duration, Y::Duration) => Sig::Ok(a.clone()),
                _ => Sig::NoMatch,
            };
        }
        ("_*_" | "_/_" | "_%_", [a, c]) => {
            let ok = match (&a.ty, &c.ty) {
                (Y::Dyn, _) | (_, Y::Dyn) => true,
                (Y::Int, Y::Int) | (Y::Uint, Y::Uint) => true,
                (Y::Double, Y::Double) => name != "_%_",
                _ => false,
            };
            return if !ok {
                Sig::NoMatch
            } else if a.is_dyn() {
                Sig::Ok(c.clone())
            } else {
                Sig::Ok(a.clone())
            };
        }
        ("@in", [el, container]) => {
            let ok = match &container.ty {
                Y::Dyn => true,
                Y::List(e) => same(e, el),
                Y::Map(k, _) => same(k, el),
                _ => false,
            };
            return if ok { b() } else { Sig::NoMatch };
        }
        ("_[_]" | "_[?_]", [c, k]) => {
            let r = match &c.ty {
                Y::Dyn => T::dyn_(),
                Y::List(e) if is(k, |y| matches!(y, Y::Int | Y::Uint)) => (**e).clone(),
                Y::Map(kt, v) if same(kt, k) => (**v).clone(),
                Y::Optional(inner) => match &inner.ty {
                    Y::List(e) => (**e).clone(),
                    Y::Map(_, v) => (**v).clone(),
                    _ => T::dyn_(),
                },
                _ => return Sig::NoMatch,
            };
            return Sig::Ok(if name == "_[?_]" || matches!(c.ty, Y::Optional(_)) {
                T::new(Y::Optional(Box::new(r)))
            } else {
                r
            });
        }
        _ => {}
    }

    if is_format_function(name) {
        return if target.is_none() && args.is_empty() {
            opaque(FORMAT)
        } else {
            Sig::NoMatch
        };
    }
    // Declared functions: name, call style and arity must match one.
    let member = target.is_some();
    let declared: Vec<&(&str, bool, &[usize])> =
        DECLARED.iter().filter(|(n, _, _)| *n == name).collect();
    if declared.is_empty() {
        return Sig::Undeclared;
    }
    if !declared
        .iter()
        .any(|(_, m, ar)| *m == member && ar.contains(&args.len()))
    {
        return Sig::NoMatch;
    }
    let t = target.cloned().unwrap_or_else(T::dyn_);
    let a0 = args.first().cloned().unwrap_or_else(T::dyn_);
    let all_str = args.iter().all(is_str);

    match (name, member) {
        ("size", _) => {
            let x = if member { &t } else { &a0 };
            if is(x, |y| {
                matches!(y, Y::String | Y::Bytes | Y::List(_) | Y::Map(..))
            }) {
                int()
            } else {
                Sig::NoMatch
            }
        }
        ("contains" | "startsWith" | "endsWith" | "matches", true) => {
            if is_str(&t) && all_str {
                b()
            } else {
                Sig::NoMatch
            }
        }
        ("matches", false) => {
            if all_str {
                b()
            } else {
                Sig::NoMatch
            }
        }
        ("int" | "uint" | "double" | "string" | "bytes" | "bool", false) => {
            let convertible = match &a0.ty {
                Y::Dyn => true,
                Y::Int | Y::Uint | Y::Double | Y::String => true,
                Y::Bool => matches!(name, "string" | "bool"),
                Y::Bytes => matches!(name, "string" | "bytes"),
                Y::Timestamp | Y::Duration => matches!(name, "string" | "int"),
                Y::Opaque(o) => name == "string" && [IP, CIDR].contains(o),
                _ => false,
            };
            if !convertible {
                return Sig::NoMatch;
            }
            let ty = match name {
                "int" => Y::Int,
                "uint" => Y::Uint,
                "double" => Y::Double,
                "string" => Y::String,
                "bytes" => Y::Bytes,
                _ => Y::Bool,
            };
            let max = if matches!(ty, Y::String | Y::Bytes) {
                a0.max.max(20)
            } else {
                1
            };
            Sig::Ok(T::sized(ty, max))
        }
        ("dyn", false) => Sig::Ok(T::dyn_()),
        ("type", false) => Sig::Ok(T::new(Y::Type)),
        ("duration", false) => {
            if is(&a0, |y| matches!(y, Y::String | Y::Duration)) {
                Sig::Ok(T::new(Y::Duration))
            } else {
                Sig::NoMatch
            }
        }
        ("timestamp", false) => {
            if is(&a0, |y| matches!(y, Y::String | Y::Timestamp | Y::Int)) {
                Sig::Ok(T::new(Y::Timestamp))
            } else {
                Sig::NoMatch
            }
        }
        (
            "getFullYear" | "getMonth" | "getDayOfMonth" | "getDate" | "getDayOfWeek"
            | "getDayOfYear",
            true,
        ) => {
            if is(&t, |y| matches!(y, Y::Timestamp)) && all_str {
                int()
            } else {
                Sig::NoMatch
            }
        }
        ("getHours" | "getMinutes" | "getSeconds" | "getMilliseconds", true) => {
            if is(&t, |y| matches!(y, Y::Timestamp | Y::Duration)) && all_str {
                int()
            } else {
                Sig::NoMatch
            }
        }
        ("optional.of" | "optional.ofNonZeroValue", false) => {
            Sig::Ok(T::new(Y::Optional(Box::new(a0))))
        }
        ("optional.none", false) => Sig::Ok(T::new(Y::Optional(Box::new(T::dyn_())))),
        ("hasValue" | "value" | "orValue" | "or", true) => {
            let inner = match &t.ty {
                Y::Optional(i) => (**i).clone(),
                Y::Dyn => T::dyn_(),
                _ => return Sig::NoMatch,
            };
            match name {
                "hasValue" => b(),
                "value" => Sig::Ok(inner),
                "orValue" => Sig::Ok(if inner.is_dyn() { a0 } else { inner }),
                _ => Sig::Ok(t.clone()),
            }
        }
        ("indexOf" | "lastIndexOf", true) => match &t.ty {
            Y::List(_) | Y::Dyn => int(),
            Y::String if is_str(&a0) && args.iter().skip(1).all(is_int) => int(),
            _ => Sig::NoMatch,
        },
        ("charAt" | "substring", true) => {
            if is_str(&t) && args.iter().all(is_int) {
                string(tmax)
            } else {
                Sig::NoMatch
            }
        }
        ("lowerAscii" | "upperAscii" | "trim" | "reverse", true) => {
            if is_str(&t) {
                string(tmax)
            } else {
                Sig::NoMatch
            }
        }
        ("replace", true) => {
            if is_str(&t) && args.iter().take(2).all(is_str) {
                string(UNBOUNDED)
            } else {
                Sig::NoMatch
            }
        }
        ("split", true) => {
            if is_str(&t) && is_str(&a0) {
                Sig::Ok(T::sized(Y::List(Box::new(T::sized(Y::String, tmax))), tmax))
            } else {
                Sig::NoMatch
            }
        }
        ("format", true) => {
            if is_str(&t) && is_list(&a0) {
                string(UNBOUNDED)
            } else {
                Sig::NoMatch
            }
        }
        ("join", true) => {
            if is(
                &t,
                |y| matches!(y, Y::List(e) if is(e, |y| matches!(y, Y::String))),
            ) && all_str
            {
                string(UNBOUNDED)
            } else {
                Sig::NoMatch
            }
        }
        ("strings.quote", false) => {
            if all_str {
                string(UNBOUNDED)
            } else {
                Sig::NoMatch
            }
        }
        ("isSorted" | "sum" | "min" | "max" | "slice" | "flatten" | "distinct", true) => {
            let el = match &t.ty {
                Y::List(e) => (**e).clone(),
                Y::Dyn => T::dyn_(),
                _ => return Sig::NoMatch,
            };
            match name {
                "isSorted" => b(),
                "sum" | "min" | "max" => Sig::Ok(el),
                "flatten" => Sig::Ok(T::sized(Y::List(Box::new(T::dyn_())), UNBOUNDED)),
                _ => Sig::Ok(t.clone()),
            }
        }
        ("find", true) => {
            if is_str(&t) && all_str {
                string(tmax)
            } else {
                Sig::NoMatch
            }
        }
        ("findAll", true) => {
            if is_str(&t) && is_str(&a0) {
                Sig::Ok(T::sized(Y::List(Box::new(T::sized(Y::String, tmax))), tmax))
            } else {
                Sig::NoMatch
            }
        }
        ("sets.contains" | "sets.equivalent" | "sets.intersects", false) => {
            if args.iter().all(is_list) {
                b()
            } else {
                Sig::NoMatch
            }
        }
        (
            "url" | "isURL" | "quantity" | "isQuantity" | "ip" | "isIP" | "ip.isCanonical" | "cidr"
            | "isCIDR" | "format.named",
            false,
        ) => {
            if !all_str {
                return Sig::NoMatch;
            }
            match name {
                "url" => opaque(URL),
                "quantity" => opaque(QUANTITY),
                "ip" => opaque(IP),
                "cidr" => opaque(CIDR),
                "format.named" => Sig::Ok(T::new(Y::Optional(Box::new(T::new(Y::Opaque(FORMAT)))))),
                _ => b(),
            }
        }
        ("getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath", true) => {
            if is_opaque(&t, URL) {
                string(UNBOUNDED)
            } else {
                Sig::NoMatch
            }
        }
        ("getQuery", true) => {
            if is_opaque(&t, URL) {
                Sig::Ok(T::sized(
                    Y::Map(
                        Box::new(T::sized(Y::String, UNBOUNDED)),
                        Box::new(T::sized(
                            Y::List(Box::new(T::sized(Y::String, UNBOUNDED))),
                            UNBOUNDED,
                        )),
                    ),
                    UNBOUNDED,
                ))
            } else {
                Sig::NoMatch
            }
        }
        ("sign" | "isInteger" | "asInteger" | "asApproximateFloat", true) => {
            if !is_opaque(&t, QUANTITY) {
                return Sig::NoMatch;
            }
            match name {
                "isInteger" => b(),
                "asApproximateFloat" => Sig::Ok(T::new(Y::Double)),
                _ => int(),
            }
        }
        ("add" | "sub", true) => {
            if is_opaque(&t, QUANTITY) && (is_opaque(&a0, QUANTITY) || is_int(&a0)) {
                opaque(QUANTITY)
            } else {
                Sig::NoMatch
            }
        }
        ("compareTo" | "isGreaterThan" | "isLessThan", true) => {
            if is_opaque(&t, QUANTITY) && is_opaque(&a0, QUANTITY) {
                if name == "compareTo" { int() } else { b() }
            } else {
                Sig::NoMatch
            }
        }
        ("family", true) => {
            if is_opaque(&t, IP) {
                int()
            } else {
                Sig::NoMatch
            }
        }
        (
            "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast",
            true,
        ) => {
            if is_opaque(&t, IP) {
                b()
            } else {
                Sig::NoMatch
            }
        }
        ("containsIP", true) => {
            if is_opaque(&t, CIDR) && (is_opaque(&a0, IP) || is_str(&a0)) {
                b()
            } else {
                Sig::NoMatch
            }
        }
        ("containsCIDR", true) => {
            if is_opaque(&t, CIDR) && (is_opaque(&a0, CIDR) || is_str(&a0)) {
                b()
            } else {
                Sig::NoMatch
            }
        }
        ("ip", true) => {
            if is_opaque(&t, CIDR) {
                opaque(IP)
            } else {
                Sig::NoMatch
            }
        }
        ("masked", true) => {
            if is_opaque(&t, CIDR) {
                opaque(CIDR)
            } else {
                Sig::NoMatch
            }
        }
        ("prefixLength", true) => {
            if is_opaque(&t, CIDR) {
                int()
            } else {
                Sig::NoMatch
            }
        }
        ("validate", true) => {
            if is_opaque(&t, FORMAT) && all_str {
                Sig::Ok(T::new(Y::Optional(Box::new(T::sized(
                    Y::List(Box::new(T::sized(Y::String, UNBOUNDED))),
                    UNBOUNDED,
                )))))
            } else {
                Sig::NoMatch
            }
        }
        _ => Sig::Ok(T::dyn_()),
    }
}

/// `format.dns1123Label()` and friends are declared per name.
pub(crate) fn is_format_function(name: &str) -> bool {
    name.strip_prefix("format.")
        .is_some_and(|f| crate::library::format::NAMES.contains(&f))
}
