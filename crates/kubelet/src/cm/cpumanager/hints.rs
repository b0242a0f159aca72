//! The CPU Manager as a Topology Manager hint provider (upstream's
//! `policy_static.go` GetTopologyHints / GetPodTopologyHints and Allocate
//! with the merged affinity): hints are the NUMA node sets with enough free
//! CPUs, preferred when as narrow as the request allows; allocation takes the
//! CPUs of the admitted NUMA nodes first.

use berth_topology::TopologyHint;
use berth_topology::cpu_assignment::cpu_topology_hints;
use berth_topology::cpuset::CpuSet;
use berth_topology::provider::{
    AdmissionError, ContainerResources, HintMap, HintProvider, PodResources, QosClass,
};

use super::policy_static::StaticPolicy;
use super::state::State;
use super::{CpuManager, Policy};

fn cpus(pod: &PodResources, c: &ContainerResources) -> usize {
    if pod.qos != QosClass::Guaranteed {
        return 0;
    }
    c.whole_request("cpu")
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0)
}

/// CPUs of the pod's regular init containers that its other containers have
/// not taken over: what the next container may reuse.
fn reusable(state: &State, pod: &PodResources) -> CpuSet {
    let Some(held) = state.assignments.get(&pod.uid) else {
        return CpuSet::new();
    };
    let mut init = CpuSet::new();
    let mut taken = CpuSet::new();
    for c in pod.all_containers() {
        let Some(s) = held.get(&c.name) else { continue };
        let regular_init = !c.sidecar && pod.init_containers.iter().any(|i| i.name == c.name);
        if regular_init {
            init = init.union(s);
        } else {
            taken = taken.union(s);
        }
    }
    init.difference(&taken)
}

fn cpu_hints(hints: Vec<TopologyHint>) -> HintMap {
    HintMap::from([("cpu".to_string(), Some(hints))])
}

impl CpuManager {
    fn static_policy(&self) -> Option<&StaticPolicy> {
        match &self.policy {
            Policy::Static(p) => Some(p),
            Policy::None => None,
        }
    }
}

impl HintProvider for CpuManager {
    fn get_topology_hints(&self, pod: &PodResources, c: &ContainerResources) -> HintMap {
        let (Some(p), n) = (self.static_policy(), cpus(pod, c)) else {
            return HintMap::new();
        };
        if n == 0 {
            return HintMap::new();
        }
        let inner = self.lock();
        // A container that has its CPUs (an agent restart) is hinted to them.
        if let Some(held) = inner.state.assigned(&pod.uid, &c.name) {
            return cpu_hints(cpu_topology_hints(&self.machine, held, n));
        }
        let available = p.available(&inner.state, &reusable(&inner.state, pod));
        cpu_hints(cpu_topology_hints(&self.machine, &available, n))
    }

    fn get_pod_topology_hints(&self, pod: &PodResources) -> HintMap {
        let Some(p) = self.static_policy() else {
            return HintMap::new();
        };
        // Upstream's podGuaranteedCPUs: the widest regular init container,
        // or the app containers with the sidecars beside them.
        let init_max = pod
            .init_containers
            .iter()
            .filter(|c| !c.sidecar)
            .map(|c| cpus(pod, c))
            .max()
            .unwrap_or(0);
        let running: usize = pod
            .all_containers()
            .filter(|c| c.sidecar || pod.containers.iter().any(|a| a.name == c.name))
            .map(|c| cpus(pod, c))
            .sum();
        let n = init_max.max(running);
        if n == 0 {
            return HintMap::new();
        }
        let inner = self.lock();
        let held = inner
            .state
            .assignments
            .get(&pod.uid)
            .map(|cs| cs.values().fold(CpuSet::new(), |acc, s| acc.union(s)));
        let available = match held {
            Some(h) if h.len() >= n => h,
            _ => p.available(&inner.state, &CpuSet::new()),
        };
        cpu_hints(cpu_topology_hints(&self.machine, &available, n))
    }

    fn allocate(
        &self,
        pod: &PodResources,
        c: &ContainerResources,
        hint: &TopologyHint,
    ) -> Result<(), AdmissionError> {
        let Some(p) = self.static_policy() else {
            return Ok(());
        };
        let n = cpus(pod, c);
        let preferred = hint.affinity.map(|mask| {
            let nodes: Vec<usize> = mask.bits().collect();
            self.machine.cpus_in_numa_nodes(&nodes)
        });
        let mut inner = self.lock();
        let reuse = reusable(&inner.state, pod);
        let before = inner.state.clone();
        p.allocate(
            &self.machine,
            &mut inner.state,
            &pod.uid,
            &c.name,
            n,
            &reuse,
            preferred.as_ref(),
        )
        .map_err(|e| {
            let (reason, message) = e.rejection();
            AdmissionError::new(reason, message)
        })?;
        if inner.state != before {
            self.save(&inner.state);
            self.changed.notify_one();
        }
        Ok(())
    }
}
