//! VolumeRestrictions (upstream `plugins/volumerestrictions`): volumes that
//! cannot be shared. A ReadWriteOncePod claim already used by a scheduled
//! pod blocks every node (preemption may free it); the in-tree disks
//! upstream checks (GCE PD, AWS EBS, iSCSI, Ceph RBD) cannot be mounted
//! read-write by two pods on one node.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Pod, Volume};

use crate::framework::{
    Code, CycleState, Filter, NodeInfo, Plugin, PodInfo, PreFilter, PreFilterExtensions, Snapshot,
    Status,
};

pub const NAME: &str = "VolumeRestrictions";
pub const ERR_REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
pub const ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";
const STATE_KEY: &str = "PreFilterVolumeRestrictions";

pub struct VolumeRestrictions;

/// The pod's ReadWriteOncePod claims and how many scheduled pods use them.
#[derive(Clone, Debug, Default)]
struct PreFilterState {
    read_write_once_pod_claims: BTreeSet<String>,
    conflicting_claim_refs: i64,
}

impl PreFilterState {
    fn refs_of(&self, other: &Pod) -> i64 {
        other
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .filter(|c| self.read_write_once_pod_claims.contains(&c.claim_name))
            .count() as i64
    }
}

impl Plugin for VolumeRestrictions {
    fn name(&self) -> &'static str {
        NAME
    }
}

/// Volumes the disk-conflict check looks at.
fn needs_restrictions_check(v: &Volume) -> bool {
    v.gce_persistent_disk.is_some()
        || v.aws_elastic_block_store.is_some()
        || v.rbd.is_some()
        || v.iscsi.is_some()
}

/// Upstream's isVolumeConflict: `v` cannot join `other`'s volumes on a node.
fn is_volume_conflict(v: &Volume, other: &Pod) -> bool {
    other
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|e| {
            if let (Some(a), Some(b)) = (&v.gce_persistent_disk, &e.gce_persistent_disk)
                && a.pd_name == b.pd_name
                && !(a.read_only.unwrap_or(false) && b.read_only.unwrap_or(false))
            {
                return true;
            }
            if let (Some(a), Some(b)) = (&v.aws_elastic_block_store, &e.aws_elastic_block_store)
                && a.volume_id == b.volume_id
            {
                return true;
            }
            if let (Some(a), Some(b)) = (&v.iscsi, &e.iscsi)
                && a.iqn == b.iqn
                && !(a.read_only.unwrap_or(false) && b.read_only.unwrap_or(false))
            {
                return true;
            }
            if let (Some(a), Some(b)) = (&v.rbd, &e.rbd) {
                let overlap = a.monitors.iter().any(|m| b.monitors.contains(m));
                // An unset pool is "rbd" on both sides (the API's default).
                let pool = |p: &Option<String>| p.clone().unwrap_or_else(|| "rbd".into());
                if overlap
                    && pool(&a.pool) == pool(&b.pool)
                    && a.image == b.image
                    && !(a.read_only.unwrap_or(false) && b.read_only.unwrap_or(false))
                {
                    return true;
                }
            }
            false
        })
}

fn satisfies_volume_conflicts(pod: &Pod, node: &NodeInfo) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter(|v| needs_restrictions_check(v))
        .all(|v| !node.pods.iter().any(|e| is_volume_conflict(v, &e.pod)))
}

impl PreFilter for VolumeRestrictions {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snap: &Snapshot) -> Status {
        let spec_volumes = || pod.pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
        let needs_check = spec_volumes().any(needs_restrictions_check);
        let ns = pod.namespace();
        let mut rwop = BTreeSet::new();
        for c in spec_volumes().filter_map(|v| v.persistent_volume_claim.as_ref()) {
            let Some(claim) = snap.storage.claim(ns, &c.claim_name) else {
                return Status::unresolvable(format!(
                    "persistentvolumeclaim {:?} not found",
                    c.claim_name
                ));
            };
            let modes = claim.spec.as_ref().and_then(|s| s.access_modes.as_ref());
            if modes.is_some_and(|m| m.iter().any(|m| m == "ReadWriteOncePod")) {
                rwop.insert(c.claim_name.clone());
            }
        }
        let mut s = PreFilterState {
            read_write_once_pod_claims: rwop,
            conflicting_claim_refs: 0,
        };
        if !s.read_write_once_pod_claims.is_empty() {
            // Upstream's IsPVCUsedByPods over the snapshot: at most one pod
            // may use each such claim, so each claim counts once.
            let key = pod.key();
            let used: BTreeSet<&str> = snap
                .nodes
                .iter()
                .flat_map(|n| n.pods.iter())
                .filter(|p| p.namespace() == ns && p.key() != key)
                .flat_map(|p| {
                    p.pod
                        .spec
                        .iter()
                        .flat_map(|s| s.volumes.iter().flatten())
                        .filter_map(|v| v.persistent_volume_claim.as_ref())
                        .map(|c| c.claim_name.as_str())
                })
                .collect();
            s.conflicting_claim_refs = s
                .read_write_once_pod_claims
                .iter()
                .filter(|c| used.contains(c.as_str()))
                .count() as i64;
        }
        if !needs_check && s.conflicting_claim_refs == 0 {
            return Status::new(Code::Skip, Vec::new());
        }
        state.write(STATE_KEY, s);
        Status::success()
    }

    fn extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for VolumeRestrictions {
    fn add_pod(&self, state: &mut CycleState, pod: &PodInfo, added: &PodInfo, _: &NodeInfo) {
        update(state, pod, added, 1);
    }

    fn remove_pod(&self, state: &mut CycleState, pod: &PodInfo, removed: &PodInfo, _: &NodeInfo) {
        update(state, pod, removed, -1);
    }
}

fn update(state: &mut CycleState, pod: &PodInfo, other: &PodInfo, sign: i64) {
    let Some(s) = state.read::<PreFilterState>(STATE_KEY) else {
        return;
    };
    if other.namespace() != pod.namespace() {
        return;
    }
    let mut s = s.clone();
    s.conflicting_claim_refs += sign * s.refs_of(&other.pod);
    state.write(STATE_KEY, s);
}

impl Filter for VolumeRestrictions {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !satisfies_volume_conflicts(&pod.pod, node) {
            return Status::unschedulable(ERR_REASON_DISK_CONFLICT);
        }
        let Some(s) = state.read::<PreFilterState>(STATE_KEY) else {
            return Status::error(format!("cannot read {STATE_KEY:?} from cycleState"));
        };
        if s.conflicting_claim_refs > 0 {
            return Status::unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT);
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests;
