//! The reclaim policy of a released volume (upstream's `reclaimVolume`,
//! `deleteVolumeOperation`, `findDeletablePlugin`, `recycleVolumeOperation`)
//! as Berth can run it: the controller has no in-tree volume plugins and no
//! access to node filesystems, so a volume is deleted by whoever provisioned
//! it (an external provisioner watching Released volumes) or it fails with
//! upstream's message.

use berth_api::storage::ANN_DYNAMICALLY_PROVISIONED;
use k8s_openapi::api::core::v1::PersistentVolume;

/// Upstream's CSI migration annotation: a migrated volume is the CSI
/// driver's to reclaim.
const ANN_MIGRATED_TO: &str = "pv.kubernetes.io/migrated-to";

/// What the reclaim policy asks of the controller.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Mark the volume Failed: (event reason, message, also the status message).
    pub fail: Option<(&'static str, String)>,
}

/// `spec.persistentVolumeReclaimPolicy` (the API defaults it to Retain).
pub fn policy(v: &PersistentVolume) -> &str {
    v.spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("Retain")
}

/// Upstream's `reclaimVolume` for a released volume.
pub fn reclaim(v: &PersistentVolume) -> Outcome {
    let annotations = v.metadata.annotations.as_ref();
    if annotations
        .and_then(|a| a.get(ANN_MIGRATED_TO))
        .is_some_and(|m| !m.is_empty())
    {
        return Outcome::default();
    }
    match policy(v) {
        "Retain" => Outcome::default(),
        // Validation refuses Recycle; a volume stored before that finds no
        // recycler (Berth has no recycler pods).
        "Recycle" => Outcome {
            fail: Some((
                "VolumeFailedRecycle",
                "No recycler plugin found for the volume!".into(),
            )),
        },
        "Delete" => match find_deleter(v) {
            Ok(()) => Outcome::default(),
            Err(message) => Outcome {
                fail: Some(("VolumeFailedDelete", message)),
            },
        },
        _ => Outcome {
            fail: Some((
                "VolumeUnknownReclaimPolicy",
                "Volume has unrecognized PersistentVolumeReclaimPolicy".into(),
            )),
        },
    }
}

/// Upstream's `findDeletablePlugin` without in-tree plugins: Ok when an
/// external deleter owns the volume (its provisioner, not a `kubernetes.io/`
/// plugin, or a CSI driver), else upstream's error.
fn find_deleter(v: &PersistentVolume) -> Result<(), String> {
    let name = v.metadata.name.as_deref().unwrap_or_default();
    if let Some(p) = v
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_DYNAMICALLY_PROVISIONED))
        .filter(|p| !p.is_empty())
    {
        if !p.starts_with("kubernetes.io/") {
            return Ok(());
        }
        return Err(format!("no volume plugin matched name: {p}"));
    }
    let spec = v.spec.as_ref();
    if spec.is_some_and(|s| s.csi.is_some()) {
        return Ok(());
    }
    // The one in-tree deleter a static volume can reach: hostPath refuses
    // paths outside /tmp (upstream's NewDeleter), and inside /tmp it would
    // remove a directory of the controller's host, which Berth's controller
    // cannot reach: no deleter either.
    if let Some(hp) = spec.and_then(|s| s.host_path.as_ref())
        && !is_tmp_path(&hp.path)
    {
        return Err(format!(
            "failed to create deleter for volume {name:?}: host_path deleter only supports /tmp/.+ but received provided {}",
            hp.path
        ));
    }
    Err(format!(
        "error getting deleter volume plugin for volume {name:?}: no deletable volume plugin matched"
    ))
}

/// Upstream's `^/tmp/.+` check.
fn is_tmp_path(p: &str) -> bool {
    p.strip_prefix("/tmp/").is_some_and(|rest| !rest.is_empty())
}
