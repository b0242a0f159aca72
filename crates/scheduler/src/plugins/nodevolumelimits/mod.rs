//! NodeVolumeLimits (upstream `plugins/nodevolumelimits/csi.go`, CSILimits):
//! a node's CSI drivers attach at most `CSINode.spec.drivers[].allocatable.count`
//! volumes. The pod's claims count per driver (a bound claim by its PV's
//! `spec.csi` driver and handle, an unbound one by its class's provisioner),
//! plus the volumes the node's pods already use; a volume shared with a pod
//! already there counts once.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use berth_api::storage::claim_class;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use rand::Rng;

use crate::framework::{
    Code, CycleState, Filter, NodeInfo, Plugin, PodInfo, PreFilter, Snapshot, Status,
    StorageSnapshot,
};
use berth_api::storage::{volume_claim_name, volume_is_for_pod};

pub const NAME: &str = "NodeVolumeLimits";
pub const ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";
/// Upstream's resource-name prefix of a CSI driver's attach limit.
pub const CSI_ATTACH_LIMIT_PREFIX: &str = "attachable-volumes-csi-";
/// Node allocatable entries that are volume limits (the legacy form).
const ATTACHABLE_VOLUMES_PREFIX: &str = "attachable-volumes-";
const STATE_KEY: &str = NAME;

pub struct CsiLimits {
    /// Unbound claims get made-up volume handles under this prefix, so they
    /// never collide with a real handle (upstream's randomVolumeIDPrefix).
    random_volume_id_prefix: String,
}

impl Default for CsiLimits {
    fn default() -> Self {
        let mut rng = rand::rng();
        let prefix = (0..32)
            .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
            .collect();
        Self {
            random_volume_id_prefix: prefix,
        }
    }
}

/// Unique volume name (`driver/handle`) → limit key.
type Volumes = HashMap<String, String>;

struct StateData {
    storage: Arc<StorageSnapshot>,
    /// The pod's own volumes, or why it cannot be placed anywhere.
    new_volumes: Result<Volumes, Status>,
}

pub fn attach_limit_key(driver: &str) -> String {
    format!("{CSI_ATTACH_LIMIT_PREFIX}{driver}")
}

impl CsiLimits {
    /// Upstream's filterAttachableVolumes: the CSI volumes of `pod`'s claims.
    /// A missing claim stops a new pod (it cannot run without it) and is
    /// skipped for pods already placed.
    fn attachable_volumes(
        &self,
        pod: &Pod,
        storage: &StorageSnapshot,
        new_pod: bool,
        out: &mut Volumes,
    ) -> Result<(), Status> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            // Inline volumes count only through CSI migration, which Berth
            // does not do (upstream's checkAttachableInlineVolume).
            let Some((name, ephemeral)) = volume_claim_name(pod, v) else {
                continue;
            };
            if name.is_empty() {
                return Err(Status::error("PersistentVolumeClaim had no name"));
            }
            let Some(claim) = storage.claim(ns, &name) else {
                if new_pod {
                    return Err(Status::unresolvable(format!(
                        "looking up PVC {ns}/{name}: persistentvolumeclaim {name:?} not found"
                    )));
                }
                continue;
            };
            if ephemeral {
                volume_is_for_pod(pod, claim).map_err(Status::error)?;
            }
            let Some((driver, handle)) = self.csi_driver_info(claim, storage) else {
                continue;
            };
            out.insert(format!("{driver}/{handle}"), attach_limit_key(&driver));
        }
        Ok(())
    }

    /// The driver and volume handle of a claim: its PV's CSI source, or for
    /// a claim not bound (yet) its class's provisioner and a made-up handle.
    fn csi_driver_info(
        &self,
        claim: &PersistentVolumeClaim,
        storage: &StorageSnapshot,
    ) -> Option<(String, String)> {
        let pv_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .unwrap_or_default();
        match storage.volume(pv_name).filter(|_| !pv_name.is_empty()) {
            Some(pv) => {
                let csi = pv.spec.as_ref()?.csi.as_ref()?;
                Some((csi.driver.clone(), csi.volume_handle.clone()))
            }
            None => {
                // No class, or one that is gone: an Immediate claim, bound
                // before scheduling, so not counted.
                let class = storage.class(&claim_class(claim))?;
                Some((
                    class.provisioner.clone(),
                    format!(
                        "{}-{}/{}",
                        self.random_volume_id_prefix,
                        claim.metadata.namespace.as_deref().unwrap_or("default"),
                        claim.metadata.name.as_deref().unwrap_or_default()
                    ),
                ))
            }
        }
    }
}

/// The node's limits: the legacy `attachable-volumes-*` allocatable entries,
/// overridden by the CSINode's per-driver counts.
fn volume_limits(node: &NodeInfo, csi_node: Option<&CSINode>) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = node
        .node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(ATTACHABLE_VOLUMES_PREFIX))
        .filter_map(|(k, q)| {
            berth_api::quantity::Quantity::parse(&q.0)
                .ok()
                .map(|q| (k.clone(), q.value()))
        })
        .collect();
    for d in csi_node.iter().flat_map(|n| n.spec.drivers.iter()) {
        if let Some(count) = d.allocatable.as_ref().and_then(|a| a.count) {
            out.insert(attach_limit_key(&d.name), i64::from(count));
        }
    }
    out
}

impl Plugin for CsiLimits {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl PreFilter for CsiLimits {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snap: &Snapshot) -> Status {
        let has_claims = pod
            .pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some());
        if !has_claims {
            return Status::new(Code::Skip, Vec::new());
        }
        let mut new_volumes = Volumes::new();
        let new_volumes = self
            .attachable_volumes(&pod.pod, &snap.storage, true, &mut new_volumes)
            .map(|()| new_volumes);
        state.write(
            STATE_KEY,
            StateData {
                storage: snap.storage.clone(),
                new_volumes,
            },
        );
        Status::success()
    }
}

impl Filter for CsiLimits {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(data) = state.read::<StateData>(STATE_KEY) else {
            return Status::error(format!("cannot read {STATE_KEY:?} from cycleState"));
        };
        let mut new_volumes = match &data.new_volumes {
            Ok(v) if v.is_empty() => return Status::success(),
            Ok(v) => v.clone(),
            Err(s) => return s.clone(),
        };
        let limits = volume_limits(node, data.storage.csi_node(node.name()).map(|n| &**n));
        if limits.is_empty() {
            return Status::success();
        }
        let mut attached = Volumes::new();
        for p in &node.pods {
            if let Err(s) = self.attachable_volumes(&p.pod, &data.storage, false, &mut attached) {
                return s;
            }
        }
        let mut attached_count: HashMap<&str, i64> = HashMap::new();
        for (unique, key) in &attached {
            // A volume the node already has does not count again.
            new_volumes.remove(unique);
            *attached_count.entry(key).or_default() += 1;
        }
        let mut new_count: HashMap<&str, i64> = HashMap::new();
        for key in new_volumes.values() {
            *new_count.entry(key).or_default() += 1;
        }
        for (key, count) in new_count {
            if let Some(max) = limits.get(key)
                && attached_count.get(key).copied().unwrap_or(0) + count > *max
            {
                return Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests;
