//! The Node object as a kubelet registers it: configuration, the pure functions that
//! compute its labels, allocatable and conditions (upstream's `pkg/kubelet/nodestatus`
//! setters), and the I/O that registers it, reports its status and heartbeats its Lease.

mod client;
pub mod health;
mod lease;
pub mod topology;

pub use client::{NodeAgent, patch_status, register};
pub use lease::{
    LEASE_DURATION_SECONDS, LEASE_NAMESPACE, LeaseHeartbeat, NODE_STATUS_REPORT_FREQUENCY,
    NODE_STATUS_UPDATE_FREQUENCY, RENEW_INTERVAL,
};

use std::collections::BTreeMap;

use berth_api::quantity::{Format, Quantity};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use crate::{Error, Result};

/// A resource list (`cpu`, `memory`, `pods`, `ephemeral-storage`, `hugepages-2Mi`, …).
pub type Resources = BTreeMap<String, Quantity>;

/// Parses `cpu=500m,memory=1Gi` (the form of `--kube-reserved`) into a resource list.
pub fn parse_resources(s: &str) -> Result<Resources> {
    let mut out = Resources::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| Error::Eviction(part.to_string()))?;
        out.insert(k.trim().to_string(), quantity(k, v.trim())?);
    }
    Ok(out)
}

fn quantity(what: &str, v: &str) -> Result<Quantity> {
    Quantity::parse(v).map_err(|source| Error::Quantity {
        what: what.to_string(),
        value: v.to_string(),
        source,
    })
}

/// An eviction signal's threshold: an absolute quantity or a share of capacity.
#[derive(Clone, Debug, PartialEq)]
pub enum ThresholdValue {
    Quantity(Quantity),
    /// A fraction in 0..=1 (`10%` is 0.1).
    Percentage(f64),
}

/// One `--eviction-hard` entry, e.g. `memory.available<100Mi`.
#[derive(Clone, Debug, PartialEq)]
pub struct EvictionThreshold {
    pub signal: String,
    pub value: ThresholdValue,
}

impl EvictionThreshold {
    /// Parses `memory.available<100Mi,nodefs.available<10%`.
    pub fn parse_list(s: &str) -> Result<Vec<EvictionThreshold>> {
        s.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (signal, v) = p
                    .split_once('<')
                    .ok_or_else(|| Error::Eviction(p.to_string()))?;
                let value = match v.strip_suffix('%') {
                    Some(pct) => {
                        let f: f64 = pct.parse().map_err(|_| Error::Eviction(p.to_string()))?;
                        if !(0.0..=100.0).contains(&f) {
                            return Err(Error::Eviction(p.to_string()));
                        }
                        ThresholdValue::Percentage(f / 100.0)
                    }
                    None => ThresholdValue::Quantity(quantity(signal, v)?),
                };
                Ok(EvictionThreshold {
                    signal: signal.to_string(),
                    value,
                })
            })
            .collect()
    }

    /// Upstream's Linux default `--eviction-hard`.
    pub fn defaults() -> Vec<EvictionThreshold> {
        let pct = |signal: &str, f: f64| EvictionThreshold {
            signal: signal.into(),
            value: ThresholdValue::Percentage(f),
        };
        vec![
            EvictionThreshold {
                signal: "memory.available".into(),
                value: ThresholdValue::Quantity(Quantity::from_value(100 << 20, Format::BinarySI)),
            },
            pct("nodefs.available", 0.10),
            pct("nodefs.inodesFree", 0.05),
            pct("imagefs.available", 0.15),
        ]
    }

    /// The amount this threshold holds back from `capacity` (upstream's GetThresholdQuantity).
    fn reservation(&self, capacity: &Quantity) -> Quantity {
        match &self.value {
            ThresholdValue::Quantity(q) => q.clone(),
            ThresholdValue::Percentage(f) => {
                Quantity::from_value((capacity.value() as f64 * f) as i64, Format::BinarySI)
            }
        }
    }
}

/// A NUMA cell, kept for the topology manager of the real agent and for simulated nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: Vec<u32>,
    pub memory: Option<Quantity>,
}

/// Everything a kubelet knows about its node at registration.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub name: String,
    pub capacity: Resources,
    pub kube_reserved: Resources,
    pub system_reserved: Resources,
    pub eviction_hard: Vec<EvictionThreshold>,
    /// Extra labels (`--node-labels`); the default ones are added by [`node_labels`].
    pub labels: BTreeMap<String, String>,
    /// `node-role.kubernetes.io/<role>` labels to set.
    pub roles: Vec<String>,
    pub taints: Vec<Taint>,
    pub addresses: Vec<NodeAddress>,
    pub node_info: NodeSystemInfo,
    pub pod_cidrs: Vec<String>,
    pub numa: Vec<NumaNode>,
    /// The kubelet's port, published in `status.daemonEndpoints`.
    pub kubelet_port: i32,
    /// Annotations set at registration besides upstream's.
    pub annotations: BTreeMap<String, String>,
}

impl NodeConfig {
    /// A node with upstream's defaults (110 pods, default eviction thresholds) and
    /// the given machine capacity.
    pub fn new(name: impl Into<String>, capacity: Resources) -> Self {
        let name = name.into();
        let mut capacity = capacity;
        capacity
            .entry("pods".into())
            .or_insert_with(|| Quantity::from_value(110, Format::DecimalSI));
        NodeConfig {
            addresses: vec![NodeAddress {
                type_: "Hostname".into(),
                address: name.clone(),
            }],
            name,
            capacity,
            kube_reserved: Resources::new(),
            system_reserved: Resources::new(),
            eviction_hard: EvictionThreshold::defaults(),
            labels: BTreeMap::new(),
            roles: Vec::new(),
            taints: Vec::new(),
            node_info: NodeSystemInfo {
                architecture: std::env::consts::ARCH
                    .replace("x86_64", "amd64")
                    .replace("aarch64", "arm64"),
                operating_system: std::env::consts::OS.into(),
                kubelet_version: KUBELET_VERSION.into(),
                kube_proxy_version: String::new(),
                ..Default::default()
            },
            pod_cidrs: Vec::new(),
            numa: Vec::new(),
            kubelet_port: 10250,
            annotations: BTreeMap::new(),
        }
    }
}

/// The Kubernetes version Berth's kubelet reports (`kubectl get nodes` VERSION).
pub const KUBELET_VERSION: &str = "v1.33.0-berth";

/// Allocatable = capacity − kube-reserved − system-reserved − hard eviction thresholds,
/// never below zero; memory also loses pre-allocated huge pages (upstream's
/// `MachineInfo` setter with the container manager's reservation).
pub fn allocatable(cfg: &NodeConfig) -> Resources {
    let mut reserved = Resources::new();
    for r in [&cfg.kube_reserved, &cfg.system_reserved] {
        for (k, v) in r {
            reserved
                .entry(k.clone())
                .or_insert_with(Quantity::zero)
                .add(v);
        }
    }
    for t in &cfg.eviction_hard {
        let resource = match t.signal.as_str() {
            "memory.available" => "memory",
            "nodefs.available" => "ephemeral-storage",
            _ => continue,
        };
        if let Some(cap) = cfg.capacity.get(resource) {
            reserved
                .entry(resource.into())
                .or_insert_with(Quantity::zero)
                .add(&t.reservation(cap));
        }
    }
    let mut out = Resources::new();
    for (k, cap) in &cfg.capacity {
        let mut v = cap.clone();
        if let Some(r) = reserved.get(k) {
            v.sub(r);
        }
        if k == "memory" {
            for (h, q) in &cfg.capacity {
                if h.starts_with("hugepages-") {
                    v.sub(q);
                }
            }
        }
        if v.sign() < 0 {
            v = Quantity::zero();
        }
        out.insert(k.clone(), v);
    }
    out
}

/// The labels a kubelet sets on its node, over the configured ones (upstream's
/// `updateDefaultLabels`: the defaults win).
pub fn node_labels(cfg: &NodeConfig) -> BTreeMap<String, String> {
    let mut l = cfg.labels.clone();
    for role in &cfg.roles {
        l.insert(format!("node-role.kubernetes.io/{role}"), String::new());
    }
    l.extend(default_labels(cfg));
    l
}

fn default_labels(cfg: &NodeConfig) -> BTreeMap<String, String> {
    let os = cfg.node_info.operating_system.clone();
    let arch = cfg.node_info.architecture.clone();
    BTreeMap::from([
        ("kubernetes.io/hostname".to_string(), cfg.name.clone()),
        ("kubernetes.io/os".to_string(), os.clone()),
        ("kubernetes.io/arch".to_string(), arch.clone()),
        ("beta.kubernetes.io/os".to_string(), os),
        ("beta.kubernetes.io/arch".to_string(), arch),
    ])
}

/// What the node's health checks report; drives the conditions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeHealth {
    pub memory_pressure: bool,
    pub disk_pressure: bool,
    pub pid_pressure: bool,
    /// Why the node is not ready (runtime down, network not ready…); empty = ready.
    pub not_ready: Vec<String>,
}

/// The four kubelet conditions in upstream's order, each keeping its previous
/// `lastTransitionTime` unless its status changed.
pub fn conditions(
    health: &NodeHealth,
    previous: &[NodeCondition],
    now: Timestamp,
) -> Vec<NodeCondition> {
    let pressure = |on: bool, t: &str, yes: (&str, &str), no: (&str, &str)| {
        let (reason, message) = if on { yes } else { no };
        (t.to_string(), on, reason.to_string(), message.to_string())
    };
    let ready_message = health::aggregate(&health.not_ready);
    let specs = [
        pressure(
            health.memory_pressure,
            "MemoryPressure",
            (
                "KubeletHasInsufficientMemory",
                "kubelet has insufficient memory available",
            ),
            (
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
        ),
        pressure(
            health.disk_pressure,
            "DiskPressure",
            ("KubeletHasDiskPressure", "kubelet has disk pressure"),
            ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ),
        pressure(
            health.pid_pressure,
            "PIDPressure",
            (
                "KubeletHasInsufficientPID",
                "kubelet has insufficient PID available",
            ),
            (
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
        ),
        if health.not_ready.is_empty() {
            (
                "Ready".to_string(),
                true,
                "KubeletReady".to_string(),
                "kubelet is posting ready status".to_string(),
            )
        } else {
            (
                "Ready".to_string(),
                false,
                "KubeletNotReady".to_string(),
                ready_message,
            )
        },
    ];
    specs
        .into_iter()
        .map(|(type_, on, reason, message)| {
            let status = if on { "True" } else { "False" }.to_string();
            let transition = previous
                .iter()
                .find(|c| c.type_ == type_ && c.status == status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or(Time(now));
            NodeCondition {
                type_,
                status,
                reason: Some(reason),
                message: Some(message),
                last_heartbeat_time: Some(Time(now)),
                last_transition_time: Some(transition),
            }
        })
        .collect()
}

fn to_k8s(r: &Resources) -> BTreeMap<String, K8sQuantity> {
    r.iter()
        .map(|(k, v)| (k.clone(), K8sQuantity(v.canonical())))
        .collect()
}

/// The node's status as the kubelet reports it.
pub fn node_status(
    cfg: &NodeConfig,
    health: &NodeHealth,
    previous: &[NodeCondition],
    now: Timestamp,
) -> NodeStatus {
    NodeStatus {
        capacity: Some(to_k8s(&cfg.capacity)),
        allocatable: Some(to_k8s(&allocatable(cfg))),
        conditions: Some(conditions(health, previous, now)),
        addresses: Some(cfg.addresses.clone()),
        node_info: Some(cfg.node_info.clone()),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: cfg.kubelet_port,
            }),
        }),
        ..Default::default()
    }
}

/// Adds extended resources to a status's capacity and allocatable (a value of
/// 0 reports a resource whose plugin is gone, as upstream does before dropping it).
pub fn merge_extended(status: &mut NodeStatus, capacity: &Resources, allocatable: &Resources) {
    for (target, src) in [
        (&mut status.capacity, capacity),
        (&mut status.allocatable, allocatable),
    ] {
        let map = target.get_or_insert_with(BTreeMap::new);
        for (k, v) in src {
            map.insert(k.clone(), K8sQuantity(v.canonical()));
        }
    }
}

/// The Node object a kubelet creates when it registers.
pub fn node_object(cfg: &NodeConfig, health: &NodeHealth, now: Timestamp) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(cfg.name.clone()),
            labels: Some(node_labels(cfg)),
            // Upstream's kubelet marks volume attach/detach as the controller's job.
            annotations: Some(
                [(
                    "volumes.kubernetes.io/controller-managed-attach-detach".to_string(),
                    "true".to_string(),
                )]
                .into_iter()
                .chain((!cfg.numa.is_empty()).then(|| {
                    (
                        topology::NUMA_ANNOTATION.to_string(),
                        topology::numa_annotation(&cfg.numa),
                    )
                }))
                .chain(cfg.annotations.clone())
                .collect(),
            ),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: (!cfg.taints.is_empty()).then(|| cfg.taints.clone()),
            pod_cidr: cfg.pod_cidrs.first().cloned(),
            pod_cidrs: (!cfg.pod_cidrs.is_empty()).then(|| cfg.pod_cidrs.clone()),
            ..Default::default()
        }),
        status: Some(node_status(cfg, health, &[], now)),
    }
}

/// Whether two statuses differ in anything but heartbeat times: a kubelet reports
/// on change at once, otherwise only every `nodeStatusReportFrequency`.
pub fn status_changed(a: &NodeStatus, b: &NodeStatus) -> bool {
    let strip = |s: &NodeStatus| {
        let mut s = s.clone();
        for c in s.conditions.iter_mut().flatten() {
            c.last_heartbeat_time = None;
        }
        s.images = None;
        s
    };
    strip(a) != strip(b)
}

#[cfg(test)]
mod tests;
