//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding validation,
//! as upstream's `pkg/apis/admissionregistration/validation`
//! (`ValidateValidatingAdmissionPolicy*`), with its messages and paths.
//!
//! Upstream validates after defaulting (`failurePolicy: Fail`,
//! `matchPolicy: Equivalent`, `{}` selectors); Berth does not default these
//! kinds yet, so an absent defaulted field is read as its default here rather
//! than refused as "Required value".
//!
//! Object metadata is validated by the generic rules
//! (`berth_api::validation`); this is the spec and status.

use std::collections::HashSet;

use berth_api::validation::{
    FieldError, is_dns1035_label, is_dns1123_subdomain, is_qualified_name, validate_label_selector,
};
use serde_json::{Value, json};

use super::matching::arr;
use super::{CelEnv, env_for};

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
/// `sets.List()` order, as upstream's messages list them.
const REASONS: &[&str] = &[
    "Forbidden",
    "Invalid",
    "RequestEntityTooLarge",
    "Unauthorized",
];
const VALIDATION_ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
const PARAMETER_NOT_FOUND_ACTIONS: &[&str] = &["Deny", "Allow"];
const MAX_MATCH_CONDITIONS: usize = 64;
const MAX_AUDIT_ANNOTATIONS: usize = 20;
const MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH: usize = 5 * 1024;

/// Expressions an update carries over unchanged are not compiled again
/// (upstream compiles them in its lenient "stored expressions"
/// environment), so that a policy stored under older rules stays editable.
#[derive(Default)]
struct Preexisting {
    expressions: HashSet<String>,
    /// Upstream skips match conditions entirely when they did not change.
    ignore_match_conditions: bool,
}

/// A new policy.
pub fn validate_policy(obj: &Value) -> Vec<FieldError> {
    validate_policy_spec(obj, &Preexisting::default())
}

/// An update of a policy's main resource.
pub fn validate_policy_update(obj: &Value, old: &Value) -> Vec<FieldError> {
    let spec = |o: &Value| o.get("spec").cloned().unwrap_or(Value::Null);
    let mut pre = Preexisting {
        ignore_match_conditions: spec(obj).get("matchConditions")
            == spec(old).get("matchConditions"),
        ..Default::default()
    };
    let old_spec = spec(old);
    for list in [
        "validations",
        "matchConditions",
        "variables",
        "auditAnnotations",
    ] {
        for item in arr(old_spec.get(list)) {
            for field in ["expression", "messageExpression", "valueExpression"] {
                if let Some(e) = item.get(field).and_then(Value::as_str) {
                    pre.expressions.insert(e.to_string());
                }
            }
        }
    }
    validate_policy_spec(obj, &pre)
}

/// An update through `validatingadmissionpolicies/<name>/status`.
pub fn validate_policy_status(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let warnings = obj.pointer("/status/typeChecking/expressionWarnings");
    for (i, w) in arr(warnings).iter().enumerate() {
        let p = format!("status.typeChecking.expressionWarnings[{i}]");
        if w.get("warning")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            errs.push(FieldError::required(format!("{p}.warning"), ""));
        }
        if w.get("fieldRef")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .is_empty()
        {
            errs.push(FieldError::required(format!("{p}.fieldRef"), ""));
        }
    }
    errs
}

fn validate_policy_spec(obj: &Value, pre: &Preexisting) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Some(fp) = spec.get("failurePolicy").and_then(Value::as_str)
        && !FAILURE_POLICIES.contains(&fp)
    {
        errs.push(FieldError::not_supported(
            "spec.failurePolicy",
            fp,
            FAILURE_POLICIES,
        ));
    }
    let has_params = matches!(spec.get("paramKind"), Some(Value::Object(_)));
    if let Some(pk) = spec.get("paramKind").filter(|v| v.is_object()) {
        errs.extend(validate_param_kind(pk, "spec.paramKind"));
    }
    match spec.get("matchConstraints") {
        None | Some(Value::Null) => errs.push(FieldError::required("spec.matchConstraints", "")),
        Some(mc) => {
            errs.extend(validate_match_resources(mc, "spec.matchConstraints"));
            // At least one rule: the rules give the expressions their types.
            if arr(mc.get("resourceRules")).is_empty() {
                errs.push(FieldError::required(
                    "spec.matchConstraints.resourceRules",
                    "",
                ));
            }
        }
    }
    let has_variables = !arr(spec.get("variables")).is_empty();
    let env = CelEnv {
        params: has_params,
        variables: has_variables,
    };
    if !pre.ignore_match_conditions {
        errs.extend(validate_match_conditions(
            spec.get("matchConditions"),
            &env,
            pre,
            "spec.matchConditions",
        ));
    }
    for (i, v) in arr(spec.get("variables")).iter().enumerate() {
        errs.extend(validate_variable(
            v,
            &env,
            pre,
            &format!("spec.variables[{i}]"),
        ));
    }
    let validations = arr(spec.get("validations"));
    let audit_annotations = arr(spec.get("auditAnnotations"));
    if validations.is_empty() && audit_annotations.is_empty() {
        let why = "validations or auditAnnotations must contain at least one item";
        errs.push(FieldError::required("spec.validations", why));
        errs.push(FieldError::required("spec.auditAnnotations", why));
        return errs;
    }
    for (i, v) in validations.iter().enumerate() {
        errs.extend(validate_validation(
            v,
            &env,
            pre,
            &format!("spec.validations[{i}]"),
        ));
    }
    if audit_annotations.len() > MAX_AUDIT_ANNOTATIONS {
        errs.push(FieldError::invalid(
            "spec.auditAnnotations",
            json!(audit_annotations),
            format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
        ));
    }
    let mut keys = HashSet::new();
    for (i, a) in audit_annotations.iter().enumerate() {
        let p = format!("spec.auditAnnotations[{i}]");
        errs.extend(validate_audit_annotation(a, name, &env, pre, &p));
        let key = a.get("key").and_then(Value::as_str).unwrap_or("");
        if !keys.insert(key.to_string()) {
            errs.push(FieldError::duplicate(format!("{p}.key"), key));
        }
    }
    errs
}

fn validate_param_kind(pk: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let av_path = format!("{path}.apiVersion");
    let api_version = pk.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if api_version.is_empty() {
        errs.push(FieldError::required(&av_path, ""));
    } else {
        match parse_group_version(api_version) {
            Err(e) => errs.push(FieldError::invalid(&av_path, api_version, e)),
            Ok((group, version)) => {
                if !group.is_empty() {
                    let msgs = is_dns1123_subdomain(group);
                    if !msgs.is_empty() {
                        errs.push(FieldError::invalid(&av_path, group, msgs.join(",")));
                    }
                }
                if version.is_empty() {
                    errs.push(FieldError::invalid(
                        &av_path,
                        api_version,
                        "version must be specified",
                    ));
                } else {
                    let msgs = is_dns1035_label(version);
                    if !msgs.is_empty() {
                        errs.push(FieldError::invalid(&av_path, version, msgs.join(",")));
                    }
                }
            }
        }
    }
    let kind_path = format!("{path}.kind");
    let kind = pk.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind.is_empty() {
        errs.push(FieldError::required(&kind_path, ""));
    } else {
        let msgs = is_dns1035_label(&kind.to_lowercase());
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                &kind_path,
                kind,
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    msgs.join(",")
                ),
            ));
        }
    }
    errs
}

/// Upstream's `parseGroupVersion`: `v1`, `group/v1`, or an error for more
/// than one slash.
fn parse_group_version(gv: &str) -> Result<(&str, &str), String> {
    if gv.is_empty() || gv == "/" {
        return Ok(("", ""));
    }
    match gv.matches('/').count() {
        0 => Ok(("", gv)),
        1 => Ok(gv.split_once('/').unwrap_or(("", gv))),
        _ => Err(format!("unexpected GroupVersion string: {gv}")),
    }
}

fn validate_match_resources(mr: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !mr.is_object() {
        return errs;
    }
    if let Some(mp) = mr.get("matchPolicy").and_then(Value::as_str)
        && !MATCH_POLICIES.contains(&mp)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.matchPolicy"),
            mp,
            MATCH_POLICIES,
        ));
    }
    for sel in ["namespaceSelector", "objectSelector"] {
        if let Some(s) = mr.get(sel).filter(|v| !v.is_null()) {
            errs.extend(validate_label_selector(Some(s), &format!("{path}.{sel}")));
        }
    }
    for list in ["resourceRules", "excludeResourceRules"] {
        for (i, r) in arr(mr.get(list)).iter().enumerate() {
            errs.extend(validate_named_rule(r, &format!("{path}.{list}[{i}]")));
        }
    }
    errs
}

fn validate_named_rule(r: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = HashSet::new();
    for (i, n) in arr(r.get("resourceNames")).iter().enumerate() {
        let n = n.as_str().unwrap_or("");
        let p = format!("{path}.resourceNames[{i}]");
        for msg in path_segment_name(n) {
            errs.push(FieldError::invalid(&p, n, msg));
        }
        if !names.insert(n) {
            errs.push(FieldError::duplicate(&p, n));
        }
    }
    errs.extend(berth_webhook::validate_rule_with_operations(r, path));
    errs
}

/// Upstream's `path.ValidatePathSegmentName` (no prefix).
fn path_segment_name(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|c| name.contains(**c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

fn validate_match_conditions(
    v: Option<&Value>,
    env: &CelEnv,
    pre: &Preexisting,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let conditions = arr(v);
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errs.push(FieldError::too_many(
            path,
            conditions.len(),
            MAX_MATCH_CONDITIONS,
        ));
    }
    let mut names = HashSet::new();
    for (i, c) in conditions.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let expr = c
            .get("expression")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        if expr.is_empty() {
            errs.push(FieldError::required(format!("{p}.expression"), ""));
        } else {
            errs.extend(check_expression(
                expr,
                env,
                true,
                &["bool"],
                pre,
                &format!("{p}.expression"),
            ));
        }
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        } else {
            for msg in is_qualified_name(name) {
                errs.push(FieldError::invalid(format!("{p}.name"), name, msg));
            }
            if !names.insert(name) {
                errs.push(FieldError::duplicate(format!("{p}.name"), name));
            }
        }
    }
    errs
}

fn validate_variable(v: &Value, env: &CelEnv, pre: &Preexisting, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = v.get("name").and_then(Value::as_str).unwrap_or("");
    if name.trim().is_empty() {
        errs.push(FieldError::required(
            format!("{path}.name"),
            "name is not specified",
        ));
    } else if !berth_cel::is_identifier(name) {
        errs.push(FieldError::invalid(
            format!("{path}.name"),
            name,
            "name is not a valid CEL identifier",
        ));
    }
    let expr = v.get("expression").and_then(Value::as_str).unwrap_or("");
    if expr.trim().is_empty() {
        errs.push(FieldError::required(
            format!("{path}.expression"),
            "expression is not specified",
        ));
    } else {
        errs.extend(check_expression(
            expr,
            env,
            true,
            &[],
            pre,
            &format!("{path}.expression"),
        ));
    }
    errs
}

fn validate_validation(v: &Value, env: &CelEnv, pre: &Preexisting, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let expr = v.get("expression").and_then(Value::as_str).unwrap_or("");
    if expr.trim().is_empty() {
        errs.push(FieldError::required(
            format!("{path}.expression"),
            "expression is not specified",
        ));
    } else {
        // The untrimmed text, so that the compiler's columns are the user's.
        errs.extend(check_expression(
            expr,
            env,
            true,
            &["bool"],
            pre,
            &format!("{path}.expression"),
        ));
    }
    let me = v
        .get("messageExpression")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !me.is_empty() && me.trim().is_empty() {
        errs.push(FieldError::invalid(
            format!("{path}.messageExpression"),
            me,
            "must be non-empty if specified",
        ));
    } else if !me.trim().is_empty() {
        errs.extend(check_expression(
            me,
            env,
            false,
            &["string"],
            pre,
            &format!("{path}.messageExpression"),
        ));
    }
    let msg = v.get("message").and_then(Value::as_str).unwrap_or("");
    if !msg.is_empty() && msg.trim().is_empty() {
        errs.push(FieldError::invalid(
            format!("{path}.message"),
            msg,
            "message must be non-empty if specified",
        ));
    } else if msg.trim().contains(['\n', '\r']) {
        errs.push(FieldError::invalid(
            format!("{path}.message"),
            msg,
            "message must not contain line breaks",
        ));
    }
    if let Some(reason) = v.get("reason").and_then(Value::as_str)
        && !REASONS.contains(&reason)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.reason"),
            reason,
            REASONS,
        ));
    }
    errs
}

fn validate_audit_annotation(
    a: &Value,
    policy: &str,
    env: &CelEnv,
    pre: &Preexisting,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let key = a.get("key").and_then(Value::as_str).unwrap_or("");
    if policy.is_empty() {
        errs.push(FieldError::invalid(
            format!("{path}.key"),
            key,
            "requires metadata.name be non-empty",
        ));
    } else {
        let full = format!("{policy}/{key}");
        for msg in is_qualified_name(&full) {
            errs.push(FieldError::invalid(
                format!("{path}.key"),
                full.as_str(),
                msg,
            ));
        }
    }
    let ve = a
        .get("valueExpression")
        .and_then(Value::as_str)
        .unwrap_or("");
    let p = format!("{path}.valueExpression");
    if ve.trim().is_empty() {
        errs.push(FieldError::required(&p, "valueExpression is not specified"));
    } else if ve.trim().len() > MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH {
        errs.push(FieldError::required(
            &p,
            format!(
                "must not exceed {MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH} bytes in length"
            ),
        ));
    } else {
        errs.extend(check_expression(
            ve.trim(),
            env,
            true,
            &["string", "null_type"],
            pre,
            &p,
        ));
    }
    errs
}

/// `validationActions`, the binding's `paramRef` and `matchResources`.
pub fn validate_binding(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let policy = spec.get("policyName").and_then(Value::as_str).unwrap_or("");
    if policy.is_empty() {
        errs.push(FieldError::required("spec.policyName", ""));
    } else {
        for msg in is_dns1123_subdomain(policy) {
            errs.push(FieldError::invalid("spec.policyName", policy, msg));
        }
    }
    if let Some(pr) = spec.get("paramRef").filter(|v| v.is_object()) {
        errs.extend(validate_param_ref(pr, "spec.paramRef"));
    }
    if let Some(mr) = spec.get("matchResources").filter(|v| v.is_object()) {
        // "matchResouces": upstream's path, typo included.
        errs.extend(validate_match_resources(mr, "spec.matchResouces"));
    }
    errs.extend(validate_validation_actions(
        arr(spec.get("validationActions")),
        "spec.validationActions",
    ));
    errs
}

fn validate_param_ref(pr: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = pr.get("name").and_then(Value::as_str).unwrap_or("");
    let selector = pr.get("selector").filter(|v| !v.is_null());
    const EXCLUSIVE: &str = "name and selector are mutually exclusive";
    if !name.is_empty() {
        for msg in path_segment_name(name) {
            errs.push(FieldError::invalid(format!("{path}.name"), name, msg));
        }
        if selector.is_some() {
            errs.push(FieldError::forbidden(format!("{path}.name"), EXCLUSIVE));
        }
    }
    if let Some(sel) = selector {
        errs.extend(validate_label_selector(
            Some(sel),
            &format!("{path}.selector"),
        ));
        if !name.is_empty() {
            errs.push(FieldError::forbidden(format!("{path}.selector"), EXCLUSIVE));
        }
    }
    if name.is_empty() && selector.is_none() {
        errs.push(FieldError::required(
            path,
            "one of name or selector must be specified",
        ));
    }
    match pr.get("parameterNotFoundAction").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required(
            format!("{path}.parameterNotFoundAction"),
            "",
        )),
        Some(a) if !PARAMETER_NOT_FOUND_ACTIONS.contains(&a) => {
            errs.push(FieldError::not_supported(
                format!("{path}.parameterNotFoundAction"),
                a,
                PARAMETER_NOT_FOUND_ACTIONS,
            ))
        }
        Some(_) => {}
    }
    errs
}

fn validate_validation_actions(actions: &[Value], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = HashSet::new();
    for (i, a) in actions.iter().enumerate() {
        let a = a.as_str().unwrap_or("");
        if !VALIDATION_ACTIONS.contains(&a) {
            errs.push(FieldError::not_supported(
                format!("{path}[{i}]"),
                a,
                VALIDATION_ACTIONS,
            ));
        }
        if !seen.insert(a) {
            errs.push(FieldError::duplicate(format!("{path}[{i}]"), a));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        errs.push(FieldError::invalid(
            path,
            json!(actions),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        errs.push(FieldError::required(
            path,
            "at least one validation action is required",
        ));
    }
    errs
}

/// Compiles `expr` in the policy's environment; `want` lists the result
/// types upstream accepts (empty: any). A `dyn` result passes: Berth types
/// `object` and `params` at runtime only, where upstream knows more.
fn check_expression(
    expr: &str,
    env: &CelEnv,
    authorizer: bool,
    want: &[&str],
    pre: &Preexisting,
    path: &str,
) -> Vec<FieldError> {
    if pre.expressions.contains(expr) {
        return Vec::new();
    }
    match berth_cel::compile(expr, &env_for(env, authorizer)) {
        Err(e) => vec![FieldError::invalid(path, expr, e.message)],
        Ok(p) => {
            let t = p.result_type();
            if want.is_empty() || t == "dyn" || want.contains(&t.as_str()) {
                return Vec::new();
            }
            let why = match want {
                [one] => format!("must evaluate to {one}"),
                many => format!("must evaluate to one of [{}]", many.join(" ")),
            };
            vec![FieldError::invalid(path, expr, why)]
        }
    }
}
