//! Container garbage collection (upstream's `kuberuntime_gc.go` with the policy
//! of `pkg/kubelet/container/container_gc.go`): every [`CONTAINER_GC_PERIOD`]
//! the agent removes dead containers beyond `--maximum-dead-containers-per-container`
//! (per pod and container name, newest kept) and `--maximum-dead-containers`
//! (the whole node), none younger than `--minimum-container-ttl-duration`;
//! every dead container of a pod that is gone or evicted; and the dead sandboxes
//! that hold no container, keeping a live pod's newest.
//!
//! [`plan`] decides from plain lists, so every rule is a table test;
//! [`garbage_collect`] lists, plans and removes through a [`Runtime`].

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tracing::{debug, warn};

use super::{
    ContainerState, ContainerStatus, Filter, Runtime, RuntimeResult, SandboxState, SandboxStatus,
};
use crate::agent::podspec::{LABEL_CONTAINER_NAME, LABEL_POD_UID};

/// How often the agent collects containers (upstream's `ContainerGCPeriod`).
pub const CONTAINER_GC_PERIOD: Duration = Duration::from_secs(60);

/// Upstream's `GCPolicy`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerGcPolicy {
    /// `--minimum-container-ttl-duration`: a dead container younger stays.
    pub min_age: Duration,
    /// `--maximum-dead-containers-per-container`: dead instances kept per pod
    /// and container name (negative: no limit).
    pub max_per_pod_container: i32,
    /// `--maximum-dead-containers`: dead containers kept on the node (negative:
    /// no limit).
    pub max_containers: i32,
}

impl Default for ContainerGcPolicy {
    fn default() -> Self {
        ContainerGcPolicy {
            min_age: Duration::ZERO,
            max_per_pod_container: 1,
            max_containers: -1,
        }
    }
}

/// What the agent knows of a pod, by uid (upstream's `podStateProvider`).
pub trait PodStateProvider: Send + Sync {
    /// The pod is gone, evicted, or deleted with nothing running: everything
    /// of it may go.
    fn should_pod_content_be_removed(&self, uid: &str) -> bool;
    /// The pod is gone or terminal: its containers may go when disk is reclaimed.
    fn should_pod_runtime_be_removed(&self, uid: &str) -> bool;
}

/// What one collection removes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub containers: Vec<String>,
    pub sandboxes: Vec<String>,
}

fn created(c: &ContainerStatus) -> DateTime<Utc> {
    c.created_at.unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Keeps the newest `keep` of a unit sorted newest first; the rest go.
fn remove_oldest(unit: &mut Vec<&ContainerStatus>, keep: usize, out: &mut Vec<String>) {
    if unit.len() > keep {
        out.extend(unit.drain(keep..).map(|c| c.id.clone()));
    }
}

/// Upstream's `evictContainers` then `evictSandboxes`, as a decision.
///
/// `all_sources_ready`: the agent has listed its pods once (before that a pod
/// it has not heard of yet is not gone). `evict_non_deleted`: the eviction
/// manager reclaims disk, so terminal pods' containers go too.
pub fn plan(
    policy: &ContainerGcPolicy,
    containers: &[ContainerStatus],
    sandboxes: &[SandboxStatus],
    pods: &dyn PodStateProvider,
    all_sources_ready: bool,
    evict_non_deleted: bool,
    now: DateTime<Utc>,
) -> Plan {
    let mut out = Plan::default();
    let removable = |uid: &str| {
        all_sources_ready
            && (pods.should_pod_content_be_removed(uid)
                || (evict_non_deleted && pods.should_pod_runtime_be_removed(uid)))
    };
    // Evict units: the dead containers of one pod's container name, newest first.
    let newest_gc = chrono::Duration::from_std(policy.min_age)
        .ok()
        .and_then(|age| now.checked_sub_signed(age))
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    let mut units: BTreeMap<(&str, &str), Vec<&ContainerStatus>> = BTreeMap::new();
    for c in containers {
        if c.state == ContainerState::Running || created(c) > newest_gc {
            continue;
        }
        let uid = c
            .labels
            .get(LABEL_POD_UID)
            .map(String::as_str)
            .unwrap_or("");
        let name = c
            .labels
            .get(LABEL_CONTAINER_NAME)
            .map(String::as_str)
            .unwrap_or(c.name.as_str());
        if uid.is_empty() {
            // Not one of the agent's containers.
            continue;
        }
        units.entry((uid, name)).or_default().push(c);
    }
    for unit in units.values_mut() {
        unit.sort_by_key(|c| std::cmp::Reverse((created(c), c.attempt)));
    }
    units.retain(|(uid, _), unit| {
        if removable(uid) {
            remove_oldest(unit, 0, &mut out.containers);
            return false;
        }
        true
    });
    if let Ok(keep) = usize::try_from(policy.max_per_pod_container) {
        for unit in units.values_mut() {
            remove_oldest(unit, keep, &mut out.containers);
        }
    }
    if let Ok(max) = usize::try_from(policy.max_containers) {
        let count = |units: &BTreeMap<_, Vec<&ContainerStatus>>| {
            units.values().map(Vec::len).sum::<usize>()
        };
        if count(&units) > max {
            // An equal share per unit (at least one), then the oldest overall.
            let share = (max / units.len().max(1)).max(1);
            for unit in units.values_mut() {
                remove_oldest(unit, share, &mut out.containers);
            }
            let mut flat: Vec<&ContainerStatus> = units.values().flatten().copied().collect();
            if flat.len() > max {
                flat.sort_by_key(|c| std::cmp::Reverse((created(c), c.attempt)));
                remove_oldest(&mut flat, max, &mut out.containers);
            }
        }
    }

    // Sandboxes: a ready one, or one still holding a container, is active.
    let removed: HashSet<&str> = out.containers.iter().map(String::as_str).collect();
    let holding: HashSet<&str> = containers
        .iter()
        .filter(|c| !removed.contains(c.id.as_str()))
        .map(|c| c.sandbox_id.as_str())
        .collect();
    let mut by_pod: BTreeMap<&str, Vec<&SandboxStatus>> = BTreeMap::new();
    for s in sandboxes.iter().filter(|s| !s.uid.is_empty()) {
        by_pod.entry(s.uid.as_str()).or_default().push(s);
    }
    for (uid, mut list) in by_pod {
        list.sort_by_key(|s| std::cmp::Reverse((s.created_at, s.attempt)));
        // A live pod keeps its newest sandbox; a gone pod keeps none.
        let keep = if removable(uid) { 0 } else { 1 };
        for s in list.iter().skip(keep) {
            let active = s.state == SandboxState::Ready || holding.contains(s.id.as_str());
            if !active {
                out.sandboxes.push(s.id.clone());
            }
        }
    }
    out
}

/// One collection: list, plan, remove. Returns what was removed.
pub async fn garbage_collect(
    rt: &dyn Runtime,
    policy: &ContainerGcPolicy,
    pods: &dyn PodStateProvider,
    all_sources_ready: bool,
    evict_non_deleted: bool,
) -> RuntimeResult<Plan> {
    let all = Filter::default();
    let containers = rt.list_containers(&all).await?;
    let sandboxes = rt.list_sandboxes(&all).await?;
    let p = plan(
        policy,
        &containers,
        &sandboxes,
        pods,
        all_sources_ready,
        evict_non_deleted,
        Utc::now(),
    );
    for id in &p.containers {
        // A container in an unknown state may still run: kill it first.
        let unknown = containers
            .iter()
            .any(|c| c.id == *id && c.state == ContainerState::Unknown);
        if unknown && let Err(e) = rt.stop_container(id, Duration::ZERO).await {
            warn!(container = %id, error = %e, "killing a container in unknown state before removal");
            continue;
        }
        debug!(container = %id, "removing dead container");
        if let Err(e) = rt.remove_container(id).await {
            warn!(container = %id, error = %e, "failed to remove container");
        }
    }
    for id in &p.sandboxes {
        debug!(sandbox = %id, "removing dead sandbox");
        // A sandbox whose pause process died still holds its network: stop
        // (idempotent) releases it before the removal.
        let removed = match rt.stop_sandbox(id).await {
            Ok(()) => rt.remove_sandbox(id).await,
            Err(e) => Err(e),
        };
        if let Err(e) = removed {
            warn!(sandbox = %id, error = %e, "failed to remove sandbox");
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests;
