//! The scheduler's view of pods and nodes (upstream `framework/types.go`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use berth_api::quantity::Quantity;
use k8s_openapi::api::core::v1::{Container, Node, Pod, ResourceRequirements};

use super::affinity::{AffinityTerm, WeightedAffinityTerm};

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// Upstream's defaults for containers that request nothing, so that scoring
/// still spreads best-effort pods (`schedutil.DefaultMilliCPURequest`, `DefaultMemoryRequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// Amounts of resources: milli-CPU, bytes, and scalar (extended) resources in units.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resource {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub allowed_pod_number: i64,
    pub scalar: BTreeMap<String, i64>,
}

impl Resource {
    /// Reads a resource list (`requests`, `allocatable`). Unparsable quantities count as zero.
    pub fn from_list(
        list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    ) -> Self {
        let mut r = Resource::default();
        for (name, q) in list.into_iter().flatten() {
            let Ok(q) = Quantity::parse(&q.0) else {
                continue;
            };
            r.set(name, &q);
        }
        r
    }

    fn set(&mut self, name: &str, q: &Quantity) {
        match name {
            CPU => self.milli_cpu = q.milli_value(),
            MEMORY => self.memory = q.value(),
            EPHEMERAL_STORAGE => self.ephemeral_storage = q.value(),
            PODS => self.allowed_pod_number = q.value(),
            _ => {
                self.scalar.insert(name.to_string(), q.value());
            }
        }
    }

    /// The amount of `name` in its scheduling unit.
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.allowed_pod_number,
            _ => self.scalar.get(name).copied().unwrap_or(0),
        }
    }

    pub fn add(&mut self, o: &Resource) {
        self.milli_cpu += o.milli_cpu;
        self.memory += o.memory;
        self.ephemeral_storage += o.ephemeral_storage;
        self.allowed_pod_number += o.allowed_pod_number;
        for (k, v) in &o.scalar {
            *self.scalar.entry(k.clone()).or_insert(0) += v;
        }
    }

    /// Per-resource maximum (init containers against the running set).
    pub fn set_max(&mut self, o: &Resource) {
        self.milli_cpu = self.milli_cpu.max(o.milli_cpu);
        self.memory = self.memory.max(o.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(o.ephemeral_storage);
        for (k, v) in &o.scalar {
            let e = self.scalar.entry(k.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
    }

    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }
}

fn container_requests(c: &Container, non_zero: bool) -> Resource {
    let mut r = Resource::from_list(
        c.resources
            .as_ref()
            .and_then(|r: &ResourceRequirements| r.requests.as_ref()),
    );
    // Upstream defaults requests from limits at admission; a pod created
    // without defaulting still carries only limits, so read them here too.
    if let Some(limits) = c.resources.as_ref().and_then(|r| r.limits.as_ref()) {
        let requests = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        for (name, q) in limits {
            if requests.is_some_and(|rq| rq.contains_key(name)) {
                continue;
            }
            if let Ok(q) = Quantity::parse(&q.0) {
                r.set(name, &q);
            }
        }
    }
    if non_zero {
        if r.milli_cpu == 0 {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if r.memory == 0 {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
    }
    r
}

/// A pod's effective request (upstream `resourcehelper.PodRequests`): the
/// larger of the running containers (plus sidecars) and each init container
/// (plus the sidecars started before it), plus the pod overhead.
/// `non_zero` applies the scoring defaults to containers that request nothing.
pub fn pod_requests(pod: &Pod, non_zero: bool) -> Resource {
    let Some(spec) = pod.spec.as_ref() else {
        return Resource::default();
    };
    let mut running = Resource::default();
    for c in &spec.containers {
        running.add(&container_requests(c, non_zero));
    }
    let mut sidecars = Resource::default();
    let mut init_max = Resource::default();
    for c in spec.init_containers.iter().flatten() {
        let req = container_requests(c, non_zero);
        if c.restart_policy.as_deref() == Some("Always") {
            // A sidecar keeps running next to the app containers.
            sidecars.add(&req);
            init_max.set_max(&sidecars);
        } else {
            let mut with_sidecars = sidecars.clone();
            with_sidecars.add(&req);
            init_max.set_max(&with_sidecars);
        }
    }
    running.add(&sidecars);
    running.set_max(&init_max);
    if let Some(overhead) = spec.overhead.as_ref() {
        running.add(&Resource::from_list(Some(overhead)));
    }
    running
}

/// A host port a pod's container asks for (`hostIP`, protocol, `hostPort`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

pub const DEFAULT_BIND_ALL_HOST_IP: &str = "0.0.0.0";

/// Upstream's `GetHostPorts`: containers and restartable init containers
/// with a non-zero hostPort; empty IP means all addresses, empty protocol TCP.
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    spec.containers
        .iter()
        .chain(sidecars)
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.is_some_and(|hp| hp > 0))
        .map(|p| HostPort {
            ip: p
                .host_ip
                .clone()
                .filter(|ip| !ip.is_empty())
                .unwrap_or_else(|| DEFAULT_BIND_ALL_HOST_IP.to_string()),
            protocol: p
                .protocol
                .clone()
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "TCP".to_string()),
            port: p.host_port.unwrap_or_default(),
        })
        .collect()
}

/// A pod with what the plugins compute from it once (upstream `framework.PodInfo`).
#[derive(Clone, Debug)]
pub struct PodInfo {
    pub pod: Arc<Pod>,
    pub requests: Resource,
    pub non_zero_requests: Resource,
    pub required_affinity_terms: Vec<AffinityTerm>,
    pub required_anti_affinity_terms: Vec<AffinityTerm>,
    pub preferred_affinity_terms: Vec<WeightedAffinityTerm>,
    pub preferred_anti_affinity_terms: Vec<WeightedAffinityTerm>,
    pub host_ports: Vec<HostPort>,
}

impl PodInfo {
    pub fn new(pod: Pod) -> Self {
        Self::from_arc(Arc::new(pod))
    }

    pub fn from_arc(pod: Arc<Pod>) -> Self {
        let requests = pod_requests(&pod, false);
        let non_zero_requests = pod_requests(&pod, true);
        let terms = super::affinity::PodTerms::of(&pod);
        let host_ports = host_ports(&pod);
        Self {
            pod,
            requests,
            non_zero_requests,
            required_affinity_terms: terms.required_affinity,
            required_anti_affinity_terms: terms.required_anti_affinity,
            preferred_affinity_terms: terms.preferred_affinity,
            preferred_anti_affinity_terms: terms.preferred_anti_affinity,
            host_ports,
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        pod_key(&self.pod)
    }

    pub fn priority(&self) -> i32 {
        self.pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
    }

    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("default")
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.pod.metadata.labels.as_ref().unwrap_or(&EMPTY)
    }

    /// Any affinity or anti-affinity term (upstream's `PodsWithAffinity`).
    pub fn has_affinity(&self) -> bool {
        !self.required_affinity_terms.is_empty()
            || !self.required_anti_affinity_terms.is_empty()
            || !self.preferred_affinity_terms.is_empty()
            || !self.preferred_anti_affinity_terms.is_empty()
    }

    pub fn is_terminating(&self) -> bool {
        self.pod.metadata.deletion_timestamp.is_some()
    }
}

pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// A node with the pods placed on it (bound or assumed) and their sums.
/// Cheap to clone: the node and pods are shared.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub node: Arc<Node>,
    name: Arc<str>,
    pub allocatable: Resource,
    /// Sum of the pods' requests; `allowed_pod_number` holds the pod count.
    pub requested: Resource,
    /// As `requested`, with the scoring defaults for pods requesting nothing.
    pub non_zero_requested: Resource,
    pub pods: Vec<Arc<PodInfo>>,
    /// Pods with any (anti-)affinity term, and with required anti-affinity.
    pub pods_with_affinity: usize,
    pub pods_with_required_anti_affinity: usize,
    /// Host ports in use, one entry per pod using them.
    pub used_ports: Vec<HostPort>,
    /// Image name → size in bytes, from `status.images`.
    pub image_sizes: HashMap<String, i64>,
}

impl NodeInfo {
    pub fn new(node: Node) -> Self {
        Self::from_arc(Arc::new(node))
    }

    pub fn from_arc(node: Arc<Node>) -> Self {
        let mut ni = Self {
            name: Arc::from(node.metadata.name.as_deref().unwrap_or_default()),
            node: node.clone(),
            allocatable: Resource::default(),
            requested: Resource::default(),
            non_zero_requested: Resource::default(),
            pods: Vec::new(),
            pods_with_affinity: 0,
            pods_with_required_anti_affinity: 0,
            used_ports: Vec::new(),
            image_sizes: HashMap::new(),
        };
        ni.set_node(node);
        ni
    }

    /// Replaces the Node object, keeping the pods (a node update).
    pub fn set_node(&mut self, node: Arc<Node>) {
        let status = node.status.as_ref();
        self.allocatable = Resource::from_list(
            status.and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref())),
        );
        self.image_sizes = status
            .and_then(|s| s.images.as_ref())
            .into_iter()
            .flatten()
            .flat_map(|img| {
                let size = img.size_bytes.unwrap_or(0);
                img.names.iter().flatten().map(move |n| (n.clone(), size))
            })
            .collect();
        self.name = Arc::from(node.metadata.name.as_deref().unwrap_or_default());
        self.node = node;
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn name_arc(&self) -> Arc<str> {
        self.name.clone()
    }

    pub fn add_pod(&mut self, pi: PodInfo) {
        self.add_pod_arc(Arc::new(pi));
    }

    pub fn add_pod_arc(&mut self, pi: Arc<PodInfo>) {
        self.requested.add(&pi.requests);
        self.requested.allowed_pod_number += 1;
        self.non_zero_requested.add(&pi.non_zero_requests);
        self.non_zero_requested.allowed_pod_number += 1;
        if pi.has_affinity() {
            self.pods_with_affinity += 1;
        }
        if !pi.required_anti_affinity_terms.is_empty() {
            self.pods_with_required_anti_affinity += 1;
        }
        self.used_ports.extend(pi.host_ports.iter().cloned());
        self.pods.push(pi);
    }

    /// Removes a pod by key; true if it was there.
    pub fn remove_pod(&mut self, key: &str) -> bool {
        let Some(i) = self.pods.iter().position(|p| p.key() == key) else {
            return false;
        };
        let pi = self.pods.swap_remove(i);
        sub(&mut self.requested, &pi.requests);
        sub(&mut self.non_zero_requested, &pi.non_zero_requests);
        if pi.has_affinity() {
            self.pods_with_affinity -= 1;
        }
        if !pi.required_anti_affinity_terms.is_empty() {
            self.pods_with_required_anti_affinity -= 1;
        }
        for hp in &pi.host_ports {
            if let Some(j) = self.used_ports.iter().position(|u| u == hp) {
                self.used_ports.swap_remove(j);
            }
        }
        true
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.node.metadata.labels.as_ref().unwrap_or(&EMPTY)
    }
}

fn sub(r: &mut Resource, o: &Resource) {
    r.milli_cpu -= o.milli_cpu;
    r.memory -= o.memory;
    r.ephemeral_storage -= o.ephemeral_storage;
    r.allowed_pod_number -= 1;
    for (k, v) in &o.scalar {
        *r.scalar.entry(k.clone()).or_insert(0) -= v;
    }
}
