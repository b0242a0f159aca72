//! The metrics.k8s.io/v1beta1 API as metrics-server serves it: discovery,
//! NodeMetrics and PodMetrics (get and list, label and field selectors, the
//! Table form `kubectl get` asks for), objects built from the Node and Pod
//! listers and the storage. Pure over its inputs, so table tests drive it.

use berth_api::quantity::{Format, Quantity};
use berth_api::selector::{FieldSelector, LabelSelector};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::storage::{Storage, Usage};

pub const GROUP: &str = "metrics.k8s.io";
pub const VERSION: &str = "v1beta1";
pub const GROUP_VERSION: &str = "metrics.k8s.io/v1beta1";

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target<'a> {
    /// `/apis`, `/apis/metrics.k8s.io`, `/apis/metrics.k8s.io/v1beta1`.
    GroupList,
    Group,
    Resources,
    Nodes {
        name: Option<&'a str>,
    },
    Pods {
        namespace: Option<&'a str>,
        name: Option<&'a str>,
    },
}

impl Target<'_> {
    /// The resource a request is authorized on (`None`: a non-resource path).
    pub fn resource(&self) -> Option<&'static str> {
        match self {
            Target::Nodes { .. } => Some("nodes"),
            Target::Pods { .. } => Some("pods"),
            _ => None,
        }
    }

    pub fn name(&self) -> Option<&str> {
        match self {
            Target::Nodes { name } | Target::Pods { name, .. } => *name,
            _ => None,
        }
    }

    pub fn namespace(&self) -> Option<&str> {
        match self {
            Target::Pods { namespace, .. } => *namespace,
            _ => None,
        }
    }
}

/// Parses a path of this API; `None` for anything else (404).
pub fn target(path: &str) -> Option<Target<'_>> {
    let segs: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    Some(match segs.as_slice() {
        ["apis"] => Target::GroupList,
        ["apis", GROUP] => Target::Group,
        ["apis", GROUP, VERSION] => Target::Resources,
        ["apis", GROUP, VERSION, "nodes"] => Target::Nodes { name: None },
        ["apis", GROUP, VERSION, "nodes", n] => Target::Nodes { name: Some(n) },
        ["apis", GROUP, VERSION, "pods"] => Target::Pods {
            namespace: None,
            name: None,
        },
        ["apis", GROUP, VERSION, "namespaces", ns, "pods"] => Target::Pods {
            namespace: Some(ns),
            name: None,
        },
        ["apis", GROUP, VERSION, "namespaces", ns, "pods", n] => Target::Pods {
            namespace: Some(ns),
            name: Some(n),
        },
        _ => return None,
    })
}

/// A Kubernetes `Status` error.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Value,
}

impl ApiError {
    pub fn body(&self) -> Value {
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if !self.details.is_null() {
            s["details"] = self.details.clone();
        }
        s
    }

    fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let qualified = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("{qualified} \"{name}\" not found"),
            details: json!({"name": name, "group": group, "kind": resource}),
        }
    }

    fn bad_request(message: String) -> Self {
        ApiError {
            code: 400,
            reason: "BadRequest",
            message,
            details: Value::Null,
        }
    }

    pub fn method_not_allowed() -> Self {
        ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: "the server does not allow this method on the requested resource".into(),
            details: Value::Null,
        }
    }
}

/// The request's list options.
#[derive(Debug, Default)]
pub struct Options {
    pub label_selector: LabelSelector,
    pub field_selector: FieldSelector,
    /// The client asked for `Table` (`kubectl get`).
    pub table: bool,
}

impl Options {
    pub fn parse(query: &[(String, String)], accept: &str) -> Result<Options, ApiError> {
        let get = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let label_selector = match get("labelSelector") {
            Some(s) => LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?,
            None => LabelSelector::everything(),
        };
        let field_selector = match get("fieldSelector") {
            Some(s) => FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?,
            None => FieldSelector::everything(),
        };
        Ok(Options {
            label_selector,
            field_selector,
            table: accept.split(',').any(|a| a.contains("as=Table")),
        })
    }
}

pub fn group_list() -> Value {
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group()]})
}

pub fn group() -> Value {
    json!({
        "kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
        "versions": [{"groupVersion": GROUP_VERSION, "version": VERSION}],
        "preferredVersion": {"groupVersion": GROUP_VERSION, "version": VERSION},
    })
}

pub fn resources() -> Value {
    json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
        "resources": [
            {"name": "nodes", "singularName": "nodemetrics", "namespaced": false, "kind": "NodeMetrics", "verbs": ["get", "list"]},
            {"name": "pods", "singularName": "podmetrics", "namespaced": true, "kind": "PodMetrics", "verbs": ["get", "list"]},
        ]
    })
}

fn rfc3339(ns: i64) -> String {
    DateTime::<Utc>::from_timestamp_nanos(ns).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn window(ns: i64) -> String {
    berth_api::duration::go_duration(std::time::Duration::from_nanos(ns.max(0) as u64))
}

/// `uint64Quantity(cpu, DecimalSI, -9)` and `(memory, BinarySI, 0)`.
fn usage_json(u: &Usage) -> Value {
    json!({
        "cpu": Quantity::from_nanos(i128::from(u.cpu), Format::DecimalSI).to_string(),
        "memory": Quantity::from_value(i64::try_from(u.memory).unwrap_or(i64::MAX), Format::BinarySI).to_string(),
    })
}

fn labels_of(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Value {
    serde_json::to_value(m.labels.clone().unwrap_or_default()).unwrap_or(Value::Null)
}

fn meta_fields(
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    field: &str,
) -> Option<String> {
    match field {
        "metadata.name" => m.name.clone(),
        "metadata.namespace" => m.namespace.clone(),
        _ => None,
    }
}

fn node_metrics(node: &Node, u: &Usage, now: &str) -> Value {
    json!({
        "kind": "NodeMetrics", "apiVersion": GROUP_VERSION,
        "metadata": {"name": node.metadata.name, "creationTimestamp": now, "labels": labels_of(&node.metadata)},
        "timestamp": rfc3339(u.timestamp_ns), "window": window(u.window_ns),
        "usage": usage_json(u),
    })
}

fn pod_metrics(pod: &Pod, storage: &Storage, now: &str) -> Option<Value> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let u = storage.pod(ns, name)?;
    let containers: Vec<Value> = u
        .containers
        .iter()
        .map(|(c, cu)| json!({"name": c, "usage": usage_json(cu)}))
        .collect();
    Some(json!({
        "kind": "PodMetrics", "apiVersion": GROUP_VERSION,
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": now, "labels": labels_of(&pod.metadata)},
        "timestamp": rfc3339(u.timestamp_ns), "window": window(u.window_ns),
        "containers": containers,
    }))
}

/// Serves a GET of `target` over the listers' objects and the storage.
pub fn get(
    target: &Target<'_>,
    opts: &Options,
    nodes: &[std::sync::Arc<Node>],
    pods: &[std::sync::Arc<Pod>],
    storage: &Storage,
    now: DateTime<Utc>,
) -> Result<Value, ApiError> {
    let now = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let out = match target {
        Target::GroupList => return Ok(group_list()),
        Target::Group => return Ok(group()),
        Target::Resources => return Ok(resources()),
        Target::Nodes { name: Some(n) } => {
            let node = nodes
                .iter()
                .find(|x| x.metadata.name.as_deref() == Some(n))
                .ok_or_else(|| ApiError::not_found("", "nodes", n))?;
            let u = storage
                .node(n)
                .ok_or_else(|| ApiError::not_found(GROUP, "nodemetrics", n))?;
            node_metrics(node, &u, &now)
        }
        Target::Nodes { name: None } => {
            let mut selected: Vec<&Node> = nodes
                .iter()
                .map(|n| n.as_ref())
                .filter(|n| select(opts, &n.metadata))
                .collect();
            selected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            let items: Vec<Value> = selected
                .into_iter()
                .filter_map(|n| {
                    let u = storage.node(n.metadata.name.as_deref()?)?;
                    Some(node_metrics(n, &u, &now))
                })
                .collect();
            json!({"kind": "NodeMetricsList", "apiVersion": GROUP_VERSION, "metadata": {}, "items": items})
        }
        Target::Pods {
            namespace: Some(ns),
            name: Some(n),
        } => {
            let pod = pods
                .iter()
                .find(|p| {
                    p.metadata.namespace.as_deref() == Some(ns)
                        && p.metadata.name.as_deref() == Some(n)
                })
                .ok_or_else(|| ApiError::not_found("", "pods", n))?;
            pod_metrics(pod, storage, &now)
                .ok_or_else(|| ApiError::not_found(GROUP, "podmetrics", &format!("{ns}/{n}")))?
        }
        Target::Pods { namespace, .. } => {
            let mut selected: Vec<&Pod> = pods
                .iter()
                .map(|p| p.as_ref())
                .filter(|p| namespace.is_none_or(|ns| p.metadata.namespace.as_deref() == Some(ns)))
                .filter(|p| select(opts, &p.metadata))
                .collect();
            selected.sort_by(|a, b| {
                (&a.metadata.namespace, &a.metadata.name)
                    .cmp(&(&b.metadata.namespace, &b.metadata.name))
            });
            let items: Vec<Value> = selected
                .into_iter()
                .filter_map(|p| pod_metrics(p, storage, &now))
                .collect();
            json!({"kind": "PodMetricsList", "apiVersion": GROUP_VERSION, "metadata": {}, "items": items})
        }
    };
    Ok(if opts.table { table(&out) } else { out })
}

fn select(opts: &Options, m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    let labels = m.labels.clone().unwrap_or_default();
    opts.label_selector.matches(&labels) && opts.field_selector.matches(|f| meta_fields(m, f))
}

/// metrics-server's ConvertToTable: Name, one column per resource (summed
/// over a pod's containers), Window.
fn table(obj: &Value) -> Value {
    let items: Vec<Value> = match obj.get("items").and_then(Value::as_array) {
        Some(items) => items.clone(),
        None => vec![obj.clone()],
    };
    let mut columns = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "Name of the resource", "priority": 0}),
    ];
    for r in ["cpu", "memory"] {
        columns.push(json!({"name": r, "type": "string", "format": "quantity", "description": "", "priority": 0}));
    }
    columns.push(json!({"name": "Window", "type": "string", "format": "duration", "description": "", "priority": 0}));
    let rows: Vec<Value> = items
        .iter()
        .map(|item| {
            let usages: Vec<&Value> = match item.get("containers").and_then(Value::as_array) {
                Some(cs) => cs.iter().filter_map(|c| c.get("usage")).collect(),
                None => item.get("usage").into_iter().collect(),
            };
            let sum = |r: &str| {
                let mut total = Quantity::from_value(0, Format::DecimalSI);
                for u in &usages {
                    if let Some(q) = u.get(r).and_then(|v| Quantity::from_json(v).ok()) {
                        total.add(&q);
                    }
                }
                total.to_string()
            };
            let name = item.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
            let window = item.get("window").cloned().unwrap_or(Value::Null);
            json!({"cells": [name, sum("cpu"), sum("memory"), window], "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": item.get("metadata")}})
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "columnDefinitions": columns, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{Batch, Point};
    use std::sync::Arc;
    use std::time::Duration;

    const S: i64 = 1_000_000_000;
    const T0: i64 = 1_700_000_000;

    fn node(name: &str, labels: &[(&str, &str)]) -> Arc<Node> {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        Arc::new(n)
    }

    fn pod(ns: &str, name: &str, app: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some(ns.into());
        p.metadata.labels = Some([("app".to_string(), app.to_string())].into());
        Arc::new(p)
    }

    fn storage() -> Storage {
        let mut s = Storage::new(Duration::from_secs(15));
        for (i, at) in [T0, T0 + 15].iter().enumerate() {
            let mut b = Batch {
                node: Some(Point {
                    start_ns: 0,
                    timestamp_ns: at * S,
                    cpu_ns: (i as u64 + 1) * 15 * 250_000_000,
                    memory: 3 << 30,
                }),
                ..Default::default()
            };
            for (ns, name, c, cores_milli, mem) in [
                ("default", "web-1", "app", 500u64, 10u64 << 20),
                ("default", "web-1", "sidecar", 2, 1 << 20),
                ("default", "web-2", "app", 0, 4096),
                ("other", "db", "db", 1000, 1000),
            ] {
                b.pods.entry((ns.into(), name.into())).or_default().insert(
                    c.into(),
                    Point {
                        start_ns: (T0 - 100) * S,
                        timestamp_ns: at * S,
                        cpu_ns: 1 + (i as u64) * 15 * cores_milli * 1_000_000,
                        memory: mem,
                    },
                );
            }
            s.store(vec![("n1".into(), b)]);
        }
        s
    }

    fn run(path: &str, query: &[(&str, &str)], table: bool) -> Result<Value, ApiError> {
        let nodes = vec![node("n1", &[("zone", "a")]), node("n2", &[])];
        let pods = vec![
            pod("default", "web-2", "web"),
            pod("default", "web-1", "web"),
            pod("other", "db", "db"),
            pod("default", "new", "web"),
        ];
        let q: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let accept = if table {
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        } else {
            "application/json"
        };
        let opts = Options::parse(&q, accept)?;
        let now = DateTime::<Utc>::from_timestamp(T0 + 20, 0).unwrap();
        get(
            &target(path).unwrap(),
            &opts,
            &nodes,
            &pods,
            &storage(),
            now,
        )
    }

    #[test]
    fn node_metrics_as_metrics_server_prints_them() {
        let got = run("/apis/metrics.k8s.io/v1beta1/nodes", &[], false).unwrap();
        assert_eq!(
            got,
            json!({"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": [
                {"kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                 "metadata": {"name": "n1", "creationTimestamp": "2023-11-14T22:13:40Z", "labels": {"zone": "a"}},
                 "timestamp": "2023-11-14T22:13:35Z", "window": "15s",
                 "usage": {"cpu": "250m", "memory": "3Gi"}}
            ]})
        );
        let err = run("/apis/metrics.k8s.io/v1beta1/nodes/n2", &[], false).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (404, "nodemetrics.metrics.k8s.io \"n2\" not found")
        );
        let err = run("/apis/metrics.k8s.io/v1beta1/nodes/n3", &[], false).unwrap_err();
        assert_eq!(err.message, "nodes \"n3\" not found");
        let none = run(
            "/apis/metrics.k8s.io/v1beta1/nodes",
            &[("labelSelector", "zone=b")],
            false,
        )
        .unwrap();
        assert_eq!(none["items"], json!([]));
    }

    #[test]
    fn pod_metrics_by_namespace_selector_and_name() {
        let got = run(
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
            &[("labelSelector", "app=web")],
            false,
        )
        .unwrap();
        let names: Vec<&str> = got["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        // Sorted by name; "new" has no metrics and is left out.
        assert_eq!(names, ["web-1", "web-2"]);
        assert_eq!(
            got["items"][0]["containers"],
            json!([{"name": "app", "usage": {"cpu": "500m", "memory": "10Mi"}}, {"name": "sidecar", "usage": {"cpu": "2m", "memory": "1Mi"}}])
        );
        assert_eq!(
            got["items"][1]["containers"][0]["usage"],
            json!({"cpu": "0", "memory": "4Ki"})
        );
        let all = run(
            "/apis/metrics.k8s.io/v1beta1/pods",
            &[("fieldSelector", "metadata.namespace=other")],
            false,
        )
        .unwrap();
        assert_eq!(all["items"][0]["metadata"]["name"], "db");
        let err = run(
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/new",
            &[],
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "podmetrics.metrics.k8s.io \"default/new\" not found"
        );
        let err = run(
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/gone",
            &[],
            false,
        )
        .unwrap_err();
        assert_eq!(err.message, "pods \"gone\" not found");
        let err = run(
            "/apis/metrics.k8s.io/v1beta1/pods",
            &[("labelSelector", "a in (")],
            false,
        )
        .unwrap_err();
        assert_eq!(err.code, 400);
    }

    #[test]
    fn tables_sum_containers() {
        let got = run(
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
            &[],
            true,
        )
        .unwrap();
        let names: Vec<&str> = got["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "cpu", "memory", "Window"]);
        assert_eq!(
            got["rows"][0]["cells"],
            json!(["web-1", "502m", "11Mi", "15s"])
        );
    }

    #[test]
    fn paths() {
        assert_eq!(
            target("/apis/metrics.k8s.io/v1beta1/namespaces/a/pods/b"),
            Some(Target::Pods {
                namespace: Some("a"),
                name: Some("b")
            })
        );
        assert_eq!(
            target("/apis/metrics.k8s.io/v1beta1/"),
            Some(Target::Resources)
        );
        assert_eq!(target("/apis/metrics.k8s.io/v1beta1/services"), None);
        assert_eq!(target("/api/v1/pods"), None);
    }
}
