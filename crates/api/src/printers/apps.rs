//! `apps/v1` kinds.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::format::{
    arr, container_cells, format_label_selector, format_labels, get, int_at, name, obj, opt_int,
    selector_string, str_at,
};
use super::{AGE, NAME, Printer, WIDE_CONTAINERS, WIDE_IMAGES, age, col, wide};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    Some(match kind {
        "Deployment" => &DEPLOYMENT,
        "ReplicaSet" => &REPLICA_SET,
        "StatefulSet" => &STATEFUL_SET,
        "DaemonSet" => &DAEMON_SET,
        "ControllerRevision" => &CONTROLLER_REVISION,
        _ => return None,
    })
}

const SELECTOR_DESC: &str = "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.";

/// `spec.replicas`, which defaults to 1.
fn desired(o: &Value) -> i64 {
    opt_int(o, &["spec", "replicas"]).unwrap_or(1)
}

fn template_containers(o: &Value) -> (String, String) {
    container_cells(arr(o, &["spec", "template", "spec", "containers"]))
}

static DEPLOYMENT: Printer = Printer {
    columns: &[
        NAME,
        col("Ready", "string", "Number of the pod with ready state"),
        col(
            "Up-to-date",
            "string",
            "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
        ),
        col(
            "Available",
            "string",
            "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
        ),
        AGE,
        WIDE_CONTAINERS,
        WIDE_IMAGES,
        wide("Selector", "string", SELECTOR_DESC),
    ],
    cells: deployment_cells,
};

fn deployment_cells(o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = template_containers(o);
    // Unlike the other workloads, upstream prints the raw selector string here.
    let selector =
        selector_string(get(o, &["spec", "selector"])).unwrap_or_else(|()| "<invalid>".to_string());
    vec![
        name(o).into(),
        format!("{}/{}", int_at(o, &["status", "readyReplicas"]), desired(o)).into(),
        int_at(o, &["status", "updatedReplicas"]).into(),
        int_at(o, &["status", "availableReplicas"]).into(),
        age(o, now).into(),
        names.into(),
        images.into(),
        selector.into(),
    ]
}

static REPLICA_SET: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Desired",
            "integer",
            "Replicas is the number of desired pods.",
        ),
        col(
            "Current",
            "integer",
            "Replicas is the most recently observed number of non-terminating pods.",
        ),
        col(
            "Ready",
            "integer",
            "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
        ),
        AGE,
        WIDE_CONTAINERS,
        WIDE_IMAGES,
        wide(
            "Selector",
            "string",
            "Selector is a label query over pods that should match the replica count.",
        ),
    ],
    cells: |o, now| {
        let (names, images) = template_containers(o);
        vec![
            name(o).into(),
            desired(o).into(),
            int_at(o, &["status", "replicas"]).into(),
            int_at(o, &["status", "readyReplicas"]).into(),
            age(o, now).into(),
            names.into(),
            images.into(),
            format_label_selector(get(o, &["spec", "selector"])).into(),
        ]
    },
};

static STATEFUL_SET: Printer = Printer {
    columns: &[
        NAME,
        col("Ready", "string", "Number of the pod with ready state"),
        AGE,
        WIDE_CONTAINERS,
        WIDE_IMAGES,
    ],
    cells: |o, now| {
        let (names, images) = template_containers(o);
        vec![
            name(o).into(),
            format!("{}/{}", int_at(o, &["status", "readyReplicas"]), desired(o)).into(),
            age(o, now).into(),
            names.into(),
            images.into(),
        ]
    },
};

static DAEMON_SET: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Desired",
            "integer",
            "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).",
        ),
        col(
            "Current",
            "integer",
            "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
        ),
        col(
            "Ready",
            "integer",
            "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
        ),
        col(
            "Up-to-date",
            "integer",
            "The total number of nodes that are running updated daemon pod",
        ),
        col(
            "Available",
            "integer",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
        ),
        col(
            "Node Selector",
            "string",
            "NodeSelector is a selector which must be true for the pod to fit on a node.",
        ),
        AGE,
        WIDE_CONTAINERS,
        WIDE_IMAGES,
        wide(
            "Selector",
            "string",
            "A label query over pods that are managed by the daemon set.",
        ),
    ],
    cells: |o, now| {
        let (names, images) = template_containers(o);
        vec![
            name(o).into(),
            int_at(o, &["status", "desiredNumberScheduled"]).into(),
            int_at(o, &["status", "currentNumberScheduled"]).into(),
            int_at(o, &["status", "numberReady"]).into(),
            int_at(o, &["status", "updatedNumberScheduled"]).into(),
            int_at(o, &["status", "numberAvailable"]).into(),
            format_labels(obj(o, &["spec", "template", "spec", "nodeSelector"])).into(),
            age(o, now).into(),
            names.into(),
            images.into(),
            format_label_selector(get(o, &["spec", "selector"])).into(),
        ]
    },
};

static CONTROLLER_REVISION: Printer = Printer {
    columns: &[
        NAME,
        col("Controller", "string", "Controller of the object"),
        col(
            "Revision",
            "string",
            "Revision indicates the revision of the state represented by Data.",
        ),
        AGE,
    ],
    cells: |o, now| {
        vec![
            name(o).into(),
            controller_of(o).into(),
            int_at(o, &["revision"]).into(),
            age(o, now).into(),
        ]
    },
};

/// The controlling owner as `kind.group/name` in lower case (upstream
/// `formatResourceName` with the owner's group-kind), "<none>" without one.
fn controller_of(o: &Value) -> String {
    let Some(owner) = arr(o, &["metadata", "ownerReferences"])
        .iter()
        .find(|r| get(r, &["controller"]).and_then(Value::as_bool) == Some(true))
    else {
        return "<none>".to_string();
    };
    let kind = str_at(owner, &["kind"]);
    let api_version = str_at(owner, &["apiVersion"]);
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    let owner_name = str_at(owner, &["name"]);
    let group_kind = match (kind, group) {
        ("", "") => return owner_name.to_string(),
        (k, "") => k.to_string(),
        (k, g) => format!("{k}.{g}"),
    };
    format!("{}/{owner_name}", group_kind.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ago, now};
    use super::*;
    use serde_json::json;

    fn deployment(replicas: Value, status: Value, selector: Value) -> Value {
        json!({"metadata": {"name": "web", "creationTimestamp": ago(120)},
               "spec": {"replicas": replicas, "selector": selector,
                        "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}]}}},
               "status": status})
    }

    #[test]
    fn deployment_rows() {
        let sel = json!({"matchLabels": {"app": "web"}});
        let cases = [
            (
                deployment(
                    json!(3),
                    json!({"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}),
                    sel.clone(),
                ),
                json!([
                    "web",
                    "2/3",
                    3,
                    2,
                    "2m",
                    "nginx,log",
                    "nginx:1.27,busybox",
                    "app=web"
                ]),
            ),
            // A fresh deployment: status counts omitted (zero).
            (
                deployment(json!(1), json!({}), sel.clone()),
                json!([
                    "web",
                    "0/1",
                    0,
                    0,
                    "2m",
                    "nginx,log",
                    "nginx:1.27,busybox",
                    "app=web"
                ]),
            ),
            (
                deployment(json!(0), json!({}), json!({})),
                json!([
                    "web",
                    "0/0",
                    0,
                    0,
                    "2m",
                    "nginx,log",
                    "nginx:1.27,busybox",
                    ""
                ]),
            ),
            (
                deployment(
                    json!(null),
                    json!({}),
                    json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
                ),
                json!([
                    "web",
                    "0/1",
                    0,
                    0,
                    "2m",
                    "nginx,log",
                    "nginx:1.27,busybox",
                    "<invalid>"
                ]),
            ),
        ];
        for (d, want) in cases {
            assert_eq!(Value::from(deployment_cells(&d, now())), want);
        }
    }

    #[test]
    fn other_workloads() {
        let meta = json!({"name": "w", "creationTimestamp": ago(5)});
        let tmpl = json!({"spec": {"containers": [{"name": "c", "image": "i"}], "nodeSelector": {"kubernetes.io/os": "linux"}}});
        let rs = json!({"metadata": meta, "spec": {"replicas": 2, "template": tmpl, "selector": {"matchLabels": {"app": "w"}}},
                        "status": {"replicas": 2, "readyReplicas": 1}});
        assert_eq!(
            Value::from((REPLICA_SET.cells)(&rs, now())),
            json!(["w", 2, 2, 1, "5s", "c", "i", "app=w"])
        );
        let sts = json!({"metadata": meta, "spec": {"replicas": 3, "template": tmpl}, "status": {"readyReplicas": 3}});
        assert_eq!(
            Value::from((STATEFUL_SET.cells)(&sts, now())),
            json!(["w", "3/3", "5s", "c", "i"])
        );
        let ds = json!({"metadata": meta, "spec": {"template": tmpl, "selector": {"matchLabels": {"app": "w"}}},
                        "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                                   "updatedNumberScheduled": 3, "numberAvailable": 2}});
        assert_eq!(
            Value::from((DAEMON_SET.cells)(&ds, now())),
            json!([
                "w",
                3,
                3,
                2,
                3,
                2,
                "kubernetes.io/os=linux",
                "5s",
                "c",
                "i",
                "app=w"
            ])
        );
        let ds_cols: Vec<_> = DAEMON_SET
            .columns
            .iter()
            .filter(|c| c.priority == 0)
            .map(|c| c.name)
            .collect();
        assert_eq!(
            ds_cols,
            [
                "Name",
                "Desired",
                "Current",
                "Ready",
                "Up-to-date",
                "Available",
                "Node Selector",
                "Age"
            ]
        );
    }

    #[test]
    fn controller_revisions() {
        let cr = |owners: Value| json!({"metadata": {"name": "web-5d8f", "ownerReferences": owners}, "revision": 2});
        let cases = [
            (
                json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": true}]),
                "statefulset.apps/web",
            ),
            (
                json!([{"apiVersion": "v1", "kind": "Pod", "name": "x", "controller": true}]),
                "pod/x",
            ),
            (
                json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d"}]),
                "<none>",
            ),
            (json!(null), "<none>"),
        ];
        for (owners, want) in cases {
            let c = (CONTROLLER_REVISION.cells)(&cr(owners), now());
            assert_eq!((c[1].clone(), c[2].clone()), (json!(want), json!(2)));
        }
    }
}
