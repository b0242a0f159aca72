//! Conversion between versions of a resource that share storage.
//! - autoscaling/v1 ↔ autoscaling/v2 HorizontalPodAutoscaler, as upstream's
//!   `pkg/apis/autoscaling/v1/conversion.go` maps them (CPU utilisation target ↔
//!   a Resource metric; other v2 metrics ride along in annotations);
//! - autoscaling/v2beta2 ↔ autoscaling/v2 HorizontalPodAutoscaler: the same fields
//!   (upstream's `pkg/apis/autoscaling/v2beta2` converts both through one internal
//!   type), except `HPAScalingRules.tolerance` (added to v2 in 1.33, after v2beta2 was
//!   removed), which a v2beta2 reader does not see;
//! - core/v1 ↔ events.k8s.io/v1 Event (one storage, renamed fields);
//! - networking.k8s.io/v1beta1 ↔ v1 Ingress and IngressClass ([`crate::networking`]).

use serde_json::{Map, Value, json};

/// Annotations upstream uses to keep v2-only data on a v1 object.
const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";

/// A stored object as the endpoint `rt` serves it.
pub fn to_version(rt: &crate::registry::ResourceType, obj: Value) -> Value {
    if rt.is_storage_version() {
        obj
    } else if rt.custom.is_some() {
        // A CRD's `conversion.strategy: None`: only apiVersion changes.
        set_api_version(obj, &rt.api_version())
    } else {
        convert(obj, rt.group, rt.version)
    }
}

/// An object from the endpoint `rt` as it is stored.
pub fn to_storage(rt: &crate::registry::ResourceType, obj: Value) -> Value {
    if rt.is_storage_version() {
        obj
    } else if rt.custom.is_some() {
        set_api_version(obj, &format!("{}/{}", rt.storage_group, rt.storage_version))
    } else {
        convert(obj, rt.storage_group, rt.storage_version)
    }
}

/// Converts `obj` to `group/version`; objects of other kinds pass unchanged.
pub fn convert(obj: Value, group: &str, version: &str) -> Value {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    match (group, kind, version) {
        ("autoscaling", "HorizontalPodAutoscaler", "v1") => hpa_v2_to_v1(obj),
        ("autoscaling", "HorizontalPodAutoscaler", "v2") => hpa_to_v2(obj),
        ("autoscaling", "HorizontalPodAutoscaler", "v2beta2") => hpa_to_v2beta2(obj),
        ("events.k8s.io", "Event", "v1") => rename_event_fields(obj, "events.k8s.io/v1", false),
        ("", "Event", "v1") => rename_event_fields(obj, "v1", true),
        ("networking.k8s.io", "Ingress", "v1") => crate::networking::ingress_to_v1(obj),
        ("networking.k8s.io", "Ingress", "v1beta1") => crate::networking::ingress_to_v1beta1(obj),
        ("networking.k8s.io", "IngressClass", v) => crate::networking::ingress_class_to(obj, v),
        _ => obj,
    }
}

fn api_version_of(obj: &Value) -> &str {
    obj.get("apiVersion").and_then(Value::as_str).unwrap_or("")
}

fn set_api_version(mut obj: Value, api_version: &str) -> Value {
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(api_version));
    }
    obj
}

/// Any served HPA version → v2 (v2beta2 is a relabel; v1 is upstream's conversion).
fn hpa_to_v2(obj: Value) -> Value {
    match api_version_of(&obj) {
        "autoscaling/v2" => obj,
        "autoscaling/v2beta2" => set_api_version(obj, "autoscaling/v2"),
        _ => hpa_v1_to_v2(obj),
    }
}

/// Any served HPA version → v2beta2: through v2, without v2-only fields.
fn hpa_to_v2beta2(obj: Value) -> Value {
    if api_version_of(&obj) == "autoscaling/v2beta2" {
        return obj;
    }
    let mut obj = set_api_version(hpa_to_v2(obj), "autoscaling/v2beta2");
    strip_v2_only_hpa_fields(&mut obj);
    obj
}

/// Removes the autoscaling/v2 HPA fields v2beta2 does not have:
/// `spec.behavior.{scaleUp,scaleDown}.tolerance`.
pub fn strip_v2_only_hpa_fields(obj: &mut Value) {
    for dir in ["scaleUp", "scaleDown"] {
        if let Some(rules) = obj
            .pointer_mut(&format!("/spec/behavior/{dir}"))
            .and_then(Value::as_object_mut)
        {
            rules.remove("tolerance");
        }
    }
}

/// core/v1 field ↔ events.k8s.io/v1 field; the rest have one name in both.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

fn rename_event_fields(mut obj: Value, api_version: &str, to_core: bool) -> Value {
    if obj.get("apiVersion").and_then(Value::as_str) == Some(api_version) {
        return obj;
    }
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(api_version));
        for (core, events) in EVENT_FIELDS {
            let (from, to) = if to_core {
                (events, core)
            } else {
                (core, events)
            };
            if let Some(v) = m.remove(*from) {
                m.insert((*to).to_string(), v);
            }
        }
    }
    obj
}

fn is_cpu_utilization(m: &Value) -> bool {
    m.get("type").and_then(Value::as_str) == Some("Resource")
        && m.pointer("/resource/name").and_then(Value::as_str) == Some("cpu")
        && m.pointer("/resource/target/type").and_then(Value::as_str) == Some("Utilization")
}

/// Keeps a JSON text in an annotation (how v1 carries v2-only data).
fn set_annotation(obj: &mut Value, key: &str, value: &Value) {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    if !obj["metadata"]["annotations"].is_object() {
        obj["metadata"]["annotations"] = json!({});
    }
    obj["metadata"]["annotations"][key] = json!(value.to_string());
}

fn hpa_v2_to_v1(mut obj: Value) -> Value {
    if obj.get("apiVersion").and_then(Value::as_str) == Some("autoscaling/v1") {
        return obj;
    }
    obj["apiVersion"] = json!("autoscaling/v1");
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let metrics = spec
        .get("metrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut new_spec = json!({});
    for k in ["scaleTargetRef", "minReplicas", "maxReplicas"] {
        if let Some(v) = spec.get(k) {
            new_spec[k] = v.clone();
        }
    }
    let (cpu, others): (Vec<Value>, Vec<Value>) = metrics.into_iter().partition(is_cpu_utilization);
    if let Some(c) = cpu
        .first()
        .and_then(|m| m.pointer("/resource/target/averageUtilization"))
    {
        new_spec["targetCPUUtilizationPercentage"] = c.clone();
    }
    if !others.is_empty() {
        set_annotation(&mut obj, METRICS_ANNOTATION, &Value::Array(others));
    }
    if let Some(b) = spec.get("behavior") {
        set_annotation(&mut obj, BEHAVIOR_ANNOTATION, b);
    }
    obj["spec"] = new_spec;
    if let Some(status) = obj.get("status").cloned() {
        let mut s = json!({});
        for k in [
            "observedGeneration",
            "lastScaleTime",
            "currentReplicas",
            "desiredReplicas",
        ] {
            if let Some(v) = status.get(k) {
                s[k] = v.clone();
            }
        }
        if s.get("currentReplicas").is_none() {
            s["currentReplicas"] = json!(0);
        }
        if s.get("desiredReplicas").is_none() {
            s["desiredReplicas"] = json!(0);
        }
        let current = status
            .get("currentMetrics")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let (cpu, others): (Vec<Value>, Vec<Value>) = current.into_iter().partition(|m| {
            m.get("type").and_then(Value::as_str) == Some("Resource")
                && m.pointer("/resource/name").and_then(Value::as_str) == Some("cpu")
        });
        if let Some(u) = cpu
            .first()
            .and_then(|m| m.pointer("/resource/current/averageUtilization"))
        {
            s["currentCPUUtilizationPercentage"] = u.clone();
        }
        if !others.is_empty() {
            set_annotation(&mut obj, CURRENT_METRICS_ANNOTATION, &Value::Array(others));
        }
        if let Some(c) = status
            .get("conditions")
            .filter(|c| c.as_array().is_some_and(|a| !a.is_empty()))
        {
            set_annotation(&mut obj, CONDITIONS_ANNOTATION, c);
        }
        obj["status"] = s;
    }
    obj
}

fn take_annotation(obj: &mut Value, key: &str) -> Option<Value> {
    let s = obj["metadata"]["annotations"]
        .as_object_mut()?
        .remove(key)?;
    serde_json::from_str(s.as_str()?).ok()
}

fn hpa_v1_to_v2(mut obj: Value) -> Value {
    if obj.get("apiVersion").and_then(Value::as_str) == Some("autoscaling/v2") {
        return obj;
    }
    obj["apiVersion"] = json!("autoscaling/v2");
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut new_spec = json!({});
    for k in ["scaleTargetRef", "minReplicas", "maxReplicas"] {
        if let Some(v) = spec.get(k) {
            new_spec[k] = v.clone();
        }
    }
    let mut metrics = Vec::new();
    if let Some(t) = spec.get("targetCPUUtilizationPercentage") {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": t}}}));
    }
    if let Some(Value::Array(others)) = take_annotation(&mut obj, METRICS_ANNOTATION) {
        metrics.extend(others);
    }
    if !metrics.is_empty() {
        new_spec["metrics"] = Value::Array(metrics);
    }
    if let Some(b) = take_annotation(&mut obj, BEHAVIOR_ANNOTATION) {
        new_spec["behavior"] = b;
    }
    obj["spec"] = new_spec;
    let current_others = take_annotation(&mut obj, CURRENT_METRICS_ANNOTATION);
    let conditions = take_annotation(&mut obj, CONDITIONS_ANNOTATION);
    if let Some(status) = obj.get("status").cloned() {
        let mut s = json!({});
        for k in [
            "observedGeneration",
            "lastScaleTime",
            "currentReplicas",
            "desiredReplicas",
        ] {
            if let Some(v) = status.get(k) {
                s[k] = v.clone();
            }
        }
        let mut current = Vec::new();
        if let Some(u) = status.get("currentCPUUtilizationPercentage") {
            current.push(json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": u}}}));
        }
        if let Some(Value::Array(o)) = current_others {
            current.extend(o);
        }
        if !current.is_empty() {
            s["currentMetrics"] = Value::Array(current);
        }
        if let Some(c) = conditions {
            s["conditions"] = c;
        }
        obj["status"] = s;
    }
    if obj["metadata"]["annotations"]
        .as_object()
        .is_some_and(Map::is_empty)
        && let Some(m) = obj["metadata"].as_object_mut()
    {
        m.remove("annotations");
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpa_roundtrip_keeps_v2_only_fields() {
        let v2 = json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d", "apiVersion": "apps/v1"},
                "minReplicas": 1, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
            "status": {"currentReplicas": 2, "desiredReplicas": 3}
        });
        let v1 = convert(v2.clone(), "autoscaling", "v1");
        assert_eq!(v1["apiVersion"], "autoscaling/v1");
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
        assert!(v1["spec"].get("metrics").is_none());
        assert!(v1["metadata"]["annotations"][METRICS_ANNOTATION].is_string());
        let back = convert(v1, "autoscaling", "v2");
        assert_eq!(back, v2);
    }

    fn hpa_v2() -> Value {
        json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "namespace": "default"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d", "apiVersion": "apps/v1"},
                "minReplicas": 1, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
                    {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}],
                "behavior": {
                    "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]},
                    "scaleDown": {"stabilizationWindowSeconds": 300}}},
            "status": {"currentReplicas": 2, "desiredReplicas": 3,
                "conditions": [{"type": "AbleToScale", "status": "True"}]}
        })
    }

    #[test]
    fn hpa_v2beta2_is_v2_relabelled() {
        let v2 = hpa_v2();
        let beta = convert(v2.clone(), "autoscaling", "v2beta2");
        assert_eq!(beta["apiVersion"], "autoscaling/v2beta2");
        let mut expected = v2.clone();
        expected["apiVersion"] = json!("autoscaling/v2beta2");
        assert_eq!(beta, expected);
        assert_eq!(convert(beta.clone(), "autoscaling", "v2"), v2);
        // Idempotent on its own version.
        assert_eq!(convert(beta.clone(), "autoscaling", "v2beta2"), beta);
    }

    #[test]
    fn hpa_v2beta2_and_v1_convert_through_v2() {
        let beta = convert(hpa_v2(), "autoscaling", "v2beta2");
        let v1 = convert(beta.clone(), "autoscaling", "v1");
        assert_eq!(v1["apiVersion"], "autoscaling/v1");
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
        assert_eq!(v1, convert(hpa_v2(), "autoscaling", "v1"));
        assert_eq!(convert(v1, "autoscaling", "v2beta2"), beta);
    }

    #[test]
    fn hpa_v2beta2_drops_tolerance() {
        let mut v2 = hpa_v2();
        v2["spec"]["behavior"]["scaleDown"]["tolerance"] = json!("0.05");
        v2["spec"]["behavior"]["scaleUp"]["tolerance"] = json!("0.01");
        let beta = convert(v2, "autoscaling", "v2beta2");
        assert!(
            beta["spec"]["behavior"]["scaleDown"]
                .get("tolerance")
                .is_none()
        );
        assert!(
            beta["spec"]["behavior"]["scaleUp"]
                .get("tolerance")
                .is_none()
        );
        assert_eq!(
            beta["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
            300
        );
    }

    #[test]
    fn events_convert_both_ways() {
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "involvedObject": {"kind": "Pod", "name": "p"}, "message": "hi", "count": 3,
            "source": {"component": "kubelet"}, "reason": "Started", "type": "Normal", "reportingComponent": "kubelet"});
        let ev = convert(core.clone(), "events.k8s.io", "v1");
        assert_eq!(ev["apiVersion"], "events.k8s.io/v1");
        assert_eq!(ev["regarding"]["name"], "p");
        assert_eq!(ev["note"], "hi");
        assert_eq!(ev["deprecatedCount"], 3);
        assert_eq!(ev["reportingController"], "kubelet");
        assert!(ev.get("message").is_none());
        assert_eq!(convert(ev, "", "v1"), core);
    }

    #[test]
    fn other_kinds_pass_through() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod"});
        assert_eq!(convert(pod.clone(), "autoscaling", "v1"), pod);
    }
}
