//! HorizontalPodAutoscaler validation, as upstream's
//! `pkg/apis/autoscaling/validation`. Upstream validates the internal type, so an
//! autoscaling/v1 object is converted to v2 first and its errors name v2's paths
//! (a v1 `targetCPUUtilizationPercentage` of 0 is `spec.metrics[0].resource.target.averageUtilization`).

use serde_json::{Map, Value};

use super::{
    FieldError, NameRule, is_dns1123_label, is_qualified_name, opt_arr, opt_int, opt_obj, opt_str,
    validate_name,
};
use crate::quantity::Quantity;

/// Upstream's `MaxPeriodSeconds`.
const MAX_PERIOD_SECONDS: i64 = 1800;
/// Upstream's `MaxStabilizationWindowSeconds`.
const MAX_STABILIZATION_WINDOW_SECONDS: i64 = 3600;

const METRIC_SOURCE_TYPES: &[&str] = &[
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

/// The v2 form of an HPA of any served version.
fn as_v2(obj: &Value) -> Value {
    match obj.get("apiVersion").and_then(Value::as_str) {
        Some("autoscaling/v1") => crate::conversion::convert(obj.clone(), "autoscaling", "v2"),
        _ => obj.clone(),
    }
}

pub fn validate_hpa(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let obj = as_v2(obj);
    let mut errs = Vec::new();
    let Some(spec) = opt_obj(&mut errs, obj.get("spec"), "spec") else {
        errs.push(FieldError::required("spec.maxReplicas", ""));
        return errs;
    };
    // Scale-to-zero (the HPAScaleToZero gate) is off upstream by default; an
    // object that already has minReplicas 0 may keep it.
    let old_min_zero = old
        .map(as_v2)
        .and_then(|o| o.pointer("/spec/minReplicas").and_then(Value::as_i64))
        == Some(0);
    let lower = if old_min_zero { 0 } else { 1 };
    let min = opt_int(&mut errs, spec.get("minReplicas"), "spec.minReplicas");
    if let Some(m) = min
        && m < lower
    {
        errs.push(FieldError::invalid(
            "spec.minReplicas",
            m,
            format!("must be greater than or equal to {lower}"),
        ));
    }
    let max = opt_int(&mut errs, spec.get("maxReplicas"), "spec.maxReplicas").unwrap_or(0);
    if max < 1 {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            max,
            "must be greater than 0",
        ));
    }
    if let Some(m) = min
        && max < m
    {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            max,
            "must be greater than or equal to `minReplicas`",
        ));
    }
    cross_version_ref(&mut errs, spec.get("scaleTargetRef"), "spec.scaleTargetRef");
    validate_metrics(&mut errs, spec.get("metrics"), min);
    if let Some(b) = opt_obj(&mut errs, spec.get("behavior"), "spec.behavior") {
        for dir in ["scaleUp", "scaleDown"] {
            let path = format!("spec.behavior.{dir}");
            if let Some(rules) = opt_obj(&mut errs, b.get(dir), &path) {
                scaling_rules(&mut errs, rules, &path);
            }
        }
    }
    errs
}

/// `ValidateHorizontalPodAutoscalerStatusUpdate`: the counts are not negative.
pub fn validate_hpa_status(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for f in ["currentReplicas", "desiredReplicas"] {
        let path = format!("status.{f}");
        if let Some(n) = opt_int(&mut errs, obj.pointer(&format!("/status/{f}")), &path)
            && n < 0
        {
            errs.push(FieldError::invalid(path, n, super::IS_NEGATIVE));
        }
    }
    errs
}

/// `ValidateCrossVersionObjectReference`: kind and name are path segments.
fn cross_version_ref(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str) {
    let empty = Map::new();
    let r = opt_obj(errs, v, path).unwrap_or(&empty);
    for f in ["kind", "name"] {
        let p = format!("{path}.{f}");
        match opt_str(errs, r.get(f), &p) {
            None | Some("") => errs.push(FieldError::required(p, "")),
            Some(s) => {
                for msg in validate_name(NameRule::PathSegment, s, false) {
                    errs.push(FieldError::invalid(p.clone(), s, msg));
                }
            }
        }
    }
}

fn validate_metrics(errs: &mut Vec<FieldError>, v: Option<&Value>, min: Option<i64>) {
    let metrics = opt_arr(errs, v, "spec.metrics");
    let mut object_or_external = false;
    for (i, m) in metrics.iter().enumerate() {
        let path = format!("spec.metrics[{i}]");
        let t = m.get("type").and_then(Value::as_str).unwrap_or("");
        object_or_external |= matches!(t, "Object" | "External");
        metric_spec(errs, m, t, &path);
    }
    if min == Some(0) && !object_or_external {
        errs.push(FieldError::forbidden(
            "spec.metrics",
            "must specify at least one Object or External metric to support scaling to zero replicas",
        ));
    }
}

/// `validateMetricSpec`: one source, the one `type` names, each checked.
fn metric_spec(errs: &mut Vec<FieldError>, m: &Value, t: &str, path: &str) {
    if t.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.type"),
            "must specify a metric source type",
        ));
    }
    if !METRIC_SOURCE_TYPES.contains(&t) {
        errs.push(FieldError::not_supported(
            format!("{path}.type"),
            t,
            METRIC_SOURCE_TYPES,
        ));
    }
    let sources = [
        "object",
        "external",
        "pods",
        "resource",
        "containerResource",
    ];
    let present: Vec<&str> = sources
        .iter()
        .copied()
        .filter(|s| m.get(*s).is_some_and(|v| !v.is_null()))
        .collect();
    // Only the first source present is validated, as upstream.
    if let Some(first) = present.first() {
        let p = format!("{path}.{first}");
        let src = m.get(*first).unwrap_or(&Value::Null);
        match *first {
            "object" => object_source(errs, src, &p),
            "external" => external_source(errs, src, &p),
            "pods" => pods_source(errs, src, &p),
            "resource" => resource_source(errs, src, &p, false),
            _ => resource_source(errs, src, &p, true),
        }
    }
    // The field `type` names, lower camel case ("ContainerResource" → "containerResource").
    let expected = match t {
        "Object" => Some("object"),
        "Pods" => Some("pods"),
        "Resource" => Some("resource"),
        "External" => Some("external"),
        "ContainerResource" => Some("containerResource"),
        _ => None,
    };
    match expected {
        Some(e) if !present.contains(&e) => errs.push(FieldError::required(
            format!("{path}.{e}"),
            "must populate information for the given metric source",
        )),
        Some(_) => {}
        // An unknown type is reported a second time, as upstream's switch default.
        None => errs.push(FieldError::not_supported(
            format!("{path}.type"),
            t,
            METRIC_SOURCE_TYPES,
        )),
    }
    if present.len() != 1 {
        for s in present.iter().filter(|s| Some(**s) != expected) {
            errs.push(FieldError::forbidden(
                format!("{path}.{s}"),
                "must populate the given metric source only",
            ));
        }
    }
}

fn target<'a>(
    errs: &mut Vec<FieldError>,
    src: &'a Value,
    path: &str,
) -> Option<&'a Map<String, Value>> {
    let t = opt_obj(errs, src.get("target"), &format!("{path}.target"));
    metric_target(errs, t, &format!("{path}.target"));
    t
}

fn has(t: Option<&Map<String, Value>>, f: &str) -> bool {
    t.and_then(|t| t.get(f)).is_some_and(|v| !v.is_null())
}

fn object_source(errs: &mut Vec<FieldError>, src: &Value, path: &str) {
    cross_version_ref(
        errs,
        src.get("describedObject"),
        &format!("{path}.describedObject"),
    );
    metric_identifier(errs, src.get("metric"), &format!("{path}.metric"));
    let t = target(errs, src, path);
    if !has(t, "value") && !has(t, "averageValue") {
        errs.push(FieldError::required(
            format!("{path}.target.averageValue"),
            "must set either a target value or averageValue",
        ));
    }
}

fn external_source(errs: &mut Vec<FieldError>, src: &Value, path: &str) {
    metric_identifier(errs, src.get("metric"), &format!("{path}.metric"));
    let t = target(errs, src, path);
    if !has(t, "value") && !has(t, "averageValue") {
        errs.push(FieldError::required(
            format!("{path}.target.averageValue"),
            "must set either a target value for metric or a per-pod target",
        ));
    }
    if has(t, "value") && has(t, "averageValue") {
        errs.push(FieldError::forbidden(
            format!("{path}.target.value"),
            "may not set both a target value for metric and a per-pod target",
        ));
    }
}

fn pods_source(errs: &mut Vec<FieldError>, src: &Value, path: &str) {
    metric_identifier(errs, src.get("metric"), &format!("{path}.metric"));
    let t = target(errs, src, path);
    if !has(t, "averageValue") {
        errs.push(FieldError::required(
            format!("{path}.target.averageValue"),
            "must specify a positive target averageValue",
        ));
    }
}

/// Resource and ContainerResource sources.
fn resource_source(errs: &mut Vec<FieldError>, src: &Value, path: &str, container: bool) {
    let name_path = format!("{path}.name");
    match src.get("name").and_then(Value::as_str).unwrap_or("") {
        "" => errs.push(FieldError::required(
            name_path,
            "must specify a resource name",
        )),
        n if container => container_resource_name(errs, n, &name_path),
        _ => {}
    }
    if container {
        let p = format!("{path}.container");
        match src.get("container").and_then(Value::as_str).unwrap_or("") {
            "" => errs.push(FieldError::required(p, "must specify a container")),
            c => {
                for msg in is_dns1123_label(c) {
                    errs.push(FieldError::invalid(p.clone(), c, msg));
                }
            }
        }
    }
    let t = target(errs, src, path);
    if !has(t, "averageUtilization") && !has(t, "averageValue") {
        errs.push(FieldError::required(
            format!("{path}.target.averageUtilization"),
            "must set either a target raw value or a target utilization",
        ));
    }
    if has(t, "averageUtilization") && has(t, "averageValue") {
        errs.push(FieldError::forbidden(
            format!("{path}.target.averageValue"),
            "may not set both a target raw value and a target utilization",
        ));
    }
}

/// `ValidateContainerResourceName`: a qualified name; without a domain, one of
/// the standard container resources.
fn container_resource_name(errs: &mut Vec<FieldError>, n: &str, path: &str) {
    let msgs = is_qualified_name(n);
    let bad = !msgs.is_empty();
    for msg in msgs {
        errs.push(FieldError::invalid(path, n, msg));
    }
    let standard =
        matches!(n, "cpu" | "memory" | "ephemeral-storage") || n.starts_with("hugepages-");
    if !bad && !n.contains('/') && !standard {
        errs.push(FieldError::invalid(
            path,
            n,
            "must be a standard resource for containers",
        ));
    }
}

/// `validateMetricTarget`.
fn metric_target(errs: &mut Vec<FieldError>, t: Option<&Map<String, Value>>, path: &str) {
    let empty = Map::new();
    let t = t.unwrap_or(&empty);
    let ty = t.get("type").and_then(Value::as_str).unwrap_or("");
    if ty.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.type"),
            "must specify a metric target type",
        ));
    }
    if !matches!(ty, "Utilization" | "Value" | "AverageValue") {
        errs.push(FieldError::invalid(
            format!("{path}.type"),
            ty,
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for f in ["value", "averageValue"] {
        let Some(v) = t.get(f).filter(|v| !v.is_null()) else {
            continue;
        };
        let p = format!("{path}.{f}");
        match Quantity::from_json(v) {
            Ok(q) if q.sign() == 1 => {}
            Ok(_) => errs.push(FieldError::invalid(p, v.clone(), "must be positive")),
            Err(e) => errs.push(FieldError::invalid(p, v.clone(), e.to_string())),
        }
    }
    if let Some(u) = opt_int(
        errs,
        t.get("averageUtilization"),
        &format!("{path}.averageUtilization"),
    ) && u < 1
    {
        errs.push(FieldError::invalid(
            format!("{path}.averageUtilization"),
            u,
            "must be greater than 0",
        ));
    }
}

/// `validateMetricIdentifier`: the metric's name is a path segment.
fn metric_identifier(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str) {
    let p = format!("{path}.name");
    match v
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "" => errs.push(FieldError::required(p, "must specify a metric name")),
        n => {
            for msg in validate_name(NameRule::PathSegment, n, false) {
                errs.push(FieldError::invalid(p.clone(), n, msg));
            }
        }
    }
}

/// `validateScalingRules` and `validateScalingPolicy`.
fn scaling_rules(errs: &mut Vec<FieldError>, rules: &Map<String, Value>, path: &str) {
    let w_path = format!("{path}.stabilizationWindowSeconds");
    if let Some(w) = opt_int(errs, rules.get("stabilizationWindowSeconds"), &w_path) {
        if w < 0 {
            errs.push(FieldError::invalid(
                w_path.clone(),
                w,
                "must be greater than or equal to zero",
            ));
        }
        if w > MAX_STABILIZATION_WINDOW_SECONDS {
            errs.push(FieldError::invalid(
                w_path,
                w,
                format!("must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"),
            ));
        }
    }
    if let Some(s) = opt_str(
        errs,
        rules.get("selectPolicy"),
        &format!("{path}.selectPolicy"),
    ) && !matches!(s, "Max" | "Min" | "Disabled")
    {
        errs.push(FieldError::not_supported(
            format!("{path}.selectPolicy"),
            s,
            &["Disabled", "Max", "Min"],
        ));
    }
    let policies_path = format!("{path}.policies");
    let policies = opt_arr(errs, rules.get("policies"), &policies_path);
    if policies.is_empty() {
        errs.push(FieldError::required(
            policies_path.clone(),
            "must specify at least one Policy",
        ));
    }
    for (i, p) in policies.iter().enumerate() {
        let pp = format!("{policies_path}[{i}]");
        let ty = p.get("type").and_then(Value::as_str).unwrap_or("");
        if !matches!(ty, "Pods" | "Percent") {
            errs.push(FieldError::not_supported(
                format!("{pp}.type"),
                ty,
                &["Percent", "Pods"],
            ));
        }
        let value = opt_int(errs, p.get("value"), &format!("{pp}.value")).unwrap_or(0);
        if value <= 0 {
            errs.push(FieldError::invalid(
                format!("{pp}.value"),
                value,
                "must be greater than zero",
            ));
        }
        let period =
            opt_int(errs, p.get("periodSeconds"), &format!("{pp}.periodSeconds")).unwrap_or(0);
        if period <= 0 {
            errs.push(FieldError::invalid(
                format!("{pp}.periodSeconds"),
                period,
                "must be greater than zero",
            ));
        }
        if period > MAX_PERIOD_SECONDS {
            errs.push(FieldError::invalid(
                format!("{pp}.periodSeconds"),
                period,
                format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hpa(spec: Value) -> Value {
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
               "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
    }

    fn base() -> Value {
        json!({
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]
        })
    }

    fn with(patch: &[(&str, Value)]) -> Value {
        let mut s = base();
        for (ptr, v) in patch {
            let (parent, key) = ptr.rsplit_once('/').unwrap();
            let target = if parent.is_empty() {
                &mut s
            } else {
                s.pointer_mut(parent).unwrap()
            };
            match target {
                Value::Object(m) if v.is_null() => {
                    m.remove(key);
                }
                Value::Object(m) => {
                    m.insert(key.to_string(), v.clone());
                }
                Value::Array(a) => a[key.parse::<usize>().unwrap()] = v.clone(),
                _ => unreachable!(),
            }
        }
        hpa(s)
    }

    fn messages(obj: &Value) -> Vec<String> {
        validate_hpa(obj, None)
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn upstream_messages() {
        let policy = |v: Value| json!({"policies": [v]});
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (hpa(base()), vec![]),
            (
                with(&[("/minReplicas", json!(3)), ("/maxReplicas", json!(2))]),
                vec![
                    "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`",
                ],
            ),
            (
                with(&[("/minReplicas", json!(0))]),
                vec![
                    "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
                    "spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas",
                ],
            ),
            (
                with(&[("/maxReplicas", json!(0)), ("/minReplicas", Value::Null)]),
                vec!["spec.maxReplicas: Invalid value: 0: must be greater than 0"],
            ),
            (
                with(&[("/scaleTargetRef", json!({"name": "a/b"}))]),
                vec![
                    "spec.scaleTargetRef.kind: Required value",
                    "spec.scaleTargetRef.name: Invalid value: \"a/b\": may not contain '/'",
                ],
            ),
            (
                with(&[("/metrics/0", json!({"type": "Bogus"}))]),
                vec![
                    "spec.metrics[0].type: Unsupported value: \"Bogus\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
                    "spec.metrics[0].type: Unsupported value: \"Bogus\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
                ],
            ),
            (
                with(&[(
                    "/metrics/0",
                    json!({"type": "Pods", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}),
                )]),
                vec![
                    "spec.metrics[0].pods: Required value: must populate information for the given metric source",
                ],
            ),
            (
                with(&[(
                    "/metrics/0/resource/target",
                    json!({"type": "Utilization", "averageUtilization": 0, "averageValue": "-1"}),
                )]),
                vec![
                    "spec.metrics[0].resource.target.averageValue: Invalid value: \"-1\": must be positive",
                    "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
                    "spec.metrics[0].resource.target.averageValue: Forbidden: may not set both a target raw value and a target utilization",
                ],
            ),
            (
                with(&[("/metrics/0/resource/target", json!({"type": "Ratio"}))]),
                vec![
                    "spec.metrics[0].resource.target.type: Invalid value: \"Ratio\": must be either Utilization, Value, or AverageValue",
                    "spec.metrics[0].resource.target.averageUtilization: Required value: must set either a target raw value or a target utilization",
                ],
            ),
            (
                with(&[(
                    "/behavior",
                    json!({"scaleUp": {"stabilizationWindowSeconds": 4000, "selectPolicy": "Fastest", "policies": []}}),
                )]),
                vec![
                    "spec.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: 4000: must be less than or equal to 3600",
                    "spec.behavior.scaleUp.selectPolicy: Unsupported value: \"Fastest\": supported values: \"Disabled\", \"Max\", \"Min\"",
                    "spec.behavior.scaleUp.policies: Required value: must specify at least one Policy",
                ],
            ),
            (
                with(&[(
                    "/behavior",
                    json!({"scaleDown": policy(json!({"type": "Nodes", "value": 0, "periodSeconds": 1801}))}),
                )]),
                vec![
                    "spec.behavior.scaleDown.policies[0].type: Unsupported value: \"Nodes\": supported values: \"Percent\", \"Pods\"",
                    "spec.behavior.scaleDown.policies[0].value: Invalid value: 0: must be greater than zero",
                    "spec.behavior.scaleDown.policies[0].periodSeconds: Invalid value: 1801: must be less than or equal to 1800",
                ],
            ),
            (
                with(&[(
                    "/metrics/0",
                    json!({"type": "ContainerResource", "containerResource": {"name": "gpu", "container": "Web", "target": {"type": "AverageValue", "averageValue": "1"}}}),
                )]),
                vec![
                    "spec.metrics[0].containerResource.name: Invalid value: \"gpu\": must be a standard resource for containers",
                    "spec.metrics[0].containerResource.container: Invalid value: \"Web\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                ],
            ),
        ];
        for (obj, want) in cases {
            assert_eq!(messages(&obj), want, "{obj}");
        }
    }

    #[test]
    fn v1_is_checked_in_v2_terms() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 4, "maxReplicas": 2,
                     "targetCPUUtilizationPercentage": 0}});
        assert_eq!(
            messages(&v1),
            vec![
                "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`",
                "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
            ]
        );
    }

    #[test]
    fn min_zero_may_stay_once_stored() {
        let obj = with(&[
            ("/minReplicas", json!(0)),
            (
                "/metrics/0",
                json!({"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "10"}}}),
            ),
        ]);
        assert!(!validate_hpa(&obj, None).is_empty());
        assert!(validate_hpa(&obj, Some(&obj)).is_empty());
    }

    #[test]
    fn negative_status_counts() {
        let obj = json!({"status": {"currentReplicas": -1, "desiredReplicas": 2}});
        let got: Vec<String> = validate_hpa_status(&obj)
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            got,
            vec!["status.currentReplicas: Invalid value: -1: must be greater than or equal to 0"]
        );
    }
}
