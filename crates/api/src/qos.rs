//! Pod quality-of-service class (upstream's `ComputePodQOS` / `GetPodQOS`).
//!
//! Only cpu and memory count. A container whose limits are set but requests
//! are not is treated as requesting its limits, which is what API defaulting
//! stores, so the answer is the same before and after defaulting. When the
//! pod sets pod-level `spec.resources`, those decide instead.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::quantity::Quantity;

pub const GUARANTEED: &str = "Guaranteed";
pub const BURSTABLE: &str = "Burstable";
pub const BEST_EFFORT: &str = "BestEffort";

const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// `status.qosClass` when it already holds a valid class, otherwise the
/// computed class (upstream's `GetPodQOS`).
pub fn pod_qos(pod: &Value) -> &'static str {
    match pod
        .get("status")
        .and_then(|s| s.get("qosClass"))
        .and_then(Value::as_str)
    {
        Some(GUARANTEED) => GUARANTEED,
        Some(BURSTABLE) => BURSTABLE,
        Some(BEST_EFFORT) => BEST_EFFORT,
        _ => qos_class(pod),
    }
}

/// Computes the QoS class of a pod from its resources.
pub fn qos_class(pod: &Value) -> &'static str {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let containers: Vec<&Map<String, Value>> = ["containers", "initContainers"]
        .iter()
        .flat_map(|k| {
            spec.get(*k)
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[])
        })
        .map(|c| {
            c.get("resources")
                .and_then(Value::as_object)
                .unwrap_or(empty())
        })
        .collect();
    let mut requests: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut limits: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut guaranteed = true;

    if let Some(res) = spec.get("resources").and_then(Value::as_object) {
        limits = positive(res.get("limits"));
        requests = positive(res.get("requests"));
        let raw_limits = res
            .get("limits")
            .and_then(Value::as_object)
            .filter(|l| !l.is_empty());
        if raw_limits.is_some() {
            // Defaulting fills missing pod requests from the containers'
            // requests, or else from the pod limit.
            let mut aggregate: BTreeMap<&str, Quantity> = BTreeMap::new();
            for c in &containers {
                for (name, q) in effective_requests(c) {
                    aggregate.entry(name).or_insert_with(Quantity::zero).add(&q);
                }
            }
            for (name, lim) in &limits {
                if !explicitly_set(res, "requests", name) {
                    let q = aggregate.get(name).cloned().unwrap_or_else(|| lim.clone());
                    requests.insert(name, q);
                }
            }
            if !QOS_RESOURCES.iter().all(|r| limits.contains_key(r)) {
                guaranteed = false;
            }
        }
    } else {
        for c in &containers {
            for (name, q) in effective_requests(c) {
                requests.entry(name).or_insert_with(Quantity::zero).add(&q);
            }
            let lims = positive(c.get("limits"));
            if !QOS_RESOURCES.iter().all(|r| lims.contains_key(r)) {
                guaranteed = false;
            }
            for (name, q) in lims {
                limits.entry(name).or_insert_with(Quantity::zero).add(&q);
            }
        }
    }

    if requests.is_empty() && limits.is_empty() {
        return BEST_EFFORT;
    }
    let all_match = requests
        .iter()
        .all(|(name, req)| limits.get(name).is_some_and(|lim| lim == req));
    if guaranteed && all_match && requests.len() == limits.len() {
        return GUARANTEED;
    }
    BURSTABLE
}

/// A container's positive cpu/memory requests, with limits standing in for
/// requests it does not name (what defaulting stores).
fn effective_requests(res: &Map<String, Value>) -> BTreeMap<&'static str, Quantity> {
    let mut reqs = positive(res.get("requests"));
    for (name, q) in positive(res.get("limits")) {
        if !explicitly_set(res, "requests", name) {
            reqs.insert(name, q);
        }
    }
    reqs
}

fn explicitly_set(res: &Map<String, Value>, list: &str, name: &str) -> bool {
    res.get(list)
        .and_then(|r| r.get(name))
        .is_some_and(|v| !v.is_null())
}

fn empty() -> &'static Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(Map::new)
}

/// The positive cpu/memory quantities of a resource list; unparseable or
/// non-positive values are ignored, as upstream ignores zero.
fn positive(list: Option<&Value>) -> BTreeMap<&'static str, Quantity> {
    let mut out = BTreeMap::new();
    let Some(list) = list.and_then(Value::as_object) else {
        return out;
    };
    for name in QOS_RESOURCES {
        if let Some(q) = list.get(name).and_then(|v| Quantity::from_json(v).ok())
            && q.sign() > 0
        {
            out.insert(name, q);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: Value) -> Value {
        json!({"spec": {"containers": containers}})
    }

    fn ctr(resources: Value) -> Value {
        json!({"name": "c", "image": "x", "resources": resources})
    }

    #[test]
    fn upstream_documented_examples() {
        let cases: Vec<(&str, Value, &str)> = vec![
            ("no resources", pod(json!([ctr(json!({}))])), BEST_EFFORT),
            (
                "no resources field",
                pod(json!([{"name": "c"}])),
                BEST_EFFORT,
            ),
            (
                "requests equal limits",
                pod(json!([ctr(
                    json!({"limits": {"cpu": "700m", "memory": "200Mi"}, "requests": {"cpu": "700m", "memory": "200Mi"}})
                )])),
                GUARANTEED,
            ),
            (
                "only limits set",
                pod(json!([ctr(
                    json!({"limits": {"cpu": "700m", "memory": "200Mi"}})
                )])),
                GUARANTEED,
            ),
            (
                "equal in other units",
                pod(json!([ctr(
                    json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1024Mi"}})
                )])),
                GUARANTEED,
            ),
            (
                "memory request below limit",
                pod(json!([ctr(
                    json!({"limits": {"memory": "200Mi"}, "requests": {"memory": "100Mi"}})
                )])),
                BURSTABLE,
            ),
            (
                "only memory limit",
                pod(json!([ctr(json!({"limits": {"memory": "200Mi"}}))])),
                BURSTABLE,
            ),
            (
                "request only",
                pod(json!([ctr(json!({"requests": {"cpu": "100m"}}))])),
                BURSTABLE,
            ),
            (
                "one guaranteed one best effort container",
                pod(json!([
                    ctr(json!({"limits": {"cpu": "1", "memory": "1Gi"}})),
                    ctr(json!({}))
                ])),
                BURSTABLE,
            ),
            (
                "two guaranteed containers",
                pod(json!([
                    ctr(json!({"limits": {"cpu": "1", "memory": "1Gi"}})),
                    ctr(
                        json!({"limits": {"cpu": "500m", "memory": "100Mi"}, "requests": {"cpu": "500m", "memory": "100Mi"}})
                    )
                ])),
                GUARANTEED,
            ),
            (
                "other resources are ignored",
                pod(json!([ctr(
                    json!({"limits": {"nvidia.com/gpu": "1"}, "requests": {"ephemeral-storage": "1Gi"}})
                )])),
                BEST_EFFORT,
            ),
            (
                "zero requests are ignored",
                pod(json!([ctr(
                    json!({"requests": {"cpu": "0", "memory": "0"}})
                )])),
                BEST_EFFORT,
            ),
            (
                "burstable init container",
                json!({"spec": {
                    "containers": [ctr(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))],
                    "initContainers": [ctr(json!({"requests": {"cpu": "100m"}}))]
                }}),
                BURSTABLE,
            ),
            (
                "pod-level guaranteed",
                json!({"spec": {
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                    "containers": [ctr(json!({}))]
                }}),
                GUARANTEED,
            ),
            (
                "pod-level burstable",
                json!({"spec": {
                    "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                    "containers": [ctr(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))]
                }}),
                BURSTABLE,
            ),
            (
                "pod-level limits with container requests",
                json!({"spec": {
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                    "containers": [ctr(json!({"requests": {"cpu": "200m"}}))]
                }}),
                BURSTABLE,
            ),
            (
                "pod-level requests only",
                json!({"spec": {"resources": {"requests": {"memory": "1Gi"}}, "containers": [ctr(json!({}))]}}),
                BURSTABLE,
            ),
            ("malformed", json!({"spec": {"containers": 3}}), BEST_EFFORT),
            ("not an object", json!("pod"), BEST_EFFORT),
            (
                "bad quantity ignored",
                pod(json!([ctr(
                    json!({"limits": {"cpu": "lots", "memory": "1Gi"}})
                )])),
                BURSTABLE,
            ),
        ];
        for (name, p, want) in cases {
            assert_eq!(qos_class(&p), want, "{name}");
        }
    }

    #[test]
    fn status_class_wins() {
        let p =
            json!({"spec": {"containers": [ctr(json!({}))]}, "status": {"qosClass": "Guaranteed"}});
        assert_eq!(pod_qos(&p), GUARANTEED);
        assert_eq!(qos_class(&p), BEST_EFFORT);
        let bogus = json!({"spec": {}, "status": {"qosClass": "Gold"}});
        assert_eq!(pod_qos(&bogus), BEST_EFFORT);
    }
}
