//! The node-pressure eviction manager (upstream's `pkg/kubelet/eviction`):
//! `signals` (signals, thresholds, grace periods, conditions), `ranking` (which
//! pod goes first), `message` (upstream's texts and the evicted pod's status),
//! `manager` (the housekeeping loop), and here the configuration, the admit
//! handler and the hand-over of evictions to pod workers ([`Evictions`]).

pub mod manager;
pub mod message;
pub mod ranking;
pub mod signals;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::oneshot;

pub use signals::{Condition, EvictionFlags, Signal, Threshold};

/// Upstream's housekeeping interval (`evictionMonitoringPeriod`).
pub const HOUSEKEEPING_INTERVAL: Duration = Duration::from_secs(10);
/// `--eviction-pressure-transition-period` default.
pub const PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(300);

/// The eviction manager's configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub thresholds: Vec<Threshold>,
    /// `--eviction-max-pod-grace-period` (soft evictions).
    pub max_pod_grace_period: Duration,
    pub pressure_transition_period: Duration,
    pub housekeeping_interval: Duration,
}

impl Config {
    pub fn new(thresholds: Vec<Threshold>) -> Self {
        Config {
            thresholds,
            max_pod_grace_period: Duration::ZERO,
            pressure_transition_period: PRESSURE_TRANSITION_PERIOD,
            housekeeping_interval: HOUSEKEEPING_INTERVAL,
        }
    }
}

/// The eviction flags of a node agent, before parsing.
#[derive(Clone, Debug)]
pub struct Settings {
    pub flags: EvictionFlags,
    pub max_pod_grace_period: Duration,
    pub pressure_transition_period: Duration,
    pub housekeeping_interval: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            flags: EvictionFlags {
                hard: crate::node::EvictionThreshold::defaults(),
                ..Default::default()
            },
            max_pod_grace_period: Duration::ZERO,
            pressure_transition_period: PRESSURE_TRANSITION_PERIOD,
            housekeeping_interval: HOUSEKEEPING_INTERVAL,
        }
    }
}

impl Settings {
    /// The manager's configuration; an invalid flag is an error naming it.
    pub fn config(&self) -> crate::Result<Config> {
        Ok(Config {
            thresholds: signals::thresholds(&self.flags)?,
            max_pod_grace_period: self.max_pod_grace_period,
            pressure_transition_period: self.pressure_transition_period,
            housekeeping_interval: self.housekeeping_interval,
        })
    }
}

/// An eviction handed to a pod's worker: stop within `grace`, end Failed/Evicted
/// with `message`.
#[derive(Clone, Debug, PartialEq)]
pub struct PodEviction {
    pub grace: Duration,
    pub message: String,
}

/// A requested eviction and who waits for its cleanup.
pub type Pending = (PodEviction, Option<oneshot::Sender<()>>);

/// What the eviction manager shares with the pod workers: pending evictions, the
/// node conditions for admission, and which pods were admitted.
#[derive(Debug, Default)]
pub struct Evictions {
    pending: Mutex<HashMap<String, Pending>>,
    conditions: Mutex<Vec<Condition>>,
    admitted: Mutex<HashSet<String>>,
    /// Pods a worker made terminal (evicted, rejected) before the watch says so.
    terminal: Mutex<HashSet<String>>,
    pods: Mutex<HashMap<String, Pod>>,
    /// The pod watch has listed once (upstream's `allSourcesReady`): a pod not
    /// among those seen is gone, not merely not yet heard of.
    synced: std::sync::atomic::AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Evictions {
    /// Asks the pod's worker to evict it; the receiver fires once it is cleaned up.
    pub fn request(&self, uid: &str, ev: PodEviction) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(uid.to_string(), (ev, Some(tx)));
        rx
    }

    /// The eviction requested for this pod, if any (the worker takes it).
    pub fn take(&self, uid: &str) -> Option<Pending> {
        lock(&self.pending).remove(uid)
    }

    pub fn set_conditions(&self, c: &[Condition]) {
        *lock(&self.conditions) = c.to_vec();
    }

    pub fn conditions(&self) -> Vec<Condition> {
        lock(&self.conditions).clone()
    }

    /// The pod watch's view of the node's pods (for ranking).
    pub fn observe(&self, pod: &Pod) {
        if let Some(uid) = &pod.metadata.uid {
            lock(&self.pods).insert(uid.clone(), pod.clone());
        }
    }

    pub fn forget(&self, uid: &str) {
        lock(&self.pods).remove(uid);
        lock(&self.admitted).remove(uid);
        lock(&self.pending).remove(uid);
        lock(&self.terminal).remove(uid);
    }

    /// The pod as the watch last showed it.
    pub fn pod(&self, uid: &str) -> Option<Pod> {
        lock(&self.pods).get(uid).cloned()
    }

    /// A worker made this pod terminal (evicted, rejected, past its deadline).
    pub fn is_terminal(&self, uid: &str) -> bool {
        lock(&self.terminal).contains(uid)
    }

    pub fn set_synced(&self) {
        self.synced
            .store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn synced(&self) -> bool {
        self.synced.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The pod's worker made it terminal: it is no longer a candidate.
    pub fn finished(&self, uid: &str) {
        lock(&self.terminal).insert(uid.to_string());
    }

    /// Pods that are neither terminal nor being deleted (upstream's active pods).
    pub fn active_pods(&self) -> Vec<Pod> {
        let terminal = lock(&self.terminal).clone();
        lock(&self.pods)
            .values()
            .filter(|p| !terminal.contains(ranking::uid(p)))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                !matches!(phase, Some("Succeeded" | "Failed"))
            })
            .cloned()
            .collect()
    }

    /// The admit handler, once per pod: `Some(message)` when the pod is rejected.
    pub fn admit_once(&self, pod: &Pod) -> Option<String> {
        let uid = ranking::uid(pod).to_string();
        if !lock(&self.admitted).insert(uid) {
            return None;
        }
        admit(&self.conditions(), pod)
    }
}

/// Upstream's eviction admit handler: under pressure only critical pods are
/// admitted, except that memory pressure alone still admits pods that are not
/// BestEffort and BestEffort pods tolerating the memory-pressure taint.
pub fn admit(conditions: &[Condition], pod: &Pod) -> Option<String> {
    if conditions.is_empty() || ranking::is_critical(pod) {
        return None;
    }
    if conditions == [Condition::MemoryPressure] {
        let best_effort = crate::agent::podspec::qos(pod) == crate::cgroups::Qos::BestEffort;
        if !best_effort {
            return None;
        }
        let taint = k8s_openapi::api::core::v1::Taint {
            key: "node.kubernetes.io/memory-pressure".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let tolerates = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_ref())
            .is_some_and(|ts| ts.iter().any(|t| berth_api::taints::tolerates(t, &taint)));
        if tolerates {
            return None;
        }
    }
    Some(message::node_condition_message(conditions))
}

#[cfg(test)]
mod tests;
