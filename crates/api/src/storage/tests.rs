use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde_json::{Value, json};

use super::*;
use k8s_openapi::api::core::v1::{
    EphemeralVolumeSource, PersistentVolumeClaimVolumeSource, PodSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

fn claim(spec: Value) -> PersistentVolumeClaim {
    let mut s =
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    serde_json::from_value(
        json!({"metadata": {"name": "c", "namespace": "ns", "uid": "cu"}, "spec": s}),
    )
    .unwrap()
}

fn pv(name: &str, size: &str, extra: Value) -> PersistentVolume {
    let mut v = json!({"metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}},
        "status": {"phase": "Available"}});
    for (k, val) in extra.as_object().unwrap() {
        if k == "metadata" || k == "status" {
            for (k2, v2) in val.as_object().unwrap() {
                v[k][k2] = v2.clone();
            }
        } else {
            v["spec"][k] = val.clone();
        }
    }
    serde_json::from_value(v).unwrap()
}

fn pick(
    c: &PersistentVolumeClaim,
    vols: &[PersistentVolume],
    node: Option<&BTreeMap<String, String>>,
    delay: bool,
) -> Option<String> {
    let refs: Vec<&PersistentVolume> = vols.iter().collect();
    find_matching_volume(c, &refs, node, &BTreeSet::new(), delay)
        .unwrap()
        .and_then(|p| p.metadata.name.clone())
}

#[test]
fn classes_and_default_annotations() {
    let mut c = claim(json!({"storageClassName": "fast"}));
    assert_eq!(claim_class(&c), "fast");
    c.metadata.annotations = Some(BTreeMap::from([(
        ANN_BETA_STORAGE_CLASS.into(),
        "old".into(),
    )]));
    assert_eq!(claim_class(&c), "old");
    assert_eq!(claim_class(&claim(json!({}))), "");
    assert_eq!(
        volume_class(&pv("a", "1Gi", json!({"storageClassName": "fast"}))),
        "fast"
    );
    let sc = |k: &str, v: &str| StorageClass {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            annotations: Some(BTreeMap::from([(k.to_string(), v.to_string())])),
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(is_default_class(&sc(ANN_IS_DEFAULT_CLASS, "true")));
    assert!(is_default_class(&sc(ANN_BETA_IS_DEFAULT_CLASS, "true")));
    assert!(!is_default_class(&sc(ANN_IS_DEFAULT_CLASS, "false")));
}

#[test]
fn smallest_fitting_volume_wins() {
    let c = claim(json!({}));
    let vols = [
        pv("big", "10Gi", json!({})),
        pv("small", "2Gi", json!({})),
        pv("tiny", "500Mi", json!({})),
    ];
    assert_eq!(pick(&c, &vols, None, false).as_deref(), Some("small"));
}

#[test]
fn what_keeps_a_volume_from_matching() {
    let c = claim(json!({"selector": {"matchLabels": {"tier": "db"}}}));
    let db = json!({"metadata": {"labels": {"tier": "db"}}});
    let cases = [
        ("fits", pv("v", "1Gi", db.clone()), true),
        (
            "wrong label",
            pv("v", "1Gi", json!({"metadata": {"labels": {"tier": "web"}}})),
            false,
        ),
        (
            "other class",
            pv(
                "v",
                "1Gi",
                json!({"storageClassName": "fast", "metadata": {"labels": {"tier": "db"}}}),
            ),
            false,
        ),
        (
            "block mode",
            pv(
                "v",
                "1Gi",
                json!({"volumeMode": "Block", "metadata": {"labels": {"tier": "db"}}}),
            ),
            false,
        ),
        (
            "ROX only",
            pv(
                "v",
                "1Gi",
                json!({"accessModes": ["ReadOnlyMany"], "metadata": {"labels": {"tier": "db"}}}),
            ),
            false,
        ),
        (
            "bound elsewhere",
            pv(
                "v",
                "1Gi",
                json!({"claimRef": {"name": "other", "namespace": "ns"}, "metadata": {"labels": {"tier": "db"}}}),
            ),
            false,
        ),
        (
            "not yet available",
            pv(
                "v",
                "1Gi",
                json!({"status": {"phase": "Pending"}, "metadata": {"labels": {"tier": "db"}}}),
            ),
            false,
        ),
        (
            "released",
            pv(
                "v",
                "1Gi",
                json!({"status": {"phase": "Released"}, "metadata": {"labels": {"tier": "db"}}}),
            ),
            false,
        ),
        (
            "being deleted",
            pv(
                "v",
                "1Gi",
                json!({"metadata": {"labels": {"tier": "db"}, "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            ),
            false,
        ),
        ("too small", pv("v", "100Mi", db.clone()), false),
    ];
    for (what, v, want) in cases {
        assert_eq!(pick(&c, &[v], None, false).is_some(), want, "{what}");
    }
}

#[test]
fn pre_bound_volumes_and_delayed_binding() {
    let c = claim(json!({}));
    let prebound = pv(
        "mine",
        "5Gi",
        json!({"claimRef": {"name": "c", "namespace": "ns", "uid": "cu"}}),
    );
    let free = pv("free", "1Gi", json!({}));
    assert_eq!(
        pick(&c, &[free.clone(), prebound.clone()], None, false).as_deref(),
        Some("mine")
    );
    // A claimRef with another uid is another claim of the same name.
    let stale = pv(
        "stale",
        "1Gi",
        json!({"claimRef": {"name": "c", "namespace": "ns", "uid": "old"}}),
    );
    assert_eq!(pick(&c, &[stale], None, false), None);
    // WaitForFirstConsumer without a node: only the pre-bound volume.
    assert_eq!(pick(&c, std::slice::from_ref(&free), None, true), None);
    assert_eq!(
        pick(&c, &[free.clone(), prebound], None, true).as_deref(),
        Some("mine")
    );
    // With the node, the free one fits.
    let node = BTreeMap::from([("kubernetes.io/hostname".to_string(), "n1".to_string())]);
    assert_eq!(
        pick(&c, &[free], Some(&node), true).as_deref(),
        Some("free")
    );
}

#[test]
fn node_affinity_of_volumes() {
    let c = claim(json!({}));
    let pinned = pv(
        "local",
        "1Gi",
        json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}),
    );
    let n1 = BTreeMap::from([("kubernetes.io/hostname".to_string(), "n1".to_string())]);
    let n2 = BTreeMap::from([("kubernetes.io/hostname".to_string(), "n2".to_string())]);
    assert!(check_node_affinity(&pinned, &n1).is_ok());
    assert_eq!(
        check_node_affinity(&pinned, &n2),
        Err("no matching NodeSelectorTerms".into())
    );
    assert!(check_node_affinity(&pv("any", "1Gi", json!({})), &n2).is_ok());
    assert_eq!(
        pick(&c, std::slice::from_ref(&pinned), Some(&n2), false),
        None
    );
    assert_eq!(
        pick(&c, &[pinned], Some(&n1), false).as_deref(),
        Some("local")
    );
}

/// `matchFields` on `metadata.name` is matched as upstream's
/// CheckNodeAffinity does: against a node holding only labels (empty name),
/// never against the `kubernetes.io/hostname` label.
#[test]
fn node_affinity_match_fields_use_no_hostname_label() {
    let n1 = BTreeMap::from([("kubernetes.io/hostname".to_string(), "n1".to_string())]);
    let field = |op: &str| {
        pv(
            "f",
            "1Gi",
            json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": op, "values": ["n1"]}]}]}}}),
        )
    };
    let rows: [(&str, bool); 2] = [("In", false), ("NotIn", true)];
    for (op, fits) in rows {
        assert_eq!(check_node_affinity(&field(op), &n1).is_ok(), fits, "{op}");
    }
}

#[test]
fn fewer_access_modes_are_preferred_then_size() {
    let c = claim(json!({}));
    let wide = pv(
        "wide",
        "1Gi",
        json!({"accessModes": ["ReadWriteOnce", "ReadWriteMany"]}),
    );
    let narrow = pv("narrow", "5Gi", json!({}));
    assert_eq!(
        pick(&c, &[wide, narrow], None, false).as_deref(),
        Some("narrow")
    );
    let refs = [&pv("a", "1Gi", json!({})), &pv("b", "2Gi", json!({}))];
    let excluded = BTreeSet::from(["a".to_string()]);
    let got = find_matching_volume(&c, &refs, None, &excluded, false).unwrap();
    assert_eq!(
        got.and_then(|p| p.metadata.name.clone()).as_deref(),
        Some("b")
    );
}

#[test]
fn claim_names_and_ephemeral_ownership() {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("u1".into()),
            ..Default::default()
        },
        spec: Some(PodSpec::default()),
        ..Default::default()
    };
    let pvc_vol = Volume {
        name: "data".into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: "claim".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let eph = Volume {
        name: "scratch".into(),
        ephemeral: Some(EphemeralVolumeSource::default()),
        ..Default::default()
    };
    let empty = Volume {
        name: "tmp".into(),
        ..Default::default()
    };
    assert_eq!(
        volume_claim_name(&pod, &pvc_vol),
        Some(("claim".into(), false))
    );
    assert_eq!(
        volume_claim_name(&pod, &eph),
        Some(("web-scratch".into(), true))
    );
    assert_eq!(volume_claim_name(&pod, &empty), None);

    let mut claim = PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some("web-scratch".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(
        volume_is_for_pod(&pod, &claim).unwrap_err(),
        "PVC ns/web-scratch was not created for pod ns/web (pod is not owner)"
    );
    claim.metadata.owner_references = Some(vec![OwnerReference {
        uid: "u1".into(),
        controller: Some(true),
        ..Default::default()
    }]);
    assert!(volume_is_for_pod(&pod, &claim).is_ok());
}
