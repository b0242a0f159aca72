//! Storage facts shared by the PV controller, the scheduler's VolumeBinding
//! plugin, the storage admission plugins and the node agent: upstream's
//! annotations and finalizers, and the claim ↔ volume matching rules of
//! `pkg/volume/util` and `component-helpers/storage/volume`
//! (FindMatchingVolume, CheckNodeAffinity, access and volume modes).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::quantity::Quantity;
use crate::selector::LabelSelector;

pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
pub const ANN_DYNAMICALLY_PROVISIONED: &str = "pv.kubernetes.io/provisioned-by";
pub const ANN_IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
pub const ANN_BETA_IS_DEFAULT_CLASS: &str = "storageclass.beta.kubernetes.io/is-default-class";
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";
/// A StorageClass provisioner meaning "no dynamic provisioning".
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// Berth's built-in local-path provisioner (the default StorageClass `local-path`).
pub const LOCAL_PATH_PROVISIONER: &str = "berth.dev/local-path";

fn annotation<'a>(a: &'a Option<BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    a.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

/// The claim's class: the beta annotation first, then `spec.storageClassName`;
/// "" when none (upstream's GetPersistentVolumeClaimClass).
pub fn claim_class(pvc: &PersistentVolumeClaim) -> String {
    if let Some(c) = annotation(&pvc.metadata.annotations, ANN_BETA_STORAGE_CLASS) {
        return c.to_string();
    }
    pvc.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// The volume's class (upstream's GetPersistentVolumeClass).
pub fn volume_class(pv: &PersistentVolume) -> String {
    if let Some(c) = annotation(&pv.metadata.annotations, ANN_BETA_STORAGE_CLASS) {
        return c.to_string();
    }
    pv.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// Either default-class annotation is `"true"`.
pub fn is_default_class(sc: &StorageClass) -> bool {
    [ANN_IS_DEFAULT_CLASS, ANN_BETA_IS_DEFAULT_CLASS]
        .iter()
        .any(|k| annotation(&sc.metadata.annotations, k) == Some("true"))
}

/// The volume's claimRef names the claim (and its uid, when set).
pub fn is_bound_to_claim(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    let ns = pvc.metadata.namespace.as_deref().unwrap_or_default();
    if r.name.as_deref() != pvc.metadata.name.as_deref()
        || r.namespace.as_deref().unwrap_or_default() != ns
    {
        return false;
    }
    match r.uid.as_deref().filter(|u| !u.is_empty()) {
        Some(uid) => pvc.metadata.uid.as_deref() == Some(uid),
        None => true,
    }
}

/// The volume's `spec.nodeAffinity.required` against a node's labels (terms
/// ORed); a volume without node affinity fits every node. The error is
/// upstream's ("no matching NodeSelectorTerms").
pub fn check_node_affinity(
    pv: &PersistentVolume,
    node_labels: &BTreeMap<String, String>,
) -> Result<(), String> {
    let Some(required) = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
    else {
        return Ok(());
    };
    // Upstream's CheckNodeAffinity matches the terms against a Node that
    // carries only the labels, so a `matchFields` `metadata.name` term sees an
    // empty name (`In` never matches, `NotIn` always does); it must not be
    // read from the `kubernetes.io/hostname` label.
    if crate::nodeselector::selector_matches(required, node_labels, "") {
        Ok(())
    } else {
        Err("no matching NodeSelectorTerms".into())
    }
}

fn modes(v: Option<&Vec<String>>) -> BTreeSet<&str> {
    v.into_iter().flatten().map(String::as_str).collect()
}

/// Every access mode the claim asks for is one the volume offers.
pub fn check_access_modes(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let want = modes(pvc.spec.as_ref().and_then(|s| s.access_modes.as_ref()));
    let have = modes(pv.spec.as_ref().and_then(|s| s.access_modes.as_ref()));
    want.is_subset(&have)
}

/// Claim and volume differ in `volumeMode` (unset is Filesystem on both).
pub fn volume_mode_mismatch(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let claim = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or("Filesystem");
    let volume = pv
        .spec
        .as_ref()
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or("Filesystem");
    claim != volume
}

/// The claim's `spec.resources.requests.storage`.
pub fn claim_request(pvc: &PersistentVolumeClaim) -> Option<Quantity> {
    let q = pvc
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")?;
    Quantity::parse(&q.0).ok()
}

/// The volume's `spec.capacity.storage`.
pub fn volume_capacity(pv: &PersistentVolume) -> Option<Quantity> {
    let q = pv.spec.as_ref()?.capacity.as_ref()?.get("storage")?;
    Quantity::parse(&q.0).ok()
}

/// The volume upstream's FindMatchingVolume picks for `claim` among `volumes`:
/// one pre-bound to the claim (claimRef) wins; else the smallest Available
/// volume of the claim's class with enough capacity, the claim's access modes,
/// the same volume mode, matching the claim's selector and, on the
/// scheduler's path (`node_labels` given), the node's labels. With
/// `delay_binding` and no node, only pre-bound volumes match (binding waits
/// for the first consumer). `excluded` names volumes already taken this cycle.
pub fn find_matching_volume<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &[&'a PersistentVolume],
    node_labels: Option<&BTreeMap<String, String>>,
    excluded: &BTreeSet<String>,
    delay_binding: bool,
) -> Result<Option<&'a PersistentVolume>, String> {
    let requested = claim_request(claim).unwrap_or_else(Quantity::zero);
    let class = claim_class(claim);
    let selector = match claim.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        Some(sel) => {
            let v = serde_json::to_value(sel).map_err(|e| e.to_string())?;
            Some(LabelSelector::from_meta(&v).map_err(|e| e.0)?)
        }
        None => None,
    };
    let mut smallest: Option<(&'a PersistentVolume, (usize, Quantity))> = None;
    for &pv in volumes {
        if excluded.contains(pv.metadata.name.as_deref().unwrap_or_default()) {
            continue;
        }
        let Some(capacity) = volume_capacity(pv) else {
            continue;
        };
        if capacity < requested || volume_mode_mismatch(claim, pv) {
            continue;
        }
        if pv.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let affinity_ok = node_labels.is_none_or(|l| check_node_affinity(pv, l).is_ok());
        if is_bound_to_claim(pv, claim) {
            // A pre-bound volume is the only candidate: if the node does not
            // fit it, nothing matches.
            return Ok(affinity_ok.then_some(pv));
        }
        if node_labels.is_none() && delay_binding {
            continue;
        }
        let spec = pv.spec.as_ref();
        if spec.and_then(|s| s.claim_ref.as_ref()).is_some() {
            continue;
        }
        // Only Available volumes: a volume still settling (Pending, no
        // status yet) becomes Available on the controller's next pass, and
        // binding it now mostly ends in a write conflict (upstream's reason).
        if pv.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Available") {
            continue;
        }
        let labels = pv.metadata.labels.clone().unwrap_or_default();
        if selector.as_ref().is_some_and(|s| !s.matches(&labels)) {
            continue;
        }
        if volume_class(pv) != class || !affinity_ok {
            continue;
        }
        if !check_access_modes(claim, pv) {
            continue;
        }
        // Upstream's index tries volumes with the fewest access modes first,
        // then the smallest.
        let key = (
            modes(spec.and_then(|s| s.access_modes.as_ref())).len(),
            capacity,
        );
        if smallest.as_ref().is_none_or(|(_, k)| key < *k) {
            smallest = Some((pv, key));
        }
    }
    Ok(smallest.map(|(pv, _)| pv))
}

/// The claim a pod volume uses, if any: `persistentVolumeClaim.claimName`,
/// or `<pod>-<volume>` for a generic ephemeral volume (upstream's
/// `ephemeral.VolumeClaimName`); the bool says it is ephemeral. The one rule
/// the scheduler, the volume controllers and the node agent share.
pub fn volume_claim_name(pod: &Pod, v: &Volume) -> Option<(String, bool)> {
    if let Some(c) = &v.persistent_volume_claim {
        return Some((c.claim_name.clone(), false));
    }
    v.ephemeral.as_ref().map(|_| {
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        (format!("{pod_name}-{}", v.name), true)
    })
}

/// Upstream's `ephemeral.VolumeIsForPod`: an ephemeral volume's claim must
/// be in the pod's namespace and controlled by the pod.
pub fn volume_is_for_pod(pod: &Pod, claim: &PersistentVolumeClaim) -> Result<(), String> {
    let pod_ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let claim_ns = claim.metadata.namespace.as_deref().unwrap_or("default");
    let controlled = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == pod.metadata.uid.as_ref());
    if claim_ns != pod_ns || !controlled {
        return Err(format!(
            "PVC {claim_ns}/{} was not created for pod {pod_ns}/{} (pod is not owner)",
            claim.metadata.name.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
