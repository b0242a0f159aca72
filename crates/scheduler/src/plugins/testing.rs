//! Builders for plugin tables.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeSpec, NodeStatus, Pod, PodSpec, ResourceRequirements, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;

use crate::framework::{NodeInfo, PodInfo};

pub fn qmap(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

pub fn node(name: &str, alloc: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(qmap(alloc)),
            capacity: Some(qmap(alloc)),
            ..Default::default()
        }),
    }
}

pub fn labeled(mut n: Node, labels: &[(&str, &str)]) -> Node {
    n.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    n
}

pub fn tainted(mut n: Node, taints: &[(&str, &str, &str)]) -> Node {
    n.spec.get_or_insert_default().taints = Some(
        taints
            .iter()
            .map(|(k, v, e)| Taint {
                key: k.to_string(),
                value: (!v.is_empty()).then(|| v.to_string()),
                effect: e.to_string(),
                ..Default::default()
            })
            .collect(),
    );
    n
}

pub fn pod(name: &str, requests: &[&[(&str, &str)]]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: requests
                .iter()
                .enumerate()
                .map(|(i, r)| Container {
                    name: format!("c{i}"),
                    resources: Some(ResourceRequirements {
                        requests: (!r.is_empty()).then(|| qmap(r)),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn tolerating(mut p: Pod, tols: &[(&str, &str, &str, &str)]) -> Pod {
    p.spec.get_or_insert_default().tolerations = Some(
        tols.iter()
            .map(|(k, op, v, e)| Toleration {
                key: (!k.is_empty()).then(|| k.to_string()),
                operator: (!op.is_empty()).then(|| op.to_string()),
                value: (!v.is_empty()).then(|| v.to_string()),
                effect: (!e.is_empty()).then(|| e.to_string()),
                ..Default::default()
            })
            .collect(),
    );
    p
}

pub fn node_info(n: Node, pods: Vec<Pod>) -> NodeInfo {
    let mut ni = NodeInfo::new(n);
    for p in pods {
        ni.add_pod(PodInfo::new(p));
    }
    ni
}

// Storage objects for the volume plugins' tables.

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, EphemeralVolumeSource, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimStatus, PersistentVolumeClaimVolumeSource, PersistentVolumeSpec,
    TopologySelectorLabelRequirement, TopologySelectorTerm, Volume, VolumeNodeAffinity,
    VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::{
    CSINode, CSINodeDriver, CSINodeSpec, StorageClass, VolumeNodeResources,
};

/// A claim in `default` of `class` asking for `size`, uid `uid-<name>`.
pub fn pvc(name: &str, class: &str, size: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("1".into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            storage_class_name: (!class.is_empty()).then(|| class.to_string()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(qmap(&[("storage", size)])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: Some(PersistentVolumeClaimStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        }),
    }
}

/// The claim as the PV controller leaves it bound to `pv`.
pub fn bound_pvc(mut c: PersistentVolumeClaim, pv: &str) -> PersistentVolumeClaim {
    c.spec.get_or_insert_default().volume_name = Some(pv.into());
    c.metadata
        .annotations
        .get_or_insert_default()
        .insert(berth_api::storage::ANN_BIND_COMPLETED.into(), "yes".into());
    c.status.get_or_insert_default().phase = Some("Bound".into());
    c
}

/// An Available volume of `class` and `size`, ReadWriteOnce.
pub fn pv(name: &str, class: &str, size: &str) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.into()),
            resource_version: Some("1".into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            storage_class_name: (!class.is_empty()).then(|| class.to_string()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            capacity: Some(qmap(&[("storage", size)])),
            ..Default::default()
        }),
        status: Some(k8s_openapi::api::core::v1::PersistentVolumeStatus {
            phase: Some("Available".into()),
            ..Default::default()
        }),
    }
}

/// The volume reachable only from nodes with `key=value`.
pub fn pv_on(mut v: PersistentVolume, key: &str, value: &str) -> PersistentVolume {
    v.spec.get_or_insert_default().node_affinity = Some(VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: key.into(),
                    operator: "In".into(),
                    values: Some(vec![value.into()]),
                }]),
                ..Default::default()
            }],
        }),
    });
    v
}

/// The volume as a CSI volume of `driver` with `handle`.
pub fn csi_pv(mut v: PersistentVolume, driver: &str, handle: &str) -> PersistentVolume {
    v.spec.get_or_insert_default().csi = Some(CSIPersistentVolumeSource {
        driver: driver.into(),
        volume_handle: handle.into(),
        ..Default::default()
    });
    v
}

/// The volume bound to the claim (claimRef with uid, phase Bound).
pub fn pv_bound_to(mut v: PersistentVolume, c: &PersistentVolumeClaim) -> PersistentVolume {
    v.spec.get_or_insert_default().claim_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
        name: c.metadata.name.clone(),
        namespace: c.metadata.namespace.clone(),
        uid: c.metadata.uid.clone(),
        ..Default::default()
    });
    v.status.get_or_insert_default().phase = Some("Bound".into());
    v
}

/// A class with `provisioner` and binding `mode`, optionally limited to
/// nodes with one of `zones` as `topology.kubernetes.io/zone`.
pub fn storage_class(name: &str, provisioner: &str, mode: &str, zones: &[&str]) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        provisioner: provisioner.into(),
        volume_binding_mode: (!mode.is_empty()).then(|| mode.to_string()),
        allowed_topologies: (!zones.is_empty()).then(|| {
            vec![TopologySelectorTerm {
                match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                    key: "topology.kubernetes.io/zone".into(),
                    values: zones.iter().map(|z| z.to_string()).collect(),
                }]),
            }]
        }),
        ..Default::default()
    }
}

/// A CSINode with (driver, attach limit) pairs.
pub fn csi_node(node: &str, drivers: &[(&str, Option<i32>)]) -> CSINode {
    CSINode {
        metadata: ObjectMeta {
            name: Some(node.into()),
            ..Default::default()
        },
        spec: CSINodeSpec {
            drivers: drivers
                .iter()
                .map(|(d, count)| CSINodeDriver {
                    name: d.to_string(),
                    node_id: node.into(),
                    allocatable: count.map(|c| VolumeNodeResources { count: Some(c) }),
                    ..Default::default()
                })
                .collect(),
        },
    }
}

/// The pod with `persistentVolumeClaim` volumes for `claims`.
pub fn with_claims(mut p: Pod, claims: &[&str]) -> Pod {
    let volumes = p
        .spec
        .get_or_insert_default()
        .volumes
        .get_or_insert_default();
    for c in claims {
        volumes.push(Volume {
            name: format!("vol-{c}"),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: c.to_string(),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    p
}

/// The pod with a generic ephemeral volume `volume` (its claim is `<pod>-<volume>`).
pub fn with_ephemeral(mut p: Pod, volume: &str) -> Pod {
    p.spec
        .get_or_insert_default()
        .volumes
        .get_or_insert_default()
        .push(Volume {
            name: volume.into(),
            ephemeral: Some(EphemeralVolumeSource::default()),
            ..Default::default()
        });
    p
}
