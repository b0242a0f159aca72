//! Ingress and IngressClass validation as upstream's
//! `pkg/apis/networking/validation` (1.33): paths, messages and value forms.
//! v1beta1 bodies are validated in their v1 form, as upstream validates the
//! internal type whatever the request's version.

use serde_json::Value;

use super::{
    FIELD_IMMUTABLE, FieldError, FieldErrorType, NameRule, is_dns1035_label, is_dns1123_subdomain,
    is_valid_port_name, is_valid_port_num, regex_error, semantic_eq, validate_name,
};
use crate::networking::{CLASS_ANNOTATION, V1BETA1, ingress_to_v1};

const PATH_TYPES: &[&str] = &["Exact", "ImplementationSpecific", "Prefix"];
const INVALID_PATH_SEQUENCES: &[&str] = &["//", "/./", "/../", "%2f", "%2F"];
const INVALID_PATH_SUFFIXES: &[&str] = &["/..", "/."];
const MAX_LEN_CONTROLLER: usize = 250;
const WILDCARD_MSG: &str = "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character";
const WILDCARD_FMT: &str = r"\*\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const HTTP_PATH_FMT: &str = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+";

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// An Invalid error whose value is a Go value printed with `%#v` (upstream
/// shows some struct and slice values that way).
fn invalid_go(field: impl Into<String>, go_value: &str, detail: &str) -> FieldError {
    FieldError {
        kind: FieldErrorType::Invalid,
        field: field.into(),
        value: None,
        detail: format!("{go_value}: {detail}"),
    }
}

/// `IsWildcardDNS1123Subdomain`.
fn is_wildcard_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(super::max_len_error(253));
    }
    let ok = value
        .strip_prefix("*.")
        .is_some_and(|rest| is_dns1123_subdomain(rest).is_empty());
    if !ok {
        errs.push(regex_error(WILDCARD_MSG, WILDCARD_FMT, &["*.example.com"]));
    }
    errs
}

fn v1_form(obj: &Value) -> std::borrow::Cow<'_, Value> {
    if obj.get("apiVersion").and_then(Value::as_str) == Some(V1BETA1) {
        std::borrow::Cow::Owned(ingress_to_v1(obj.clone()))
    } else {
        std::borrow::Cow::Borrowed(obj)
    }
}

/// `ValidateIngressCreate` / `ValidateIngressUpdate` (metadata is checked by the caller).
pub fn validate_ingress(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let obj = v1_form(obj);
    let old = old.map(v1_form);
    let mut errs = Vec::new();
    let empty = Value::Null;
    let spec = obj.get("spec").unwrap_or(&empty);
    // Updates keep accepting what was stored before validation tightened.
    let allow_wildcard_rules = old.as_deref().is_some_and(|o| {
        arr(o.get("spec").unwrap_or(&empty), "rules")
            .iter()
            .any(|r| s(r, "host").contains('*') && !rule_value_errors(r, "").is_empty())
    });
    let allow_bad_secret = old.as_deref().is_some_and(|o| {
        arr(o.get("spec").unwrap_or(&empty), "tls")
            .iter()
            .any(|t| !secret_name_errors(s(t, "secretName")).is_empty())
    });
    let rules = arr(spec, "rules");
    let default_backend = spec.get("defaultBackend").filter(|b| !b.is_null());
    if rules.is_empty() && default_backend.is_none() {
        errs.push(invalid_go(
            "spec",
            "[]networking.IngressRule(nil)",
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(b) = default_backend {
        errs.extend(validate_backend(b, "spec.defaultBackend"));
    }
    for (i, rule) in rules.iter().enumerate() {
        let path = format!("spec.rules[{i}]");
        let host = s(rule, "host");
        let mut wildcard = false;
        if !host.is_empty() {
            if host.parse::<std::net::IpAddr>().is_ok() {
                errs.push(FieldError::invalid(
                    format!("{path}.host"),
                    host,
                    "must be a DNS name, not an IP address",
                ));
            }
            let msgs = if host.contains('*') {
                wildcard = true;
                is_wildcard_dns1123_subdomain(host)
            } else {
                is_dns1123_subdomain(host)
            };
            for m in msgs {
                errs.push(FieldError::invalid(format!("{path}.host"), host, m));
            }
        }
        if !wildcard || !allow_wildcard_rules {
            errs.extend(rule_value_errors(rule, &path));
        }
    }
    for (i, tls) in arr(spec, "tls").iter().enumerate() {
        for (j, host) in arr(tls, "hosts").iter().enumerate() {
            let host = host.as_str().unwrap_or("");
            let msgs = if host.contains('*') {
                is_wildcard_dns1123_subdomain(host)
            } else {
                is_dns1123_subdomain(host)
            };
            for m in msgs {
                errs.push(FieldError::invalid(
                    format!("spec.tls[{i}].hosts[{j}]"),
                    host,
                    m,
                ));
            }
        }
        if !allow_bad_secret {
            let name = s(tls, "secretName");
            for m in secret_name_errors(name) {
                errs.push(FieldError::invalid(
                    format!("spec.tls[{i}].secretName"),
                    name,
                    m,
                ));
            }
        }
    }
    if let Some(class) = spec.get("ingressClassName").and_then(Value::as_str) {
        for m in validate_name(NameRule::Subdomain, class, false) {
            errs.push(FieldError::invalid("spec.ingressClassName", class, m));
        }
    }
    if old.is_none() {
        let annotation = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(CLASS_ANNOTATION))
            .and_then(Value::as_str);
        if let (Some(a), Some(class)) = (
            annotation,
            spec.get("ingressClassName").and_then(Value::as_str),
        ) && a != class
        {
            errs.push(FieldError::invalid(
                format!("annotations.{CLASS_ANNOTATION}"),
                a,
                "must match `ingressClassName` when both are specified",
            ));
        }
    }
    errs
}

fn secret_name_errors(name: &str) -> Vec<String> {
    if name.is_empty() {
        Vec::new()
    } else {
        validate_name(NameRule::Subdomain, name, false)
    }
}

/// `validateIngressRuleValue` with `path` = `spec.rules[i]`.
fn rule_value_errors(rule: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(http) = rule.get("http").filter(|h| !h.is_null()) else {
        return errs;
    };
    let paths = arr(http, "paths");
    if paths.is_empty() {
        errs.push(FieldError::required(format!("{path}.http.paths"), ""));
    }
    for (i, p) in paths.iter().enumerate() {
        errs.extend(validate_path(p, &format!("{path}.http.paths[{i}]")));
    }
    errs
}

/// `validateHTTPIngressPath`.
fn validate_path(p: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // An absent pathType reaches here as "" (k8s-openapi's v1 type has a plain
    // string), so "" is reported as upstream reports a missing one.
    let Some(path_type) = p
        .get("pathType")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        errs.push(FieldError::required(
            format!("{path}.pathType"),
            "pathType must be specified",
        ));
        return errs;
    };
    let value = s(p, "path");
    let field = format!("{path}.path");
    match path_type {
        "Exact" | "Prefix" => {
            if !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    &field,
                    value,
                    "must be an absolute path",
                ));
            }
            if !value.is_empty() {
                for seq in INVALID_PATH_SEQUENCES {
                    if value.contains(seq) {
                        errs.push(FieldError::invalid(
                            &field,
                            value,
                            format!("must not contain '{seq}'"),
                        ));
                    }
                }
                for suffix in INVALID_PATH_SUFFIXES {
                    if value.ends_with(suffix) {
                        errs.push(FieldError::invalid(
                            &field,
                            value,
                            format!("cannot end with '{suffix}'"),
                        ));
                    }
                }
            }
        }
        "ImplementationSpecific" => {
            if !value.is_empty() && !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    &field,
                    value,
                    "must be an absolute path",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            format!("{path}.pathType"),
            other,
            PATH_TYPES,
        )),
    }
    let empty = Value::Null;
    errs.extend(validate_backend(
        p.get("backend").unwrap_or(&empty),
        &format!("{path}.backend"),
    ));
    errs
}

/// `validateIngressBackend`: exactly one of a Service (name, and a port name or
/// number) or a resource reference.
fn validate_backend(b: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let resource = b.get("resource").filter(|r| !r.is_null());
    let service = b.get("service").filter(|r| !r.is_null());
    match (resource, service) {
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            path,
            "",
            "cannot set both resource and service backends",
        )),
        (Some(r), None) => errs.extend(typed_reference_errors(
            r,
            &format!("{path}.resource"),
            false,
        )),
        (None, Some(svc)) => {
            let name = s(svc, "name");
            if name.is_empty() {
                errs.push(FieldError::required(format!("{path}.service.name"), ""));
            } else {
                for m in is_dns1035_label(name) {
                    errs.push(FieldError::invalid(format!("{path}.service.name"), name, m));
                }
            }
            let empty = Value::Null;
            let port = svc.get("port").unwrap_or(&empty);
            let port_name = s(port, "name");
            let number = port.get("number").and_then(Value::as_i64).unwrap_or(0);
            if !port_name.is_empty() && number != 0 {
                errs.push(FieldError::invalid(
                    path,
                    "",
                    "cannot set both port name & port number",
                ));
            } else if !port_name.is_empty() {
                for m in is_valid_port_name(port_name) {
                    errs.push(FieldError::invalid(
                        format!("{path}.service.port.name"),
                        port_name,
                        m,
                    ));
                }
            } else if number != 0 {
                for m in is_valid_port_num(number) {
                    errs.push(FieldError::invalid(
                        format!("{path}.service.port.number"),
                        number,
                        m,
                    ));
                }
            } else {
                errs.push(FieldError::required(
                    path,
                    "port name or number is required",
                ));
            }
        }
        (None, None) => errs.push(FieldError::invalid(
            path,
            "",
            "resource or service backend is required",
        )),
    }
    errs
}

/// `validateIngressTypedLocalObjectReference` and, with `class_params`,
/// `validateIngressClassParametersReference` (scope and namespace too).
fn typed_reference_errors(r: &Value, path: &str, class_params: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(group) = r.get("apiGroup").and_then(Value::as_str) {
        for m in is_dns1123_subdomain(group) {
            errs.push(FieldError::invalid(format!("{path}.apiGroup"), group, m));
        }
    }
    for key in ["kind", "name"] {
        let v = s(r, key);
        if v.is_empty() {
            errs.push(FieldError::required(format!("{path}.{key}"), ""));
        } else {
            for m in validate_name(NameRule::PathSegment, v, false) {
                errs.push(FieldError::invalid(format!("{path}.{key}"), v, m));
            }
        }
    }
    if !class_params {
        return errs;
    }
    let Some(scope) = r.get("scope").and_then(Value::as_str) else {
        errs.push(FieldError::required(format!("{path}.scope"), ""));
        return errs;
    };
    let namespace = r.get("namespace").and_then(Value::as_str);
    match scope {
        "Namespace" => match namespace {
            None => errs.push(FieldError::required(
                format!("{path}.namespace"),
                "`parameters.scope` is set to 'Namespace'",
            )),
            Some(ns) => {
                for m in validate_name(NameRule::Label, ns, false) {
                    errs.push(FieldError::invalid(format!("{path}.namespace"), ns, m));
                }
            }
        },
        "Cluster" => {
            if namespace.is_some() {
                errs.push(FieldError::forbidden(
                    format!("{path}.namespace"),
                    "`parameters.scope` is set to 'Cluster'",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            format!("{path}.scope"),
            other,
            &["Cluster", "Namespace"],
        )),
    }
    errs
}

/// `ValidateIngressClass` / `ValidateIngressClassUpdate` (metadata by the caller).
pub fn validate_ingress_class(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let empty = Value::Null;
    let spec = obj.get("spec").unwrap_or(&empty);
    if let Some(old) = old {
        let new_c = spec.get("controller").cloned().unwrap_or(Value::Null);
        let old_c = old
            .pointer("/spec/controller")
            .cloned()
            .unwrap_or(Value::Null);
        if !semantic_eq(&new_c, &old_c) {
            errs.push(FieldError::invalid(
                "spec.controller",
                new_c,
                FIELD_IMMUTABLE,
            ));
        }
    }
    let controller = s(spec, "controller");
    if controller.is_empty() {
        errs.push(FieldError::required("spec.controller", ""));
    } else {
        if controller.len() > MAX_LEN_CONTROLLER {
            errs.push(FieldError::too_long("spec.controller", MAX_LEN_CONTROLLER));
        }
        errs.extend(domain_prefixed_path_errors("spec.controller", controller));
    }
    if let Some(p) = spec.get("parameters").filter(|p| !p.is_null()) {
        errs.extend(typed_reference_errors(p, "spec.parameters", true));
    }
    errs
}

/// `IsDomainPrefixedPath`.
fn domain_prefixed_path_errors(field: &str, value: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some((host, path)) = value
        .split_once('/')
        .filter(|(h, p)| !h.is_empty() && !p.is_empty())
    else {
        errs.push(FieldError::invalid(
            field,
            value,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        ));
        return errs;
    };
    for m in is_dns1123_subdomain(host) {
        errs.push(FieldError::invalid(field, host, m));
    }
    let path_ok = path
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&c));
    if !path_ok {
        errs.push(FieldError::invalid(
            field,
            path,
            regex_error("Invalid path", HTTP_PATH_FMT, &[]),
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::aggregate_message;
    use serde_json::json;

    fn ingress(spec: Value) -> Value {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i", "namespace": "default"}, "spec": spec})
    }

    fn svc_backend() -> Value {
        json!({"service": {"name": "web", "port": {"number": 80}}})
    }

    #[test]
    fn ingress_cases() {
        let path = |p: Value| {
            ingress(json!({"rules": [{"host": "a.example.com", "http": {"paths": [p]}}]}))
        };
        let cases: Vec<(Value, &str)> = vec![
            (ingress(json!({"defaultBackend": svc_backend()})), ""),
            (
                ingress(json!({})),
                "spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified",
            ),
            (
                path(json!({"path": "/a", "backend": svc_backend()})),
                "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
            ),
            (
                path(json!({"path": "a", "pathType": "Prefix", "backend": svc_backend()})),
                "spec.rules[0].http.paths[0].path: Invalid value: \"a\": must be an absolute path",
            ),
            (
                path(json!({"path": "/a//b", "pathType": "Exact", "backend": svc_backend()})),
                "spec.rules[0].http.paths[0].path: Invalid value: \"/a//b\": must not contain '//'",
            ),
            (
                path(json!({"path": "/a/..", "pathType": "Exact", "backend": svc_backend()})),
                "spec.rules[0].http.paths[0].path: Invalid value: \"/a/..\": cannot end with '/..'",
            ),
            (
                path(
                    json!({"path": "", "pathType": "ImplementationSpecific", "backend": svc_backend()}),
                ),
                "",
            ),
            (
                path(json!({"path": "/", "pathType": "Regex", "backend": svc_backend()})),
                "spec.rules[0].http.paths[0].pathType: Unsupported value: \"Regex\": supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\"",
            ),
            (
                path(json!({"path": "/", "pathType": "Prefix", "backend": {}})),
                "spec.rules[0].http.paths[0].backend: Invalid value: \"\": resource or service backend is required",
            ),
            (
                path(
                    json!({"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}, "resource": {"kind": "B", "name": "b"}}}),
                ),
                "spec.rules[0].http.paths[0].backend: Invalid value: \"\": cannot set both resource and service backends",
            ),
            (
                path(
                    json!({"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"name": "http", "number": 80}}}}),
                ),
                "spec.rules[0].http.paths[0].backend: Invalid value: \"\": cannot set both port name & port number",
            ),
            (
                path(
                    json!({"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web"}}}),
                ),
                "spec.rules[0].http.paths[0].backend: Required value: port name or number is required",
            ),
            (
                path(
                    json!({"path": "/", "pathType": "Prefix", "backend": {"resource": {"apiGroup": "k8s.example.com", "kind": "StorageBucket", "name": "static"}}}),
                ),
                "",
            ),
            (
                ingress(
                    json!({"rules": [{"host": "*.foo.com", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": svc_backend()}]}}]}),
                ),
                "",
            ),
            (
                ingress(json!({"rules": [{"host": "foo.*.com"}]})),
                "spec.rules[0].host: Invalid value: \"foo.*.com\": a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ),
            (
                ingress(json!({"rules": [{"host": "10.0.0.1"}]})),
                "spec.rules[0].host: Invalid value: \"10.0.0.1\": must be a DNS name, not an IP address",
            ),
            (
                ingress(json!({"rules": [{"host": "a.com", "http": {"paths": []}}]})),
                "spec.rules[0].http.paths: Required value",
            ),
        ];
        for (obj, want) in cases {
            let errs = validate_ingress(&obj, None);
            assert_eq!(aggregate_message(&errs), want, "{obj}");
        }
    }

    #[test]
    fn v1beta1_is_validated_in_v1_form() {
        let obj = json!({"apiVersion": V1BETA1, "kind": "Ingress", "metadata": {"name": "i"}, "spec": {"backend": {"serviceName": "web", "servicePort": 80}}});
        assert!(validate_ingress(&obj, None).is_empty());
        let obj = json!({"apiVersion": V1BETA1, "kind": "Ingress", "metadata": {"name": "i"}, "spec": {"backend": {"serviceName": "Web", "servicePort": 80}}});
        let msg = aggregate_message(&validate_ingress(&obj, None));
        assert!(
            msg.starts_with(
                "spec.defaultBackend.service.name: Invalid value: \"Web\": a DNS-1035 label"
            ),
            "{msg}"
        );
    }

    #[test]
    fn ingress_class_cases() {
        let class = |spec: Value| json!({"metadata": {"name": "c"}, "spec": spec});
        let cases = vec![
            (class(json!({"controller": "berth.dev/ingress"})), ""),
            (class(json!({})), "spec.controller: Required value"),
            (
                class(json!({"controller": "nginx"})),
                "spec.controller: Invalid value: \"nginx\": must be a domain-prefixed path (such as \"acme.io/foo\")",
            ),
            (
                class(
                    json!({"controller": "example.com/ingress-controller", "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external-lb", "scope": "Cluster"}}),
                ),
                "",
            ),
            // The seed article's apiGroup carries a version: upstream refuses it too.
            (
                class(
                    json!({"controller": "example.com/ingress-controller", "parameters": {"apiGroup": "k8s.example.com/v1alpha", "kind": "IngressParameters", "name": "external-lb", "scope": "Cluster"}}),
                ),
                "spec.parameters.apiGroup: Invalid value: \"k8s.example.com/v1alpha\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ),
            (
                class(
                    json!({"controller": "a.io/b", "parameters": {"kind": "K", "name": "n", "scope": "Namespace"}}),
                ),
                "spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'",
            ),
            (
                class(
                    json!({"controller": "a.io/b", "parameters": {"kind": "K", "name": "n", "scope": "Cluster", "namespace": "x"}}),
                ),
                "spec.parameters.namespace: Forbidden: `parameters.scope` is set to 'Cluster'",
            ),
        ];
        for (obj, want) in cases {
            assert_eq!(
                aggregate_message(&validate_ingress_class(&obj, None)),
                want,
                "{obj}"
            );
        }
        let old = class(json!({"controller": "a.io/b"}));
        let new = class(json!({"controller": "a.io/c"}));
        assert_eq!(
            aggregate_message(&validate_ingress_class(&new, Some(&old))),
            "spec.controller: Invalid value: \"a.io/c\": field is immutable"
        );
    }
}
