//! LimitRanger (upstream's `plugin/pkg/admission/limitranger`): a new pod's
//! containers get the `default` limits and `defaultRequest` requests of the
//! namespace's `type: Container` LimitRanges (the
//! `kubernetes.io/limit-ranger` annotation says what was set); then pods are
//! checked against the Container and Pod `min`, `max` and
//! `maxLimitRequestRatio`, and claims against the PersistentVolumeClaim
//! `min`/`max` of `requests.storage`.

use async_trait::async_trait;
use berth_api::quantity::Quantity;
use berth_api::quota::{ResourceList, parse_list, pod_resources};
use serde_json::{Map, Value, json};

use super::{Attributes, Operation, Plugin, forbidden};
use crate::objects;
use crate::rest::Rest;
use crate::status::ApiResult;

/// The annotation naming the defaults LimitRanger set.
pub const LIMIT_RANGER_ANNOTATION: &str = "kubernetes.io/limit-ranger";

pub struct LimitRanger;

#[async_trait]
impl Plugin for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    async fn admit(&self, rest: &Rest, a: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        if a.operation != Operation::Create || !a.is("", "Pod") {
            return Ok(());
        }
        for lr in limit_ranges(rest, a).await? {
            default_pod_resources(&lr, obj);
        }
        Ok(())
    }

    async fn validate(
        &self,
        rest: &Rest,
        a: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> ApiResult<()> {
        let Some(obj) = obj else {
            return Ok(());
        };
        let pod = a.rt.group.is_empty() && a.rt.kind == "Pod";
        let claim = a.is("", "PersistentVolumeClaim");
        // Pod specs are immutable but for in-place resizes.
        let supported = match (a.operation, a.subresource) {
            (Operation::Create, None) => pod || claim,
            (Operation::Update, None) => claim,
            (Operation::Update, Some("resize")) => pod,
            _ => false,
        };
        if !supported || a.old.is_some_and(objects::is_deleting) {
            return Ok(());
        }
        let mut errs = Vec::new();
        for lr in limit_ranges(rest, a).await? {
            let found = if pod {
                validate_pod(&lr, obj)
            } else {
                validate_claim(&lr, obj)
            };
            errs.extend(found);
        }
        if errs.is_empty() {
            return Ok(());
        }
        Err(forbidden(a, aggregate(&errs)))
    }
}

/// Upstream's `utilerrors.NewAggregate(...).Error()`: one message as is,
/// several (duplicates dropped) in brackets.
fn aggregate(errs: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errs {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The namespace's LimitRanges, read consistently from the watch cache.
async fn limit_ranges(rest: &Rest, a: &Attributes<'_>) -> ApiResult<Vec<Value>> {
    let Some(ns) = a.namespace else {
        return Ok(Vec::new());
    };
    let Some(rt) = berth_api::registry::lookup("", "v1", "limitranges") else {
        return Ok(Vec::new());
    };
    super::resource_quota::consistent_list(rest, rt, ns).await
}

fn items(lr: &Value) -> impl Iterator<Item = &Value> {
    lr.pointer("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn container_lists(c: &Value) -> (ResourceList, ResourceList) {
    let r = c.get("resources");
    (
        parse_list(r.and_then(|r| r.get("requests"))),
        parse_list(r.and_then(|r| r.get("limits"))),
    )
}

/// `PodMutateLimitFunc`: the `type: Container` items' `default` and
/// `defaultRequest` fill what each container (and init container) leaves
/// unset; the annotation lists what was set.
pub fn default_pod_resources(lr: &Value, pod: &mut Value) {
    let mut default_requests = Map::new();
    let mut default_limits = Map::new();
    for item in items(lr).filter(|i| i.get("type").and_then(Value::as_str) == Some("Container")) {
        for (field, into) in [
            ("defaultRequest", &mut default_requests),
            ("default", &mut default_limits),
        ] {
            if let Some(m) = item.get(field).and_then(Value::as_object) {
                for (k, v) in m {
                    into.insert(k.clone(), v.clone());
                }
            }
        }
    }
    let mut notes: Vec<String> = Vec::new();
    for (field, prefix) in [
        ("containers", "container"),
        ("initContainers", "init container"),
    ] {
        let Some(list) = pod
            .get_mut("spec")
            .and_then(|s| s.get_mut(field))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in list {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let Some(c) = c.as_object_mut() else {
                continue;
            };
            let res = c.entry("resources").or_insert_with(|| json!({}));
            if !res.is_object() {
                *res = json!({});
            }
            let mut set = |which: &str, defaults: &Map<String, Value>| -> Vec<String> {
                let list = res
                    .as_object_mut()
                    .map(|r| r.entry(which).or_insert_with(|| json!({})));
                let Some(list) = list else {
                    return Vec::new();
                };
                if !list.is_object() {
                    *list = json!({});
                }
                let Some(list) = list.as_object_mut() else {
                    return Vec::new();
                };
                let mut names = Vec::new();
                for (k, v) in defaults {
                    if !list.contains_key(k) {
                        list.insert(k.clone(), v.clone());
                        names.push(k.clone());
                    }
                }
                names.sort();
                names
            };
            let requests = set("requests", &default_requests);
            let limits = set("limits", &default_limits);
            if !requests.is_empty() {
                notes.push(format!(
                    "{} request for {prefix} {name}",
                    requests.join(", ")
                ));
            }
            if !limits.is_empty() {
                notes.push(format!("{} limit for {prefix} {name}", limits.join(", ")));
            }
        }
    }
    if notes.is_empty() {
        return;
    }
    if let Some(meta) = objects::meta_mut(pod) {
        let ann = meta.entry("annotations").or_insert_with(|| json!({}));
        if !ann.is_object() {
            *ann = json!({});
        }
        ann[LIMIT_RANGER_ANNOTATION] =
            json!(format!("LimitRanger plugin set: {}", notes.join("; ")));
    }
}

/// Upstream's `MaxMilliValue`: milli-units compare exactly below it.
const MAX_MILLI_VALUE: i64 = i64::MAX / 1000;

/// `requestLimitEnforcedValues`: milli-units when none would overflow.
fn observed(
    req: Option<&Quantity>,
    lim: Option<&Quantity>,
    enforced: &Quantity,
) -> (i64, i64, i64) {
    let zero = Quantity::zero();
    let (req, lim) = (req.unwrap_or(&zero), lim.unwrap_or(&zero));
    let (r, l, e) = (req.value(), lim.value(), enforced.value());
    if r <= MAX_MILLI_VALUE && l <= MAX_MILLI_VALUE && e <= MAX_MILLI_VALUE {
        (req.milli_value(), lim.milli_value(), enforced.milli_value())
    } else {
        (r, l, e)
    }
}

/// `minConstraint`.
fn min_constraint(
    limit_type: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<String> {
    let (req, lim) = (requests.get(name), limits.get(name));
    let (r, l, e) = observed(req, lim, enforced);
    let Some(req) = req else {
        return Some(format!(
            "minimum {name} usage per {limit_type} is {enforced}.  No request is specified"
        ));
    };
    if r < e {
        return Some(format!(
            "minimum {name} usage per {limit_type} is {enforced}, but request is {req}"
        ));
    }
    match lim {
        Some(lim) if l < e => Some(format!(
            "minimum {name} usage per {limit_type} is {enforced}, but limit is {lim}"
        )),
        _ => None,
    }
}

/// `maxConstraint`.
fn max_constraint(
    limit_type: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<String> {
    let (req, lim) = (requests.get(name), limits.get(name));
    let (r, l, e) = observed(req, lim, enforced);
    let Some(lim) = lim else {
        return Some(format!(
            "maximum {name} usage per {limit_type} is {enforced}.  No limit is specified"
        ));
    };
    if l > e {
        return Some(format!(
            "maximum {name} usage per {limit_type} is {enforced}, but limit is {lim}"
        ));
    }
    match req {
        Some(req) if r > e => Some(format!(
            "maximum {name} usage per {limit_type} is {enforced}, but request is {req}"
        )),
        _ => None,
    }
}

/// `maxRequestConstraint` (claims: only what was requested counts).
fn max_request_constraint(
    limit_type: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
) -> Option<String> {
    let req = requests.get(name);
    let (r, _, e) = observed(req, None, enforced);
    let Some(req) = req else {
        return Some(format!(
            "maximum {name} usage per {limit_type} is {enforced}.  No request is specified"
        ));
    };
    (r > e).then(|| {
        format!("maximum {name} usage per {limit_type} is {enforced}, but request is {req}")
    })
}

/// `limitRequestRatioConstraint`.
fn ratio_constraint(
    limit_type: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<String> {
    let (req, lim) = (requests.get(name), limits.get(name));
    let (r, l, _) = observed(req, lim, enforced);
    if req.is_none() || r == 0 {
        return Some(format!(
            "{name} max limit to request ratio per {limit_type} is {enforced}, but no request is specified or request is 0"
        ));
    }
    if lim.is_none() || l == 0 {
        return Some(format!(
            "{name} max limit to request ratio per {limit_type} is {enforced}, but no limit is specified or limit is 0"
        ));
    }
    let shown = l as f64 / r as f64;
    let (observed_ratio, max_ratio) = if enforced.value() <= MAX_MILLI_VALUE {
        (shown * 1000.0, enforced.milli_value() as f64)
    } else {
        (shown, enforced.value() as f64)
    };
    (observed_ratio > max_ratio).then(|| {
        format!(
            "{name} max limit to request ratio per {limit_type} is {enforced}, but provided ratio is {shown:.6}"
        )
    })
}

/// min, max and maxLimitRequestRatio of one item against one set of
/// requests and limits.
fn check_item(
    item: &Value,
    limit_type: &str,
    requests: &ResourceList,
    limits: &ResourceList,
    errs: &mut Vec<String>,
) {
    for (field, check) in [
        (
            "min",
            min_constraint
                as fn(&str, &str, &Quantity, &ResourceList, &ResourceList) -> Option<String>,
        ),
        ("max", max_constraint),
        ("maxLimitRequestRatio", ratio_constraint),
    ] {
        for (name, enforced) in parse_list(item.get(field)) {
            errs.extend(check(limit_type, &name, &enforced, requests, limits));
        }
    }
}

/// `PodValidateLimitFunc`: every container and init container against the
/// Container items; the pod's effective requests and limits (without
/// overhead) against the Pod items.
pub fn validate_pod(lr: &Value, pod: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    for item in items(lr) {
        match item.get("type").and_then(Value::as_str) {
            Some("Container") => {
                for field in ["containers", "initContainers"] {
                    for c in pod
                        .pointer(&format!("/spec/{field}"))
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let (requests, limits) = container_lists(c);
                        check_item(item, "Container", &requests, &limits, &mut errs);
                    }
                }
            }
            Some("Pod") => {
                let requests = pod_resources(pod, "requests", false);
                let limits = pod_resources(pod, "limits", false);
                check_item(item, "Pod", &requests, &limits, &mut errs);
            }
            _ => {}
        }
    }
    errs
}

/// `PersistentVolumeClaimValidateLimitFunc`: `requests` against the
/// PersistentVolumeClaim items' min and max.
pub fn validate_claim(lr: &Value, pvc: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let requests = parse_list(pvc.pointer("/spec/resources/requests"));
    let limit_type = "PersistentVolumeClaim";
    for item in items(lr).filter(|i| i.get("type").and_then(Value::as_str) == Some(limit_type)) {
        for (name, enforced) in parse_list(item.get("min")) {
            errs.extend(min_constraint(
                limit_type,
                &name,
                &enforced,
                &requests,
                &ResourceList::new(),
            ));
        }
        for (name, enforced) in parse_list(item.get("max")) {
            errs.extend(max_request_constraint(
                limit_type, &name, &enforced, &requests,
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lr(items: Value) -> Value {
        json!({"metadata": {"name": "lr", "namespace": "d"}, "spec": {"limits": items}})
    }

    fn pod(containers: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})
    }

    fn c(name: &str, requests: Value, limits: Value) -> Value {
        json!({"name": name, "image": "x", "resources": {"requests": requests, "limits": limits}})
    }

    #[test]
    fn defaults_fill_unset_resources_and_annotate() {
        // As the docs' "Configure Default Memory Requests and Limits".
        let range = lr(json!([{"type": "Container",
            "default": {"memory": "512Mi", "cpu": "1"},
            "defaultRequest": {"memory": "256Mi", "cpu": "500m"}}]));
        let mut p = pod(json!([
            {"name": "none", "image": "x"},
            c("some", json!({"memory": "128Mi"}), json!({"memory": "1Gi"})),
        ]));
        p["spec"]["initContainers"] = json!([{"name": "init", "image": "x", "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "2"}}}]);
        default_pod_resources(&range, &mut p);
        assert_eq!(
            p["spec"]["containers"][0]["resources"],
            json!({"requests": {"memory": "256Mi", "cpu": "500m"}, "limits": {"memory": "512Mi", "cpu": "1"}})
        );
        assert_eq!(
            p["spec"]["containers"][1]["resources"],
            json!({"requests": {"memory": "128Mi", "cpu": "500m"}, "limits": {"memory": "1Gi", "cpu": "1"}})
        );
        assert_eq!(
            p["metadata"]["annotations"][LIMIT_RANGER_ANNOTATION],
            "LimitRanger plugin set: cpu, memory request for container none; cpu, memory limit for container none; cpu request for container some; cpu limit for container some; memory request for init container init; memory limit for init container init"
        );
        // Nothing to set: no annotation.
        let mut full = pod(json!([c(
            "a",
            json!({"memory": "1Mi", "cpu": "1"}),
            json!({"memory": "1Mi", "cpu": "1"})
        )]));
        default_pod_resources(&range, &mut full);
        assert!(full["metadata"].get("annotations").is_none());
        // Pod items carry no defaults.
        let mut p = pod(json!([{"name": "a", "image": "x"}]));
        default_pod_resources(&lr(json!([{"type": "Pod", "max": {"cpu": "1"}}])), &mut p);
        assert!(p["metadata"].get("annotations").is_none());
    }

    #[test]
    fn pod_constraints_table() {
        let container_range = lr(json!([{"type": "Container",
            "min": {"cpu": "100m", "memory": "100Mi"}, "max": {"cpu": "800m", "memory": "1Gi"},
            "maxLimitRequestRatio": {"cpu": "4"}}]));
        // (pod, errors)
        let cases = [
            (
                pod(json!([c(
                    "a",
                    json!({"cpu": "200m", "memory": "200Mi"}),
                    json!({"cpu": "400m", "memory": "500Mi"})
                )])),
                vec![],
            ),
            (
                pod(json!([c(
                    "a",
                    json!({"cpu": "50m", "memory": "200Mi"}),
                    json!({"cpu": "100m", "memory": "2Gi"})
                )])),
                vec![
                    "minimum cpu usage per Container is 100m, but request is 50m",
                    "maximum memory usage per Container is 1Gi, but limit is 2Gi",
                ],
            ),
            (
                pod(json!([c(
                    "a",
                    json!({"cpu": "100m", "memory": "200Mi"}),
                    json!({"cpu": "800m", "memory": "500Mi"})
                )])),
                vec![
                    "cpu max limit to request ratio per Container is 4, but provided ratio is 8.000000",
                ],
            ),
            (
                pod(json!([c("a", json!({}), json!({}))])),
                vec![
                    "minimum cpu usage per Container is 100m.  No request is specified",
                    "minimum memory usage per Container is 100Mi.  No request is specified",
                    "maximum cpu usage per Container is 800m.  No limit is specified",
                    "maximum memory usage per Container is 1Gi.  No limit is specified",
                    "cpu max limit to request ratio per Container is 4, but no request is specified or request is 0",
                ],
            ),
            (
                pod(json!([c(
                    "a",
                    json!({"cpu": "200m", "memory": "200Mi"}),
                    json!({"cpu": "900m", "memory": "50Mi"})
                )])),
                vec![
                    "minimum memory usage per Container is 100Mi, but limit is 50Mi",
                    "maximum cpu usage per Container is 800m, but limit is 900m",
                    "cpu max limit to request ratio per Container is 4, but provided ratio is 4.500000",
                ],
            ),
        ];
        for (p, want) in cases {
            assert_eq!(validate_pod(&container_range, &p), want, "{p}");
        }
        // The Pod type sums the containers.
        let pod_range = lr(json!([{"type": "Pod", "max": {"cpu": "1"}}]));
        let two = pod(json!([
            c("a", json!({"cpu": "600m"}), json!({"cpu": "600m"})),
            c("b", json!({"cpu": "600m"}), json!({"cpu": "600m"}))
        ]));
        assert_eq!(
            validate_pod(&pod_range, &two),
            vec!["maximum cpu usage per Pod is 1, but limit is 1200m"]
        );
    }

    #[test]
    fn claim_constraints() {
        let range = lr(
            json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "2Gi"}}]),
        );
        let pvc = |s: &str| json!({"spec": {"resources": {"requests": {"storage": s}}}});
        assert!(validate_claim(&range, &pvc("1Gi")).is_empty());
        assert_eq!(
            validate_claim(&range, &pvc("500Mi")),
            vec!["minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"]
        );
        assert_eq!(
            validate_claim(&range, &pvc("5Gi")),
            vec!["maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi"]
        );
    }

    #[test]
    fn aggregate_messages() {
        assert_eq!(aggregate(&["a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "b".into(), "a".into()]), "[a, b]");
    }
}
