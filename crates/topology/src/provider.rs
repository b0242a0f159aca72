//! The `HintProvider` seam (upstream's `topologymanager.HintProvider`), over
//! plain structs so the resource managers and their tests need no API types.

use std::collections::BTreeMap;

use crate::hint::TopologyHint;

/// A pod's QoS class (upstream's `v1.PodQOSClass`), as the CPU and memory
/// managers need it: only Guaranteed pods get exclusive resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// One container's resources. Amounts are in milli-units, as
/// `Quantity::milli_value` gives them: `cpu: 1` is 1000, `cpu: 250m` is 250,
/// `nvidia.com/gpu: 2` is 2000, `memory: 1Ki` is 1_024_000.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerResources {
    pub name: String,
    pub requests: BTreeMap<String, i64>,
    pub limits: BTreeMap<String, i64>,
    /// An init container with `restartPolicy: Always` (a sidecar): it keeps
    /// its resources while the app containers run.
    pub sidecar: bool,
}

impl ContainerResources {
    /// The request of `resource` in whole units, if it is a whole number.
    pub fn whole_request(&self, resource: &str) -> Option<i64> {
        self.requests
            .get(resource)
            .filter(|m| **m % 1000 == 0)
            .map(|m| m / 1000)
    }
}

/// A pod as the resource managers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodResources {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub qos: QosClass,
    pub init_containers: Vec<ContainerResources>,
    pub containers: Vec<ContainerResources>,
}

fn milli(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> i64 {
    berth_api::quantity::Quantity::parse(&q.0).map_or(0, |q| q.milli_value())
}

fn container(c: &k8s_openapi::api::core::v1::Container, sidecar: bool) -> ContainerResources {
    type List = BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>;
    let list = |m: Option<&List>| {
        m.map(|m| m.iter().map(|(k, v)| (k.clone(), milli(v))).collect())
            .unwrap_or_default()
    };
    let r = c.resources.as_ref();
    ContainerResources {
        name: c.name.clone(),
        requests: list(r.and_then(|r| r.requests.as_ref())),
        limits: list(r.and_then(|r| r.limits.as_ref())),
        sidecar,
    }
}

impl PodResources {
    /// The pod as the resource managers see it, its QoS class computed as
    /// upstream's (for callers that have not computed it).
    pub fn of_pod(pod: &k8s_openapi::api::core::v1::Pod) -> PodResources {
        let qos = serde_json::to_value(pod)
            .map(|v| berth_api::qos::qos_class(&v))
            .unwrap_or("BestEffort");
        let qos = match qos {
            "Guaranteed" => QosClass::Guaranteed,
            "Burstable" => QosClass::Burstable,
            _ => QosClass::BestEffort,
        };
        Self::from_pod(pod, qos)
    }

    /// The pod as the resource managers see it, with its QoS class.
    pub fn from_pod(pod: &k8s_openapi::api::core::v1::Pod, qos: QosClass) -> PodResources {
        let spec = pod.spec.as_ref();
        PodResources {
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            qos,
            init_containers: spec
                .and_then(|s| s.init_containers.as_ref())
                .into_iter()
                .flatten()
                .map(|c| container(c, c.restart_policy.as_deref() == Some("Always")))
                .collect(),
            containers: spec
                .into_iter()
                .flat_map(|s| &s.containers)
                .map(|c| container(c, false))
                .collect(),
        }
    }

    /// Init containers then app containers, the order upstream admits them in.
    pub fn all_containers(&self) -> impl Iterator<Item = &ContainerResources> {
        self.init_containers.iter().chain(&self.containers)
    }
}

/// Hints per resource name. `None` for a resource: the provider has no
/// preference for it (upstream's nil slice); `Some(vec![])`: no NUMA placement
/// can satisfy it (upstream's empty slice). An empty map: no preference at all.
pub type HintMap = BTreeMap<String, Option<Vec<TopologyHint>>>;

/// Why a pod cannot be admitted, as upstream's `admission.Error`: `reason`
/// becomes the pod's status reason, `message` its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct AdmissionError {
    pub reason: String,
    pub message: String,
}

/// Upstream's `TopologyAffinityError` reason and message.
pub const TOPOLOGY_AFFINITY_ERROR: &str = "TopologyAffinityError";
pub const TOPOLOGY_AFFINITY_MESSAGE: &str = "Resources cannot be allocated with Topology locality";

impl AdmissionError {
    pub fn new(reason: impl Into<String>, message: impl Into<String>) -> Self {
        AdmissionError {
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// The Topology Manager's rejection.
    pub fn topology_affinity() -> Self {
        Self::new(TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE)
    }

    /// An allocation failure without a type of its own, worded as upstream's
    /// `GetPodAdmitResult` words it.
    pub fn unexpected(err: impl std::fmt::Display) -> Self {
        Self::new(
            "UnexpectedAdmissionError",
            format!("Allocate failed due to {err}, which is unexpected"),
        )
    }
}

/// A resource manager that takes part in NUMA alignment: the CPU, memory and
/// device managers. The Topology Manager asks every provider for hints, merges
/// them with its policy and, when it admits, calls [`allocate`](Self::allocate)
/// with the merged hint (upstream's providers read it back from the manager's
/// store; Berth passes it).
pub trait HintProvider: Send + Sync {
    /// Hints for one container (container scope).
    fn get_topology_hints(&self, pod: &PodResources, container: &ContainerResources) -> HintMap;

    /// Hints for the whole pod (pod scope).
    fn get_pod_topology_hints(&self, pod: &PodResources) -> HintMap;

    /// Allocates the container's resources within `hint` where it can.
    fn allocate(
        &self,
        pod: &PodResources,
        container: &ContainerResources,
        hint: &TopologyHint,
    ) -> Result<(), AdmissionError>;
}
