//! Kubernetes' CEL: the expression language of CRD `x-kubernetes-validations`
//! and ValidatingAdmissionPolicy, as `k8s.io/apiserver/pkg/cel` and
//! `k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel` define it.
//!
//! Pure: no I/O, no async. Rules and objects are user input, so nothing here
//! panics on any input, and evaluation is bounded by cel-go's cost model.
//!
//! - [`compile`] parses (with the `cel` crate's parser and its standard
//!   macros), type-checks against an [`Env`] and estimates the worst-case cost.
//! - [`Program::eval`] interprets, counting runtime cost.
//! - [`validate`] and [`validate_rules`] are the CRD entry points (the
//!   apiextensions-apiserver's `Validator.Validate` and the CRD creation
//!   checks).
//!
//! Known differences from upstream (cel-go + Kubernetes):
//! - The checker is permissive where cel-go's full inference would be needed;
//!   `dyn` values are checked at runtime only. It never rejects what upstream
//!   accepts for the cases tested, but may accept some rules upstream rejects.
//! - Costs follow cel-go's model (1 per identifier/selection/call, 10 per list
//!   and 30 per map literal, string functions at 0.1 per byte, regexes at
//!   string × pattern/4) but not its every overload: estimates and runtime
//!   costs are close to, not equal to, upstream's numbers.
//! - Parse error texts come from the `cel` crate's antlr runtime (`no viable
//!   alternative ...` where cel-go may say `mismatched input ...`).
//! - Time zones: `UTC` and fixed offsets only, no IANA names.
//! - Not provided: `cel.bind`, two-variable macros other than what the parser
//!   expands, `authorizer`, the `semver`, `jsonpatch` and `math` libraries,
//!   struct (message) literals.
//!
//! Only the parser of the `cel` crate is used: its interpreter has no cost
//! accounting and no hooks for Kubernetes' value semantics (set/map lists,
//! schema objects, Quantity/URL/IP types), which upstream's behaviour needs.

mod check;
mod eval;
mod functions;
pub mod library;
mod parse;
pub mod schema;
mod validation;
mod value;

use std::collections::BTreeSet;

use cel::IdedExpr;
use cel::common::ast::Expr;
use serde_json::Value;

pub use eval::Activation;
pub use schema::{DeclKind, DeclType, decl_type, escape, is_identifier, json_to_value, unescape};
pub use validation::{validate, validate_rules, validate_static, validate_with_budget};
pub use value::{EvalValue, Key, ListType, ListValue, MapValue};

use check::{Checker, T, Ty};

/// Upstream's `PerCallLimit`: the most runtime cost one evaluation may use.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// Upstream's `RuntimeCELCostBudget`: the cost all rules of one object share.
pub const RUNTIME_CEL_COST_BUDGET: i64 = 10_000_000;
/// Upstream's `StaticEstimatedCostLimit`: the largest estimated cost of one
/// rule (times the number of times it can run).
pub const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// Upstream's `StaticEstimatedCRDCostLimit`: the estimated cost of all rules
/// of a schema together.
pub const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;
/// cel-go's default limit on an expression's size, in code points.
pub const EXPRESSION_SIZE_CODE_POINT_LIMIT: usize = 100_000;
/// cel-go's default parser recursion limit.
pub const MAX_RECURSION_DEPTH: usize = 250;

/// A compile error: cel-go's issues text (`ERROR: <input>:1:5: ...` with the
/// source line and a caret), or a rule-level message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CompileError {
    pub message: String,
}

/// An evaluation error, worded as cel-go's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    #[error("no such key: {0}")]
    NoSuchKey(String),
    #[error("no such overload")]
    NoSuchOverload,
    #[error("operation cancelled: actual cost limit exceeded")]
    CostLimitExceeded,
    #[error("{0}")]
    Other(String),
}

/// The variables an expression may reference, with their types.
#[derive(Clone, Debug, Default)]
pub struct Env {
    vars: Vec<(String, T)>,
}

impl Env {
    /// An environment without variables.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares `name` as `dyn`: typed at runtime only.
    pub fn with_dyn(mut self, name: &str) -> Self {
        self.set(name, T::dyn_());
        self
    }

    /// Declares `name` with the type of an OpenAPI v3 schema (JSONSchemaProps
    /// JSON). A schema CEL cannot see (no type) makes it `dyn`.
    pub fn with_schema(mut self, name: &str, schema: &Value, is_resource_root: bool) -> Self {
        let t = match decl_type(schema, is_resource_root, "selfType0") {
            Some(d) => T::from_decl(&d),
            None => T::dyn_(),
        };
        self.set(name, t);
        self
    }

    fn set(&mut self, name: &str, t: T) {
        self.vars.retain(|(n, _)| n != name);
        self.vars.push((name.to_string(), t));
    }

    /// The environment of a CRD rule on `schema`: `self` and `oldSelf`.
    pub fn crd(schema: &Value, is_resource_root: bool) -> Self {
        Env::new()
            .with_schema("self", schema, is_resource_root)
            .with_schema("oldSelf", schema, is_resource_root)
    }

    /// As [`Env::crd`], for a rule with `optionalOldSelf: true`: `oldSelf` is
    /// `optional(<type of self>)`.
    pub fn crd_optional_old_self(schema: &Value, is_resource_root: bool) -> Self {
        let mut env = Env::crd(schema, is_resource_root);
        if let Some((_, t)) = env.vars.iter_mut().find(|(n, _)| n == "oldSelf") {
            *t = T {
                ty: Ty::Optional(Box::new(t.clone())),
                max: 1,
            };
        }
        env
    }

    /// The environment of a ValidatingAdmissionPolicy expression: `object`,
    /// `oldObject`, `request`, `params`, `namespaceObject`, `variables` and
    /// `authorizer`, all typed at runtime.
    pub fn admission_policy() -> Self {
        [
            "object",
            "oldObject",
            "request",
            "params",
            "namespaceObject",
            "variables",
            "authorizer",
        ]
        .iter()
        .fold(Env::new(), |env, n| env.with_dyn(n))
    }
}

/// A compiled expression.
#[derive(Debug)]
pub struct Program {
    expr: IdedExpr,
    source: String,
    result: T,
    estimated_cost: u64,
    idents: BTreeSet<String>,
}

/// Compiles `expr` for `env`: parse, macro expansion, type check and cost
/// estimate.
pub fn compile(expr: &str, env: &Env) -> Result<Program, CompileError> {
    let (parsed, offsets) = parse::parse(expr)?;
    let mut checker = Checker::new(&env.vars);
    let (result, cost) = checker.check(&parsed);
    if !checker.errors.is_empty() {
        let issues: Vec<String> = checker
            .errors
            .iter()
            .map(|e| parse::issue(expr, offsets.get(&e.id).copied(), &e.msg))
            .collect();
        return Err(CompileError {
            message: format!("compilation failed: {}", issues.join("\n")),
        });
    }
    if let Some(e) = checker.instantiation_errors.first() {
        return Err(CompileError {
            message: format!("program instantiation failed: {e}"),
        });
    }
    let mut idents = BTreeSet::new();
    collect_idents(&parsed, &mut idents);
    Ok(Program {
        expr: parsed,
        source: expr.to_string(),
        result,
        estimated_cost: cost,
        idents,
    })
}

fn collect_idents(e: &IdedExpr, out: &mut BTreeSet<String>) {
    // Iterative: the AST depth is bounded, but no reason to recurse.
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match &e.expr {
            Expr::Ident(n) => {
                out.insert(n.clone());
            }
            Expr::Select(s) => stack.push(&s.operand),
            Expr::Call(c) => {
                stack.extend(c.target.as_deref());
                stack.extend(&c.args);
            }
            Expr::List(l) => stack.extend(&l.elements),
            Expr::Map(m) => {
                for en in &m.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(me) = &en.expr {
                        stack.push(&me.key);
                        stack.push(&me.value);
                    }
                }
            }
            Expr::Struct(s) => {
                for en in &s.entries {
                    if let cel::common::ast::EntryExpr::StructField(f) = &en.expr {
                        stack.push(&f.value);
                    }
                }
            }
            Expr::Comprehension(c) => {
                stack.extend([
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ]);
            }
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
}

impl Program {
    /// Evaluates with upstream's per-call cost limit.
    pub fn eval(&self, vars: &Activation) -> Result<EvalValue, EvalError> {
        self.eval_with_limit(vars, PER_CALL_LIMIT).0
    }

    /// Evaluates with a cost limit; returns the result and the cost spent
    /// (cel-go's `ActualCost`), also when the evaluation failed.
    pub fn eval_with_limit(
        &self,
        vars: &Activation,
        limit: u64,
    ) -> (Result<EvalValue, EvalError>, u64) {
        let mut interp = eval::Interp::new(vars, limit);
        let r = interp.eval(&self.expr);
        (r, interp.cost)
    }

    /// The worst-case cost cel-go's estimator would give, from the size
    /// bounds of the declared types (saturating at `u64::MAX` when unbounded).
    pub fn estimated_cost(&self) -> u64 {
        self.estimated_cost
    }

    /// Whether the expression names `var` (e.g. `oldSelf`, which makes a CRD
    /// rule a transition rule).
    pub fn references(&self, var: &str) -> bool {
        self.idents.contains(var)
    }

    /// The checked result type's name (`bool`, `string`, `dyn`, ...).
    pub fn result_type(&self) -> String {
        self.result.name()
    }

    pub(crate) fn result_is(&self, want: &str) -> bool {
        matches!(self.result.ty, Ty::Dyn) || self.result.name() == want
    }

    pub fn source(&self) -> &str {
        &self.source
    }
}

/// Converts a JSON value into a CEL value under a schema (for building an
/// [`Activation`]); `schema: None` converts structurally.
pub fn to_eval_value(v: &Value, schema: Option<&Value>, is_resource_root: bool) -> EvalValue {
    let decl = schema.and_then(|s| decl_type(s, is_resource_root, "selfType0"));
    json_to_value(v, decl.as_deref())
}
