//! The static policy's decisions (upstream's `policy_static.go`), pure over
//! the state: which containers get exclusive CPUs (those of Guaranteed pods
//! with an integer CPU request), which CPUs they get (whole sockets, then
//! whole cores, then threads, never the reserved ones; CPUs of the pod's init
//! containers are reused by its later containers), and the pool left shared.

use berth_topology::cpu_assignment::{check_full_pcpus, take_by_topology};
use berth_topology::cpuset::CpuSet;
use berth_topology::machine::Machine;
use k8s_openapi::api::core::v1::Container;

use super::state::State;
use crate::cgroups::Qos;

/// The static policy's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaticPolicy {
    /// Never handed out exclusively (`--reserved-cpus`, or taken by topology
    /// for kube-reserved + system-reserved CPU).
    pub reserved: CpuSet,
    /// `full-pcpus-only`: exclusive CPUs come in whole cores.
    pub full_pcpus_only: bool,
}

/// How many exclusive CPUs `c` gets: its CPU request when the pod is
/// Guaranteed and the request a whole number of CPUs, else 0 (shared pool).
pub fn guaranteed_cpus(qos: Qos, c: &Container) -> usize {
    if qos != Qos::Guaranteed {
        return 0;
    }
    let Some(q) = c
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref()?.get("cpu"))
    else {
        return 0;
    };
    let Ok(q) = berth_api::quantity::Quantity::parse(&q.0) else {
        return 0;
    };
    let milli = q.milli_value();
    if milli <= 0 || milli % 1000 != 0 {
        return 0;
    }
    usize::try_from(milli / 1000).unwrap_or(0)
}

fn is_restartable_init(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Why a pod's CPUs cannot be allocated (upstream's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocateError {
    #[error(
        "not enough cpus available to satisfy request: requested={requested}, available={available}"
    )]
    NotEnough { requested: usize, available: usize },
    #[error("{0}")]
    SmtAlignment(String),
}

impl StaticPolicy {
    /// Allocates exclusive CPUs for every container of `pod` that gets them,
    /// into `state`; containers that have CPUs already keep them. All or
    /// nothing: on error `state` is unchanged.
    pub fn allocate_pod(
        &self,
        m: &Machine,
        state: &mut State,
        pod_uid: &str,
        qos: Qos,
        init: &[Container],
        containers: &[Container],
    ) -> Result<(), AllocateError> {
        let mut next = state.clone();
        // Regular init containers run one at a time before the app
        // containers: what they held is reusable by the containers after them.
        let mut reusable = CpuSet::new();
        for c in init {
            let got = self.allocate(m, &mut next, pod_uid, qos, c, &reusable)?;
            if !is_restartable_init(c) {
                reusable = reusable.union(&got);
            } else {
                reusable = reusable.difference(&got);
            }
        }
        for c in containers {
            let got = self.allocate(m, &mut next, pod_uid, qos, c, &reusable)?;
            reusable = reusable.difference(&got);
        }
        *state = next;
        Ok(())
    }

    /// One container's CPUs (empty for the shared pool).
    fn allocate(
        &self,
        m: &Machine,
        state: &mut State,
        pod_uid: &str,
        qos: Qos,
        c: &Container,
        reusable: &CpuSet,
    ) -> Result<CpuSet, AllocateError> {
        if let Some(s) = state.assigned(pod_uid, &c.name) {
            return Ok(s.clone());
        }
        let n = guaranteed_cpus(qos, c);
        if n == 0 {
            return Ok(CpuSet::new());
        }
        let available = state.default_set.difference(&self.reserved).union(reusable);
        if self.full_pcpus_only {
            check_full_pcpus(m, &available, n)
                .map_err(|e| AllocateError::SmtAlignment(e.to_string()))?;
        }
        let got = take_by_topology(m, &available, n).map_err(|_| AllocateError::NotEnough {
            requested: n,
            available: available.len(),
        })?;
        state.default_set = state.default_set.difference(&got);
        state
            .assignments
            .entry(pod_uid.to_string())
            .or_default()
            .insert(c.name.clone(), got.clone());
        Ok(got)
    }

    /// Releases a pod's CPUs into the shared pool; true when it held any.
    pub fn remove_pod(&self, state: &mut State, pod_uid: &str) -> bool {
        let Some(cs) = state.assignments.remove(pod_uid) else {
            return false;
        };
        for s in cs.values() {
            state.default_set = state.default_set.union(s);
        }
        true
    }

    /// Upstream's `validateState`: a fresh state is every CPU shared; a
    /// restored one must still describe this machine.
    pub fn validate(&self, m: &Machine, state: &mut State) -> Result<(), String> {
        let all: CpuSet = m.cpus.keys().copied().collect();
        if !self.reserved.is_subset(&all) {
            return Err(format!(
                "reserved cpus {} are not all on this machine ({all})",
                self.reserved
            ));
        }
        if state.default_set.is_empty() && state.assignments.is_empty() {
            state.default_set = all;
            return Ok(());
        }
        if !self.reserved.is_subset(&state.default_set) {
            return Err(format!(
                "not all reserved cpus: \"{}\" are present in defaultCpuSet: \"{}\"",
                self.reserved, state.default_set
            ));
        }
        let assigned = state.all_assigned();
        if !assigned.intersection(&state.default_set).is_empty() {
            return Err(format!(
                "pod: cpuset \"{assigned}\" overlaps with default cpuset \"{}\"",
                state.default_set
            ));
        }
        let total = assigned.union(&state.default_set);
        if total != all {
            return Err(format!(
                "current set of available CPUs \"{all}\" doesn't match with CPUs in state \"{total}\""
            ));
        }
        Ok(())
    }
}

/// The reserved CPUs when only a count is configured (kube-reserved +
/// system-reserved CPU, rounded up): taken by topology from the whole
/// machine, as upstream.
pub fn reserved_by_count(m: &Machine, count: usize) -> Result<CpuSet, String> {
    let all: CpuSet = m.cpus.keys().copied().collect();
    take_by_topology(m, &all, count).map_err(|e| e.to_string())
}
