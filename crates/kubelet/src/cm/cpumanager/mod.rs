//! The CPU Manager (upstream's `pkg/kubelet/cm/cpumanager`):
//! `--cpu-manager-policy none` leaves CPUs to the kernel's scheduler;
//! `static` gives containers of Guaranteed pods with integer CPU requests
//! exclusive CPUs (`policy_static.rs`; admitted by the Topology Manager, for
//! which `hints.rs` is the CPU hint provider), every other container the shared pool,
//! and keeps both in a checkpoint (`state.rs`) so an agent restart keeps
//! them. Cpusets reach containers through CRI: at creation, and for the
//! shared pool, which shrinks and grows as exclusive sets come and go, by
//! `UpdateContainerResources` in the reconcile loop
//! (`--cpu-manager-reconcile-period`, 10 s, and right after a change).

mod hints;
pub mod policy_static;
pub mod state;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

pub use berth_topology::cpuset::CpuSet;
use berth_topology::machine::Machine;
use tracing::{info, warn};

use self::policy_static::StaticPolicy;
use self::state::State;
use crate::agent::podspec::{LABEL_CONTAINER_NAME, LABEL_POD_UID};
use crate::runtime::{ContainerState, Filter, LinuxResources, Runtime};

/// The checkpoint's file name under the agent's directory (upstream's).
pub const CHECKPOINT_FILE: &str = "cpu_manager_state";
/// Upstream's admission failure reason for an allocation that failed.
pub const ADMISSION_REASON: &str = "UnexpectedAdmissionError";

/// `--cpu-manager-policy`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Policy {
    #[default]
    None,
    Static(StaticPolicy),
}

impl Policy {
    pub fn name(&self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::Static(_) => "static",
        }
    }
}

/// The CPU Manager's flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuManagerConfig {
    /// `--cpu-manager-policy`: `none` or `static`.
    pub policy: String,
    /// `--reserved-cpus`: the CPUs kept from exclusive use.
    pub reserved_cpus: Option<CpuSet>,
    /// kube-reserved + system-reserved CPU in millicores: how many CPUs the
    /// static policy reserves (rounded up) without `--reserved-cpus`.
    pub reserved_cpu_millis: i64,
    /// `--cpu-manager-policy-options full-pcpus-only=true`.
    pub full_pcpus_only: bool,
    pub reconcile_period: Duration,
}

impl Default for CpuManagerConfig {
    fn default() -> Self {
        CpuManagerConfig {
            policy: "none".into(),
            reserved_cpus: None,
            reserved_cpu_millis: 0,
            full_pcpus_only: false,
            reconcile_period: Duration::from_secs(10),
        }
    }
}

impl CpuManagerConfig {
    /// The policy on `machine`, as upstream's NewManager and NewStaticPolicy
    /// decide it.
    pub fn policy(&self, machine: &Machine) -> Result<Policy, CpuManagerError> {
        match self.policy.as_str() {
            "none" => Ok(Policy::None),
            "static" => {
                let reserved = match &self.reserved_cpus {
                    Some(set) if !set.is_empty() => set.clone(),
                    _ => {
                        let count =
                            usize::try_from((self.reserved_cpu_millis + 999) / 1000).unwrap_or(0);
                        if count == 0 {
                            return Err(CpuManagerError::NoReserved);
                        }
                        policy_static::reserved_by_count(machine, count)
                            .map_err(CpuManagerError::Reserve)?
                    }
                };
                Ok(Policy::Static(StaticPolicy {
                    reserved,
                    full_pcpus_only: self.full_pcpus_only,
                }))
            }
            other => Err(CpuManagerError::UnknownPolicy(other.to_string())),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CpuManagerError {
    #[error("unknown policy: \"{0}\"")]
    UnknownPolicy(String),
    #[error("[cpumanager] unable to determine reserved CPU resources for static policy")]
    NoReserved,
    #[error("[cpumanager] unable to reserve the required amount of CPUs: {0}")]
    Reserve(String),
    #[error(
        "could not restore state from checkpoint: configured policy {configured:?} differs from state checkpoint policy {stored:?}, please drain this node and delete the CPU manager checkpoint file {path:?} before restarting Kubelet"
    )]
    PolicyChanged {
        configured: String,
        stored: String,
        path: String,
    },
    #[error(
        "could not restore state from checkpoint: {0}, please drain this node and delete the CPU manager checkpoint file before restarting Kubelet"
    )]
    Checkpoint(String),
    #[error(
        "[cpumanager] static policy invalid state, please drain node and remove policy state file: {0}"
    )]
    InvalidState(String),
}

struct Inner {
    state: State,
    /// The cpuset last sent to each running container, by container id.
    applied: HashMap<String, CpuSet>,
}

pub struct CpuManager {
    policy: Policy,
    reconcile_period: Duration,
    machine: Machine,
    checkpoint: PathBuf,
    inner: Mutex<Inner>,
    /// Poked when the shared pool changed, so the reconcile loop runs now.
    changed: tokio::sync::Notify,
}

impl CpuManager {
    /// Restores the checkpoint under `dir` (or starts fresh) for `machine`.
    pub fn new(
        cfg: CpuManagerConfig,
        machine: Machine,
        dir: &std::path::Path,
    ) -> Result<CpuManager, CpuManagerError> {
        let policy = cfg.policy(&machine)?;
        let checkpoint = dir.join(CHECKPOINT_FILE);
        let restored =
            state::read(&checkpoint).map_err(|e| CpuManagerError::Checkpoint(e.to_string()))?;
        let mut state = State::default();
        if let Some((stored, s)) = restored {
            if stored != policy.name() {
                return Err(CpuManagerError::PolicyChanged {
                    configured: policy.name().into(),
                    stored,
                    path: checkpoint.display().to_string(),
                });
            }
            state = s;
        }
        if let Policy::Static(p) = &policy {
            p.validate(&machine, &mut state)
                .map_err(CpuManagerError::InvalidState)?;
            info!(reserved = %p.reserved, shared = %state.default_set, "cpu manager: static policy");
        }
        let m = CpuManager {
            policy,
            reconcile_period: cfg.reconcile_period,
            machine,
            checkpoint,
            inner: Mutex::new(Inner {
                state,
                applied: HashMap::new(),
            }),
            changed: tokio::sync::Notify::new(),
        };
        m.save(&m.lock().state);
        Ok(m)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn save(&self, state: &State) {
        if let Err(e) = state::write(&self.checkpoint, self.policy.name(), state) {
            warn!(error = %e, path = %self.checkpoint.display(), "writing the cpu manager checkpoint");
        }
    }

    /// The machine's CPU and NUMA topology.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The cpuset container `name` of pod `uid` runs on: its exclusive CPUs,
    /// else the shared pool; None under the none policy.
    pub fn container_cpuset(&self, uid: &str, name: &str) -> Option<CpuSet> {
        if self.policy == Policy::None {
            return None;
        }
        let inner = self.lock();
        Some(
            inner
                .state
                .assigned(uid, name)
                .cloned()
                .unwrap_or_else(|| inner.state.default_set.clone()),
        )
    }

    /// Releases a finished or deleted pod's CPUs into the shared pool.
    pub fn remove_pod(&self, uid: &str) {
        let Policy::Static(p) = &self.policy else {
            return;
        };
        let mut inner = self.lock();
        if p.remove_pod(&mut inner.state, uid) {
            self.save(&inner.state);
            self.changed.notify_one();
        }
    }

    /// Whether a pod holds exclusive CPUs.
    pub fn holds(&self, uid: &str) -> bool {
        self.lock().state.assignments.contains_key(uid)
    }

    /// A copy of the state (the shared pool and the assignments).
    pub fn state(&self) -> State {
        self.lock().state.clone()
    }

    /// Upstream's reconcileState: drops assignments of pods the agent no
    /// longer runs (`live`, once the pod watch has listed), then sends every
    /// running container whose cpuset changed its new one. `live` is read
    /// under the manager's lock: a worker registers before it admits its pod,
    /// so no assignment made meanwhile is taken for stale.
    pub async fn reconcile(
        &self,
        runtime: &dyn Runtime,
        live: Option<&(dyn Fn() -> HashSet<String> + Sync)>,
    ) {
        if self.policy == Policy::None {
            return;
        }
        if let (Some(live), Policy::Static(p)) = (live, &self.policy) {
            let mut inner = self.lock();
            let live = live();
            let stale: Vec<String> = inner
                .state
                .assignments
                .keys()
                .filter(|uid| !live.contains(*uid))
                .cloned()
                .collect();
            for uid in &stale {
                p.remove_pod(&mut inner.state, uid);
            }
            if !stale.is_empty() {
                self.save(&inner.state);
            }
        }
        let containers = match runtime.list_containers(&Filter::default()).await {
            Ok(l) => l,
            Err(e) => {
                warn!(error = %e, "cpu manager: listing containers");
                return;
            }
        };
        let mut running = HashSet::new();
        for c in containers {
            if c.state != ContainerState::Running {
                continue;
            }
            let (Some(uid), Some(name)) = (
                c.labels.get(LABEL_POD_UID),
                c.labels.get(LABEL_CONTAINER_NAME),
            ) else {
                continue;
            };
            running.insert(c.id.clone());
            let Some(want) = self.container_cpuset(uid, name) else {
                continue;
            };
            if self.lock().applied.get(&c.id) == Some(&want) {
                continue;
            }
            let r = LinuxResources {
                cpuset_cpus: want.to_string(),
                ..Default::default()
            };
            match runtime.update_container_resources(&c.id, &r).await {
                Ok(()) => {
                    self.lock().applied.insert(c.id.clone(), want);
                }
                Err(e) => {
                    warn!(container = %c.id, error = %e, "cpu manager: updating the container's cpuset")
                }
            }
        }
        self.lock().applied.retain(|id, _| running.contains(id));
    }

    /// Waits for the next reconcile: the period, or a change of the pool.
    pub async fn next_reconcile(&self) {
        tokio::select! {
            _ = tokio::time::sleep(self.reconcile_period) => {}
            _ = self.changed.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests;
