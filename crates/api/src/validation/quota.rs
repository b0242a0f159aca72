//! ResourceQuota and LimitRange validation (upstream's `ValidateResourceQuota`,
//! `ValidateResourceQuotaStatusUpdate` and `ValidateLimitRange`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::pod::validate_container_resource_name;
use super::{FieldError, IS_NEGATIVE, is_qualified_name, opt_arr, opt_obj};
use crate::quantity::Quantity;
use crate::quota;

const IS_INVALID_QUOTA_RESOURCE: &str = "must be a standard resource for quota";
const IS_NOT_INTEGER: &str = "must be an integer";

/// Upstream's `standardResources` (`IsStandardResourceName`).
const STANDARD_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

/// `validateResourceName`: a qualified name, and a standard one unless it has
/// a domain.
fn validate_resource_name(errs: &mut Vec<FieldError>, name: &str, path: &str) -> bool {
    let msgs = is_qualified_name(name);
    if !msgs.is_empty() {
        for m in msgs {
            errs.push(FieldError::invalid(path, name, m));
        }
        return false;
    }
    let standard = STANDARD_RESOURCES.contains(&name)
        || name.starts_with("hugepages-")
        || name.starts_with("requests.hugepages-");
    if !name.contains('/') && !standard {
        errs.push(FieldError::invalid(
            path,
            name,
            "must be a standard resource type or fully qualified",
        ));
    }
    true
}

/// `ValidateResourceQuotaResourceName`.
fn validate_quota_resource_name(errs: &mut Vec<FieldError>, name: &str, path: &str) {
    validate_resource_name(errs, name, path);
    if !name.contains('/') && !quota::is_standard_quota_resource(name) {
        errs.push(FieldError::invalid(path, name, IS_INVALID_QUOTA_RESOURCE));
    }
}

/// `ValidateResourceQuantityValue`: not negative; whole for counted resources.
fn validate_quantity_value(errs: &mut Vec<FieldError>, name: &str, v: &Value, path: &str) {
    let q = match Quantity::from_json(v) {
        Ok(q) => q,
        Err(e) => {
            errs.push(FieldError::invalid(path, v.clone(), e.to_string()));
            return;
        }
    };
    if q.sign() < 0 {
        errs.push(FieldError::invalid(path, q.to_string(), IS_NEGATIVE));
    }
    if quota::is_integer_resource(name) && q.milli_value() % 1000 != 0 {
        errs.push(FieldError::invalid(path, q.to_string(), IS_NOT_INTEGER));
    }
}

fn validate_quota_list(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str) {
    let Some(list) = opt_obj(errs, v, path) else {
        return;
    };
    for (k, v) in list {
        let p = format!("{path}[{k}]");
        validate_quota_resource_name(errs, k, &p);
        validate_quantity_value(errs, k, v, &p);
    }
}

fn is_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

/// `IsResourceQuotaScopeValidForResource`.
fn scope_valid_for_resource(scope: &str, resource: &str) -> bool {
    const COUNTS: &[&str] = &["pods", "count/pods"];
    const COMPUTE: &[&str] = &[
        "cpu",
        "memory",
        "limits.cpu",
        "limits.memory",
        "requests.cpu",
        "requests.memory",
    ];
    match scope {
        quota::SCOPE_BEST_EFFORT => COUNTS.contains(&resource),
        quota::SCOPE_VOLUME_ATTRIBUTES_CLASS => false,
        quota::SCOPE_TERMINATING
        | quota::SCOPE_NOT_TERMINATING
        | quota::SCOPE_NOT_BEST_EFFORT
        | quota::SCOPE_PRIORITY_CLASS
        | quota::SCOPE_CROSS_NAMESPACE_POD_AFFINITY => {
            COUNTS.contains(&resource) || COMPUTE.contains(&resource)
        }
        _ => true,
    }
}

fn conflicting(set: &BTreeSet<String>) -> usize {
    [
        (quota::SCOPE_BEST_EFFORT, quota::SCOPE_NOT_BEST_EFFORT),
        (quota::SCOPE_TERMINATING, quota::SCOPE_NOT_TERMINATING),
    ]
    .iter()
    .filter(|(a, b)| set.contains(*a) && set.contains(*b))
    .count()
}

fn validate_scopes(errs: &mut Vec<FieldError>, spec: &Map<String, Value>, hard: &[String]) {
    let scopes_v = spec.get("scopes").cloned().unwrap_or(Value::Null);
    let scopes = opt_arr(errs, spec.get("scopes"), "spec.scopes");
    let mut set = BTreeSet::new();
    for s in scopes {
        let s = s.as_str().unwrap_or("");
        if !quota::STANDARD_SCOPES.contains(&s) {
            errs.push(FieldError::invalid(
                "spec.scopes",
                scopes_v.clone(),
                "unsupported scope",
            ));
        }
        for k in hard {
            if is_container_resource(k) && !scope_valid_for_resource(s, k) {
                errs.push(FieldError::invalid(
                    "spec.scopes",
                    scopes_v.clone(),
                    "unsupported scope applied to resource",
                ));
            }
        }
        set.insert(s.to_string());
    }
    for _ in 0..conflicting(&set) {
        errs.push(FieldError::invalid(
            "spec.scopes",
            scopes_v.clone(),
            "conflicting scopes",
        ));
    }
}

fn validate_scope_selector(errs: &mut Vec<FieldError>, spec: &Map<String, Value>, hard: &[String]) {
    let Some(sel) = spec.get("scopeSelector").filter(|s| !s.is_null()) else {
        return;
    };
    let path = "spec.scopeSelector.matchExpressions";
    let mut set = BTreeSet::new();
    for req in opt_arr(errs, sel.get("matchExpressions"), path) {
        let s = |k: &str| req.get(k).and_then(Value::as_str).unwrap_or("");
        let (scope, op) = (s("scopeName"), s("operator"));
        let values = req
            .get("values")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !quota::STANDARD_SCOPES.contains(&scope) {
            errs.push(FieldError::invalid(
                format!("{path}.scopeName"),
                scope,
                "unsupported scope",
            ));
        }
        for k in hard {
            if is_container_resource(k) && !scope_valid_for_resource(scope, k) {
                errs.push(FieldError::invalid(
                    path,
                    sel.clone(),
                    "unsupported scope applied to resource",
                ));
            }
        }
        if matches!(
            scope,
            quota::SCOPE_BEST_EFFORT
                | quota::SCOPE_NOT_BEST_EFFORT
                | quota::SCOPE_TERMINATING
                | quota::SCOPE_NOT_TERMINATING
                | quota::SCOPE_CROSS_NAMESPACE_POD_AFFINITY
        ) && op != "Exists"
        {
            errs.push(FieldError::invalid(
                format!("{path}.operator"),
                op,
                "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
            ));
        }
        match op {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                format!("{path}.values"),
                "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::invalid(
                format!("{path}.values"),
                Value::Array(values),
                "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => errs.push(FieldError::invalid(
                format!("{path}.operator"),
                op,
                "not a valid selector operator",
            )),
        }
        set.insert(scope.to_string());
    }
    for _ in 0..conflicting(&set) {
        errs.push(FieldError::invalid(path, sel.clone(), "conflicting scopes"));
    }
}

/// `ValidateResourceQuota`: spec and status resource names and values, scopes
/// and the scope selector. A domain-qualified name nobody counts (e.g.
/// `example.com/widgets`) is valid and simply never used.
pub(super) fn validate_resource_quota(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let empty = Map::new();
    let spec = opt_obj(&mut errs, obj.get("spec"), "spec").unwrap_or(&empty);
    validate_quota_list(&mut errs, spec.get("hard"), "spec.hard");
    let hard: Vec<String> = spec
        .get("hard")
        .and_then(Value::as_object)
        .map(|h| h.keys().cloned().collect())
        .unwrap_or_default();
    let has_scopes = spec
        .get("scopes")
        .and_then(Value::as_array)
        .is_some_and(|s| !s.is_empty());
    if has_scopes {
        validate_scopes(&mut errs, spec, &hard);
    }
    validate_scope_selector(&mut errs, spec, &hard);
    if let Some(status) = obj.get("status").and_then(Value::as_object) {
        validate_quota_list(&mut errs, status.get("hard"), "status.hard");
        validate_quota_list(&mut errs, status.get("used"), "status.used");
    }
    errs
}

/// Upstream's `validateLimitRangeResourceName`: container rules for the Pod
/// and Container types, generic ones otherwise.
fn validate_limit_range_resource_name(
    errs: &mut Vec<FieldError>,
    limit_type: &str,
    name: &str,
    path: &str,
) {
    if matches!(limit_type, "Pod" | "Container") {
        validate_container_resource_name(errs, name, path);
    } else {
        validate_resource_name(errs, name, path);
    }
}

/// `ValidateLimitRange`.
pub(super) fn validate_limit_range(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut types = BTreeSet::new();
    for (i, item) in opt_arr(&mut errs, obj.pointer("/spec/limits"), "spec.limits")
        .iter()
        .enumerate()
    {
        let p = format!("spec.limits[{i}]");
        let limit_type = item.get("type").and_then(Value::as_str).unwrap_or("");
        let type_path = format!("{p}.type");
        let msgs = is_qualified_name(limit_type);
        if !msgs.is_empty() {
            for m in msgs {
                errs.push(FieldError::invalid(&type_path, limit_type, m));
            }
        } else if !limit_type.contains('/')
            && !matches!(limit_type, "Pod" | "Container" | "PersistentVolumeClaim")
        {
            errs.push(FieldError::invalid(
                &type_path,
                limit_type,
                "must be a standard limit type or fully qualified",
            ));
        }
        if !types.insert(limit_type.to_string()) {
            errs.push(FieldError::duplicate(&type_path, limit_type));
        }

        let mut keys = BTreeSet::new();
        let mut lists: BTreeMap<&str, BTreeMap<String, Quantity>> = BTreeMap::new();
        let mut read = |errs: &mut Vec<FieldError>, field: &'static str| {
            let mut out = BTreeMap::new();
            let fp = format!("{p}.{field}");
            if let Some(m) = opt_obj(errs, item.get(field), &fp) {
                for (k, v) in m {
                    let kp = format!("{fp}[{k}]");
                    validate_limit_range_resource_name(errs, limit_type, k, &kp);
                    keys.insert(k.clone());
                    match Quantity::from_json(v) {
                        Ok(q) => {
                            out.insert(k.clone(), q);
                        }
                        Err(e) => errs.push(FieldError::invalid(kp, v.clone(), e.to_string())),
                    }
                }
            }
            out
        };
        lists.insert("max", read(&mut errs, "max"));
        lists.insert("min", read(&mut errs, "min"));
        let non_empty = |f: &str| {
            item.get(f)
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty())
        };
        if limit_type == "Pod" {
            for f in ["default", "defaultRequest"] {
                if non_empty(f) {
                    errs.push(FieldError::forbidden(
                        format!("{p}.{f}"),
                        "may not be specified when `type` is 'Pod'",
                    ));
                }
            }
        } else {
            lists.insert("default", read(&mut errs, "default"));
            lists.insert("defaultRequest", read(&mut errs, "defaultRequest"));
        }
        if limit_type == "PersistentVolumeClaim"
            && !lists["min"].contains_key("storage")
            && !lists["max"].contains_key("storage")
        {
            errs.push(FieldError::required(
                format!("{p}.limits"),
                "either minimum or maximum storage value is required, but neither was provided",
            ));
        }
        lists.insert(
            "maxLimitRequestRatio",
            read(&mut errs, "maxLimitRequestRatio"),
        );

        let get = |f: &str, k: &str| lists.get(f).and_then(|l| l.get(k)).cloned();
        for k in &keys {
            let (min, max) = (get("min", k), get("max", k));
            let (def, def_req) = (get("default", k), get("defaultRequest", k));
            let ratio = get("maxLimitRequestRatio", k);
            let at = |f: &str| format!("{p}.{f}[{k}]");
            let s = |q: &Quantity| json!(q.to_string());
            if let (Some(min), Some(max)) = (&min, &max)
                && min > max
            {
                errs.push(FieldError::invalid(
                    at("min"),
                    s(min),
                    format!("min value {min} is greater than max value {max}"),
                ));
            }
            if let (Some(dr), Some(min)) = (&def_req, &min)
                && min > dr
            {
                errs.push(FieldError::invalid(
                    at("defaultRequest"),
                    s(dr),
                    format!("min value {min} is greater than default request value {dr}"),
                ));
            }
            if let (Some(dr), Some(max)) = (&def_req, &max)
                && dr > max
            {
                errs.push(FieldError::invalid(
                    at("defaultRequest"),
                    s(dr),
                    format!("default request value {dr} is greater than max value {max}"),
                ));
            }
            if let (Some(dr), Some(d)) = (&def_req, &def)
                && dr > d
            {
                errs.push(FieldError::invalid(
                    at("defaultRequest"),
                    s(dr),
                    format!("default request value {dr} is greater than default limit value {d}"),
                ));
            }
            if let (Some(d), Some(min)) = (&def, &min)
                && min > d
            {
                errs.push(FieldError::invalid(
                    at("default"),
                    s(min),
                    format!("min value {min} is greater than default value {d}"),
                ));
            }
            if let (Some(d), Some(max)) = (&def, &max)
                && d > max
            {
                errs.push(FieldError::invalid(
                    at("default"),
                    s(max),
                    format!("default value {d} is greater than max value {max}"),
                ));
            }
            if let Some(r) = &ratio
                && *r < Quantity::from_value(1, crate::quantity::Format::DecimalSI)
            {
                errs.push(FieldError::invalid(
                    at("maxLimitRequestRatio"),
                    s(r),
                    format!("ratio {r} is less than 1"),
                ));
            }
            if let (Some(r), Some(min), Some(max)) = (&ratio, &min, &max) {
                let limit = max.as_f64() / min.as_f64();
                if r.as_f64() > limit {
                    errs.push(FieldError::invalid(
                        at("maxLimitRequestRatio"),
                        s(r),
                        format!("ratio {r} is greater than max/min = {limit:.6}"),
                    ));
                }
            }
            let overcommit = quota::is_native_resource(k) && !k.starts_with("hugepages-");
            if let (false, Some(d), Some(dr)) = (overcommit, &def, &def_req)
                && d != dr
            {
                errs.push(FieldError::invalid(
                    at("defaultRequest"),
                    s(dr),
                    format!("default value {d} must equal to defaultRequest value {dr} in {k}"),
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.error_body()))
            .collect()
    }

    #[test]
    fn resource_quota_cases() {
        let rq = |spec: Value| json!({"metadata": {"name": "q", "namespace": "d"}, "spec": spec});
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (
                rq(
                    json!({"hard": {"requests.cpu": "1", "count/deployments.apps": "2", "example.com/widgets": "3"}}),
                ),
                vec![],
            ),
            (
                rq(json!({"hard": {"cpu": "-1"}})),
                vec!["spec.hard[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"],
            ),
            (
                rq(json!({"hard": {"pods": "1500m"}})),
                vec!["spec.hard[pods]: Invalid value: \"1500m\": must be an integer"],
            ),
            (
                rq(json!({"hard": {"widgets": "1"}})),
                vec![
                    "spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource type or fully qualified",
                    "spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource for quota",
                ],
            ),
            (
                rq(json!({"hard": {"storage": "1Gi"}})),
                vec![
                    "spec.hard[storage]: Invalid value: \"storage\": must be a standard resource for quota",
                ],
            ),
            (
                rq(json!({"hard": {"cpu": "1"}, "scopes": ["BestEffort"]})),
                vec![
                    "spec.scopes: Invalid value: [\"BestEffort\"]: unsupported scope applied to resource",
                ],
            ),
            (
                rq(json!({"hard": {"pods": "1"}, "scopes": ["BestEffort", "NotBestEffort"]})),
                vec![
                    "spec.scopes: Invalid value: [\"BestEffort\",\"NotBestEffort\"]: conflicting scopes",
                ],
            ),
            (
                rq(json!({"hard": {"pods": "1"}, "scopes": ["Forever"]})),
                vec!["spec.scopes: Invalid value: [\"Forever\"]: unsupported scope"],
            ),
            (
                rq(
                    json!({"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "In"},
                    {"scopeName": "BestEffort", "operator": "In", "values": ["x"]}]}}),
                ),
                vec![
                    "spec.scopeSelector.matchExpressions.values: Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
                    "spec.scopeSelector.matchExpressions.operator: Invalid value: \"In\": must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
                ],
            ),
        ];
        for (obj, want) in cases {
            assert_eq!(msgs(validate_resource_quota(&obj)), want, "{obj}");
        }
    }

    #[test]
    fn limit_range_cases() {
        let lr = |item: Value| json!({"metadata": {"name": "l", "namespace": "d"}, "spec": {"limits": [item]}});
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (
                lr(
                    json!({"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "1"},
                    "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "200m"}, "maxLimitRequestRatio": {"cpu": "4"}}),
                ),
                vec![],
            ),
            (
                lr(json!({"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}})),
                vec![
                    "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1",
                ],
            ),
            (
                lr(
                    json!({"type": "Container", "max": {"memory": "1Gi"}, "default": {"memory": "2Gi"}}),
                ),
                vec![
                    "spec.limits[0].default[memory]: Invalid value: \"1Gi\": default value 2Gi is greater than max value 1Gi",
                ],
            ),
            (
                lr(
                    json!({"type": "Container", "default": {"cpu": "100m"}, "defaultRequest": {"cpu": "200m"}}),
                ),
                vec![
                    "spec.limits[0].defaultRequest[cpu]: Invalid value: \"200m\": default request value 200m is greater than default limit value 100m",
                ],
            ),
            (
                lr(
                    json!({"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "200m"}, "maxLimitRequestRatio": {"cpu": "3"}}),
                ),
                vec![
                    "spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: \"3\": ratio 3 is greater than max/min = 2.000000",
                ],
            ),
            (
                lr(json!({"type": "Container", "maxLimitRequestRatio": {"cpu": "500m"}})),
                vec![
                    "spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: \"500m\": ratio 500m is less than 1",
                ],
            ),
            (
                lr(json!({"type": "Pod", "default": {"cpu": "1"}})),
                vec![
                    "spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'",
                ],
            ),
            (
                lr(json!({"type": "PersistentVolumeClaim", "max": {"cpu": "1"}})),
                vec![
                    "spec.limits[0].limits: Required value: either minimum or maximum storage value is required, but neither was provided",
                ],
            ),
            (
                lr(json!({"type": "Machine"})),
                vec![
                    "spec.limits[0].type: Invalid value: \"Machine\": must be a standard limit type or fully qualified",
                ],
            ),
            (
                lr(json!({"type": "Container", "max": {"gpu": "1"}})),
                vec![
                    "spec.limits[0].max[gpu]: Invalid value: \"gpu\": must be a standard resource for containers",
                ],
            ),
        ];
        for (obj, want) in cases {
            assert_eq!(msgs(validate_limit_range(&obj)), want, "{obj}");
        }
    }
}
