//! Core (`v1`) kinds.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::format::{
    arr, bool_at, container_cells, format_labels, get, int_at, map_len, name, obj, opt_int,
    opt_str, or, quantity_at, since, str_at, time_at,
};
use super::{AGE, Column, NAME, Printer, WIDE_CONTAINERS, WIDE_IMAGES, age, col, wide};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    Some(match kind {
        "Pod" => &POD,
        "PodTemplate" => &POD_TEMPLATE,
        "ReplicationController" => &REPLICATION_CONTROLLER,
        "Service" => &SERVICE,
        "Endpoints" => &ENDPOINTS,
        "Node" => &NODE,
        "Event" => &EVENT,
        "Namespace" => &NAMESPACE,
        "Secret" => &SECRET,
        "ServiceAccount" => &SERVICE_ACCOUNT,
        "ConfigMap" => &CONFIG_MAP,
        "PersistentVolume" => &PERSISTENT_VOLUME,
        "PersistentVolumeClaim" => &PERSISTENT_VOLUME_CLAIM,
        "ResourceQuota" => &RESOURCE_QUOTA,
        // LimitRange has no printer upstream: default table.
        _ => return None,
    })
}

// ---- Pod ----

static POD: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Ready",
            "string",
            "The aggregate readiness state of this pod for accepting traffic.",
        ),
        col(
            "Status",
            "string",
            "The aggregate status of the containers in this pod.",
        ),
        col(
            "Restarts",
            "string",
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        ),
        AGE,
        wide(
            "IP",
            "string",
            "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
        ),
        wide(
            "Node",
            "string",
            "NodeName indicates in which node this pod is scheduled.",
        ),
        wide(
            "Nominated Node",
            "string",
            "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods.",
        ),
        wide(
            "Readiness Gates",
            "string",
            "If specified, all readiness gates will be evaluated for pod readiness.",
        ),
    ],
    cells: pod_cells,
};

/// Upstream `node.NodeUnreachablePodReason`.
const NODE_UNREACHABLE_POD_REASON: &str = "NodeLost";

fn has_condition(pod: &Value, type_: &str) -> bool {
    arr(pod, &["status", "conditions"])
        .iter()
        .any(|c| str_at(c, &["type"]) == type_ && str_at(c, &["status"]) == "True")
}

/// Upstream `isPodInitializedConditionTrue`: the first Initialized condition decides.
fn initialized_condition_true(pod: &Value) -> bool {
    arr(pod, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == "Initialized")
        .is_some_and(|c| str_at(c, &["status"]) == "True")
}

/// A terminated container's reason as upstream words it when `reason` is empty.
fn terminated_reason(t: &Value, prefix: &str) -> String {
    let reason = str_at(t, &["reason"]);
    if !reason.is_empty() {
        return format!("{prefix}{reason}");
    }
    let signal = int_at(t, &["signal"]);
    if signal != 0 {
        format!("{prefix}Signal:{signal}")
    } else {
        format!("{prefix}ExitCode:{}", int_at(t, &["exitCode"]))
    }
}

/// Keeps the later of `latest` and the container's last termination time.
fn track_last_restart(latest: &mut Option<DateTime<Utc>>, status: &Value) {
    if obj(status, &["lastState", "terminated"]).is_none() {
        return;
    }
    let finished = time_at(status, &["lastState", "terminated", "finishedAt"]);
    if let Some(t) = finished.filter(|t| latest.is_none_or(|l| l < *t)) {
        *latest = Some(t);
    }
}

/// Upstream `printPod`, including its reason precedence: pod phase, then
/// `status.reason`, SchedulingGated, init container state, app container
/// state (last container wins), then deletion.
fn pod_cells(pod: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let phase = str_at(pod, &["status", "phase"]);
    let status_reason = str_at(pod, &["status", "reason"]);
    let mut reason = if status_reason.is_empty() {
        phase.to_string()
    } else {
        status_reason.to_string()
    };
    if arr(pod, &["status", "conditions"]).iter().any(|c| {
        str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated"
    }) {
        reason = "SchedulingGated".to_string();
    }

    let init_specs = arr(pod, &["spec", "initContainers"]);
    let is_sidecar = |name: &str| {
        init_specs
            .iter()
            .any(|c| str_at(c, &["name"]) == name && str_at(c, &["restartPolicy"]) == "Always")
    };
    let sidecars = init_specs
        .iter()
        .filter(|c| str_at(c, &["restartPolicy"]) == "Always")
        .count();
    let total = arr(pod, &["spec", "containers"]).len() + sidecars;

    let mut ready = 0usize;
    let mut restarts = 0i64;
    let mut sidecar_restarts = 0i64;
    let mut last_restart: Option<DateTime<Utc>> = None;
    let mut last_sidecar_restart: Option<DateTime<Utc>> = None;

    let mut initializing = false;
    for (i, cs) in arr(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        let count = int_at(cs, &["restartCount"]);
        restarts += count;
        track_last_restart(&mut last_restart, cs);
        let sidecar = is_sidecar(str_at(cs, &["name"]));
        if sidecar {
            sidecar_restarts += count;
            track_last_restart(&mut last_sidecar_restart, cs);
        }
        let terminated = obj(cs, &["state", "terminated"]).is_some();
        let waiting_reason = str_at(cs, &["state", "waiting", "reason"]);
        if terminated && int_at(cs, &["state", "terminated", "exitCode"]) == 0 {
            continue;
        }
        if sidecar && bool_at(cs, &["started"]) {
            if bool_at(cs, &["ready"]) {
                ready += 1;
            }
            continue;
        }
        reason = if terminated {
            let t = get(cs, &["state", "terminated"]).unwrap_or(&Value::Null);
            terminated_reason(t, "Init:")
        } else if obj(cs, &["state", "waiting"]).is_some()
            && !waiting_reason.is_empty()
            && waiting_reason != "PodInitializing"
        {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        break;
    }

    if !initializing || initialized_condition_true(pod) {
        // Past init, plain init containers' restarts stop counting; sidecars' still do.
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for cs in arr(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += int_at(cs, &["restartCount"]);
            track_last_restart(&mut last_restart, cs);
            let waiting_reason = str_at(cs, &["state", "waiting", "reason"]);
            let terminated = get(cs, &["state", "terminated"]).filter(|t| t.is_object());
            if obj(cs, &["state", "waiting"]).is_some() && !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                reason = terminated_reason(t, "");
            } else if bool_at(cs, &["ready"]) && obj(cs, &["state", "running"]).is_some() {
                has_running = true;
                ready += 1;
            }
        }
        // A pod whose last container completed but another still runs is not Completed.
        if reason == "Completed" && has_running {
            reason = if has_condition(pod, "Ready") {
                "Running"
            } else {
                "NotReady"
            }
            .to_string();
        }
    }

    let deleting = get(pod, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null());
    if deleting && status_reason == NODE_UNREACHABLE_POD_REASON {
        reason = "Unknown".to_string();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".to_string();
    }

    let restarts_cell = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", since(Some(t), now)),
        _ => restarts.to_string(),
    };

    // Upstream reads podIPs; the v1 → internal conversion fills it from podIP.
    let pod_ip = arr(pod, &["status", "podIPs"])
        .first()
        .map(|p| str_at(p, &["ip"]))
        .unwrap_or_else(|| str_at(pod, &["status", "podIP"]));

    let gates = arr(pod, &["spec", "readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = arr(pod, &["status", "conditions"]);
        let true_count = gates
            .iter()
            .filter(|g| {
                let t = str_at(g, &["conditionType"]);
                conditions
                    .iter()
                    .find(|c| str_at(c, &["type"]) == t)
                    .is_some_and(|c| str_at(c, &["status"]) == "True")
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };

    vec![
        name(pod).into(),
        format!("{ready}/{total}").into(),
        reason.into(),
        restarts_cell.into(),
        age(pod, now).into(),
        or(pod_ip, "<none>").into(),
        or(str_at(pod, &["spec", "nodeName"]), "<none>").into(),
        or(str_at(pod, &["status", "nominatedNodeName"]), "<none>").into(),
        readiness_gates.into(),
    ]
}

// ---- PodTemplate ----

static POD_TEMPLATE: Printer = Printer {
    columns: &[
        NAME,
        col("Containers", "string", super::CONTAINERS_DESC),
        col("Images", "string", super::IMAGES_DESC),
        col("Pod Labels", "string", "The labels for the pod template."),
    ],
    cells: |o, _| {
        let (names, images) = container_cells(arr(o, &["template", "spec", "containers"]));
        vec![
            name(o).into(),
            names.into(),
            images.into(),
            format_labels(obj(o, &["template", "metadata", "labels"])).into(),
        ]
    },
};

// ---- ReplicationController ----

static REPLICATION_CONTROLLER: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Desired",
            "integer",
            "Replicas is the number of desired replicas.",
        ),
        col(
            "Current",
            "integer",
            "Replicas is the most recently observed number of replicas.",
        ),
        col(
            "Ready",
            "integer",
            "The number of ready replicas for this replication controller.",
        ),
        AGE,
        WIDE_CONTAINERS,
        WIDE_IMAGES,
        wide(
            "Selector",
            "string",
            "Selector is a label query over pods that should match the Replicas count.",
        ),
    ],
    cells: |o, now| {
        let (names, images) = container_cells(arr(o, &["spec", "template", "spec", "containers"]));
        vec![
            name(o).into(),
            // replicas defaults to 1, so a stored object always has it.
            opt_int(o, &["spec", "replicas"]).unwrap_or(1).into(),
            int_at(o, &["status", "replicas"]).into(),
            int_at(o, &["status", "readyReplicas"]).into(),
            age(o, now).into(),
            names.into(),
            images.into(),
            format_labels(obj(o, &["spec", "selector"])).into(),
        ]
    },
};

// ---- Service ----

static SERVICE: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Type",
            "string",
            "type determines how the Service is exposed.",
        ),
        col(
            "Cluster-IP",
            "string",
            "clusterIP is the IP address of the service and is usually assigned randomly.",
        ),
        col(
            "External-IP",
            "string",
            "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
        ),
        col(
            "Port(s)",
            "string",
            "The list of ports that are exposed by this service.",
        ),
        AGE,
        wide(
            "Selector",
            "string",
            "Route service traffic to pods with label keys and values matching this selector.",
        ),
    ],
    cells: service_cells,
};

/// Upstream `loadBalancerStatusStringer` (wide, so never clipped): unique
/// ingress IPs or hostnames, sorted.
pub(super) fn load_balancer_ingress(o: &Value) -> String {
    let mut out: Vec<&str> = arr(o, &["status", "loadBalancer", "ingress"])
        .iter()
        .filter_map(|i| {
            let ip = str_at(i, &["ip"]);
            let host = str_at(i, &["hostname"]);
            if !ip.is_empty() {
                Some(ip)
            } else if !host.is_empty() {
                Some(host)
            } else {
                None
            }
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out.join(",")
}

fn strings(v: &[Value]) -> Vec<&str> {
    v.iter().map(|s| s.as_str().unwrap_or("")).collect()
}

/// Upstream `getServiceExternalIP`.
fn service_external_ip(svc: &Value, type_: &str) -> String {
    let external_ips = strings(arr(svc, &["spec", "externalIPs"]));
    match type_ {
        "ClusterIP" | "NodePort" if !external_ips.is_empty() => external_ips.join(","),
        "ClusterIP" | "NodePort" => "<none>".to_string(),
        "LoadBalancer" => {
            let lb = load_balancer_ingress(svc);
            if !external_ips.is_empty() {
                let mut all: Vec<&str> = if lb.is_empty() {
                    Vec::new()
                } else {
                    lb.split(',').collect()
                };
                all.extend(external_ips);
                all.join(",")
            } else if !lb.is_empty() {
                lb
            } else {
                "<pending>".to_string()
            }
        }
        "ExternalName" => str_at(svc, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    }
}

/// Upstream `makePortString`: `port[:nodePort]/protocol`, comma-joined.
fn service_ports(svc: &Value) -> String {
    let ports: Vec<String> = arr(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let port = int_at(p, &["port"]);
            // Protocol defaults to TCP.
            let proto = opt_str(p, &["protocol"]).unwrap_or("TCP");
            match int_at(p, &["nodePort"]) {
                np if np > 0 => format!("{port}:{np}/{proto}"),
                _ => format!("{port}/{proto}"),
            }
        })
        .collect();
    or(&ports.join(","), "<none>")
}

fn service_cells(svc: &Value, now: DateTime<Utc>) -> Vec<Value> {
    // type defaults to ClusterIP.
    let type_ = opt_str(svc, &["spec", "type"]).unwrap_or("ClusterIP");
    // Upstream reads clusterIPs; defaulting fills it from clusterIP.
    let cluster_ip = arr(svc, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .unwrap_or_else(|| str_at(svc, &["spec", "clusterIP"]));
    vec![
        name(svc).into(),
        type_.into(),
        or(cluster_ip, "<none>").into(),
        service_external_ip(svc, type_).into(),
        service_ports(svc).into(),
        age(svc, now).into(),
        format_labels(obj(svc, &["spec", "selector"])).into(),
    ]
}

// ---- Endpoints ----

static ENDPOINTS: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Endpoints",
            "string",
            "The set of all endpoints is the union of all subsets.",
        ),
        AGE,
    ],
    cells: |o, now| {
        vec![
            name(o).into(),
            format_endpoints(o).into(),
            age(o, now).into(),
        ]
    },
};

/// Upstream `formatEndpoints` (all ports): at most 3 `ip:port`, then "+ N more...".
fn format_endpoints(ep: &Value) -> String {
    let subsets = arr(ep, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0;
    for ss in subsets {
        let addresses = arr(ss, &["addresses"]);
        let ports = arr(ss, &["ports"]);
        if ports.is_empty() {
            // Headless services may have no ports.
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(str_at(a, &["ip"]).to_string());
            }
            continue;
        }
        for p in ports {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(join_host_port(str_at(a, &["ip"]), int_at(p, &["port"])));
            }
        }
    }
    let ret = list.join(",");
    if more {
        format!("{ret} + {} more...", count - MAX)
    } else {
        ret
    }
}

/// Go `net.JoinHostPort`: IPv6 hosts are bracketed.
fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

// ---- Node ----

static NODE: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "The status of the node"),
        col("Roles", "string", "The roles of the node"),
        AGE,
        col("Version", "string", "Kubelet Version reported by the node."),
        wide(
            "Internal-IP",
            "string",
            "List of addresses reachable to the node.",
        ),
        wide(
            "External-IP",
            "string",
            "List of addresses reachable to the node.",
        ),
        wide(
            "OS-Image",
            "string",
            "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        ),
        wide(
            "Kernel-Version",
            "string",
            "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        ),
        wide(
            "Container-Runtime",
            "string",
            "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        ),
    ],
    cells: node_cells,
};

/// Upstream node status: Ready / NotReady (last Ready condition wins) or
/// Unknown, plus SchedulingDisabled when cordoned.
fn node_status(node: &Value) -> String {
    let ready = arr(node, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| str_at(c, &["type"]) == "Ready");
    let mut status = vec![match ready {
        Some(c) if str_at(c, &["status"]) == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if bool_at(node, &["spec", "unschedulable"]) {
        status.push("SchedulingDisabled");
    }
    status.join(",")
}

/// Upstream `findNodeRoles`: `node-role.kubernetes.io/<role>` keys and the
/// value of `kubernetes.io/role`, sorted and unique.
fn node_roles(node: &Value) -> String {
    let mut roles: Vec<&str> = obj(node, &["metadata", "labels"])
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                (!role.is_empty()).then_some(role)
            } else if k == "kubernetes.io/role" {
                v.as_str().filter(|v| !v.is_empty())
            } else {
                None
            }
        })
        .collect();
    roles.sort_unstable();
    roles.dedup();
    or(&roles.join(","), "<none>")
}

fn node_address(node: &Value, type_: &str) -> String {
    arr(node, &["status", "addresses"])
        .iter()
        .find(|a| str_at(a, &["type"]) == type_)
        .map_or_else(
            || "<none>".to_string(),
            |a| str_at(a, &["address"]).to_string(),
        )
}

fn node_cells(node: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let info = |field: &str| or(str_at(node, &["status", "nodeInfo", field]), "<unknown>");
    vec![
        name(node).into(),
        node_status(node).into(),
        node_roles(node).into(),
        age(node, now).into(),
        str_at(node, &["status", "nodeInfo", "kubeletVersion"]).into(),
        node_address(node, "InternalIP").into(),
        node_address(node, "ExternalIP").into(),
        info("osImage").into(),
        info("kernelVersion").into(),
        info("containerRuntimeVersion").into(),
    ]
}

// ---- Event (also events.k8s.io, which upstream prints through the same internal type) ----

pub(super) static EVENT: Printer = Printer {
    columns: &[
        col(
            "Last Seen",
            "string",
            "The time at which the most recent occurrence of this event was recorded.",
        ),
        col(
            "Type",
            "string",
            "Type of this event (Normal, Warning), new types could be added in the future",
        ),
        col(
            "Reason",
            "string",
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
        ),
        col("Object", "string", "The object that this event is about."),
        wide(
            "Subobject",
            "string",
            "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].",
        ),
        wide(
            "Source",
            "string",
            "The component reporting this event. Should be a short machine understandable string.",
        ),
        col(
            "Message",
            "string",
            "A human-readable description of the status of this operation.",
        ),
        wide(
            "First Seen",
            "string",
            "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        ),
        wide(
            "Count",
            "string",
            "The number of times this event has occurred.",
        ),
        Column {
            priority: 1,
            ..NAME
        },
    ],
    cells: |o, now| event_cells(o, &CORE_EVENT_FIELDS, now),
};

/// Where an event's fields live: core/v1 and events.k8s.io/v1 name them differently.
pub(super) struct EventFields {
    pub involved_object: &'static str,
    pub message: &'static str,
    pub source: &'static str,
    pub first_timestamp: &'static str,
    pub last_timestamp: &'static str,
    pub count: &'static str,
    pub reporting_controller: &'static str,
}

const CORE_EVENT_FIELDS: EventFields = EventFields {
    involved_object: "involvedObject",
    message: "message",
    source: "source",
    first_timestamp: "firstTimestamp",
    last_timestamp: "lastTimestamp",
    count: "count",
    reporting_controller: "reportingComponent",
};

/// Upstream `printEvent`.
pub(super) fn event_cells(ev: &Value, f: &EventFields, now: DateTime<Utc>) -> Vec<Value> {
    let first = match time_at(ev, &[f.first_timestamp]) {
        Some(t) => since(Some(t), now),
        None => since(time_at(ev, &["eventTime"]), now),
    };
    let mut last = match time_at(ev, &[f.last_timestamp]) {
        Some(t) => since(Some(t), now),
        None => first.clone(),
    };
    let mut count = int_at(ev, &[f.count]);
    if obj(ev, &["series"]).is_some() {
        last = since(time_at(ev, &["series", "lastObservedTime"]), now);
        count = int_at(ev, &["series", "count"]);
    } else if count == 0 {
        // Singleton events have no count in the new API.
        count = 1;
    }

    let kind = str_at(ev, &[f.involved_object, "kind"]).to_lowercase();
    let obj_name = str_at(ev, &[f.involved_object, "name"]);
    let target = if obj_name.is_empty() {
        kind
    } else {
        format!("{kind}/{obj_name}")
    };

    // Upstream `formatEventSource`: the legacy source, else the reporting fields.
    let first_non_empty = |a: &'static str, b: &'static str| {
        let v = str_at(ev, &[f.source, a]);
        if v.is_empty() { str_at(ev, &[b]) } else { v }
    };
    let component = first_non_empty("component", f.reporting_controller);
    let instance = first_non_empty("host", "reportingInstance");
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };

    vec![
        last.into(),
        str_at(ev, &["type"]).into(),
        str_at(ev, &["reason"]).into(),
        target.into(),
        str_at(ev, &[f.involved_object, "fieldPath"]).into(),
        source.into(),
        str_at(ev, &[f.message]).trim().into(),
        first.into(),
        count.into(),
        name(ev).into(),
    ]
}

// ---- Namespace, Secret, ServiceAccount, ConfigMap ----

static NAMESPACE: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "The status of the namespace"),
        AGE,
    ],
    cells: |o, now| {
        vec![
            name(o).into(),
            str_at(o, &["status", "phase"]).into(),
            age(o, now).into(),
        ]
    },
};

static SECRET: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Type",
            "string",
            "Used to facilitate programmatic handling of secret data.",
        ),
        col("Data", "string", "Data contains the secret data."),
        AGE,
    ],
    cells: |o, now| {
        // stringData is merged into data on write; count the union in case it was not.
        let mut keys: Vec<&String> = ["data", "stringData"]
            .iter()
            .flat_map(|f| obj(o, &[*f]).into_iter().flat_map(|m| m.keys()))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        vec![
            name(o).into(),
            str_at(o, &["type"]).into(),
            keys.len().into(),
            age(o, now).into(),
        ]
    },
};

static SERVICE_ACCOUNT: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Secrets",
            "string",
            "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
        ),
        AGE,
    ],
    cells: |o, now| {
        vec![
            name(o).into(),
            arr(o, &["secrets"]).len().into(),
            age(o, now).into(),
        ]
    },
};

static CONFIG_MAP: Printer = Printer {
    columns: &[
        NAME,
        col("Data", "string", "Data contains the configuration data."),
        AGE,
    ],
    cells: |o, now| {
        let n = map_len(o, &["data"]) + map_len(o, &["binaryData"]);
        vec![name(o).into(), n.into(), age(o, now).into()]
    },
};

// ---- PersistentVolume, PersistentVolumeClaim ----

static PERSISTENT_VOLUME: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Capacity",
            "string",
            "capacity is the description of the persistent volume's resources and capacity.",
        ),
        col(
            "Access Modes",
            "string",
            "accessModes contains all ways the volume can be mounted.",
        ),
        col(
            "Reclaim Policy",
            "string",
            "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.",
        ),
        col(
            "Status",
            "string",
            "phase indicates if a volume is available, bound to a claim, or released by a claim.",
        ),
        col(
            "Claim",
            "string",
            "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.",
        ),
        col("StorageClass", "string", "StorageClass of the pv"),
        col(
            "VolumeAttributesClass",
            "string",
            "VolumeAttributesClass of the pv",
        ),
        col(
            "Reason",
            "string",
            "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
        ),
        AGE,
        wide(
            "VolumeMode",
            "string",
            "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.",
        ),
    ],
    cells: pv_cells,
};

/// Upstream `GetAccessModesAsString`: fixed order, duplicates dropped.
fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|v| v.as_str() == Some(m));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(m, _)| has(m))
    .map(|(_, s)| *s)
    .collect::<Vec<_>>()
    .join(",")
}

const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// Upstream `GetPersistentVolume(Claim)Class`: the beta annotation wins.
fn storage_class(o: &Value) -> String {
    match opt_str(
        o,
        &["metadata", "annotations", BETA_STORAGE_CLASS_ANNOTATION],
    ) {
        Some(c) => c.to_string(),
        None => str_at(o, &["spec", "storageClassName"]).to_string(),
    }
}

fn deleting_or(o: &Value, phase: &str) -> String {
    if get(o, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null()) {
        "Terminating".to_string()
    } else {
        phase.to_string()
    }
}

fn pv_cells(pv: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let claim = match obj(pv, &["spec", "claimRef"]) {
        Some(_) => format!(
            "{}/{}",
            str_at(pv, &["spec", "claimRef", "namespace"]),
            str_at(pv, &["spec", "claimRef", "name"])
        ),
        None => String::new(),
    };
    vec![
        name(pv).into(),
        quantity_at(pv, &["spec", "capacity", "storage"]).into(),
        access_modes(arr(pv, &["spec", "accessModes"])).into(),
        str_at(pv, &["spec", "persistentVolumeReclaimPolicy"]).into(),
        deleting_or(pv, str_at(pv, &["status", "phase"])).into(),
        claim.into(),
        storage_class(pv).into(),
        opt_str(pv, &["spec", "volumeAttributesClassName"])
            .unwrap_or("<unset>")
            .into(),
        str_at(pv, &["status", "reason"]).into(),
        age(pv, now).into(),
        opt_str(pv, &["spec", "volumeMode"])
            .unwrap_or("<unset>")
            .into(),
    ]
}

static PERSISTENT_VOLUME_CLAIM: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Status",
            "string",
            "phase represents the current phase of PersistentVolumeClaim.",
        ),
        col(
            "Volume",
            "string",
            "volumeName is the binding reference to the PersistentVolume backing this claim.",
        ),
        col(
            "Capacity",
            "string",
            "capacity represents the actual resources of the underlying volume.",
        ),
        col(
            "Access Modes",
            "string",
            "accessModes contains the actual access modes the volume backing the PVC has.",
        ),
        col("StorageClass", "string", "StorageClass of the pvc"),
        col(
            "VolumeAttributesClass",
            "string",
            "VolumeAttributesClass of the pvc",
        ),
        AGE,
        wide(
            "VolumeMode",
            "string",
            "volumeMode defines what type of volume is required by the claim.",
        ),
    ],
    cells: pvc_cells,
};

fn pvc_cells(pvc: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let volume = str_at(pvc, &["spec", "volumeName"]);
    // Capacity and modes are only shown once bound.
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            quantity_at(pvc, &["status", "capacity", "storage"]),
            access_modes(arr(pvc, &["status", "accessModes"])),
        )
    };
    vec![
        name(pvc).into(),
        deleting_or(pvc, str_at(pvc, &["status", "phase"])).into(),
        volume.into(),
        capacity.into(),
        modes.into(),
        storage_class(pvc).into(),
        opt_str(pvc, &["spec", "volumeAttributesClassName"])
            .unwrap_or("<unset>")
            .into(),
        age(pvc, now).into(),
        opt_str(pvc, &["spec", "volumeMode"])
            .unwrap_or("<unset>")
            .into(),
    ]
}

// ---- ResourceQuota ----

static RESOURCE_QUOTA: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Request",
            "string",
            "Request represents a minimum amount of cpu/memory that a container may consume.",
        ),
        col(
            "Limit",
            "string",
            "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
        ),
        AGE,
    ],
    cells: |o, now| {
        let mut resources: Vec<&String> = obj(o, &["status", "hard"])
            .into_iter()
            .flat_map(|m| m.keys())
            .collect();
        resources.sort_unstable();
        let (mut requests, mut limits) = (Vec::new(), Vec::new());
        for r in resources {
            let used = quantity_at(o, &["status", "used", r]);
            let hard = quantity_at(o, &["status", "hard", r]);
            let entry = format!("{r}: {used}/{hard}");
            if r.split('.').count() > 1 && r.split('.').next() == Some("limits") {
                limits.push(entry);
            } else {
                requests.push(entry);
            }
        }
        vec![
            name(o).into(),
            requests.join(", ").into(),
            limits.join(", ").into(),
            age(o, now).into(),
        ]
    },
};

#[cfg(test)]
mod tests {
    use super::super::testutil::{ago, now};
    use super::*;
    use serde_json::json;

    fn pod(spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": "p", "creationTimestamp": ago(600)}, "spec": spec, "status": status})
    }

    fn one_container() -> Value {
        json!({"containers": [{"name": "app", "image": "busybox"}]})
    }

    fn running(name: &str, ready: bool, restarts: i64) -> Value {
        json!({"name": name, "ready": ready, "restartCount": restarts, "state": {"running": {"startedAt": ago(100)}}})
    }

    fn waiting(name: &str, reason: &str, restarts: i64) -> Value {
        json!({"name": name, "ready": false, "restartCount": restarts, "state": {"waiting": {"reason": reason}}})
    }

    fn terminated(name: &str, reason: &str, exit_code: i64) -> Value {
        json!({"name": name, "ready": false, "restartCount": 0,
               "state": {"terminated": {"reason": reason, "exitCode": exit_code, "finishedAt": ago(50)}}})
    }

    /// (Ready, Status, Restarts) of a pod row.
    fn ready_status_restarts(p: &Value) -> (String, String, String) {
        let c = pod_cells(p, now());
        let s = |i: usize| c[i].as_str().unwrap().to_string();
        (s(1), s(2), s(3))
    }

    #[test]
    fn pod_status_reasons() {
        let init2 = json!({"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "app"}]});
        let cases: Vec<(&str, Value, (&str, &str, &str))> = vec![
            (
                "running and ready",
                pod(
                    one_container(),
                    json!({"phase": "Running", "containerStatuses": [running("app", true, 0)]}),
                ),
                ("1/1", "Running", "0"),
            ),
            (
                "pending, image being pulled",
                pod(
                    one_container(),
                    json!({"phase": "Pending", "containerStatuses": [waiting("app", "ContainerCreating", 0)]}),
                ),
                ("0/1", "ContainerCreating", "0"),
            ),
            (
                "pending without statuses",
                pod(one_container(), json!({"phase": "Pending"})),
                ("0/1", "Pending", "0"),
            ),
            (
                "crash loop",
                pod(
                    one_container(),
                    json!({"phase": "Running", "containerStatuses": [waiting("app", "CrashLoopBackOff", 4)]}),
                ),
                ("0/1", "CrashLoopBackOff", "4"),
            ),
            (
                "completed",
                pod(
                    json!({"containers": [{"name": "app"}]}),
                    json!({"phase": "Succeeded", "containerStatuses": [terminated("app", "Completed", 0)]}),
                ),
                ("0/1", "Completed", "0"),
            ),
            (
                "error",
                pod(
                    one_container(),
                    json!({"phase": "Failed", "containerStatuses": [terminated("app", "Error", 1)]}),
                ),
                ("0/1", "Error", "0"),
            ),
            (
                "terminated without reason: signal",
                pod(
                    one_container(),
                    json!({"phase": "Failed", "containerStatuses": [
                    {"name": "app", "state": {"terminated": {"signal": 9, "exitCode": 137}}}]}),
                ),
                ("0/1", "Signal:9", "0"),
            ),
            (
                "terminated without reason: exit code",
                pod(
                    one_container(),
                    json!({"phase": "Failed", "containerStatuses": [
                    {"name": "app", "state": {"terminated": {"exitCode": 2}}}]}),
                ),
                ("0/1", "ExitCode:2", "0"),
            ),
            (
                "evicted",
                pod(
                    one_container(),
                    json!({"phase": "Failed", "reason": "Evicted", "message": "low on memory"}),
                ),
                ("0/1", "Evicted", "0"),
            ),
            (
                "node lost, not deleting",
                pod(
                    one_container(),
                    json!({"phase": "Running", "reason": "NodeLost"}),
                ),
                ("0/1", "NodeLost", "0"),
            ),
            (
                "scheduling gated",
                pod(
                    one_container(),
                    json!({"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
                ),
                ("0/1", "SchedulingGated", "0"),
            ),
            (
                "first init container running",
                pod(
                    init2.clone(),
                    json!({"phase": "Pending", "initContainerStatuses": [
                    running("i1", false, 0), waiting("i2", "PodInitializing", 0)]}),
                ),
                ("0/1", "Init:0/2", "0"),
            ),
            (
                "second init container running",
                pod(
                    init2.clone(),
                    json!({"phase": "Pending", "initContainerStatuses": [
                    terminated("i1", "Completed", 0), running("i2", false, 0)],
                    "containerStatuses": [waiting("app", "PodInitializing", 0)]}),
                ),
                ("0/1", "Init:1/2", "0"),
            ),
            (
                "init container crash looping",
                pod(
                    init2.clone(),
                    json!({"phase": "Pending", "initContainerStatuses": [
                    waiting("i1", "CrashLoopBackOff", 3)], "containerStatuses": [waiting("app", "PodInitializing", 0)]}),
                ),
                ("0/1", "Init:CrashLoopBackOff", "3"),
            ),
            (
                "init container failed",
                pod(
                    init2.clone(),
                    json!({"phase": "Pending", "initContainerStatuses": [terminated("i1", "Error", 1)]}),
                ),
                ("0/1", "Init:Error", "0"),
            ),
            (
                "init container killed by signal",
                pod(
                    init2.clone(),
                    json!({"phase": "Pending", "initContainerStatuses": [
                    {"name": "i1", "state": {"terminated": {"signal": 15, "exitCode": 143}}}]}),
                ),
                ("0/1", "Init:Signal:15", "0"),
            ),
            (
                "init done, app container starting",
                pod(
                    init2.clone(),
                    json!({"phase": "Pending", "initContainerStatuses": [
                    terminated("i1", "Completed", 0), terminated("i2", "Completed", 0)],
                    "containerStatuses": [waiting("app", "PodInitializing", 0)]}),
                ),
                ("0/1", "PodInitializing", "0"),
            ),
            (
                "one container done, another still running and pod ready",
                pod(
                    json!({"containers": [{"name": "a"}, {"name": "b"}]}),
                    json!({"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [running("a", true, 0), terminated("b", "Completed", 0)]}),
                ),
                ("1/2", "Running", "0"),
            ),
            (
                "one container done, another running but pod not ready",
                pod(
                    json!({"containers": [{"name": "a"}, {"name": "b"}]}),
                    json!({"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "False"}],
                    "containerStatuses": [running("a", true, 0), terminated("b", "Completed", 0)]}),
                ),
                ("1/2", "NotReady", "0"),
            ),
            (
                "running but container not ready",
                pod(
                    one_container(),
                    json!({"phase": "Running", "containerStatuses": [running("app", false, 0)]}),
                ),
                ("0/1", "Running", "0"),
            ),
            (
                "sidecar started and ready counts as a container",
                pod(
                    json!({"initContainers": [{"name": "side", "restartPolicy": "Always"}], "containers": [{"name": "app"}]}),
                    json!({"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
                    "initContainerStatuses": [{"name": "side", "started": true, "ready": true, "restartCount": 2,
                        "state": {"running": {}}}],
                    "containerStatuses": [running("app", true, 1)]}),
                ),
                ("2/2", "Running", "3"),
            ),
            (
                "sidecar not started yet blocks init",
                pod(
                    json!({"initContainers": [{"name": "side", "restartPolicy": "Always"}], "containers": [{"name": "app"}]}),
                    json!({"phase": "Pending", "initContainerStatuses": [{"name": "side", "started": false,
                        "state": {"running": {}}}], "containerStatuses": [waiting("app", "PodInitializing", 0)]}),
                ),
                ("0/2", "Init:0/1", "0"),
            ),
        ];
        for (what, p, (ready, status, restarts)) in cases {
            assert_eq!(
                ready_status_restarts(&p),
                (ready.into(), status.into(), restarts.into()),
                "{what}"
            );
        }
    }

    #[test]
    fn pod_deletion_reasons() {
        let mut p = pod(
            one_container(),
            json!({"phase": "Running", "containerStatuses": [running("app", true, 0)]}),
        );
        p["metadata"]["deletionTimestamp"] = json!(ago(1));
        assert_eq!(ready_status_restarts(&p).1, "Terminating");
        p["status"]["reason"] = json!("NodeLost");
        assert_eq!(ready_status_restarts(&p).1, "Unknown");
        // A finished pod being deleted keeps its final status.
        let mut done = pod(
            one_container(),
            json!({"phase": "Succeeded", "containerStatuses": [terminated("app", "Completed", 0)]}),
        );
        done["metadata"]["deletionTimestamp"] = json!(ago(1));
        assert_eq!(ready_status_restarts(&done).1, "Completed");
    }

    #[test]
    fn pod_restarts_show_time_since_last_termination() {
        let mut a = running("a", true, 4);
        a["lastState"] =
            json!({"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(3600)}});
        let mut b = running("b", true, 1);
        b["lastState"] =
            json!({"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(30)}});
        let p = pod(
            json!({"containers": [{"name": "a"}, {"name": "b"}]}),
            json!({"phase": "Running", "containerStatuses": [a, b]}),
        );
        assert_eq!(
            ready_status_restarts(&p),
            ("2/2".into(), "Running".into(), "5 (30s ago)".into())
        );

        // Restarts without any recorded termination print just the count.
        let p = pod(
            one_container(),
            json!({"phase": "Running", "containerStatuses": [running("app", true, 2)]}),
        );
        assert_eq!(ready_status_restarts(&p).2, "2");

        // While initializing, only init container restarts count.
        let mut i1 = waiting("i1", "CrashLoopBackOff", 7);
        i1["lastState"] = json!({"terminated": {"exitCode": 1, "finishedAt": ago(190)}});
        let p = pod(
            json!({"initContainers": [{"name": "i1"}], "containers": [{"name": "app"}]}),
            json!({"phase": "Pending", "initContainerStatuses": [i1], "containerStatuses": [waiting("app", "PodInitializing", 0)]}),
        );
        assert_eq!(
            ready_status_restarts(&p),
            (
                "0/1".into(),
                "Init:CrashLoopBackOff".into(),
                "7 (3m10s ago)".into()
            )
        );
    }

    #[test]
    fn pod_wide_columns() {
        let p = pod(
            json!({"containers": [{"name": "app"}], "nodeName": "n1",
                   "readinessGates": [{"conditionType": "example.com/a"}, {"conditionType": "example.com/b"}]}),
            json!({"phase": "Running", "podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.9"}, {"ip": "fd00::9"}],
                   "conditions": [{"type": "example.com/a", "status": "True"}, {"type": "example.com/b", "status": "False"}]}),
        );
        let c = pod_cells(&p, now());
        assert_eq!(c[4], json!("10m"));
        assert_eq!(
            &c[5..],
            &[
                json!("10.0.0.9"),
                json!("n1"),
                json!("<none>"),
                json!("1/2")
            ]
        );
        let bare = pod_cells(&json!({"metadata": {"name": "x"}}), now());
        assert_eq!(
            bare,
            vec![
                json!("x"),
                json!("0/0"),
                json!(""),
                json!("0"),
                json!("<unknown>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        // podIP alone (no podIPs) still shows.
        let c = pod_cells(&pod(one_container(), json!({"podIP": "10.1.1.1"})), now());
        assert_eq!(c[5], json!("10.1.1.1"));
    }

    fn svc(spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": "s", "creationTimestamp": ago(60)}, "spec": spec, "status": status})
    }

    #[test]
    fn service_rows() {
        let cases = [
            (
                svc(
                    json!({"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                    "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}], "selector": {"k8s-app": "kube-dns"}}),
                    json!({}),
                ),
                [
                    "s",
                    "ClusterIP",
                    "10.96.0.10",
                    "<none>",
                    "53/UDP,53/TCP",
                    "60s",
                    "k8s-app=kube-dns",
                ],
            ),
            (
                svc(
                    json!({"type": "NodePort", "clusterIPs": ["10.96.1.1"],
                    "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443, "nodePort": 30443, "protocol": "TCP"}]}),
                    json!({}),
                ),
                [
                    "s",
                    "NodePort",
                    "10.96.1.1",
                    "<none>",
                    "80/TCP,443:30443/TCP",
                    "60s",
                    "<none>",
                ],
            ),
            (
                svc(
                    json!({"type": "LoadBalancer", "clusterIPs": ["10.96.1.2"], "ports": [{"port": 80, "nodePort": 31000}]}),
                    json!({}),
                ),
                [
                    "s",
                    "LoadBalancer",
                    "10.96.1.2",
                    "<pending>",
                    "80:31000/TCP",
                    "60s",
                    "<none>",
                ],
            ),
            (
                svc(
                    json!({"type": "LoadBalancer", "clusterIPs": ["10.96.1.2"], "externalIPs": ["1.1.1.1"]}),
                    json!({"loadBalancer": {"ingress": [{"ip": "5.5.5.5"}, {"hostname": "lb.example.com"}, {"ip": "5.5.5.5"}]}}),
                ),
                [
                    "s",
                    "LoadBalancer",
                    "10.96.1.2",
                    "5.5.5.5,lb.example.com,1.1.1.1",
                    "<none>",
                    "60s",
                    "<none>",
                ],
            ),
            (
                svc(
                    json!({"type": "ExternalName", "externalName": "db.example.com"}),
                    json!({}),
                ),
                [
                    "s",
                    "ExternalName",
                    "<none>",
                    "db.example.com",
                    "<none>",
                    "60s",
                    "<none>",
                ],
            ),
            (
                svc(
                    json!({"type": "ClusterIP", "clusterIP": "None", "externalIPs": ["2.2.2.2", "3.3.3.3"]}),
                    json!({}),
                ),
                [
                    "s",
                    "ClusterIP",
                    "None",
                    "2.2.2.2,3.3.3.3",
                    "<none>",
                    "60s",
                    "<none>",
                ],
            ),
        ];
        for (s, want) in cases {
            assert_eq!(
                service_cells(&s, now()),
                want.map(Value::from).to_vec(),
                "{s}"
            );
        }
    }

    #[test]
    fn node_rows() {
        let node = |labels: Value, conditions: Value, unschedulable: bool| {
            json!({"metadata": {"name": "n", "creationTimestamp": ago(86400 * 3), "labels": labels},
                   "spec": {"unschedulable": unschedulable},
                   "status": {"conditions": conditions, "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Debian GNU/Linux 12",
                              "kernelVersion": "6.1.0", "containerRuntimeVersion": "berth://0.1.0"},
                              "addresses": [{"type": "Hostname", "address": "n"}, {"type": "InternalIP", "address": "192.168.1.5"}]}})
        };
        let ready = json!([{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]);
        let c = node_cells(
            &node(
                json!({"node-role.kubernetes.io/control-plane": ""}),
                ready.clone(),
                false,
            ),
            now(),
        );
        assert_eq!(
            c,
            [
                "n",
                "Ready",
                "control-plane",
                "3d",
                "v1.33.0",
                "192.168.1.5",
                "<none>",
                "Debian GNU/Linux 12",
                "6.1.0",
                "berth://0.1.0"
            ]
            .map(Value::from)
            .to_vec()
        );
        let cases = [
            (
                json!({}),
                ready.clone(),
                true,
                "Ready,SchedulingDisabled",
                "<none>",
            ),
            (
                json!({"kubernetes.io/role": "worker", "node-role.kubernetes.io/infra": "", "node-role.kubernetes.io/": "x"}),
                json!([{"type": "Ready", "status": "False"}]),
                false,
                "NotReady",
                "infra,worker",
            ),
            (
                json!({"node-role.kubernetes.io/b": "", "node-role.kubernetes.io/a": "", "kubernetes.io/role": ""}),
                json!([{"type": "Ready", "status": "Unknown"}]),
                true,
                "NotReady,SchedulingDisabled",
                "a,b",
            ),
            (json!(null), json!([]), false, "Unknown", "<none>"),
        ];
        for (labels, conditions, unsched, status, roles) in cases {
            let c = node_cells(&node(labels, conditions, unsched), now());
            assert_eq!(
                (c[1].as_str().unwrap(), c[2].as_str().unwrap()),
                (status, roles)
            );
        }
        let bare = node_cells(&json!({"metadata": {"name": "b"}}), now());
        assert_eq!(
            &bare[4..],
            [
                "",
                "<none>",
                "<none>",
                "<unknown>",
                "<unknown>",
                "<unknown>"
            ]
            .map(Value::from)
        );
    }

    #[test]
    fn event_rows() {
        let ev = json!({"metadata": {"name": "p.17f", "creationTimestamp": ago(300)},
            "involvedObject": {"kind": "Pod", "name": "web-0", "fieldPath": "spec.containers{app}"},
            "reason": "BackOff", "message": "Back-off restarting failed container\n", "type": "Warning",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": ago(300), "lastTimestamp": ago(20), "count": 7});
        assert_eq!(
            EVENT
                .columns
                .iter()
                .map(|c| (c.name, c.priority))
                .collect::<Vec<_>>(),
            [
                ("Last Seen", 0),
                ("Type", 0),
                ("Reason", 0),
                ("Object", 0),
                ("Subobject", 1),
                ("Source", 1),
                ("Message", 0),
                ("First Seen", 1),
                ("Count", 1),
                ("Name", 1)
            ]
        );
        assert_eq!(
            (EVENT.cells)(&ev, now()),
            vec![
                json!("20s"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/web-0"),
                json!("spec.containers{app}"),
                json!("kubelet, node-1"),
                json!("Back-off restarting failed container"),
                json!("5m"),
                json!(7),
                json!("p.17f")
            ]
        );

        // New-style event: eventTime, series, reporting fields, no involved name.
        let ev = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Node"}, "eventTime": "2025-06-01T11:59:00.000000Z",
            "series": {"count": 3, "lastObservedTime": "2025-06-01T11:59:50.123456Z"},
            "reportingComponent": "berth-scheduler", "reportingInstance": "", "type": "Normal", "reason": "R", "message": "m"});
        let c = (EVENT.cells)(&ev, now());
        assert_eq!(c[0], json!("9s"));
        assert_eq!(c[3], json!("node"));
        assert_eq!(c[5], json!("berth-scheduler"));
        assert_eq!(c[7], json!("60s"));
        assert_eq!(c[8], json!(3));
        // Singleton without count or times.
        let c = (EVENT.cells)(&json!({"metadata": {"name": "e"}}), now());
        assert_eq!(
            (c[0].clone(), c[7].clone(), c[8].clone()),
            (json!("<unknown>"), json!("<unknown>"), json!(1))
        );
    }

    #[test]
    fn endpoints_formatting() {
        let ep = json!({"subsets": [
            {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]},
        ]});
        assert_eq!(
            format_endpoints(&ep),
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."
        );
        assert_eq!(
            format_endpoints(
                &json!({"subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 53}]}]})
            ),
            "[fd00::1]:53"
        );
        assert_eq!(
            format_endpoints(&json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}]}]})),
            "10.0.0.1"
        );
        assert_eq!(format_endpoints(&json!({})), "<none>");
        assert_eq!(
            format_endpoints(&json!({"subsets": [{"ports": [{"port": 80}]}]})),
            ""
        );
    }

    #[test]
    fn storage_rows() {
        let pv = json!({"metadata": {"name": "pv1", "creationTimestamp": ago(7200)},
            "spec": {"capacity": {"storage": "1024Mi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": "default", "name": "data"},
                     "storageClassName": "standard", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"}});
        assert_eq!(
            pv_cells(&pv, now()),
            [
                "pv1",
                "1Gi",
                "RWO,RWX",
                "Retain",
                "Bound",
                "default/data",
                "standard",
                "<unset>",
                "",
                "120m",
                "Filesystem"
            ]
            .map(Value::from)
            .to_vec()
        );
        let pvc = json!({"metadata": {"name": "data", "creationTimestamp": ago(60), "deletionTimestamp": ago(1)},
            "spec": {"volumeName": "pv1", "storageClassName": "standard", "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}});
        assert_eq!(
            pvc_cells(&pvc, now()),
            [
                "data",
                "Terminating",
                "pv1",
                "1Gi",
                "RWO",
                "standard",
                "<unset>",
                "60s",
                "<unset>"
            ]
            .map(Value::from)
            .to_vec()
        );
        let pending = json!({"metadata": {"name": "d", "annotations": {"volume.beta.kubernetes.io/storage-class": "beta"}},
            "spec": {"storageClassName": "standard"}, "status": {"phase": "Pending"}});
        let c = pvc_cells(&pending, now());
        assert_eq!(&c[1..6], ["Pending", "", "", "", "beta"].map(Value::from));
    }

    #[test]
    fn small_core_kinds() {
        let row = |kind: &str, o: Value| (printer(kind).unwrap().cells)(&o, now());
        let meta = json!({"name": "x", "creationTimestamp": ago(10)});
        assert_eq!(
            row(
                "ConfigMap",
                json!({"metadata": meta, "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}})
            ),
            vec![json!("x"), json!(3), json!("10s")]
        );
        assert_eq!(
            row(
                "Secret",
                json!({"metadata": meta, "type": "Opaque", "data": {"a": ""}, "stringData": {"a": "", "b": ""}})
            ),
            vec![json!("x"), json!("Opaque"), json!(2), json!("10s")]
        );
        assert_eq!(
            row(
                "ServiceAccount",
                json!({"metadata": meta, "secrets": [{"name": "t"}]})
            ),
            vec![json!("x"), json!(1), json!("10s")]
        );
        assert_eq!(
            row(
                "Namespace",
                json!({"metadata": meta, "status": {"phase": "Terminating"}})
            ),
            vec![json!("x"), json!("Terminating"), json!("10s")]
        );
        assert_eq!(
            row(
                "ReplicationController",
                json!({"metadata": meta, "spec": {"replicas": 3, "selector": {"app": "a"},
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}, {"name": "d", "image": "j"}]}}},
            "status": {"replicas": 3, "readyReplicas": 2}})
            ),
            vec![
                json!("x"),
                json!(3),
                json!(3),
                json!(2),
                json!("10s"),
                json!("c,d"),
                json!("i,j"),
                json!("app=a")
            ]
        );
        assert_eq!(
            row(
                "PodTemplate",
                json!({"metadata": meta, "template": {"metadata": {"labels": {"b": "2", "a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}})
            ),
            vec![json!("x"), json!("c"), json!("i"), json!("a=1,b=2")]
        );
        assert_eq!(
            row(
                "ResourceQuota",
                json!({"metadata": meta, "status": {
            "hard": {"pods": "10", "limits.memory": "2Gi", "requests.cpu": "1", "limits.cpu": "2"},
            "used": {"pods": "3", "limits.memory": "1024Mi", "requests.cpu": "500m"}}})
            ),
            vec![
                json!("x"),
                json!("pods: 3/10, requests.cpu: 500m/1"),
                json!("limits.cpu: 0/2, limits.memory: 1Gi/2Gi"),
                json!("10s")
            ]
        );
    }
}
