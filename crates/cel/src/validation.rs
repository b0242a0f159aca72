//! CRD `x-kubernetes-validations`: evaluation on custom resources (upstream's
//! `schema/cel/validation.go`) and the checks at CRD creation
//! (`apiextensions/validation/validation.go`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use berth_api::validation::{FieldError, FieldErrorType, go_quote};
use serde_json::Value;

use crate::schema::{
    MAX_REQUEST_SIZE_BYTES, additional_properties_schema, bool_of, decl_type, has_properties,
    json_to_value, str_of,
};
use crate::value::EvalValue;
use crate::{
    Activation, CompileError, Env, EvalError, PER_CALL_LIMIT, Program, RUNTIME_CEL_COST_BUDGET,
    STATIC_ESTIMATED_COST_LIMIT, STATIC_ESTIMATED_CRD_COST_LIMIT, compile,
};

/// Upstream's `MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES: usize = 5 * 1024;

const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// Evaluates every `x-kubernetes-validations` rule of `schema` (the CRD
/// version's `openAPIV3Schema`) on `new`, with `old` for transition rules on
/// update, sharing upstream's `RuntimeCELCostBudget`.
///
/// `path` prefixes the field paths; empty is upstream's nil path (a rule on
/// the root reports its field as `<nil>`).
pub fn validate(schema: &Value, new: &Value, old: Option<&Value>, path: &str) -> Vec<FieldError> {
    validate_with_budget(schema, new, old, path, RUNTIME_CEL_COST_BUDGET).0
}

/// [`validate`] with an explicit cost budget; returns the errors and the
/// budget left (negative once it ran out, as upstream).
pub fn validate_with_budget(
    schema: &Value,
    new: &Value,
    old: Option<&Value>,
    path: &str,
    budget: i64,
) -> (Vec<FieldError>, i64) {
    let mut v = Validator {
        programs: HashMap::new(),
        shared: false,
        errors: Vec::new(),
        budget,
    };
    v.walk(schema, true, new, old, path, 0);
    (v.errors, v.budget)
}

/// Programs compiled from schemas that live for the process, by the address of
/// the rule's schema node: compiled once, reused by every later write.
type SharedPrograms = HashMap<(usize, usize, u8), Arc<Result<Program, CompileError>>>;
static SHARED: Mutex<Option<SharedPrograms>> = Mutex::new(None);

/// [`validate`] for a schema that is never freed (a served CRD version's): its
/// rules are compiled on first use and kept, so a write pays only evaluation.
pub fn validate_static(
    schema: &'static Value,
    new: &Value,
    old: Option<&Value>,
    path: &str,
) -> Vec<FieldError> {
    let mut v = Validator {
        programs: HashMap::new(),
        shared: true,
        errors: Vec::new(),
        budget: RUNTIME_CEL_COST_BUDGET,
    };
    v.walk(schema, true, new, old, path, 0);
    v.errors
}

struct Validator {
    /// Compiled rules by (schema node address, rule index, which expression):
    /// the schema outlives the walk, so addresses are stable keys.
    programs: HashMap<(usize, usize, u8), Arc<Result<Program, CompileError>>>,
    /// Use [`SHARED`] (the schema is `'static`, so node addresses never get reused).
    shared: bool,
    errors: Vec<FieldError>,
    budget: i64,
}

fn field_display(path: &str) -> String {
    if path.is_empty() {
        "<nil>".into()
    } else {
        path.to_string()
    }
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn schema_type(s: &Value) -> Value {
    Value::String(str_of(s, "type").unwrap_or("").to_string())
}

fn rules_of(s: &Value) -> &[Value] {
    s.get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Upstream's `ruleErrorString`: the message if any, else the rule.
fn rule_error_string(rule: &Value) -> String {
    match str_of(rule, "message").map(str::trim) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => str_of(rule, "rule").unwrap_or("").trim().to_string(),
    }
}

impl Validator {
    #[allow(clippy::too_many_arguments)]
    fn program(
        &mut self,
        node: &Value,
        rule_holder: &Value,
        idx: usize,
        which: u8,
        expr: &str,
        is_root: bool,
        optional_old_self: bool,
    ) -> Arc<Result<Program, CompileError>> {
        let key = (rule_holder as *const Value as usize, idx, which);
        if let Some(p) = self.programs.get(&key) {
            return p.clone();
        }
        let build = || {
            let env = if optional_old_self {
                Env::crd_optional_old_self(node, is_root)
            } else {
                Env::crd(node, is_root)
            };
            Arc::new(compile(expr, &env))
        };
        let p = if self.shared {
            let cached = SHARED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert_with(HashMap::new)
                .get(&key)
                .cloned();
            match cached {
                Some(p) => p,
                None => {
                    // Compiled outside the lock: a rule compiles in well under a millisecond.
                    let p = build();
                    SHARED
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert_with(HashMap::new)
                        .insert(key, p.clone());
                    p
                }
            }
        } else {
            build()
        };
        self.programs.insert(key, p.clone());
        p
    }

    fn walk(
        &mut self,
        s: &Value,
        is_root: bool,
        new: &Value,
        old: Option<&Value>,
        path: &str,
        depth: usize,
    ) {
        if new.is_null() || depth > 100 || !s.is_object() {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        self.validate_expressions(s, s, is_root, new, old, path);
        if self.budget < 0 {
            return;
        }
        if let Some(all_of) = s.get("allOf").and_then(Value::as_array) {
            for entry in all_of {
                self.validate_expressions(s, entry, is_root, new, old, path);
                if self.budget < 0 {
                    return;
                }
            }
        }
        match new {
            Value::Array(items) => {
                let Some(item_schema) = s.get("items") else {
                    return;
                };
                let embedded = bool_of(item_schema, "x-kubernetes-embedded-resource");
                let old_items = old.and_then(Value::as_array);
                let keys: Option<Vec<&str>> = (str_of(s, "x-kubernetes-list-type") == Some("map"))
                    .then(|| {
                        s.get("x-kubernetes-list-map-keys")
                            .and_then(Value::as_array)
                            .map(|a| a.iter().filter_map(Value::as_str).collect())
                            .unwrap_or_default()
                    });
                for (i, item) in items.iter().enumerate() {
                    // Only map lists correlate old elements (by their keys).
                    let old_item = match (&keys, old_items) {
                        (Some(keys), Some(olds)) => olds
                            .iter()
                            .find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k))),
                        _ => None,
                    };
                    self.walk(
                        item_schema,
                        embedded,
                        item,
                        old_item,
                        &format!("{path}[{i}]"),
                        depth + 1,
                    );
                    if self.budget < 0 {
                        return;
                    }
                }
            }
            Value::Object(map) => {
                // Upstream's MapIsCorrelatable: granular (default) and atomic.
                let correlatable = matches!(
                    str_of(s, "x-kubernetes-map-type"),
                    None | Some("granular") | Some("atomic")
                );
                let old_map = old.and_then(Value::as_object).filter(|_| correlatable);
                if let Some(ap) = additional_properties_schema(s) {
                    let embedded = bool_of(ap, "x-kubernetes-embedded-resource");
                    for (k, v) in map {
                        let old_v = old_map.and_then(|m| m.get(k));
                        self.walk(ap, embedded, v, old_v, &format!("{path}[{k}]"), depth + 1);
                        if self.budget < 0 {
                            return;
                        }
                    }
                }
                if let Some(props) = s.get("properties").and_then(Value::as_object) {
                    for (k, v) in map {
                        let Some(ps) = props.get(k) else { continue };
                        let embedded = bool_of(ps, "x-kubernetes-embedded-resource");
                        let old_v = old_map.and_then(|m| m.get(k));
                        self.walk(ps, embedded, v, old_v, &child(path, k), depth + 1);
                        if self.budget < 0 {
                            return;
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// Evaluates the rules held by `holder` (the node itself, or one of its
    /// `allOf` entries) against the node typed by `node`.
    fn validate_expressions(
        &mut self,
        node: &Value,
        holder: &Value,
        is_root: bool,
        new: &Value,
        old: Option<&Value>,
        path: &str,
    ) {
        let rules = rules_of(holder);
        if rules.is_empty() {
            return;
        }
        let ty = schema_type(node);
        let field = field_display(path);
        if self.budget <= 0 {
            self.errors
                .push(FieldError::invalid(field, ty, OUT_OF_BUDGET));
            self.budget = -1;
            return;
        }
        let decl = decl_type(node, is_root, "selfType0");
        let self_val = json_to_value(new, decl.as_deref());
        let old_val = old.map(|o| json_to_value(o, decl.as_deref()));
        for (i, rule) in rules.iter().enumerate() {
            let Some(src) = str_of(rule, "rule").filter(|r| !r.trim().is_empty()) else {
                continue;
            };
            let optional = bool_of(rule, "optionalOldSelf");
            let compiled = self.program(node, holder, i, 0, src, is_root, optional);
            let program = match &*compiled {
                Ok(p) => p,
                Err(e) => {
                    let detail = format!("rule compile error: {e}");
                    self.errors
                        .push(FieldError::invalid(field.clone(), ty.clone(), detail));
                    continue;
                }
            };
            let uses_old_self = program.references("oldSelf");
            if uses_old_self && old_val.is_none() && !optional {
                // Transition rules run only where an old value exists.
                continue;
            }
            let mut act = Activation::new();
            act.insert("self", self_val.clone());
            if optional {
                act.insert(
                    "oldSelf",
                    EvalValue::Optional(old_val.clone().map(Box::new)),
                );
            } else if let Some(o) = &old_val {
                act.insert("oldSelf", o.clone());
            }
            let (result, cost) = program.eval_with_limit(&act, PER_CALL_LIMIT);
            if cost > i64::MAX as u64 || cost as i64 > self.budget {
                self.errors.push(FieldError::invalid(
                    field.clone(),
                    ty.clone(),
                    OUT_OF_BUDGET,
                ));
                self.budget = -1;
                return;
            }
            self.budget -= cost as i64;
            let res = rule_error_string(rule);
            match result {
                Ok(EvalValue::Bool(true)) => continue,
                Ok(_) => {}
                Err(EvalError::NoSuchOverload) => {
                    self.errors.push(FieldError::invalid(
                        field.clone(),
                        ty.clone(),
                        format!("'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {res}"),
                    ));
                    continue;
                }
                Err(EvalError::CostLimitExceeded) => {
                    self.errors.push(FieldError::invalid(
                        field.clone(),
                        ty.clone(),
                        format!("'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {res}"),
                    ));
                    self.budget = -1;
                    return;
                }
                Err(e) => {
                    self.errors.push(FieldError::invalid(
                        field.clone(),
                        ty.clone(),
                        format!("{e} evaluating rule: {res}"),
                    ));
                    continue;
                }
            }

            // The rule evaluated to false: report it at its fieldPath.
            let mut err_field = path.to_string();
            if let Some(fp) = str_of(rule, "fieldPath").filter(|f| !f.trim().is_empty())
                && let Ok(normalized) = valid_field_path(fp, node)
                && !normalized.is_empty()
            {
                err_field = child(path, &normalized);
            }
            let err_field = field_display(&err_field);
            let mut detail = None;
            if let Some(me) = str_of(rule, "messageExpression").filter(|m| !m.trim().is_empty()) {
                let compiled = self.program(node, holder, i, 1, me, is_root, optional);
                if let Ok(program) = &*compiled {
                    let (r, cost) = program.eval_with_limit(&act, PER_CALL_LIMIT);
                    if cost > i64::MAX as u64 || cost as i64 > self.budget {
                        self.errors.push(FieldError::invalid(
                            err_field,
                            ty.clone(),
                            "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run",
                        ));
                        self.budget = -1;
                        return;
                    }
                    if let Err(EvalError::CostLimitExceeded) = r {
                        self.errors.push(FieldError::invalid(
                            err_field,
                            ty.clone(),
                            format!("no further validation rules will be run due to call cost exceeds limit for messageExpression: {}", go_quote(me)),
                        ));
                        self.budget = -1;
                        return;
                    }
                    self.budget -= cost as i64;
                    // Upstream logs a failed messageExpression and falls back
                    // to the message.
                    if let Ok(EvalValue::String(s)) = r {
                        let t = s.trim();
                        if !t.is_empty()
                            && !t.contains('\n')
                            && t.len() <= MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES
                        {
                            detail = Some(t.to_string());
                        }
                    }
                }
            }
            let detail = detail.unwrap_or_else(|| match str_of(rule, "message").map(str::trim) {
                Some(m) if !m.is_empty() => m.to_string(),
                _ => format!("failed rule: {res}"),
            });
            self.errors.push(error_for_reason(
                err_field,
                ty.clone(),
                detail,
                str_of(rule, "reason"),
            ));
        }
    }
}

/// Upstream's `fieldErrorForReason`.
fn error_for_reason(field: String, ty: Value, detail: String, reason: Option<&str>) -> FieldError {
    match reason {
        Some("FieldValueForbidden") => FieldError::forbidden(field, detail),
        Some("FieldValueRequired") => FieldError::required(field, detail),
        Some("FieldValueDuplicate") => FieldError::duplicate(field, ty),
        _ => FieldError::invalid(field, ty, detail),
    }
}

/// Upstream's `ValidFieldPath`: a JSON path of field (`.a`) and map-key
/// (`['k']`) accessors valid for the schema, normalized to a field path.
pub(crate) fn valid_field_path(json_path: &str, schema: &Value) -> Result<String, String> {
    let mut out = String::new();
    let mut s = schema;
    let mut rest = json_path;
    let step = |name: &str, s: &mut &Value, out: &mut String| -> Result<(), String> {
        if has_properties(s) {
            let p = s
                .get("properties")
                .and_then(|p| p.get(name))
                .ok_or("does not refer to a valid field")?;
            *out = child(out, name);
            *s = p;
        } else if let Some(ap) = additional_properties_schema(s) {
            out.push_str(&format!("[{name}]"));
            *s = ap;
        } else {
            return Err("does not refer to a valid field".into());
        }
        Ok(())
    };
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let name = &r[..end];
            if name.is_empty() {
                return Err("unexpected end of JSON path".into());
            }
            step(name, &mut s, &mut out)?;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            // A single-quoted key, with \' and \\ escapes.
            let mut key = String::new();
            let mut chars = r.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some((_, '\'')) => key.push('\''),
                        Some((_, '\\')) => key.push('\\'),
                        Some((_, 'n')) => key.push('\n'),
                        Some((_, 't')) => key.push('\t'),
                        Some((_, o)) => {
                            return Err(format!(
                                "invalid string literal: invalid escape char \\{o}"
                            ));
                        }
                        None => return Err("unexpected end of JSON path".into()),
                    },
                    '\'' => {
                        end = Some(i);
                        break;
                    }
                    c => key.push(c),
                }
            }
            let end = end.ok_or("unexpected end of JSON path")?;
            let after = &r[end + 1..];
            rest = after.strip_prefix(']').ok_or("expected ]")?;
            step(&key, &mut s, &mut out)?;
        } else {
            return Err(format!("expected [ or . but got: {rest}"));
        }
    }
    Ok(out)
}

/// Go's `%#v` of the internal `apiextensions.ValidationRule`, which upstream
/// puts in the message of a rule that does not compile.
fn go_rule(rule: &Value) -> String {
    let s = |k: &str| go_quote(str_of(rule, k).unwrap_or(""));
    // Go prints a set pointer as its address, which differs per run.
    let reason = match rule.get("reason") {
        Some(Value::String(_)) => "(*apiextensions.FieldValueErrorReason)(0xc000000000)",
        _ => "(*apiextensions.FieldValueErrorReason)(nil)",
    };
    let optional = match rule.get("optionalOldSelf") {
        Some(Value::Bool(_)) => "(*bool)(0xc000000000)",
        _ => "(*bool)(nil)",
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}, OptionalOldSelf:{optional}}}",
        s("rule"),
        s("message"),
        s("messageExpression"),
        s("fieldPath"),
    )
}

/// Upstream's `getCostErrorMessage`.
fn cost_error_message(name: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{name} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

fn invalid_raw(field: String, rendered_value: String, detail: &str) -> FieldError {
    // The value is already rendered Go-style, so it goes into the detail
    // with no value: `Invalid value: <rendered>: <detail>`.
    FieldError {
        kind: FieldErrorType::Invalid,
        field,
        value: None,
        detail: format!("{rendered_value}: {detail}"),
    }
}

const SUPPORTED_REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

struct RulesChecker {
    errors: Vec<FieldError>,
    total: u64,
    most_expensive: Vec<(String, u64)>,
}

impl RulesChecker {
    fn observe(&mut self, path: String, cost: u64) {
        self.total = self.total.saturating_add(cost);
        // Rules under 1% of the limit are not named, as upstream.
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT / 100 {
            return;
        }
        self.most_expensive.push((path, cost));
        self.most_expensive.sort_by_key(|e| std::cmp::Reverse(e.1));
        self.most_expensive.truncate(4);
    }

    /// `cardinality`: how many times a rule here can run (`None`: unbounded).
    /// `uncorrelatable`: the path of the closest list above that is not a map
    /// list, under which `oldSelf` cannot be used.
    fn node(
        &mut self,
        s: &Value,
        is_root: bool,
        path: &str,
        cardinality: Option<u64>,
        uncorrelatable: Option<&str>,
        depth: usize,
    ) {
        if !s.is_object() || depth > 100 {
            return;
        }
        self.rules(s, s, is_root, path, cardinality, uncorrelatable);
        if let Some(all_of) = s.get("allOf").and_then(Value::as_array) {
            for (i, entry) in all_of.iter().enumerate() {
                self.rules(
                    s,
                    entry,
                    is_root,
                    &format!("{path}.allOf[{i}]"),
                    cardinality,
                    uncorrelatable,
                );
            }
        }
        if let Some(props) = s.get("properties").and_then(Value::as_object) {
            for (k, p) in props {
                self.node(
                    p,
                    bool_of(p, "x-kubernetes-embedded-resource"),
                    &format!("{path}.properties[{k}]"),
                    cardinality,
                    uncorrelatable,
                    depth + 1,
                );
            }
        }
        if let Some(items) = s.get("items") {
            let card = match (cardinality, s.get("maxItems").and_then(Value::as_u64)) {
                (Some(c), Some(m)) => Some(c.saturating_mul(m)),
                _ => None,
            };
            let unc = if str_of(s, "x-kubernetes-list-type") == Some("map") {
                uncorrelatable.map(str::to_string)
            } else {
                Some(uncorrelatable.unwrap_or(path).to_string())
            };
            self.node(
                items,
                bool_of(items, "x-kubernetes-embedded-resource"),
                &format!("{path}.items"),
                card,
                unc.as_deref(),
                depth + 1,
            );
        }
        if let Some(ap) = additional_properties_schema(s) {
            let card = match (cardinality, s.get("maxProperties").and_then(Value::as_u64)) {
                (Some(c), Some(m)) => Some(c.saturating_mul(m)),
                _ => None,
            };
            let unc = match str_of(s, "x-kubernetes-map-type") {
                None | Some("granular") | Some("atomic") => uncorrelatable.map(str::to_string),
                _ => Some(uncorrelatable.unwrap_or(path).to_string()),
            };
            self.node(
                ap,
                bool_of(ap, "x-kubernetes-embedded-resource"),
                &format!("{path}.additionalProperties"),
                card,
                unc.as_deref(),
                depth + 1,
            );
        }
    }

    fn rules(
        &mut self,
        node: &Value,
        holder: &Value,
        is_root: bool,
        path: &str,
        cardinality: Option<u64>,
        uncorrelatable: Option<&str>,
    ) {
        let rules = rules_of(holder);
        if rules.is_empty() {
            return;
        }
        let mut schema_errors = false;
        for (i, rule) in rules.iter().enumerate() {
            let base = format!("{path}.x-kubernetes-validations[{i}]");
            let raw_rule = str_of(rule, "rule").unwrap_or("");
            let raw_msg = str_of(rule, "message").unwrap_or("");
            let (r, m) = (raw_rule.trim(), raw_msg.trim());
            let before = self.errors.len();
            if r.is_empty() {
                self.errors.push(FieldError::required(
                    format!("{base}.rule"),
                    "rule is not specified",
                ));
            } else if !raw_msg.is_empty() && m.is_empty() {
                self.errors.push(FieldError::invalid(
                    format!("{base}.message"),
                    raw_msg,
                    "message must be non-empty if specified",
                ));
            } else if m.contains(['\n', '\r']) {
                self.errors.push(FieldError::invalid(
                    format!("{base}.message"),
                    raw_msg,
                    "message must not contain line breaks",
                ));
            } else if r.contains(['\n', '\r']) && m.is_empty() {
                self.errors.push(FieldError::required(
                    format!("{base}.message"),
                    "message must be specified if rule contains line breaks",
                ));
            }
            let raw_me = str_of(rule, "messageExpression").unwrap_or("");
            if !raw_me.is_empty() && raw_me.trim().is_empty() {
                self.errors.push(FieldError::required(
                    format!("{base}.messageExpression"),
                    "messageExpression must be non-empty if specified",
                ));
            }
            if let Some(reason) = str_of(rule, "reason")
                && !SUPPORTED_REASONS.contains(&reason)
            {
                self.errors.push(FieldError::not_supported(
                    format!("{base}.reason"),
                    reason,
                    SUPPORTED_REASONS,
                ));
            }
            if let Some(fp) = str_of(rule, "fieldPath") {
                if !fp.is_empty() && fp.trim().is_empty() {
                    self.errors.push(FieldError::invalid(
                        format!("{base}.fieldPath"),
                        fp,
                        "fieldPath must be non-empty if specified",
                    ));
                }
                if fp.contains(['\n', '\r']) {
                    self.errors.push(FieldError::invalid(
                        format!("{base}.fieldPath"),
                        fp,
                        "fieldPath must not contain line breaks",
                    ));
                }
                if !fp.is_empty() && valid_field_path(fp, node).is_err() {
                    self.errors.push(FieldError::invalid(
                        format!("{base}.fieldPath"),
                        fp,
                        "fieldPath must be a valid path",
                    ));
                }
            }
            schema_errors |= self.errors.len() > before;
        }
        // As upstream, CEL is only checked once the schema-level errors are
        // fixed: they make for confusing compile errors.
        if schema_errors {
            return;
        }
        let min_size = decl_type(node, is_root, "selfType0").map_or(1, |d| d.min_serialized_size);
        let card = cardinality.unwrap_or(MAX_REQUEST_SIZE_BYTES / (min_size + 1));
        for (i, rule) in rules.iter().enumerate() {
            let base = format!("{path}.x-kubernetes-validations[{i}]");
            let src = str_of(rule, "rule").unwrap_or("");
            let optional = rule.get("optionalOldSelf").and_then(Value::as_bool) == Some(true);
            let env = if optional {
                Env::crd_optional_old_self(node, is_root)
            } else {
                Env::crd(node, is_root)
            };
            let program = match compile(src, &env) {
                Ok(p) if !p.result_is("bool") => {
                    Err("cel expression must evaluate to a bool".to_string())
                }
                Ok(p) => Ok(p),
                Err(e) => Err(e.message),
            };
            let rule_path = format!("{base}.rule");
            match &program {
                Ok(p) => {
                    let cost = p.estimated_cost().saturating_mul(card);
                    if cost > STATIC_ESTIMATED_COST_LIMIT {
                        self.errors.push(FieldError::forbidden(
                            rule_path.clone(),
                            cost_error_message(
                                "estimated rule cost",
                                cost,
                                STATIC_ESTIMATED_COST_LIMIT,
                            ),
                        ));
                    }
                    self.observe(rule_path.clone(), cost);
                }
                Err(detail) => {
                    self.errors
                        .push(invalid_raw(rule_path.clone(), go_rule(rule), detail));
                }
            }
            if let Some(me) = str_of(rule, "messageExpression").filter(|m| !m.trim().is_empty()) {
                let me_path = format!("{base}.messageExpression");
                match compile(me, &env) {
                    Ok(p) if !p.result_is("string") => self.errors.push(invalid_raw(
                        me_path,
                        go_rule(rule),
                        "must evaluate to a string",
                    )),
                    Ok(p) => {
                        let cost = p.estimated_cost().saturating_mul(card);
                        if cost > STATIC_ESTIMATED_COST_LIMIT {
                            self.errors.push(FieldError::forbidden(
                                me_path.clone(),
                                cost_error_message(
                                    "estimated messageExpression cost",
                                    cost,
                                    STATIC_ESTIMATED_COST_LIMIT,
                                ),
                            ));
                        }
                        self.observe(me_path, cost);
                    }
                    Err(e) => self.errors.push(invalid_raw(
                        me_path,
                        go_rule(rule),
                        &format!("messageExpression {}", e.message),
                    )),
                }
            }
            if let Ok(p) = &program {
                if p.references("oldSelf") {
                    if let Some(unc) = uncorrelatable {
                        self.errors.push(FieldError::invalid(
                            rule_path,
                            src,
                            format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {unc}"),
                        ));
                    }
                } else if let Some(b) = rule.get("optionalOldSelf").and_then(Value::as_bool) {
                    self.errors.push(FieldError::invalid(
                        format!("{base}.optionalOldSelf"),
                        b,
                        "may not be set if oldSelf is not used in rule",
                    ));
                }
            }
        }
    }
}

/// The CRD creation checks of every `x-kubernetes-validations` entry in
/// `schema` (an `openAPIV3Schema`), reported under `path` (e.g.
/// `spec.validation.openAPIV3Schema` or `spec.versions[0].schema.openAPIV3Schema`):
/// rule/message shape, compilation of `rule` and `messageExpression`, the
/// estimated cost per rule and for the whole schema.
pub fn validate_rules(schema: &Value, path: &str) -> Vec<FieldError> {
    let mut c = RulesChecker {
        errors: Vec::new(),
        total: 0,
        most_expensive: Vec::new(),
    };
    c.node(schema, true, path, Some(1), None, 0);
    if c.total > STATIC_ESTIMATED_CRD_COST_LIMIT {
        for (p, _) in std::mem::take(&mut c.most_expensive) {
            c.errors.push(FieldError::forbidden(
                p,
                "contributed to estimated rule & messageExpression cost total exceeding cost limit for entire OpenAPIv3 schema",
            ));
        }
        c.errors.push(FieldError::forbidden(
            path,
            cost_error_message(
                "x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema",
                c.total,
                STATIC_ESTIMATED_CRD_COST_LIMIT,
            ),
        ));
    }
    c.errors
}
