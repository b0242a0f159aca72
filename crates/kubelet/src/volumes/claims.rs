//! PersistentVolumeClaim-backed volumes: from a pod's volume to the host path
//! its containers bind-mount, as upstream's volume manager resolves them
//! (desired_state_of_world_populator: claim → bound PV → plugin).
//!
//! A volume names a claim directly (`persistentVolumeClaim.claimName`) or
//! through a generic ephemeral volume (the claim `<pod>-<volume>` the ephemeral
//! controller creates). The claim must be Bound and not being deleted; its PV's
//! source decides the plugin. Berth mounts `local` and `hostPath` PVs (the
//! built-in local-path provisioner makes `local` ones) by bind-mounting their
//! directory into the containers; every other source is a clear error, never a
//! silently missing volume.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Volume};

use super::VolumeError;

/// The claim a pod volume uses, if it is claim-backed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    pub claim: String,
    /// `persistentVolumeClaim.readOnly`: every mount of the volume read-only.
    pub read_only: bool,
    /// A generic ephemeral volume: the claim must be owned by the pod.
    pub ephemeral: bool,
}

/// The claim behind `volume` of `pod` (upstream's `ephemeral.VolumeClaimName`
/// for generic ephemeral volumes).
pub fn claim_of(pod: &Pod, volume: &Volume) -> Option<ClaimRef> {
    let (claim, ephemeral) = berth_api::storage::volume_claim_name(pod, volume)?;
    let read_only = volume
        .persistent_volume_claim
        .as_ref()
        .and_then(|c| c.read_only)
        .unwrap_or(false);
    Some(ClaimRef {
        claim,
        read_only,
        ephemeral,
    })
}

/// A claim volume ready to be bind-mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimMount {
    pub pv: String,
    pub path: PathBuf,
    pub read_only: bool,
    /// The PV's plugin supports ownership management (`fsGroup` applies):
    /// upstream's local volume does, hostPath does not.
    pub supports_ownership: bool,
}

/// What the agent needs to mount a claim volume: the claim (None when it does
/// not exist) and its bound PV (None when absent). Errors carry upstream's
/// wording (the kubelet's populator and volume plugins).
pub fn resolve(
    pod: &Pod,
    r: &ClaimRef,
    claim: Option<&PersistentVolumeClaim>,
    pv: Option<&PersistentVolume>,
) -> Result<ClaimMount, VolumeError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let fail = |m: String| Err(VolumeError::Claim(m));
    let Some(claim) = claim else {
        return fail(format!(
            "error processing PVC {ns}/{}: failed to fetch PVC from API server: persistentvolumeclaims {:?} not found",
            r.claim, r.claim
        ));
    };
    if claim.metadata.deletion_timestamp.is_some() {
        return fail(format!(
            "error processing PVC {ns}/{}: can't start pod because PVC {ns}/{} is being deleted",
            r.claim, r.claim
        ));
    }
    if r.ephemeral {
        berth_api::storage::volume_is_for_pod(pod, claim).map_err(VolumeError::Claim)?;
    }
    let phase = claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    let volume_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or("");
    if phase != "Bound" || volume_name.is_empty() {
        return fail(format!(
            "error processing PVC {ns}/{}: PVC {ns}/{} has non-bound phase ({phase:?}) or empty pvc.Spec.VolumeName ({volume_name:?})",
            r.claim, r.claim
        ));
    }
    let Some(pv) = pv.filter(|p| p.metadata.name.as_deref() == Some(volume_name)) else {
        return fail(format!(
            "error processing PVC {ns}/{}: failed to fetch PV {volume_name:?} from API server: persistentvolumes {volume_name:?} not found",
            r.claim
        ));
    };
    let claim_uid = claim.metadata.uid.as_deref().unwrap_or_default();
    let bound_uid = pv
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .and_then(|c| c.uid.as_deref())
        .unwrap_or_default();
    if bound_uid != claim_uid {
        return fail(format!(
            "error processing PVC {ns}/{}: found PV object {volume_name:?} but it has a ClaimRef that is bound to a different claim",
            r.claim
        ));
    }
    let spec = pv.spec.clone().unwrap_or_default();
    if spec.volume_mode.as_deref() == Some("Block") {
        return fail(format!(
            "PersistentVolume {volume_name:?} has volumeMode Block: Berth mounts block volumes through CSI drivers only"
        ));
    }
    let read_only = r.read_only;
    if let Some(l) = &spec.local {
        let path = PathBuf::from(&l.path);
        if !path.exists() {
            return fail(format!(
                "MountVolume.NewMounter initialization failed for volume {volume_name:?} : path {:?} does not exist",
                l.path
            ));
        }
        return Ok(ClaimMount {
            pv: volume_name.to_string(),
            path,
            read_only,
            supports_ownership: true,
        });
    }
    if let Some(h) = &spec.host_path {
        let src = k8s_openapi::api::core::v1::HostPathVolumeSource {
            path: h.path.clone(),
            type_: h.type_.clone(),
        };
        return Ok(ClaimMount {
            pv: volume_name.to_string(),
            path: super::host_path(&src)?,
            read_only,
            supports_ownership: false,
        });
    }
    fail(format!(
        "PersistentVolume {volume_name:?}: its volume source ({}) cannot be mounted by Berth's node agent (it mounts local and hostPath volumes)",
        source_kind(&spec)
    ))
}

/// Volume sources (of pods or PVs) Berth's node agent has no plugin for.
const UNMOUNTABLE: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "gitRepo",
    "glusterfs",
    "image",
    "iscsi",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

/// The name of a PV's source field, for messages.
fn source_kind(spec: &k8s_openapi::api::core::v1::PersistentVolumeSpec) -> &'static str {
    let v = serde_json::to_value(spec).unwrap_or_default();
    UNMOUNTABLE
        .iter()
        .copied()
        .find(|k| v.get(*k).is_some())
        .unwrap_or("none")
}

/// Pod volume sources the agent has no plugin for (upstream would find a
/// plugin; Berth reports the volume as unmountable instead of dropping it).
pub fn unsupported_source(volume: &Volume) -> Option<&'static str> {
    // The typed check first: every sync asks, and only the rare unsupported
    // volume is serialised to name its source.
    let supported = volume.empty_dir.is_some()
        || volume.host_path.is_some()
        || volume.config_map.is_some()
        || volume.secret.is_some()
        || volume.downward_api.is_some()
        || volume.projected.is_some()
        || volume.persistent_volume_claim.is_some()
        || volume.ephemeral.is_some();
    if supported {
        return None;
    }
    let v = serde_json::to_value(volume).unwrap_or_default();
    Some(
        UNMOUNTABLE
            .iter()
            .copied()
            .find(|k| v.get(*k).is_some())
            .unwrap_or("unknown"),
    )
}
