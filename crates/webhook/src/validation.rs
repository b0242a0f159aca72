//! Validation of MutatingWebhookConfiguration and
//! ValidatingWebhookConfiguration objects, as upstream's
//! `pkg/apis/admissionregistration/validation` (with `util/webhook`'s URL and
//! service checks). Match condition expressions are only checked for
//! presence: compiling CEL is the caller's.

use std::collections::HashSet;

use berth_api::validation::{
    FieldError, NameRule, is_dns1035_label, is_dns1123_subdomain, is_qualified_name,
    is_valid_port_num, validate_label_selector, validate_object_meta, validate_object_meta_update,
};
use serde_json::{Map, Value, json};

const ACCEPTED_REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
const NO_SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun"];
const ALL_SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun", "Some", "Unknown"];
const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
const MAX_MATCH_CONDITIONS: usize = 64;

/// What an update relaxes for configurations stored before a rule existed.
struct Options {
    require_no_side_effects: bool,
    require_recognized_review_version: bool,
    require_unique_names: bool,
    ignore_match_conditions: bool,
}

/// Validates a new configuration (its `kind` says which).
pub fn validate_configuration(obj: &Value) -> Vec<FieldError> {
    validate(
        obj,
        &Options {
            require_no_side_effects: true,
            require_recognized_review_version: true,
            require_unique_names: true,
            ignore_match_conditions: false,
        },
    )
}

/// Validates an update of `old` to `obj`: rules the stored object already
/// broke are not enforced, as upstream's `Validate…Update`.
pub fn validate_configuration_update(obj: &Value, old: &Value) -> Vec<FieldError> {
    let old_hooks = arr(old.get("webhooks"));
    let new_hooks = arr(obj.get("webhooks"));
    let opts = Options {
        require_no_side_effects: old_hooks.iter().all(|h| {
            h.get("sideEffects")
                .and_then(Value::as_str)
                .is_some_and(|s| NO_SIDE_EFFECTS.contains(&s))
        }),
        require_recognized_review_version: old_hooks.iter().all(|h| {
            let versions = arr(h.get("admissionReviewVersions"));
            versions.is_empty()
                || versions
                    .iter()
                    .filter_map(Value::as_str)
                    .any(|v| ACCEPTED_REVIEW_VERSIONS.contains(&v))
        }),
        require_unique_names: {
            let mut seen = HashSet::new();
            old_hooks
                .iter()
                .all(|h| seen.insert(h.get("name").cloned().unwrap_or(Value::Null).to_string()))
        },
        ignore_match_conditions: old_hooks.len() == new_hooks.len()
            && old_hooks
                .iter()
                .zip(new_hooks)
                .all(|(o, n)| o.get("matchConditions") == n.get("matchConditions")),
    };
    let mut errs = validate(obj, &opts);
    if let (Some(m), Some(o)) = (obj.get("metadata"), old.get("metadata"))
        && m.is_object()
    {
        errs.extend(validate_object_meta_update(m, o, "metadata"));
    }
    errs
}

fn validate(obj: &Value, opts: &Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mutating = match obj.get("kind").and_then(Value::as_str) {
        Some("MutatingWebhookConfiguration") => true,
        Some("ValidatingWebhookConfiguration") => false,
        other => {
            errs.push(FieldError::not_supported(
                "kind",
                other.unwrap_or(""),
                &[
                    "MutatingWebhookConfiguration",
                    "ValidatingWebhookConfiguration",
                ],
            ));
            return errs;
        }
    };
    let empty = Value::Object(Map::new());
    let meta = match obj.get("metadata") {
        None | Some(Value::Null) => &empty,
        Some(m) => m,
    };
    errs.extend(validate_object_meta(
        meta,
        false,
        NameRule::Subdomain,
        "metadata",
    ));
    let mut names = HashSet::new();
    for (i, hook) in typed_arr(&mut errs, obj.get("webhooks"), "webhooks")
        .iter()
        .enumerate()
    {
        let path = format!("webhooks[{i}]");
        let Some(h) = hook.as_object() else {
            errs.push(FieldError::type_invalid(&path, hook, "object"));
            continue;
        };
        errs.extend(validate_webhook(h, mutating, opts, &path));
        errs.extend(validate_review_versions(
            h.get("admissionReviewVersions"),
            opts.require_recognized_review_version,
            &format!("{path}.admissionReviewVersions"),
        ));
        if opts.require_unique_names
            && let Some(name) = h.get("name").and_then(Value::as_str)
            && !name.is_empty()
            && !names.insert(name)
        {
            errs.push(FieldError::duplicate(format!("{path}.name"), name));
        }
    }
    errs
}

fn validate_webhook(
    h: &Map<String, Value>,
    mutating: bool,
    opts: &Options,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = typed_str(&mut errs, h.get("name"), &format!("{path}.name")).unwrap_or("");
    errs.extend(fully_qualified_name(name, &format!("{path}.name")));
    for (i, rule) in typed_arr(&mut errs, h.get("rules"), &format!("{path}.rules"))
        .iter()
        .enumerate()
    {
        let p = format!("{path}.rules[{i}]");
        match rule.as_object() {
            Some(r) => errs.extend(validate_rule(r, &p)),
            None => errs.push(FieldError::type_invalid(&p, rule, "object")),
        }
    }
    one_of(
        &mut errs,
        h.get("failurePolicy"),
        &format!("{path}.failurePolicy"),
        FAILURE_POLICIES,
    );
    one_of(
        &mut errs,
        h.get("matchPolicy"),
        &format!("{path}.matchPolicy"),
        MATCH_POLICIES,
    );
    let allowed = if opts.require_no_side_effects {
        NO_SIDE_EFFECTS
    } else {
        ALL_SIDE_EFFECTS
    };
    let se_path = format!("{path}.sideEffects");
    match h.get("sideEffects") {
        // The API server decodes through a typed struct whose `sideEffects` is a
        // plain string: an absent field arrives empty.
        None | Some(Value::Null) => errs.push(FieldError::required(
            &se_path,
            format!("must specify one of {}", allowed.join(", ")),
        )),
        Some(Value::String(s)) if s.is_empty() => errs.push(FieldError::required(
            &se_path,
            format!("must specify one of {}", allowed.join(", ")),
        )),
        Some(_) => one_of(&mut errs, h.get("sideEffects"), &se_path, allowed),
    }
    let t_path = format!("{path}.timeoutSeconds");
    if let Some(t) = typed_int(&mut errs, h.get("timeoutSeconds"), &t_path)
        && !(1..=30).contains(&t)
    {
        errs.push(FieldError::invalid(
            t_path,
            t,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    for sel in ["namespaceSelector", "objectSelector"] {
        if let Some(s) = h.get(sel).filter(|s| !s.is_null()) {
            errs.extend(validate_label_selector(Some(s), &format!("{path}.{sel}")));
        }
    }
    if mutating {
        one_of(
            &mut errs,
            h.get("reinvocationPolicy"),
            &format!("{path}.reinvocationPolicy"),
            REINVOCATION_POLICIES,
        );
    }
    errs.extend(validate_client_config(
        h.get("clientConfig"),
        &format!("{path}.clientConfig"),
    ));
    if !opts.ignore_match_conditions {
        errs.extend(validate_match_conditions(
            h.get("matchConditions"),
            &format!("{path}.matchConditions"),
        ));
    }
    errs
}

/// `utilvalidation.IsFullyQualifiedName`: a DNS subdomain of at least three
/// labels.
fn fully_qualified_name(name: &str, path: &str) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let msgs = is_dns1123_subdomain(name);
    if !msgs.is_empty() {
        return vec![FieldError::invalid(path, name, msgs.join(","))];
    }
    if name.split('.').count() < 3 {
        return vec![FieldError::invalid(
            path,
            name,
            "should be a domain with at least three segments separated by dots",
        )];
    }
    Vec::new()
}

/// Upstream's `validateRuleWithOperations` (subresources allowed), which
/// webhooks and admission policies share.
pub fn validate_rule_with_operations(r: &Value, path: &str) -> Vec<FieldError> {
    match r.as_object() {
        Some(m) => validate_rule(m, path),
        None => vec![FieldError::type_invalid(path, r, "object")],
    }
}

fn validate_rule(r: &Map<String, Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ops_path = format!("{path}.operations");
    let ops = typed_strings(&mut errs, r.get("operations"), &ops_path);
    if ops.is_empty() {
        errs.push(FieldError::required(&ops_path, ""));
    }
    if ops.len() > 1 && ops.contains(&"*") {
        errs.push(FieldError::invalid(
            &ops_path,
            json!(ops),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, op) in ops.iter().enumerate() {
        if !OPERATIONS.contains(op) {
            errs.push(FieldError::not_supported(
                format!("{ops_path}[{i}]"),
                *op,
                OPERATIONS,
            ));
        }
    }
    let groups_path = format!("{path}.apiGroups");
    let groups = typed_strings(&mut errs, r.get("apiGroups"), &groups_path);
    if groups.is_empty() {
        errs.push(FieldError::required(&groups_path, ""));
    }
    if groups.len() > 1 && groups.contains(&"*") {
        errs.push(FieldError::invalid(
            &groups_path,
            json!(groups),
            "if '*' is present, must not specify other API groups",
        ));
    }
    let versions_path = format!("{path}.apiVersions");
    let versions = typed_strings(&mut errs, r.get("apiVersions"), &versions_path);
    if versions.is_empty() {
        errs.push(FieldError::required(&versions_path, ""));
    }
    if versions.len() > 1 && versions.contains(&"*") {
        errs.push(FieldError::invalid(
            &versions_path,
            json!(versions),
            "if '*' is present, must not specify other API versions",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        if v.is_empty() {
            errs.push(FieldError::required(format!("{versions_path}[{i}]"), ""));
        }
    }
    let res_path = format!("{path}.resources");
    let resources = typed_strings(&mut errs, r.get("resources"), &res_path);
    errs.extend(validate_resources(&resources, &res_path));
    if let Some(scope) = typed_str(&mut errs, r.get("scope"), &format!("{path}.scope"))
        && !SCOPES.contains(&scope)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.scope"),
            scope,
            SCOPES,
        ));
    }
    errs
}

/// Upstream's `validateResources` (subresources allowed), including its
/// reading of `*` with other resources: only the last resource without a
/// subresource decides whether `*` conflicts.
fn validate_resources(resources: &[&str], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if resources.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    let mut with_wildcard_sub: HashSet<&str> = HashSet::new();
    let mut sub_with_wildcard_res: HashSet<&str> = HashSet::new();
    let mut double_wildcard = false;
    let mut single_wildcard = false;
    let mut without_sub = false;
    for (i, res_sub) in resources.iter().enumerate() {
        let p = format!("{path}[{i}]");
        if res_sub.is_empty() {
            errs.push(FieldError::required(p, ""));
            continue;
        }
        if *res_sub == "*/*" {
            double_wildcard = true;
        }
        if *res_sub == "*" {
            single_wildcard = true;
        }
        let Some((res, sub)) = res_sub.split_once('/') else {
            without_sub = *res_sub != "*";
            continue;
        };
        if with_wildcard_sub.contains(res) {
            errs.push(FieldError::invalid(
                &p,
                *res_sub,
                format!("if '{res}/*' is present, must not specify {res_sub}"),
            ));
        }
        if sub_with_wildcard_res.contains(sub) {
            errs.push(FieldError::invalid(
                &p,
                *res_sub,
                format!("if '*/{sub}' is present, must not specify {res_sub}"),
            ));
        }
        if sub == "*" {
            with_wildcard_sub.insert(res);
        }
        if res == "*" {
            sub_with_wildcard_res.insert(sub);
        }
    }
    if resources.len() > 1 && double_wildcard {
        errs.push(FieldError::invalid(
            path,
            json!(resources),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single_wildcard && without_sub {
        errs.push(FieldError::invalid(
            path,
            json!(resources),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
    errs
}

fn validate_review_versions(
    v: Option<&Value>,
    require_recognized: bool,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let versions = typed_strings(&mut errs, v, path);
    if versions.is_empty() {
        if errs.is_empty() {
            errs.push(FieldError::required(
                path,
                format!(
                    "must specify one of {}",
                    ACCEPTED_REVIEW_VERSIONS.join(", ")
                ),
            ));
        }
        return errs;
    }
    let mut seen = HashSet::new();
    let mut accepted = false;
    for (i, v) in versions.iter().enumerate() {
        let p = format!("{path}[{i}]");
        if !seen.insert(*v) {
            errs.push(FieldError::invalid(p, *v, "duplicate version"));
            continue;
        }
        for msg in is_dns1035_label(v) {
            errs.push(FieldError::invalid(&p, *v, msg));
        }
        accepted |= ACCEPTED_REVIEW_VERSIONS.contains(v);
    }
    if require_recognized && !accepted {
        errs.push(FieldError::invalid(
            path,
            json!(versions),
            format!(
                "must include at least one of {}",
                ACCEPTED_REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
    errs
}

fn validate_client_config(cc: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let empty = Map::new();
    let cc = match cc {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(other) => return vec![FieldError::type_invalid(path, other, "object")],
    };
    let url = cc.get("url").filter(|v| !v.is_null());
    let service = cc.get("service").filter(|v| !v.is_null());
    match (url, service) {
        (Some(_), Some(_)) | (None, None) => errs.push(FieldError::required(
            path,
            "exactly one of url or service is required",
        )),
        (Some(u), None) => {
            let p = format!("{path}.url");
            if let Some(u) = typed_str(&mut errs, Some(u), &p) {
                errs.extend(validate_webhook_url(u, &p));
            }
        }
        (None, Some(s)) => {
            let p = format!("{path}.service");
            match s.as_object() {
                Some(s) => errs.extend(validate_webhook_service(s, &p)),
                None => errs.push(FieldError::type_invalid(p, s, "object")),
            }
        }
    }
    if let Some(ca) = cc.get("caBundle").filter(|v| !v.is_null())
        && !ca.is_string()
    {
        errs.push(FieldError::type_invalid(
            format!("{path}.caBundle"),
            ca,
            "string",
        ));
    }
    errs
}

/// `ValidateWebhookURL` with https forced.
fn validate_webhook_url(u: &str, path: &str) -> Vec<FieldError> {
    const FORM: &str = "; desired format: https://host[/path]";
    let mut errs = Vec::new();
    let parsed = match crate::url::parse(u) {
        Ok(p) => p,
        Err(e) => {
            errs.push(FieldError::required(
                path,
                format!("url must be a valid URL: {e}{FORM}"),
            ));
            return errs;
        }
    };
    if parsed.scheme != "https" {
        errs.push(FieldError::invalid(
            path,
            parsed.scheme.as_str(),
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if parsed.host_port.is_empty() {
        errs.push(FieldError::invalid(
            path,
            "",
            format!("host must be specified{FORM}"),
        ));
    }
    if let Some(user) = &parsed.user {
        errs.push(FieldError::invalid(
            path,
            user.as_str(),
            "user information is not permitted in the URL",
        ));
    }
    if !parsed.fragment.is_empty() {
        errs.push(FieldError::invalid(
            path,
            parsed.fragment.as_str(),
            "fragments are not permitted in the URL",
        ));
    }
    if !parsed.query.is_empty() {
        errs.push(FieldError::invalid(
            path,
            parsed.query.as_str(),
            "query parameters are not permitted in the URL",
        ));
    }
    errs
}

/// `ValidateWebhookService`.
fn validate_webhook_service(s: &Map<String, Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = typed_str(&mut errs, s.get("name"), &format!("{path}.name")).unwrap_or("");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    let ns = typed_str(&mut errs, s.get("namespace"), &format!("{path}.namespace")).unwrap_or("");
    if ns.is_empty() {
        errs.push(FieldError::required(format!("{path}.namespace"), ""));
    }
    // Stored objects are defaulted to 443 before validation.
    let port = typed_int(&mut errs, s.get("port"), &format!("{path}.port")).unwrap_or(443);
    let msgs = is_valid_port_num(port);
    if !msgs.is_empty() {
        errs.push(FieldError::invalid(
            format!("{path}.port"),
            port,
            format!("port is not valid: {}", msgs.join(", ")),
        ));
    }
    let p_path = format!("{path}.path");
    let Some(url_path) = typed_str(&mut errs, s.get("path"), &p_path) else {
        return errs;
    };
    if url_path.is_empty() || url_path == "/" {
        return errs;
    }
    if url_path == "//" {
        errs.push(FieldError::invalid(
            p_path,
            url_path,
            "segment[0] may not be empty",
        ));
        return errs;
    }
    if !url_path.starts_with('/') {
        errs.push(FieldError::invalid(
            &p_path,
            url_path,
            "must start with a '/'",
        ));
    }
    // Upstream drops the first byte whatever it is, then one trailing '/'.
    let mut rest = url_path.get(1..).unwrap_or("");
    rest = rest.strip_suffix('/').unwrap_or(rest);
    for (i, step) in rest.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                &p_path,
                url_path,
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for msg in is_dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                &p_path,
                url_path,
                format!("segment[{i}]: {msg}"),
            ));
        }
    }
    errs
}

fn validate_match_conditions(v: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let conditions = typed_arr(&mut errs, v, path);
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errs.push(FieldError::too_many(
            path,
            conditions.len(),
            MAX_MATCH_CONDITIONS,
        ));
        return errs;
    }
    let mut names = HashSet::new();
    for (i, c) in conditions.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(c) = c.as_object() else {
            errs.push(FieldError::type_invalid(&p, c, "object"));
            continue;
        };
        let expr =
            typed_str(&mut errs, c.get("expression"), &format!("{p}.expression")).unwrap_or("");
        if expr.trim().is_empty() {
            errs.push(FieldError::required(format!("{p}.expression"), ""));
        }
        let name = typed_str(&mut errs, c.get("name"), &format!("{p}.name")).unwrap_or("");
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

/// A policy field that, when set, must be one of `allowed`.
fn one_of(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str, allowed: &[&str]) {
    if let Some(s) = typed_str(errs, v, path)
        && !allowed.contains(&s)
    {
        errs.push(FieldError::not_supported(path, s, allowed));
    }
}

fn typed_str<'a>(errs: &mut Vec<FieldError>, v: Option<&'a Value>, path: &str) -> Option<&'a str> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            errs.push(FieldError::type_invalid(path, other, "string"));
            None
        }
    }
}

fn typed_int(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str) -> Option<i64> {
    match v {
        None | Some(Value::Null) => None,
        Some(n) if n.as_i64().is_some() => n.as_i64(),
        Some(other) => {
            errs.push(FieldError::type_invalid(path, other, "integer"));
            None
        }
    }
}

fn typed_arr<'a>(errs: &mut Vec<FieldError>, v: Option<&'a Value>, path: &str) -> &'a [Value] {
    match v {
        None | Some(Value::Null) => &[],
        Some(Value::Array(a)) => a,
        Some(other) => {
            errs.push(FieldError::type_invalid(path, other, "array"));
            &[]
        }
    }
}

fn typed_strings<'a>(errs: &mut Vec<FieldError>, v: Option<&'a Value>, path: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    for (i, item) in typed_arr(errs, v, path).iter().enumerate() {
        match item.as_str() {
            Some(s) => out.push(s),
            None => errs.push(FieldError::type_invalid(
                format!("{path}[{i}]"),
                item,
                "string",
            )),
        }
    }
    out
}

fn arr(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

#[cfg(test)]
mod tests;
