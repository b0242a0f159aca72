//! `autoscaling` kinds (v2 wire form; v1's CPU-only fields are read as the
//! equivalent v2 Resource metric, as upstream's conversion does).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::format::{arr, canonical_quantity, get, int_at, name, opt_int, str_at};
use super::{AGE, NAME, Printer, age, col};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    match kind {
        "HorizontalPodAutoscaler" => Some(&HPA),
        _ => None,
    }
}

static HPA: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Reference",
            "string",
            "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
        ),
        col(
            "Targets",
            "string",
            "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).",
        ),
        col(
            "MinPods",
            "string",
            "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
        ),
        col(
            "MaxPods",
            "string",
            "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
        ),
        col(
            "Replicas",
            "string",
            "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
        ),
        AGE,
    ],
    cells: hpa_cells,
};

/// A `*resource.Quantity` as Go prints it: canonical, or "<nil>" when unset.
fn quantity_ptr(v: &Value, path: &[&str]) -> String {
    match get(v, path) {
        Some(Value::String(s)) => canonical_quantity(s).unwrap_or_else(|| s.clone()),
        Some(Value::Number(n)) => n.to_string(),
        _ => "<nil>".to_string(),
    }
}

fn present(v: &Value, path: &[&str]) -> bool {
    get(v, path).is_some_and(|x| !x.is_null())
}

/// The metric specs and statuses in v2 form; v1 objects only carry a CPU
/// utilization target and current value.
fn metrics(hpa: &Value) -> (Vec<Value>, Vec<Value>) {
    if present(hpa, &["spec", "metrics"])
        || !present(hpa, &["spec", "targetCPUUtilizationPercentage"])
    {
        return (
            arr(hpa, &["spec", "metrics"]).to_vec(),
            arr(hpa, &["status", "currentMetrics"]).to_vec(),
        );
    }
    let target = get(hpa, &["spec", "targetCPUUtilizationPercentage"])
        .cloned()
        .unwrap_or(Value::Null);
    let specs = vec![
        json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}}),
    ];
    let statuses = match get(hpa, &["status", "currentCPUUtilizationPercentage"])
        .filter(|v| !v.is_null())
    {
        Some(current) => vec![
            json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": current}}}),
        ],
        None => Vec::new(),
    };
    (specs, statuses)
}

/// Upstream `formatHPAMetrics`: at most two metrics, statuses matched by position.
fn format_hpa_metrics(specs: &[Value], statuses: &[Value]) -> String {
    if specs.is_empty() {
        return "<none>".to_string();
    }
    const MAX: usize = 2;
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let status = statuses.get(i);
            // The status entry's source of this type, when it reported one.
            let current = |source: &str| {
                status
                    .and_then(|s| get(s, &[source]))
                    .filter(|s| s.is_object())
            };
            match str_at(spec, &["type"]) {
                source @ ("External" | "Object") => {
                    let key = if source == "External" {
                        "external"
                    } else {
                        "object"
                    };
                    if present(spec, &[key, "target", "averageValue"]) {
                        let cur = current(key)
                            .filter(|c| present(c, &["current", "averageValue"]))
                            .map_or_else(
                                || "<unknown>".to_string(),
                                |c| quantity_ptr(c, &["current", "averageValue"]),
                            );
                        format!(
                            "{cur}/{} (avg)",
                            quantity_ptr(spec, &[key, "target", "averageValue"])
                        )
                    } else {
                        let cur = current(key).map_or_else(
                            || "<unknown>".to_string(),
                            |c| quantity_ptr(c, &["current", "value"]),
                        );
                        format!("{cur}/{}", quantity_ptr(spec, &[key, "target", "value"]))
                    }
                }
                "Pods" => {
                    let cur = current("pods").map_or_else(
                        || "<unknown>".to_string(),
                        |c| quantity_ptr(c, &["current", "averageValue"]),
                    );
                    format!(
                        "{cur}/{}",
                        quantity_ptr(spec, &["pods", "target", "averageValue"])
                    )
                }
                source @ ("Resource" | "ContainerResource") => {
                    let key = if source == "Resource" {
                        "resource"
                    } else {
                        "containerResource"
                    };
                    let resource = str_at(spec, &[key, "name"]);
                    if present(spec, &[key, "target", "averageValue"]) {
                        let cur = current(key).map_or_else(
                            || "<unknown>".to_string(),
                            |c| quantity_ptr(c, &["current", "averageValue"]),
                        );
                        format!(
                            "{resource}: {cur}/{}",
                            quantity_ptr(spec, &[key, "target", "averageValue"])
                        )
                    } else {
                        let cur = current(key)
                            .and_then(|c| opt_int(c, &["current", "averageUtilization"]))
                            .map_or_else(|| "<unknown>".to_string(), |u| format!("{u}%"));
                        let target = opt_int(spec, &[key, "target", "averageUtilization"])
                            .map_or_else(|| "<auto>".to_string(), |u| format!("{u}%"));
                        format!("{resource}: {cur}/{target}")
                    }
                }
                _ => "<unknown type>".to_string(),
            }
        })
        .collect();
    if list.len() > MAX {
        format!("{} + {} more...", list[..MAX].join(", "), list.len() - MAX)
    } else {
        list.join(", ")
    }
}

fn hpa_cells(hpa: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let reference = format!(
        "{}/{}",
        str_at(hpa, &["spec", "scaleTargetRef", "kind"]),
        str_at(hpa, &["spec", "scaleTargetRef", "name"])
    );
    let (specs, statuses) = metrics(hpa);
    let min_pods = opt_int(hpa, &["spec", "minReplicas"])
        .map_or_else(|| "<unset>".to_string(), |m| m.to_string());
    vec![
        name(hpa).into(),
        reference.into(),
        format_hpa_metrics(&specs, &statuses).into(),
        min_pods.into(),
        int_at(hpa, &["spec", "maxReplicas"]).into(),
        int_at(hpa, &["status", "currentReplicas"]).into(),
        age(hpa, now).into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ago, now};
    use super::*;

    fn hpa(metrics: Value, current: Value) -> Value {
        json!({"metadata": {"name": "web", "creationTimestamp": ago(30)},
               "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                        "minReplicas": 1, "maxReplicas": 10, "metrics": metrics},
               "status": {"currentReplicas": 2, "currentMetrics": current}})
    }

    fn cpu_util(target: i64) -> Value {
        json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}})
    }

    #[test]
    fn hpa_targets() {
        let cases = [
            (json!([cpu_util(80)]), json!(null), "cpu: <unknown>/80%"),
            (
                json!([cpu_util(80)]),
                json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 50, "averageValue": "120m"}}}]),
                "cpu: 50%/80%",
            ),
            (
                json!([{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1024Mi"}}}]),
                json!([{"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "512Mi"}}}]),
                "memory: 512Mi/1Gi",
            ),
            (
                json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}]),
                json!([]),
                "cpu: <unknown>/<auto>",
            ),
            (
                json!([{"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}}]),
                json!([{"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "1500m"}}}]),
                "1500m/1k",
            ),
            (
                json!([{"type": "Object", "object": {"target": {"type": "Value", "value": "10"}}}]),
                json!([]),
                "<unknown>/10",
            ),
            (
                json!([{"type": "External", "external": {"target": {"type": "AverageValue", "averageValue": "30"}}}]),
                json!([{"type": "External", "external": {"current": {"averageValue": "12"}}}]),
                "12/30 (avg)",
            ),
            (
                json!([{"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "app",
                     "target": {"type": "Utilization", "averageUtilization": 60}}}]),
                json!([]),
                "cpu: <unknown>/60%",
            ),
            (
                json!([cpu_util(80), cpu_util(70), cpu_util(60)]),
                json!([]),
                "cpu: <unknown>/80%, cpu: <unknown>/70% + 1 more...",
            ),
            (json!([{"type": "Bogus"}]), json!([]), "<unknown type>"),
            (json!([]), json!([]), "<none>"),
        ];
        for (metrics, current, want) in cases {
            let c = hpa_cells(&hpa(metrics, current), now());
            assert_eq!(c[2], json!(want));
        }
        let c = hpa_cells(&hpa(json!([cpu_util(80)]), json!(null)), now());
        assert_eq!(
            Value::from(c),
            json!([
                "web",
                "Deployment/web",
                "cpu: <unknown>/80%",
                "1",
                10,
                2,
                "30s"
            ])
        );
    }

    #[test]
    fn hpa_v1_shape() {
        let v1 = json!({"metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5, "targetCPUUtilizationPercentage": 50},
            "status": {"currentReplicas": 1, "currentCPUUtilizationPercentage": 12}});
        assert_eq!(
            Value::from(hpa_cells(&v1, now())),
            json!([
                "web",
                "Deployment/web",
                "cpu: 12%/50%",
                "<unset>",
                5,
                1,
                "<unknown>"
            ])
        );
    }
}
