//! `metadata` validation (upstream's `ValidateObjectMeta` and
//! `ValidateObjectMetaUpdate`), label selectors, labels and annotations.

use serde_json::{Map, Value};

use super::{
    FieldError, NameRule, TOTAL_ANNOTATION_SIZE_LIMIT, immutable, is_dns1123_label,
    is_qualified_name, is_valid_label_value, non_negative, opt_arr, opt_obj, opt_str,
    validate_name,
};

/// Finalizer names upstream accepts without a domain prefix.
const STANDARD_FINALIZERS: &[&str] = &["kubernetes", "orphan", "foregroundDeletion"];

/// Validates `metadata` of an object whose names follow `rule`; `path` is
/// the field path of the metadata (`metadata`).
pub fn validate_object_meta(
    meta: &Value,
    namespaced: bool,
    rule: NameRule,
    path: &str,
) -> Vec<FieldError> {
    object_meta(meta, namespaced, rule, path, true)
}

/// [`validate_object_meta`] with apimachinery's generic finalizer rule (any
/// qualified name), which CustomResourceDefinitions and custom resources get
/// upstream: only built-in kinds require a standard or domain-prefixed name.
pub fn validate_object_meta_generic(
    meta: &Value,
    namespaced: bool,
    rule: NameRule,
    path: &str,
) -> Vec<FieldError> {
    object_meta(meta, namespaced, rule, path, false)
}

fn object_meta(
    meta: &Value,
    namespaced: bool,
    rule: NameRule,
    path: &str,
    kube_finalizers: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(m) = meta.as_object() else {
        errs.push(FieldError::type_invalid(path, meta, "object"));
        return errs;
    };
    let generate_name = opt_str(
        &mut errs,
        m.get("generateName"),
        &format!("{path}.generateName"),
    )
    .unwrap_or("");
    if !generate_name.is_empty() {
        for msg in validate_name(rule, generate_name, true) {
            errs.push(FieldError::invalid(
                format!("{path}.generateName"),
                generate_name,
                msg,
            ));
        }
    }
    let name = opt_str(&mut errs, m.get("name"), &format!("{path}.name")).unwrap_or("");
    if name.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.name"),
            "name or generateName is required",
        ));
    } else {
        for msg in validate_name(rule, name, false) {
            errs.push(FieldError::invalid(format!("{path}.name"), name, msg));
        }
    }
    let ns_path = format!("{path}.namespace");
    let namespace = opt_str(&mut errs, m.get("namespace"), &ns_path).unwrap_or("");
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required(ns_path, ""));
        } else {
            for msg in is_dns1123_label(namespace) {
                errs.push(FieldError::invalid(&ns_path, namespace, msg));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(ns_path, "not allowed on this type"));
    }
    non_negative(
        &mut errs,
        m.get("generation"),
        &format!("{path}.generation"),
    );
    errs.extend(validate_labels(m.get("labels"), &format!("{path}.labels")));
    errs.extend(validate_annotations(
        m.get("annotations"),
        &format!("{path}.annotations"),
    ));
    errs.extend(validate_owner_references(
        m.get("ownerReferences"),
        &format!("{path}.ownerReferences"),
    ));
    errs.extend(validate_finalizers(
        m.get("finalizers"),
        &format!("{path}.finalizers"),
        kube_finalizers,
    ));
    errs
}

/// Metadata rules on update: identity fields may not change, and no
/// finalizer may be added once deletion has started.
pub fn validate_object_meta_update(new: &Value, old: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for f in ["name", "namespace", "uid", "creationTimestamp"] {
        immutable(&mut errs, new.get(f), old.get(f), &format!("{path}.{f}"));
    }
    let deleting = old.get("deletionTimestamp").is_some_and(|v| !v.is_null());
    if deleting {
        let strs = |v: &Value| -> Vec<String> {
            v.get("finalizers")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let old_f = strs(old);
        let mut extra: Vec<String> = strs(new)
            .into_iter()
            .filter(|f| !old_f.contains(f))
            .collect();
        extra.sort();
        extra.dedup();
        if !extra.is_empty() {
            let list: Vec<String> = extra.iter().map(|s| super::go_quote(s)).collect();
            errs.push(FieldError::forbidden(
                format!("{path}.finalizers"),
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    list.join(", ")
                ),
            ));
        }
    }
    errs
}

/// Reads a `map[string]string`, reporting entries of the wrong type.
pub(crate) fn string_map<'a>(
    errs: &mut Vec<FieldError>,
    v: Option<&'a Value>,
    path: &str,
) -> Vec<(&'a str, &'a str)> {
    let Some(m) = opt_obj(errs, v, path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (k, v) in m {
        match v {
            Value::String(s) => out.push((k.as_str(), s.as_str())),
            other => errs.push(FieldError::type_invalid(
                format!("{path}[{k}]"),
                other,
                "string",
            )),
        }
    }
    out
}

/// `ValidateLabels`: keys are qualified names, values label values; errors
/// carry the map's own path, as upstream's do.
pub fn validate_labels(labels: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in string_map(&mut errs, labels, path) {
        for msg in is_qualified_name(k) {
            errs.push(FieldError::invalid(path, k, msg));
        }
        for msg in is_valid_label_value(v) {
            errs.push(FieldError::invalid(path, v, msg));
        }
    }
    errs
}

/// `ValidateAnnotations`: case-insensitive qualified keys, 256 KiB in total.
pub fn validate_annotations(annotations: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0usize;
    for (k, v) in string_map(&mut errs, annotations, path) {
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, k, msg));
        }
        total += k.len() + v.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

fn validate_owner_references(refs: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut first_controller: Option<String> = None;
    for r in opt_arr(&mut errs, refs, path) {
        let Some(o) = r.as_object() else {
            errs.push(FieldError::type_invalid(path, r, "object"));
            continue;
        };
        let s = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("");
        let api_version = s("apiVersion");
        // The version is what follows the last '/', or the whole string.
        let version = api_version.rsplit('/').next().unwrap_or("");
        if version.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.apiVersion"),
                api_version,
                "version must not be empty",
            ));
        }
        if s("kind").is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.kind"),
                s("kind"),
                "kind must not be empty",
            ));
        }
        if s("name").is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.name"),
                s("name"),
                "name must not be empty",
            ));
        }
        if s("uid").is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.uid"),
                s("uid"),
                "uid must not be empty",
            ));
        }
        if o.get("controller").and_then(Value::as_bool) == Some(true) {
            let current = format!("{}/{}", s("kind"), s("name"));
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid(
                    path,
                    refs.cloned().unwrap_or(Value::Null),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
    errs
}

/// `ValidateFinalizerName` (core flavour): qualified, and either prefixed or
/// one of the standard names.
pub fn validate_finalizer_name(name: &str, path: &str) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = is_qualified_name(name)
        .into_iter()
        .map(|msg| FieldError::invalid(path, name, msg))
        .collect();
    if !name.contains('/') && !STANDARD_FINALIZERS.contains(&name) {
        errs.push(FieldError::invalid(
            path,
            name,
            "name is neither a standard finalizer name nor is it fully qualified",
        ));
    }
    errs
}

fn validate_finalizers(finalizers: Option<&Value>, path: &str, kube: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut has_orphan = false;
    let mut has_foreground = false;
    for f in opt_arr(&mut errs, finalizers, path) {
        match f.as_str() {
            Some(name) => {
                has_orphan |= name == "orphan";
                has_foreground |= name == "foregroundDeletion";
                if kube {
                    errs.extend(validate_finalizer_name(name, path));
                } else {
                    errs.extend(
                        is_qualified_name(name)
                            .into_iter()
                            .map(|msg| FieldError::invalid(path, name, msg)),
                    );
                }
            }
            None => errs.push(FieldError::type_invalid(path, f, "string")),
        }
    }
    if has_orphan && has_foreground {
        errs.push(FieldError::invalid(
            path,
            finalizers.cloned().unwrap_or(Value::Null),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errs
}

/// `ValidateLabelSelector` for a metav1.LabelSelector (`None`/null is valid).
pub fn validate_label_selector(selector: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(sel) = opt_obj(&mut errs, selector, path) else {
        return errs;
    };
    errs.extend(validate_labels(
        sel.get("matchLabels"),
        &format!("{path}.matchLabels"),
    ));
    let exprs_path = format!("{path}.matchExpressions");
    for (i, expr) in opt_arr(&mut errs, sel.get("matchExpressions"), &exprs_path)
        .iter()
        .enumerate()
    {
        let p = format!("{exprs_path}[{i}]");
        let Some(e) = expr.as_object() else {
            errs.push(FieldError::type_invalid(&p, expr, "object"));
            continue;
        };
        errs.extend(validate_selector_requirement(e, &p));
    }
    errs
}

fn validate_selector_requirement(e: &Map<String, Value>, p: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let values = opt_arr(&mut errs, e.get("values"), &format!("{p}.values"));
    let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
    match op {
        "In" | "NotIn" => {
            if values.is_empty() {
                errs.push(FieldError::required(
                    format!("{p}.values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                ));
            }
        }
        "Exists" | "DoesNotExist" => {
            if !values.is_empty() {
                errs.push(FieldError::forbidden(
                    format!("{p}.values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ));
            }
        }
        _ => errs.push(FieldError::invalid(
            format!("{p}.operator"),
            op,
            "not a valid selector operator",
        )),
    }
    let key = opt_str(&mut errs, e.get("key"), &format!("{p}.key")).unwrap_or("");
    for msg in is_qualified_name(key) {
        errs.push(FieldError::invalid(format!("{p}.key"), key, msg));
    }
    for (i, v) in values.iter().enumerate() {
        let vp = format!("{p}.values[{i}]");
        match v.as_str() {
            Some(s) => {
                for msg in is_valid_label_value(s) {
                    errs.push(FieldError::invalid(&vp, s, msg));
                }
            }
            None => errs.push(FieldError::type_invalid(vp, v, "string")),
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn object_meta_cases() {
        let sub = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        let cases: Vec<(Value, bool, Vec<String>)> = vec![
            (json!({"name": "ok", "namespace": "default"}), true, vec![]),
            (
                json!({"namespace": "default"}),
                true,
                vec!["metadata.name: Required value: name or generateName is required".into()],
            ),
            (
                json!({"name": "Foo", "namespace": "default"}),
                true,
                vec![format!("metadata.name: Invalid value: \"Foo\": {sub}")],
            ),
            (json!({"name": "a"}), true, vec!["metadata.namespace: Required value".into()]),
            (
                json!({"name": "a", "namespace": "x"}),
                false,
                vec!["metadata.namespace: Forbidden: not allowed on this type".into()],
            ),
            (
                json!({"name": "a", "namespace": "d", "generateName": "Web-"}),
                true,
                vec![format!("metadata.generateName: Invalid value: \"Web-\": {sub}")],
            ),
            (
                json!({"name": "a", "namespace": "d", "labels": {"app": "-bad"}}),
                true,
                vec!["metadata.labels: Invalid value: \"-bad\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".into()],
            ),
            (
                json!({"name": "a", "namespace": "d", "annotations": {"Example.com/Key": "v"}}),
                true,
                vec![],
            ),
            (
                json!({"name": "a", "namespace": "d", "annotations": {"a": big}}),
                true,
                vec!["metadata.annotations: Too long: must have at most 262144 bytes".into()],
            ),
            (
                json!({"name": "a", "namespace": "d", "finalizers": ["kubernetes", "example.com/x", "custom"]}),
                true,
                vec!["metadata.finalizers: Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified".into()],
            ),
            (
                json!({"name": "a", "namespace": "d", "generation": -1}),
                true,
                vec!["metadata.generation: Invalid value: -1: must be greater than or equal to 0".into()],
            ),
            (
                json!({"name": "a", "namespace": "d", "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "1", "controller": true},
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "s", "uid": "2", "controller": true},
                    {"apiVersion": "", "kind": "", "name": "", "uid": ""}
                ]}),
                true,
                vec![
                    "metadata.ownerReferences: Invalid value: [{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"r\",\"uid\":\"1\",\"controller\":true},{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"s\",\"uid\":\"2\",\"controller\":true},{\"apiVersion\":\"\",\"kind\":\"\",\"name\":\"\",\"uid\":\"\"}]: Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/r and ReplicaSet/s".into(),
                    "metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty".into(),
                    "metadata.ownerReferences.kind: Invalid value: \"\": kind must not be empty".into(),
                    "metadata.ownerReferences.name: Invalid value: \"\": name must not be empty".into(),
                    "metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty".into(),
                ],
            ),
            (
                json!({"name": 3, "namespace": "d"}),
                true,
                vec![
                    "metadata.name: Invalid value: 3: must be of type string".into(),
                    "metadata.name: Required value: name or generateName is required".into(),
                ],
            ),
        ];
        for (meta, namespaced, want) in cases {
            let mut got = msgs(&validate_object_meta(
                &meta,
                namespaced,
                NameRule::Subdomain,
                "metadata",
            ));
            let mut want = want;
            got.sort();
            want.sort();
            assert_eq!(got, want, "{meta}");
        }
    }

    #[test]
    fn meta_update_rules() {
        let old = json!({"name": "a", "namespace": "d", "uid": "1", "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["a/b"]});
        let new = json!({"name": "b", "namespace": "d", "uid": "1", "finalizers": ["a/b", "c/d"]});
        assert_eq!(
            msgs(&validate_object_meta_update(&new, &old, "metadata")),
            vec![
                "metadata.name: Invalid value: \"b\": field is immutable",
                "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"c/d\"}",
            ]
        );
        let same = json!({"name": "a", "namespace": "d", "uid": "1"});
        assert!(
            validate_object_meta_update(
                &same,
                &json!({"name": "a", "namespace": "d", "uid": "1"}),
                "metadata"
            )
            .is_empty()
        );
    }

    #[test]
    fn label_selector_cases() {
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (json!({"matchLabels": {"app": "x"}}), vec![]),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
                vec![
                    "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                ],
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
                vec![
                    "spec.selector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ],
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "Equals"}]}),
                vec![
                    "spec.selector.matchExpressions[0].operator: Invalid value: \"Equals\": not a valid selector operator",
                ],
            ),
        ];
        for (sel, want) in cases {
            assert_eq!(
                msgs(&validate_label_selector(Some(&sel), "spec.selector")),
                want,
                "{sel}"
            );
        }
    }
}
