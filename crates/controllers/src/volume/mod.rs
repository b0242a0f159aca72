//! The volume controllers of kube-controller-manager (upstream's
//! `pkg/controller/volume`): the PersistentVolume binder (`persistentvolume/`,
//! upstream's `persistent-volume-binder`), and the PVC and PV protection
//! controllers that lift the `kubernetes.io/pvc-protection` and
//! `kubernetes.io/pv-protection` finalizers once an object is no longer in use.

pub mod persistentvolume;
pub mod pvcprotection;
pub mod pvprotection;

use k8s_openapi::api::core::v1::Pod;

/// The claims a pod's volumes name, in the pod's namespace:
/// `persistentVolumeClaim.claimName`, and `<pod>-<volume>` for a generic
/// ephemeral volume (upstream's `ephemeral.VolumeClaimName`); the bool says
/// the claim is an ephemeral one (it must then be controlled by the pod).
pub fn pod_claims(pod: &Pod) -> Vec<(String, bool)> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| berth_api::storage::volume_claim_name(pod, v))
        .collect()
}

/// Upstream's `IsPodTerminated` as the volume controllers read it: the pod
/// finished (Succeeded or Failed) and will never use its volumes again.
pub fn pod_is_terminated(pod: &Pod) -> bool {
    crate::podutil::is_finished(pod)
}
