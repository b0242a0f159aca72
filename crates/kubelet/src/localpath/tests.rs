use std::path::Path;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde_json::json;

use super::*;

fn claim(extra: serde_json::Value) -> PersistentVolumeClaim {
    let mut c = json!({
        "metadata": {"name": "data-web-0", "namespace": "ns1", "uid": "u1",
            "annotations": {
                "volume.kubernetes.io/storage-provisioner": "berth.dev/local-path",
                "volume.kubernetes.io/selected-node": "n1"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
            "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Pending"}
    });
    merge(&mut c, extra);
    serde_json::from_value(c).unwrap()
}

fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
    match (a, b) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

#[test]
fn claims_this_node_provisions() {
    let cases = [
        (json!({}), "n1", true),
        (json!({}), "n2", false),
        (
            json!({"metadata": {"annotations": {"volume.kubernetes.io/storage-provisioner": "other"}}}),
            "n1",
            false,
        ),
        (json!({"spec": {"volumeName": "pv1"}}), "n1", false),
        (
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            "n1",
            false,
        ),
    ];
    for (extra, node, want) in cases {
        assert_eq!(
            wants_provisioning(&claim(extra.clone()), node),
            want,
            "{extra} on {node}"
        );
    }
    // The beta annotation alone (older controllers) counts too.
    let mut c = claim(json!({}));
    let a = c.metadata.annotations.as_mut().unwrap();
    a.remove("volume.kubernetes.io/storage-provisioner");
    a.insert(
        "volume.beta.kubernetes.io/storage-provisioner".into(),
        "berth.dev/local-path".into(),
    );
    assert!(wants_provisioning(&c, "n1"));
}

#[test]
fn the_volume_is_pinned_to_the_node_and_pre_bound_to_the_claim() {
    let class = default_storage_class();
    let c = claim(json!({}));
    let dir = volume_dir(Path::new("/d/storage"), &c);
    assert_eq!(dir, Path::new("/d/storage/pvc-u1_ns1_data-web-0"));
    let pv = volume_for(&c, &class, "n1", &dir).unwrap();
    assert_eq!(pv.metadata.name.as_deref(), Some("pvc-u1"));
    let spec = pv.spec.as_ref().unwrap();
    assert_eq!(spec.capacity.as_ref().unwrap()["storage"].0, "1Gi");
    assert_eq!(
        spec.local.as_ref().unwrap().path,
        "/d/storage/pvc-u1_ns1_data-web-0"
    );
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    assert_eq!(spec.storage_class_name.as_deref(), Some("local-path"));
    let r = spec.claim_ref.as_ref().unwrap();
    assert_eq!(
        (r.namespace.as_deref(), r.name.as_deref(), r.uid.as_deref()),
        (Some("ns1"), Some("data-web-0"), Some("u1"))
    );
    assert_eq!(pinned_node(&pv), Some("n1"));
    assert!(is_local_path(&pv));
    assert_eq!(owned_dir(&pv, Path::new("/d/storage")), Some(dir.clone()));
    assert_eq!(owned_dir(&pv, Path::new("/elsewhere")), None);
    // A Retain class keeps the data.
    let mut retain = class.clone();
    retain.reclaim_policy = Some("Retain".into());
    let kept = volume_for(&c, &retain, "n1", &dir).unwrap();
    assert_eq!(
        kept.spec
            .unwrap()
            .persistent_volume_reclaim_policy
            .as_deref(),
        Some("Retain")
    );
}

#[test]
fn what_local_path_cannot_provision() {
    let class = default_storage_class();
    let dir = Path::new("/d/storage/x");
    let cases = [
        (
            json!({"spec": {"accessModes": ["ReadWriteMany"]}}),
            "ReadWriteMany",
        ),
        (json!({"spec": {"volumeMode": "Block"}}), "Filesystem"),
        (
            json!({"spec": {"resources": {"requests": null}}}),
            "no storage request",
        ),
    ];
    for (extra, want) in cases {
        let e = volume_for(&claim(extra.clone()), &class, "n1", dir).unwrap_err();
        assert!(e.contains(want), "{extra}: {e}");
    }
    let mut with_params = class.clone();
    with_params.parameters = Some([("x".to_string(), "y".to_string())].into());
    assert!(volume_for(&claim(json!({})), &with_params, "n1", dir).is_err());
}

#[test]
fn only_this_nodes_released_delete_volumes_are_deleted() {
    let c = claim(json!({}));
    let base = volume_for(
        &c,
        &default_storage_class(),
        "n1",
        Path::new("/d/storage/pvc-u1_ns1_data-web-0"),
    )
    .unwrap();
    let with = |phase: &str, policy: &str| {
        let mut pv: PersistentVolume = base.clone();
        pv.spec.as_mut().unwrap().persistent_volume_reclaim_policy = Some(policy.into());
        pv.status = Some(k8s_openapi::api::core::v1::PersistentVolumeStatus {
            phase: Some(phase.into()),
            ..Default::default()
        });
        pv
    };
    assert!(wants_deletion(&with("Released", "Delete"), "n1"));
    assert!(!wants_deletion(&with("Released", "Delete"), "n2"));
    assert!(!wants_deletion(&with("Released", "Retain"), "n1"));
    assert!(!wants_deletion(&with("Bound", "Delete"), "n1"));
    let mut foreign = with("Released", "Delete");
    foreign.metadata.annotations = None;
    assert!(!wants_deletion(&foreign, "n1"));
}

#[test]
fn the_default_class_is_wait_for_first_consumer_and_default() {
    let c = default_storage_class();
    assert_eq!(c.metadata.name.as_deref(), Some("local-path"));
    assert_eq!(
        c.volume_binding_mode.as_deref(),
        Some("WaitForFirstConsumer")
    );
    assert_eq!(
        c.metadata.annotations.unwrap()["storageclass.kubernetes.io/is-default-class"],
        "true"
    );
}
