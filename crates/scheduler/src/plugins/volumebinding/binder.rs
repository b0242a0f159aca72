//! The volume binder's decisions (upstream `volumebinding/binder.go`), as
//! pure functions over one view of the storage objects: how a pod's claims
//! split into bound / delayed / immediate, what a node offers them
//! (FindPodVolumes), what Reserve writes (GetBindVolumeToClaim) and when
//! PreBind's wait is over (checkBindings).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use berth_api::quantity::Quantity;
use berth_api::storage::{
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, NO_PROVISIONER,
    check_node_affinity, claim_class, claim_request, find_matching_volume, is_bound_to_claim,
    volume_claim_name, volume_is_for_pod,
};
use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod, TopologySelectorTerm,
};
use k8s_openapi::api::storage::v1::StorageClass;

use super::assume_cache::View;
use crate::framework::storage::claim_key;

/// Upstream's ConflictReasons, in the order FindPodVolumes appends them.
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const ERR_REASON_BIND_CONFLICT: &str =
    "node(s) didn't find available persistent volumes to bind";
pub const ERR_REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
pub const ERR_REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// Why PreFilter turns a pod away: unresolvable (`Unresolvable`) or an
/// internal error (`Error`), as upstream's statuses.
#[derive(Debug, PartialEq, Eq)]
pub enum ClaimsError {
    Unresolvable(String),
    Error(String),
}

/// A pod's claims as PreFilter sorts them (upstream's PodVolumeClaims).
#[derive(Clone, Debug, Default)]
pub struct PodVolumeClaims {
    /// Fully bound claims with their volume (None: the volume is gone).
    pub bound: Vec<(Arc<PersistentVolumeClaim>, Option<Arc<PersistentVolume>>)>,
    /// Unbound claims of WaitForFirstConsumer classes: the scheduler picks.
    pub unbound_delay_binding: Vec<Arc<PersistentVolumeClaim>>,
    /// Candidate volumes of those claims' classes, by class.
    pub volumes_by_class: HashMap<String, Vec<Arc<PersistentVolume>>>,
}

impl PodVolumeClaims {
    pub fn all_bound(&self) -> bool {
        self.unbound_delay_binding.is_empty()
    }
}

/// What one node offers the pod's unbound claims (upstream's PodVolumes).
#[derive(Clone, Debug, Default)]
pub struct PodVolumes {
    /// (claim, volume to bind it to).
    pub static_bindings: Vec<(Arc<PersistentVolumeClaim>, Arc<PersistentVolume>)>,
    /// Claims to provision on this node.
    pub dynamic_provisions: Vec<Arc<PersistentVolumeClaim>>,
    /// The node's labels, for PreBind's node affinity checks.
    pub node_labels: BTreeMap<String, String>,
}

/// Fully bound as upstream's isPVCFullyBound: a volume name and the PV
/// controller's bind-completed annotation.
pub fn is_claim_fully_bound(c: &PersistentVolumeClaim) -> bool {
    let named = c
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty());
    named
        && c.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(ANN_BIND_COMPLETED))
}

fn claim_name(c: &PersistentVolumeClaim) -> &str {
    c.metadata.name.as_deref().unwrap_or_default()
}

fn volume_name_of(c: &PersistentVolumeClaim) -> &str {
    c.spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default()
}

/// True when the pod has any claim (a `persistentVolumeClaim` or generic
/// ephemeral volume).
pub fn pod_has_claims(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
}

/// Upstream's `podHasPVCs` checks then `GetPodVolumeClaims`: every claim
/// exists, is not lost or being deleted, an ephemeral one belongs to the
/// pod; then splits them. Unbound immediate claims turn the pod away.
pub fn pod_volume_claims(pod: &Pod, view: &View<'_>) -> Result<PodVolumeClaims, ClaimsError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut claims = Vec::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some((name, ephemeral)) = volume_claim_name(pod, v) else {
            continue;
        };
        let Some(c) = view.claim(ns, &name) else {
            return Err(ClaimsError::Unresolvable(if ephemeral {
                format!(
                    "waiting for ephemeral volume controller to create the persistentvolumeclaim {name:?}"
                )
            } else {
                format!("persistentvolumeclaim {name:?} not found")
            }));
        };
        if c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
            return Err(ClaimsError::Unresolvable(format!(
                "persistentvolumeclaim {name:?} bound to non-existent persistentvolume {:?}",
                volume_name_of(&c)
            )));
        }
        if c.metadata.deletion_timestamp.is_some() {
            return Err(ClaimsError::Unresolvable(format!(
                "persistentvolumeclaim {name:?} is being deleted"
            )));
        }
        if ephemeral {
            volume_is_for_pod(pod, &c).map_err(ClaimsError::Unresolvable)?;
        }
        claims.push(c);
    }

    let mut out = PodVolumeClaims::default();
    let mut immediate = 0;
    for c in claims {
        if is_claim_fully_bound(&c) {
            let pv = view.volume(volume_name_of(&c));
            out.bound.push((c, pv));
            continue;
        }
        let delay = is_delay_binding_mode(&c, view).map_err(ClaimsError::Error)?;
        // A claim pre-bound to a volume name is the PV controller's to
        // finish, as an immediate one.
        if delay && volume_name_of(&c).is_empty() {
            let class = claim_class(&c);
            if !out.volumes_by_class.contains_key(&class) {
                out.volumes_by_class
                    .insert(class.clone(), view.volumes_of_class(&class));
            }
            out.unbound_delay_binding.push(c);
        } else {
            immediate += 1;
        }
    }
    if immediate > 0 {
        return Err(ClaimsError::Unresolvable(
            ERR_REASON_UNBOUND_IMMEDIATE.into(),
        ));
    }
    Ok(out)
}

/// Upstream's `IsDelayBindingMode`: no class or a missing class means
/// Immediate; a class without a binding mode is an error.
fn is_delay_binding_mode(c: &PersistentVolumeClaim, view: &View<'_>) -> Result<bool, String> {
    let class = claim_class(c);
    if class.is_empty() {
        return Ok(false);
    }
    let Some(sc) = view.class(&class) else {
        return Ok(false);
    };
    match sc.volume_binding_mode.as_deref() {
        None => Err(format!(
            "VolumeBindingMode not set for StorageClass {class:?}"
        )),
        Some(m) => Ok(m == "WaitForFirstConsumer"),
    }
}

/// Upstream's FindPodVolumes for one node: the reasons it does not fit (in
/// upstream's order), or what binding there would take. `Err` is an
/// internal error (a claim without class, a missing class, a bad selector).
pub fn find_pod_volumes(
    claims: &PodVolumeClaims,
    node_name: &str,
    node_labels: &BTreeMap<String, String>,
    view: &View<'_>,
) -> Result<(PodVolumes, Vec<&'static str>), String> {
    let mut out = PodVolumes {
        node_labels: node_labels.clone(),
        ..Default::default()
    };
    let mut bound_satisfied = true;
    let mut bound_pvs_found = true;
    let mut unbound_satisfied = true;

    // checkBoundClaims: stops at the first missing volume or mismatch.
    for (_, pv) in &claims.bound {
        let Some(pv) = pv else {
            bound_pvs_found = false;
            break;
        };
        if check_node_affinity(pv, node_labels).is_err() {
            bound_satisfied = false;
            break;
        }
    }

    'unbound: {
        if claims.unbound_delay_binding.is_empty() {
            break 'unbound;
        }
        let mut to_find = Vec::new();
        let mut to_provision = Vec::new();
        for c in &claims.unbound_delay_binding {
            match c
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANN_SELECTED_NODE))
            {
                // Another pod of this claim already chose a node for it.
                Some(selected) if selected != node_name => {
                    unbound_satisfied = false;
                    break 'unbound;
                }
                Some(_) => to_provision.push(c.clone()),
                None => to_find.push(c.clone()),
            }
        }
        if !to_find.is_empty() {
            let (found, bindings, unmatched) = find_matching_volumes(claims, to_find, node_labels)?;
            unbound_satisfied = found;
            out.static_bindings = bindings;
            to_provision.extend(unmatched);
        }
        if !to_provision.is_empty() {
            match check_volume_provisions(&to_provision, node_labels, view)? {
                Some(dynamic) => {
                    unbound_satisfied = true;
                    out.dynamic_provisions = dynamic;
                }
                None => unbound_satisfied = false,
            }
        }
    }

    let mut reasons = Vec::new();
    if !bound_satisfied {
        reasons.push(ERR_REASON_NODE_CONFLICT);
    }
    if !unbound_satisfied {
        reasons.push(ERR_REASON_BIND_CONFLICT);
    }
    if !bound_pvs_found {
        reasons.push(ERR_REASON_PV_NOT_EXIST);
    }
    Ok((out, reasons))
}

type Matches = (
    bool,
    Vec<(Arc<PersistentVolumeClaim>, Arc<PersistentVolume>)>,
    Vec<Arc<PersistentVolumeClaim>>,
);

/// Upstream's findMatchingVolumes: smallest claims first, each volume used
/// once; returns whether all matched, the bindings and the unmatched claims.
fn find_matching_volumes(
    claims: &PodVolumeClaims,
    mut to_find: Vec<Arc<PersistentVolumeClaim>>,
    node_labels: &BTreeMap<String, String>,
) -> Result<Matches, String> {
    to_find.sort_by(|a, b| {
        let (a, b) = (
            claim_request(a).unwrap_or_else(Quantity::zero),
            claim_request(b).unwrap_or_else(Quantity::zero),
        );
        a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut chosen = BTreeSet::new();
    let mut all = true;
    let mut bindings = Vec::new();
    let mut unmatched = Vec::new();
    for c in to_find {
        let candidates = claims
            .volumes_by_class
            .get(&claim_class(&c))
            .map(Vec::as_slice)
            .unwrap_or_default();
        let refs: Vec<&PersistentVolume> = candidates.iter().map(|v| &**v).collect();
        let found = find_matching_volume(&c, &refs, Some(node_labels), &chosen, true)?;
        let Some(pv) = found else {
            all = false;
            unmatched.push(c);
            continue;
        };
        let name = pv.metadata.name.clone().unwrap_or_default();
        let pv = candidates
            .iter()
            .find(|v| v.metadata.name.as_deref() == Some(name.as_str()))
            .cloned()
            .unwrap_or_else(|| Arc::new(pv.clone()));
        chosen.insert(name);
        bindings.push((c, pv));
    }
    Ok((all, bindings, unmatched))
}

/// Upstream's checkVolumeProvisions: every claim's class provisions
/// (a provisioner other than `kubernetes.io/no-provisioner`) and allows this
/// node's topology. `None` means the node cannot provision them.
fn check_volume_provisions(
    to_provision: &[Arc<PersistentVolumeClaim>],
    node_labels: &BTreeMap<String, String>,
    view: &View<'_>,
) -> Result<Option<Vec<Arc<PersistentVolumeClaim>>>, String> {
    let mut out = Vec::new();
    for c in to_provision {
        let class = claim_class(c);
        if class.is_empty() {
            return Err(format!("no class for claim {:?}", claim_key(c)));
        }
        let Some(sc) = view.class(&class) else {
            return Err(format!("failed to find storage class {class:?}"));
        };
        if sc.provisioner.is_empty() || sc.provisioner == NO_PROVISIONER {
            return Ok(None);
        }
        if !match_topology_selector_terms(sc, node_labels) {
            return Ok(None);
        }
        out.push(c.clone());
    }
    Ok(Some(out))
}

/// Upstream's `MatchTopologySelectorTerms` over a class's
/// `allowedTopologies`: none allows every node; otherwise one term whose
/// every expression has the node's label among its values (an empty term
/// selects nothing).
pub fn match_topology_selector_terms(sc: &StorageClass, labels: &BTreeMap<String, String>) -> bool {
    let terms: &[TopologySelectorTerm] = sc.allowed_topologies.as_deref().unwrap_or_default();
    if terms.is_empty() {
        return true;
    }
    terms.iter().any(|t| {
        let exprs = t.match_label_expressions.as_deref().unwrap_or_default();
        !exprs.is_empty()
            && exprs.iter().all(|e| {
                labels
                    .get(&e.key)
                    .is_some_and(|v| e.values.iter().any(|w| w == v))
            })
    })
}

/// Upstream's `GetBindVolumeToClaim`: the volume with its claimRef naming
/// the claim, marked bound-by-controller unless it was already bound to it
/// (pre-bound by a user); `None` when nothing changes.
pub fn bind_volume_to_claim(
    pv: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> Option<PersistentVolume> {
    let set_by_controller = !is_bound_to_claim(pv, claim);
    let mut out = pv.clone();
    let mut dirty = false;
    let r = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    let same = r.is_some_and(|r| {
        r.name.as_deref() == claim.metadata.name.as_deref()
            && r.namespace.as_deref() == claim.metadata.namespace.as_deref()
            && r.uid.as_deref() == claim.metadata.uid.as_deref()
    });
    if !same {
        out.spec.get_or_insert_default().claim_ref = Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            namespace: claim.metadata.namespace.clone(),
            name: claim.metadata.name.clone(),
            uid: claim.metadata.uid.clone(),
            resource_version: claim.metadata.resource_version.clone(),
            ..Default::default()
        });
        dirty = true;
    }
    let annotations = out.metadata.annotations.get_or_insert_default();
    if set_by_controller && !annotations.contains_key(ANN_BOUND_BY_CONTROLLER) {
        annotations.insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
        dirty = true;
    }
    if out
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.is_empty())
    {
        out.metadata.annotations = None;
    }
    dirty.then_some(out)
}

/// The claim with the node chosen for its provisioning.
pub fn claim_with_selected_node(c: &PersistentVolumeClaim, node: &str) -> PersistentVolumeClaim {
    let mut out = c.clone();
    out.metadata
        .annotations
        .get_or_insert_default()
        .insert(ANN_SELECTED_NODE.into(), node.into());
    out
}

/// Resource versions compare as numbers (etcd revisions); a version that
/// does not parse is never "older".
fn older(seen: Option<&str>, written: Option<&str>) -> bool {
    match (
        seen.and_then(|s| s.parse::<u64>().ok()),
        written.and_then(|s| s.parse::<u64>().ok()),
    ) {
        (Some(seen), Some(written)) => seen < written,
        _ => false,
    }
}

/// Upstream's checkBindings: `Ok(true)` once every claim PreBind wrote is
/// fully bound; `Ok(false)` to keep waiting; `Err` when the binding was
/// undone or provisioning failed, so the pod is scheduled again.
pub fn check_bindings(
    node: &str,
    node_labels: &BTreeMap<String, String>,
    bindings: &[(Arc<PersistentVolumeClaim>, Arc<PersistentVolume>)],
    provisions: &[Arc<PersistentVolumeClaim>],
    storage: &crate::framework::StorageSnapshot,
) -> Result<bool, String> {
    for (claim, written) in bindings {
        let pv_name = written.metadata.name.as_deref().unwrap_or_default();
        let Some(pv) = storage.volume(pv_name) else {
            return Err(format!(
                "failed to check binding: persistentvolume {pv_name:?} not found"
            ));
        };
        let ns = claim.metadata.namespace.as_deref().unwrap_or("default");
        let Some(pvc) = storage.claim(ns, claim_name(claim)) else {
            return Err(format!(
                "failed to check binding: persistentvolumeclaim {:?} not found",
                claim_key(claim)
            ));
        };
        // The informer has not caught up with our own write yet.
        if older(
            pv.metadata.resource_version.as_deref(),
            written.metadata.resource_version.as_deref(),
        ) {
            return Ok(false);
        }
        if let Err(e) = check_node_affinity(pv, node_labels) {
            return Err(format!(
                "pv {pv_name:?} node affinity doesn't match node {node:?}: {e}"
            ));
        }
        let claim_ref_uid = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| r.uid.as_deref())
            .unwrap_or_default();
        if claim_ref_uid.is_empty() {
            return Err(format!("ClaimRef got reset for pv {pv_name:?}"));
        }
        if !is_claim_fully_bound(pvc) {
            return Ok(false);
        }
    }
    for written in provisions {
        let ns = written.metadata.namespace.as_deref().unwrap_or("default");
        let name = claim_name(written);
        let Some(pvc) = storage.claim(ns, name) else {
            return Err(format!(
                "failed to check provisioning pvc: persistentvolumeclaim {:?} not found",
                claim_key(written)
            ));
        };
        if older(
            pvc.metadata.resource_version.as_deref(),
            written.metadata.resource_version.as_deref(),
        ) {
            return Ok(false);
        }
        let Some(annotations) = pvc.metadata.annotations.as_ref() else {
            return Err(format!("selectedNode annotation reset for PVC {name:?}"));
        };
        // A provisioner that fails removes the annotation: schedule again.
        if annotations.get(ANN_SELECTED_NODE).map(String::as_str) != Some(node) {
            return Err(format!("provisioning failed for PVC {name:?}"));
        }
        let volume = volume_name_of(pvc);
        if !volume.is_empty() {
            // Not seen yet: the informer lags behind the PV controller.
            let Some(pv) = storage.volume(volume) else {
                return Ok(false);
            };
            if let Err(e) = check_node_affinity(pv, node_labels) {
                return Err(format!(
                    "pv {volume:?} node affinity doesn't match node {node:?}: {e}"
                ));
            }
        }
        if !is_claim_fully_bound(pvc) {
            return Ok(false);
        }
    }
    Ok(true)
}
