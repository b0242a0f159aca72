//! Berth's built-in local-path provisioner (as k3s ships one): the default
//! StorageClass `local-path` provisions a directory under `<data-dir>/storage`
//! on the node a claim's first pod is scheduled to.
//!
//! It runs in every node agent, for its own node only, as an external
//! provisioner does for upstream's PV controller: the controller marks a claim
//! of the class with `volume.kubernetes.io/storage-provisioner:
//! berth.dev/local-path`, the scheduler adds `volume.kubernetes.io/selected-node`
//! (the class is `WaitForFirstConsumer`), and the agent of that node makes the
//! directory and a `local` PersistentVolume pinned to the node and pre-bound
//! to the claim (`claimRef`), which the PV controller then binds. When the
//! claim is gone and the PV is Released with reclaim policy Delete, the agent
//! removes the directory, then the PV. The decisions here are pure; `run`
//! holds the loop.

pub mod run;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use berth_api::storage::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_DYNAMICALLY_PROVISIONED, ANN_IS_DEFAULT_CLASS,
    ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER, LOCAL_PATH_PROVISIONER,
};
use k8s_openapi::api::core::v1::{
    LocalVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The default StorageClass's name (k3s's).
pub const CLASS_NAME: &str = "local-path";

const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The StorageClass `berth server` creates unless `--default-storage-class=false`.
pub fn default_storage_class() -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(CLASS_NAME.into()),
            annotations: Some(BTreeMap::from([(
                ANN_IS_DEFAULT_CLASS.to_string(),
                "true".to_string(),
            )])),
            ..Default::default()
        },
        provisioner: LOCAL_PATH_PROVISIONER.into(),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("WaitForFirstConsumer".into()),
        ..Default::default()
    }
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The claim waits for this node's local-path provisioner.
pub fn wants_provisioning(claim: &PersistentVolumeClaim, node: &str) -> bool {
    let m = &claim.metadata;
    let provisioner = annotation(m, ANN_STORAGE_PROVISIONER)
        .or_else(|| annotation(m, ANN_BETA_STORAGE_PROVISIONER));
    let unbound = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or("")
        .is_empty();
    provisioner == Some(LOCAL_PATH_PROVISIONER)
        && annotation(m, ANN_SELECTED_NODE) == Some(node)
        && unbound
        && m.deletion_timestamp.is_none()
        && m.uid.is_some()
}

/// The PV's name: `pvc-<claim uid>`, as upstream's external provisioners name them.
pub fn volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or_default())
}

/// The volume's directory: `<storage>/pvc-<uid>_<namespace>_<claim>` (k3s's layout).
pub fn volume_dir(storage: &Path, claim: &PersistentVolumeClaim) -> PathBuf {
    storage.join(format!(
        "{}_{}_{}",
        volume_name(claim),
        claim.metadata.namespace.as_deref().unwrap_or("default"),
        claim.metadata.name.as_deref().unwrap_or_default()
    ))
}

/// The PV for `claim` on `node` at `dir`, or why the class cannot provision it.
pub fn volume_for(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: &str,
    dir: &Path,
) -> Result<PersistentVolume, String> {
    let spec = claim.spec.clone().unwrap_or_default();
    let modes = spec.access_modes.clone().unwrap_or_default();
    if let Some(m) = modes
        .iter()
        .find(|m| !matches!(m.as_str(), "ReadWriteOnce" | "ReadWriteOncePod"))
    {
        return Err(format!(
            "local-path only supports ReadWriteOnce and ReadWriteOncePod access modes, not {m}"
        ));
    }
    if spec.volume_mode.as_deref() == Some("Block") {
        return Err("local-path only supports volumeMode Filesystem".into());
    }
    if class.parameters.as_ref().is_some_and(|p| !p.is_empty()) {
        return Err("local-path takes no StorageClass parameters".into());
    }
    let Some(storage) = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .cloned()
    else {
        return Err("claim has no storage request".into());
    };
    Ok(PersistentVolume {
        metadata: ObjectMeta {
            name: Some(volume_name(claim)),
            annotations: Some(BTreeMap::from([(
                ANN_DYNAMICALLY_PROVISIONED.to_string(),
                LOCAL_PATH_PROVISIONER.to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".to_string(), storage)])),
            access_modes: Some(if modes.is_empty() {
                vec!["ReadWriteOnce".into()]
            } else {
                modes
            }),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: claim.metadata.namespace.clone(),
                name: claim.metadata.name.clone(),
                uid: claim.metadata.uid.clone(),
                resource_version: claim.metadata.resource_version.clone(),
                ..Default::default()
            }),
            local: Some(LocalVolumeSource {
                path: dir.display().to_string(),
                fs_type: None,
            }),
            node_affinity: Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: HOSTNAME_LABEL.into(),
                            operator: "In".into(),
                            values: Some(vec![node.to_string()]),
                        }]),
                        match_fields: None,
                    }],
                }),
            }),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".into()),
            ),
            storage_class_name: class.metadata.name.clone(),
            mount_options: class.mount_options.clone(),
            volume_mode: Some("Filesystem".into()),
            ..Default::default()
        }),
        status: None,
    })
}

/// The node a local-path PV is pinned to: its single `kubernetes.io/hostname
/// In [node]` term (the only shape this provisioner makes).
pub fn pinned_node(pv: &PersistentVolume) -> Option<&str> {
    let terms = &pv
        .spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?
        .node_selector_terms;
    let [term] = terms.as_slice() else {
        return None;
    };
    if term.match_fields.as_ref().is_some_and(|f| !f.is_empty()) {
        return None;
    }
    let [req] = term.match_expressions.as_deref()? else {
        return None;
    };
    match (
        req.key.as_str(),
        req.operator.as_str(),
        req.values.as_deref(),
    ) {
        (HOSTNAME_LABEL, "In", Some([v])) => Some(v.as_str()),
        _ => None,
    }
}

/// A PV this provisioner made (for any node).
pub fn is_local_path(pv: &PersistentVolume) -> bool {
    annotation(&pv.metadata, ANN_DYNAMICALLY_PROVISIONED) == Some(LOCAL_PATH_PROVISIONER)
}

/// The Released local-path PV of this node whose reclaim policy is Delete: its
/// directory and object are to go.
pub fn wants_deletion(pv: &PersistentVolume, node: &str) -> bool {
    let phase = pv.status.as_ref().and_then(|s| s.phase.as_deref());
    let policy = pv
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref());
    is_local_path(pv)
        && pinned_node(pv) == Some(node)
        && phase == Some("Released")
        && policy == Some("Delete")
        && pv.metadata.deletion_timestamp.is_none()
}

/// The directory of a local-path PV, if it lies under `storage` (a PV edited
/// to point elsewhere is never removed).
pub fn owned_dir(pv: &PersistentVolume, storage: &Path) -> Option<PathBuf> {
    let path = PathBuf::from(&pv.spec.as_ref()?.local.as_ref()?.path);
    let name = path.file_name()?.to_str()?;
    let pv_name = pv.metadata.name.as_deref()?;
    (path.parent() == Some(storage) && name.starts_with(&format!("{pv_name}_"))).then_some(path)
}

#[cfg(test)]
mod tests;
