//! The static policy's decisions (upstream's `policy_static.go`), pure over
//! the state: which CPUs a container gets (whole sockets, then whole cores,
//! then threads, the Topology Manager's NUMA nodes first, never the reserved
//! ones; `hints.rs` decides who gets any and what init CPUs are reused), and
//! the pool left shared.

use berth_topology::cpu_assignment::{check_full_pcpus, take_by_topology};
use berth_topology::cpuset::CpuSet;
use berth_topology::machine::Machine;

use super::state::State;

/// The static policy's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaticPolicy {
    /// Never handed out exclusively (`--reserved-cpus`, or taken by topology
    /// for kube-reserved + system-reserved CPU).
    pub reserved: CpuSet,
    /// `full-pcpus-only`: exclusive CPUs come in whole cores.
    pub full_pcpus_only: bool,
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

impl AllocateError {
    /// The pod's rejection: upstream's `SMTAlignmentError` reason for
    /// full-pcpus-only, `UnexpectedAdmissionError` for the rest.
    pub fn rejection(&self) -> (String, String) {
        match self {
            AllocateError::SmtAlignment(m) => (
                berth_topology::cpu_assignment::SMT_ALIGNMENT_ERROR.into(),
                m.clone(),
            ),
            e => (
                super::ADMISSION_REASON.into(),
                format!("Allocate failed due to {e}, which is unexpected"),
            ),
        }
    }
}

impl StaticPolicy {
    /// What a container may take: the shared pool less the reserved CPUs,
    /// and the `reusable` CPUs of the pod's init containers.
    pub fn available(&self, state: &State, reusable: &CpuSet) -> CpuSet {
        state.default_set.difference(&self.reserved).union(reusable)
    }

    /// Container `name`'s `n` exclusive CPUs (empty for the shared pool, n = 0),
    /// as many as fit from `preferred` (the Topology Manager's NUMA nodes) first.
    #[allow(clippy::too_many_arguments)]
    pub fn allocate(
        &self,
        m: &Machine,
        state: &mut State,
        pod_uid: &str,
        name: &str,
        n: usize,
        reusable: &CpuSet,
        preferred: Option<&CpuSet>,
    ) -> Result<CpuSet, AllocateError> {
        if let Some(s) = state.assigned(pod_uid, name) {
            return Ok(s.clone());
        }
        if n == 0 {
            return Ok(CpuSet::new());
        }
        let available = self.available(state, reusable);
        if self.full_pcpus_only {
            check_full_pcpus(m, &available, n)
                .map_err(|e| AllocateError::SmtAlignment(e.to_string()))?;
        }
        let not_enough = |_| AllocateError::NotEnough {
            requested: n,
            available: available.len(),
        };
        // Upstream's allocateCPUs: the aligned CPUs first, the rest after.
        let mut got = CpuSet::new();
        if let Some(aligned) = preferred.map(|p| available.intersection(p)) {
            got = take_by_topology(m, &aligned, n.min(aligned.len())).map_err(not_enough)?;
        }
        if got.len() < n {
            let rest = take_by_topology(m, &available.difference(&got), n - got.len())
                .map_err(not_enough)?;
            got = got.union(&rest);
        }
        state.default_set = state.default_set.difference(&got);
        state
            .assignments
            .entry(pod_uid.to_string())
            .or_default()
            .insert(name.to_string(), got.clone());
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
