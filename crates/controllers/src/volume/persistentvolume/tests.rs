//! Tables for the binder's decisions (upstream's pv_controller_test.go
//! "unit test sets" in spirit: claim and volume in, objects and events out).

use berth_runtime::events::EventType;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{Value, json};

use super::binder::{self, ClaimWorld, Classes, Event, On, Plan};
use super::reclaim;

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn pv(name: &str, size: &str, extra: Value) -> PersistentVolume {
    let mut v = json!({
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/data"}},
        "status": {"phase": "Available"}
    });
    merge(&mut v, extra);
    serde_json::from_value(v).expect("pv")
}

fn pvc(name: &str, size: &str, extra: Value) -> PersistentVolumeClaim {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "resourceVersion": "5"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
                 "storageClassName": ""},
        "status": {"phase": "Pending"}
    });
    merge(&mut v, extra);
    serde_json::from_value(v).expect("pvc")
}

fn sc(name: &str, extra: Value) -> StorageClass {
    let mut v = json!({"metadata": {"name": name}, "provisioner": "berth.dev/local-path",
                       "volumeBindingMode": "Immediate", "reclaimPolicy": "Delete"});
    merge(&mut v, extra);
    serde_json::from_value(v).expect("sc")
}

fn claimed_by(claim: &str) -> Value {
    json!({"spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
        "namespace": "ns", "name": claim, "uid": format!("uid-{claim}")}}})
}

fn sync(
    claim: &PersistentVolumeClaim,
    vols: &[PersistentVolume],
    classes: &[StorageClass],
) -> Plan {
    sync_with_pods(claim, vols, classes, &[])
}

fn sync_with_pods(
    claim: &PersistentVolumeClaim,
    vols: &[PersistentVolume],
    classes: &[StorageClass],
    pods: &[String],
) -> Plan {
    let v: Vec<&PersistentVolume> = vols.iter().collect();
    let c: Vec<&StorageClass> = classes.iter().collect();
    binder::sync_claim(
        claim,
        &ClaimWorld {
            volumes: &v,
            classes: Classes { all: &c },
            unscheduled_pods: pods,
        },
    )
}

fn ann<'a>(
    m: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    k: &str,
) -> Option<&'a str> {
    m.annotations.as_ref()?.get(k).map(String::as_str)
}

fn claim_phase(p: &Plan) -> Option<&str> {
    p.claim.as_ref()?.status.as_ref()?.phase.as_deref()
}

fn volume_phase(p: &Plan) -> Option<&str> {
    p.volume.as_ref()?.status.as_ref()?.phase.as_deref()
}

fn reasons(p: &Plan) -> Vec<&'static str> {
    p.events.iter().map(|e| e.reason).collect()
}

#[test]
fn binding_picks_the_smallest_matching_volume_and_writes_upstreams_fields() {
    let vols = [
        pv("big", "10Gi", json!({})),
        pv("small", "2Gi", json!({})),
        pv("tiny", "500Mi", json!({})),
        pv("bound", "1Gi", claimed_by("other")),
    ];
    let claim = pvc("data", "1Gi", json!({}));
    let plan = sync(&claim, &vols, &[]);
    let v = plan.volume.as_ref().expect("volume written");
    assert_eq!(v.metadata.name.as_deref(), Some("small"));
    let r = v
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .expect("claimRef");
    assert_eq!(
        (
            r.namespace.as_deref(),
            r.name.as_deref(),
            r.uid.as_deref(),
            r.kind.as_deref()
        ),
        (
            Some("ns"),
            Some("data"),
            Some("uid-data"),
            Some("PersistentVolumeClaim")
        )
    );
    assert_eq!(
        ann(&v.metadata, "pv.kubernetes.io/bound-by-controller"),
        Some("yes")
    );
    assert_eq!(volume_phase(&plan), Some("Bound"));
    let c = plan.claim.as_ref().expect("claim written");
    assert_eq!(
        c.spec.as_ref().and_then(|s| s.volume_name.as_deref()),
        Some("small")
    );
    assert_eq!(
        ann(&c.metadata, "pv.kubernetes.io/bind-completed"),
        Some("yes")
    );
    assert_eq!(
        ann(&c.metadata, "pv.kubernetes.io/bound-by-controller"),
        Some("yes")
    );
    let st = c.status.as_ref().expect("status");
    assert_eq!(st.phase.as_deref(), Some("Bound"));
    assert_eq!(
        st.capacity
            .as_ref()
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.as_str()),
        Some("2Gi")
    );
    assert_eq!(st.access_modes, Some(vec!["ReadWriteOnce".to_string()]));
    assert!(plan.events.is_empty() && plan.error.is_none());
}

#[test]
fn unbound_claims() {
    let wffc = sc(
        "local",
        json!({"volumeBindingMode": "WaitForFirstConsumer"}),
    );
    let immediate = sc("fast", json!({}));
    let no_mode: StorageClass =
        serde_json::from_value(json!({"metadata": {"name": "odd"}, "provisioner": "x.io/p"}))
            .expect("sc");
    let default = sc(
        "standard",
        json!({"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}),
    );
    struct Case {
        name: &'static str,
        claim: PersistentVolumeClaim,
        volumes: Vec<PersistentVolume>,
        classes: Vec<StorageClass>,
        pods: Vec<String>,
        claim_phase: Option<&'static str>,
        bound_to: Option<&'static str>,
        events: Vec<(EventType, &'static str, &'static str)>,
        error: bool,
    }
    let cases = vec![
        Case {
            name: "no class, no volume",
            claim: pvc("c", "1Gi", json!({})),
            volumes: vec![pv("v", "500Mi", json!({}))],
            classes: vec![],
            pods: vec![],
            claim_phase: Some("Pending"),
            bound_to: None,
            events: vec![(
                EventType::Normal,
                "FailedBinding",
                "no persistent volumes available for this claim and no storage class is set",
            )],
            error: false,
        },
        Case {
            name: "class mismatch is not a match",
            claim: pvc("c", "1Gi", json!({})),
            volumes: vec![pv(
                "v",
                "5Gi",
                json!({"spec": {"storageClassName": "fast"}}),
            )],
            classes: vec![],
            pods: vec![],
            claim_phase: Some("Pending"),
            bound_to: None,
            events: vec![(
                EventType::Normal,
                "FailedBinding",
                "no persistent volumes available for this claim and no storage class is set",
            )],
            error: false,
        },
        Case {
            name: "WaitForFirstConsumer without a pod",
            claim: pvc("c", "1Gi", json!({"spec": {"storageClassName": "local"}})),
            volumes: vec![pv(
                "v",
                "5Gi",
                json!({"spec": {"storageClassName": "local"}}),
            )],
            classes: vec![wffc.clone()],
            pods: vec![],
            claim_phase: Some("Pending"),
            bound_to: None,
            events: vec![(
                EventType::Normal,
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding",
            )],
            error: false,
        },
        Case {
            name: "WaitForFirstConsumer with an unscheduled pod",
            claim: pvc("c", "1Gi", json!({"spec": {"storageClassName": "local"}})),
            volumes: vec![],
            classes: vec![wffc.clone()],
            pods: vec!["web".into()],
            claim_phase: Some("Pending"),
            bound_to: None,
            events: vec![(
                EventType::Normal,
                "WaitForPodScheduled",
                "waiting for pod web to be scheduled",
            )],
            error: false,
        },
        Case {
            name: "WaitForFirstConsumer with two unscheduled pods",
            claim: pvc("c", "1Gi", json!({"spec": {"storageClassName": "local"}})),
            volumes: vec![],
            classes: vec![wffc.clone()],
            pods: vec!["a".into(), "b".into()],
            claim_phase: Some("Pending"),
            bound_to: None,
            events: vec![(
                EventType::Normal,
                "WaitForPodScheduled",
                "waiting for pods a,b to be scheduled",
            )],
            error: false,
        },
        Case {
            name: "WaitForFirstConsumer once the scheduler picked a node: provisioning",
            claim: pvc(
                "c",
                "1Gi",
                json!({"spec": {"storageClassName": "local"},
                       "metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n1"}}}),
            ),
            volumes: vec![],
            classes: vec![wffc.clone()],
            pods: vec![],
            // The annotated claim, its status untouched.
            claim_phase: Some("Pending"),
            bound_to: None,
            events: vec![(
                EventType::Normal,
                "ExternalProvisioning",
                "Waiting for a volume to be created either by the external provisioner 'berth.dev/local-path' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.",
            )],
            error: false,
        },
        Case {
            name: "Immediate class without a volume: external provisioning",
            claim: pvc("c", "1Gi", json!({"spec": {"storageClassName": "fast"}})),
            volumes: vec![],
            classes: vec![immediate.clone()],
            pods: vec![],
            // The annotated claim, its status untouched.
            claim_phase: Some("Pending"),
            bound_to: None,
            events: vec![(
                EventType::Normal,
                "ExternalProvisioning",
                "Waiting for a volume to be created either by the external provisioner 'berth.dev/local-path' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.",
            )],
            error: false,
        },
        Case {
            name: "Immediate class with a matching volume binds",
            claim: pvc("c", "1Gi", json!({"spec": {"storageClassName": "fast"}})),
            volumes: vec![pv(
                "v",
                "1Gi",
                json!({"spec": {"storageClassName": "fast"}}),
            )],
            classes: vec![immediate.clone()],
            pods: vec![],
            claim_phase: Some("Bound"),
            bound_to: Some("v"),
            events: vec![],
            error: false,
        },
        Case {
            name: "missing class",
            claim: pvc("c", "1Gi", json!({"spec": {"storageClassName": "gone"}})),
            volumes: vec![],
            classes: vec![],
            pods: vec![],
            claim_phase: None,
            bound_to: None,
            events: vec![(
                EventType::Warning,
                "ProvisioningFailed",
                "storageclass.storage.k8s.io \"gone\" not found",
            )],
            error: false,
        },
        Case {
            name: "in-tree provisioner name",
            claim: pvc("c", "1Gi", json!({"spec": {"storageClassName": "local"}})),
            volumes: vec![],
            classes: vec![sc(
                "local",
                json!({"provisioner": "kubernetes.io/no-provisioner"}),
            )],
            pods: vec![],
            claim_phase: None,
            bound_to: None,
            events: vec![(
                EventType::Warning,
                "ProvisioningFailed",
                "no volume plugin matched name: kubernetes.io/no-provisioner",
            )],
            error: false,
        },
        Case {
            name: "class without a binding mode",
            claim: pvc("c", "1Gi", json!({"spec": {"storageClassName": "odd"}})),
            volumes: vec![],
            classes: vec![no_mode],
            pods: vec![],
            claim_phase: None,
            bound_to: None,
            events: vec![],
            error: true,
        },
        Case {
            name: "pre-bound claim: volume missing",
            claim: pvc(
                "c",
                "1Gi",
                json!({"spec": {"volumeName": "v"}, "status": {"phase": null}}),
            ),
            volumes: vec![],
            classes: vec![],
            pods: vec![],
            claim_phase: Some("Pending"),
            bound_to: None,
            events: vec![],
            error: false,
        },
        Case {
            name: "pre-bound claim: free volume binds",
            claim: pvc("c", "1Gi", json!({"spec": {"volumeName": "v"}})),
            volumes: vec![pv("v", "1Gi", json!({"status": {"phase": "Pending"}}))],
            classes: vec![],
            pods: vec![],
            claim_phase: Some("Bound"),
            bound_to: Some("v"),
            events: vec![],
            error: false,
        },
        Case {
            name: "pre-bound claim: volume too small",
            claim: pvc("c", "2Gi", json!({"spec": {"volumeName": "v"}})),
            volumes: vec![pv("v", "1Gi", json!({}))],
            classes: vec![],
            pods: vec![],
            claim_phase: Some("Pending"),
            bound_to: None,
            events: vec![(
                EventType::Warning,
                "VolumeMismatch",
                "Cannot bind to requested volume \"v\": requested PV is too small",
            )],
            error: false,
        },
        Case {
            name: "pre-bound claim: volume taken by another claim",
            claim: pvc("c", "1Gi", json!({"spec": {"volumeName": "v"}})),
            volumes: vec![pv("v", "1Gi", claimed_by("other"))],
            classes: vec![],
            pods: vec![],
            claim_phase: Some("Pending"),
            bound_to: None,
            events: vec![(
                EventType::Warning,
                "FailedBinding",
                "volume \"v\" already bound to a different claim.",
            )],
            error: false,
        },
        Case {
            name: "volume pre-bound to the claim by claimRef (no uid) wins over a smaller one",
            claim: pvc("c", "1Gi", json!({})),
            volumes: vec![
                pv("small", "1Gi", json!({})),
                pv(
                    "mine",
                    "8Gi",
                    json!({"spec": {"claimRef": {"namespace": "ns", "name": "c"}}}),
                ),
            ],
            classes: vec![],
            pods: vec![],
            claim_phase: Some("Bound"),
            bound_to: Some("mine"),
            events: vec![],
            error: false,
        },
        Case {
            name: "no class at all gets the default class (retroactive)",
            claim: pvc("c", "1Gi", json!({"spec": {"storageClassName": null}})),
            volumes: vec![],
            classes: vec![default.clone()],
            pods: vec![],
            claim_phase: Some("Pending"),
            bound_to: None,
            events: vec![],
            error: false,
        },
    ];
    for c in cases {
        let plan = sync_with_pods(&c.claim, &c.volumes, &c.classes, &c.pods);
        assert_eq!(claim_phase(&plan), c.claim_phase, "{}: claim phase", c.name);
        let bound = plan
            .claim
            .as_ref()
            .and_then(|cl| cl.spec.as_ref())
            .and_then(|s| s.volume_name.as_deref());
        let expected_name =
            c.bound_to
                .or(c.claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()));
        if c.bound_to.is_some() {
            assert_eq!(bound, expected_name, "{}: volumeName", c.name);
            assert_eq!(
                volume_phase(&plan),
                Some("Bound"),
                "{}: volume phase",
                c.name
            );
        } else {
            assert!(plan.volume.is_none(), "{}: no volume write", c.name);
        }
        let got: Vec<(EventType, &str, &str)> = plan
            .events
            .iter()
            .map(|e| (e.type_, e.reason, e.message.as_str()))
            .collect();
        assert_eq!(got, c.events, "{}: events", c.name);
        assert!(plan.events.iter().all(|e| e.on == On::Claim), "{}", c.name);
        assert_eq!(
            plan.error.is_some(),
            c.error,
            "{}: error {:?}",
            c.name,
            plan.error
        );
    }
}

#[test]
fn provisioning_annotates_the_claim_once() {
    let class = sc("fast", json!({"provisioner": "csi.example.com"}));
    let claim = pvc("c", "1Gi", json!({"spec": {"storageClassName": "fast"}}));
    let plan = sync(&claim, &[], std::slice::from_ref(&class));
    let c = plan.claim.as_ref().expect("annotated");
    assert_eq!(
        ann(&c.metadata, "volume.kubernetes.io/storage-provisioner"),
        Some("csi.example.com")
    );
    assert_eq!(
        ann(&c.metadata, "volume.beta.kubernetes.io/storage-provisioner"),
        Some("csi.example.com")
    );
    // Annotated already: nothing to write, the event again (upstream repeats it).
    let again = sync(c, &[], &[class]);
    assert!(again.claim.is_none());
    assert_eq!(reasons(&again), vec!["ExternalProvisioning"]);
}

#[test]
fn retroactive_default_class() {
    let old = sc(
        "old",
        json!({"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z",
                            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}),
    );
    let new = sc(
        "new",
        json!({"metadata": {"creationTimestamp": "2024-06-01T00:00:00Z",
                            "annotations": {"storageclass.beta.kubernetes.io/is-default-class": "true"}}}),
    );
    let plain = sc("plain", json!({}));
    let unset = pvc("c", "1Gi", json!({"spec": {"storageClassName": null}}));
    let cases = [
        (
            "newest default wins",
            unset.clone(),
            vec![old.clone(), new.clone(), plain.clone()],
            Some("new"),
        ),
        ("no default yet", unset.clone(), vec![plain.clone()], None),
        (
            "explicit empty class is kept",
            pvc("c", "1Gi", json!({})),
            vec![new.clone()],
            None,
        ),
        (
            "beta annotation counts as a class",
            pvc(
                "c",
                "1Gi",
                json!({"spec": {"storageClassName": null},
                       "metadata": {"annotations": {"volume.beta.kubernetes.io/storage-class": "plain"}}}),
            ),
            vec![new.clone(), plain.clone()],
            None,
        ),
    ];
    for (name, claim, classes, want) in cases {
        let plan = sync(&claim, &[], &classes);
        let got = plan
            .claim
            .as_ref()
            .filter(|c| c.spec != claim.spec)
            .and_then(|c| c.spec.as_ref())
            .and_then(|s| s.storage_class_name.as_deref());
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn bound_claims() {
    let bound = json!({"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                       "spec": {"volumeName": "v"}, "status": {"phase": "Bound"}});
    let claim = pvc("c", "1Gi", bound.clone());
    let cases = [
        (
            "volume gone: Lost",
            claim.clone(),
            vec![],
            Some("Lost"),
            vec![(
                EventType::Warning,
                "ClaimLost",
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
            )],
        ),
        (
            "volumeName removed: Lost",
            pvc("c", "1Gi", {
                let mut b = bound.clone();
                merge(&mut b, json!({"spec": {"volumeName": null}}));
                b
            }),
            vec![],
            Some("Lost"),
            vec![(
                EventType::Warning,
                "ClaimLost",
                "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
            )],
        ),
        (
            "already Lost: no second event",
            pvc("c", "1Gi", {
                let mut b = bound.clone();
                merge(&mut b, json!({"status": {"phase": "Lost"}}));
                b
            }),
            vec![],
            None,
            vec![],
        ),
        (
            "volume bound to another claim: misbound",
            claim.clone(),
            vec![pv("v", "1Gi", claimed_by("other"))],
            Some("Lost"),
            vec![(
                EventType::Warning,
                "ClaimMisbound",
                "Two claims are bound to the same volume, this one is bound incorrectly",
            )],
        ),
        (
            "all is well: nothing changes",
            claim.clone(),
            vec![pv("v", "1Gi", {
                let mut b = claimed_by("c");
                merge(&mut b, json!({"status": {"phase": "Bound"}}));
                b
            })],
            Some("Bound"),
            vec![],
        ),
    ];
    for (name, claim, vols, phase, events) in cases {
        let plan = sync(&claim, &vols, &[]);
        assert_eq!(claim_phase(&plan), phase, "{name}");
        let got: Vec<(EventType, &str, &str)> = plan
            .events
            .iter()
            .map(|e| (e.type_, e.reason, e.message.as_str()))
            .collect();
        assert_eq!(got, events, "{name}");
    }
}

#[test]
fn an_already_bound_pair_is_not_rewritten() {
    let claim = pvc(
        "c",
        "1Gi",
        json!({"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes",
                                             "pv.kubernetes.io/bound-by-controller": "yes"}},
               "spec": {"volumeName": "v"},
               "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}}),
    );
    let mut v = claimed_by("c");
    merge(
        &mut v,
        json!({"metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
                         "status": {"phase": "Bound"}}),
    );
    let volume = pv("v", "1Gi", v);
    // The claimRef carries a resourceVersion upstream's GetReference set; an
    // existing claimRef with the same uid is left as it is.
    let plan = sync(&claim, std::slice::from_ref(&volume), &[]);
    assert_eq!(plan.volume.as_ref(), Some(&volume));
    assert_eq!(plan.claim.as_ref(), Some(&claim));
}

#[test]
fn bound_capacity_is_set_only_when_becoming_bound() {
    let volume = pv("v", "2Gi", json!({}));
    let becoming = pvc("c", "1Gi", json!({}));
    let c = binder::claim_with_status(&becoming, "Bound", Some(&volume)).expect("status");
    let cap = |c: &PersistentVolumeClaim| {
        c.status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|m| m.get("storage"))
            .map(|q| q.0.clone())
    };
    assert_eq!(cap(&c).as_deref(), Some("2Gi"));
    // Already Bound with a different (resized) capacity: kept.
    let resized = pvc(
        "c",
        "1Gi",
        json!({"status": {"phase": "Bound", "capacity": {"storage": "3Gi"}}}),
    );
    let c = binder::claim_with_status(&resized, "Bound", Some(&volume)).expect("status");
    assert_eq!(cap(&c).as_deref(), Some("3Gi"));
    // Pending resets capacity and access modes.
    let c = binder::claim_with_status(&resized, "Pending", None).expect("status");
    assert_eq!(cap(&c), None);
    let no_cap = pv("n", "1Gi", json!({"spec": {"capacity": null}}));
    assert!(binder::claim_with_status(&becoming, "Bound", Some(&no_cap)).is_err());
}

fn volume_sync(volume: &PersistentVolume, claim: Option<&PersistentVolumeClaim>) -> Plan {
    binder::sync_volume(volume, claim)
}

#[test]
fn volumes() {
    let bound_claim = pvc(
        "c",
        "1Gi",
        json!({"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
               "spec": {"volumeName": "v"}, "status": {"phase": "Bound"}}),
    );
    let with = |extra: Value| {
        let mut b = claimed_by("c");
        merge(&mut b, extra);
        pv("v", "1Gi", b)
    };
    struct Case {
        name: &'static str,
        volume: PersistentVolume,
        claim: Option<PersistentVolumeClaim>,
        phase: &'static str,
        message: Option<&'static str>,
        events: Vec<(On, &'static str, &'static str)>,
        enqueue: bool,
    }
    let cases = vec![
        Case {
            name: "new volume becomes Available",
            volume: pv("v", "1Gi", json!({"status": {"phase": "Pending"}})),
            claim: None,
            phase: "Available",
            message: None,
            events: vec![],
            enqueue: false,
        },
        Case {
            name: "pre-bound without uid stays Available",
            volume: pv(
                "v",
                "1Gi",
                json!({"spec": {"claimRef": {"namespace": "ns", "name": "c"}}, "status": {"phase": null}}),
            ),
            claim: None,
            phase: "Available",
            message: None,
            events: vec![],
            enqueue: false,
        },
        Case {
            name: "bound and all is well",
            volume: with(json!({"status": {"phase": "Available"}})),
            claim: Some(bound_claim.clone()),
            phase: "Bound",
            message: None,
            events: vec![],
            enqueue: false,
        },
        Case {
            name: "provisioned for a pending claim: the claim is synced",
            volume: with(
                json!({"metadata": {"annotations": {"pv.kubernetes.io/provisioned-by": "berth.dev/local-path"}}}),
            ),
            claim: Some(pvc("c", "1Gi", json!({}))),
            phase: "Available",
            message: None,
            events: vec![],
            enqueue: true,
        },
        Case {
            name: "claim deleted, Retain: Released",
            volume: with(json!({"status": {"phase": "Bound"}})),
            claim: None,
            phase: "Released",
            message: None,
            events: vec![],
            enqueue: false,
        },
        Case {
            name: "claim recreated with another uid: Released",
            volume: with(json!({"status": {"phase": "Bound"}})),
            claim: Some(pvc("c", "1Gi", json!({"metadata": {"uid": "new-uid"}}))),
            phase: "Released",
            message: None,
            events: vec![],
            enqueue: false,
        },
        Case {
            name: "claim deleted, Delete by an external provisioner: Released, its provisioner deletes",
            volume: with(
                json!({"metadata": {"annotations": {"pv.kubernetes.io/provisioned-by": "berth.dev/local-path"}},
                                "spec": {"persistentVolumeReclaimPolicy": "Delete"}, "status": {"phase": "Bound"}}),
            ),
            claim: None,
            phase: "Released",
            message: None,
            events: vec![],
            enqueue: false,
        },
        Case {
            name: "claim deleted, Delete on a static CSI volume: Released for the driver",
            volume: with(
                json!({"spec": {"persistentVolumeReclaimPolicy": "Delete", "hostPath": null,
                                         "csi": {"driver": "d", "volumeHandle": "h"}}, "status": {"phase": "Bound"}}),
            ),
            claim: None,
            phase: "Released",
            message: None,
            events: vec![],
            enqueue: false,
        },
        Case {
            name: "claim deleted, Delete on a static local volume: Failed",
            volume: with(
                json!({"spec": {"persistentVolumeReclaimPolicy": "Delete", "hostPath": null,
                                         "local": {"path": "/mnt/disk"}}, "status": {"phase": "Bound"}}),
            ),
            claim: None,
            phase: "Failed",
            message: Some(
                "error getting deleter volume plugin for volume \"v\": no deletable volume plugin matched",
            ),
            events: vec![(
                On::Volume,
                "VolumeFailedDelete",
                "error getting deleter volume plugin for volume \"v\": no deletable volume plugin matched",
            )],
            enqueue: false,
        },
        Case {
            name: "claim deleted, Delete on a hostPath outside /tmp: Failed",
            volume: with(
                json!({"spec": {"persistentVolumeReclaimPolicy": "Delete"}, "status": {"phase": "Bound"}}),
            ),
            claim: None,
            phase: "Failed",
            message: Some(
                "failed to create deleter for volume \"v\": host_path deleter only supports /tmp/.+ but received provided /data",
            ),
            events: vec![(
                On::Volume,
                "VolumeFailedDelete",
                "failed to create deleter for volume \"v\": host_path deleter only supports /tmp/.+ but received provided /data",
            )],
            enqueue: false,
        },
        Case {
            name: "already Failed: no second event",
            volume: with(
                json!({"spec": {"persistentVolumeReclaimPolicy": "Delete", "hostPath": null, "local": {"path": "/x"}},
                                "status": {"phase": "Failed", "message": "old"}}),
            ),
            claim: None,
            phase: "Failed",
            message: Some("old"),
            events: vec![],
            enqueue: false,
        },
        Case {
            name: "provisioned volume whose claim bound elsewhere: released for deletion",
            volume: with(
                json!({"metadata": {"annotations": {"pv.kubernetes.io/provisioned-by": "csi.example.com"}},
                                "spec": {"persistentVolumeReclaimPolicy": "Delete"}, "status": {"phase": "Bound"}}),
            ),
            claim: Some(pvc(
                "c",
                "1Gi",
                json!({"spec": {"volumeName": "elsewhere"}}),
            )),
            phase: "Released",
            message: None,
            events: vec![],
            enqueue: false,
        },
        Case {
            name: "volume mode mismatch with the pending claim",
            volume: with(json!({"spec": {"volumeMode": "Block"}})),
            claim: Some(pvc("c", "1Gi", json!({}))),
            phase: "Available",
            message: None,
            events: vec![
                (
                    On::Volume,
                    "VolumeMismatch",
                    "Cannot bind PersistentVolume to requested PersistentVolumeClaim \"c\" due to incompatible volumeMode.",
                ),
                (
                    On::Claim,
                    "VolumeMismatch",
                    "Cannot bind PersistentVolume \"v\" to requested PersistentVolumeClaim due to incompatible volumeMode.",
                ),
            ],
            enqueue: false,
        },
    ];
    for c in cases {
        let plan = volume_sync(&c.volume, c.claim.as_ref());
        let out = plan.volume.as_ref().unwrap_or(&c.volume);
        let st = out.status.as_ref();
        assert_eq!(
            st.and_then(|s| s.phase.as_deref()),
            Some(c.phase),
            "{}: phase",
            c.name
        );
        assert_eq!(
            st.and_then(|s| s.message.as_deref()),
            c.message,
            "{}: message",
            c.name
        );
        let got: Vec<(On, &str, &str)> = plan
            .events
            .iter()
            .map(|e| (e.on, e.reason, e.message.as_str()))
            .collect();
        assert_eq!(got, c.events, "{}: events", c.name);
        assert_eq!(plan.enqueue_claim, c.enqueue, "{}: enqueue", c.name);
        assert!(
            plan.claim.is_none(),
            "{}: a volume sync never writes the claim",
            c.name
        );
    }
}

#[test]
fn unbinding_a_volume_bound_elsewhere() {
    let claim = pvc("c", "1Gi", json!({"spec": {"volumeName": "elsewhere"}}));
    // The controller bound it: claimRef and annotation go.
    let mut by_ctrl = claimed_by("c");
    merge(
        &mut by_ctrl,
        json!({"metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
                                "status": {"phase": "Bound"}}),
    );
    let plan = volume_sync(&pv("v", "1Gi", by_ctrl), Some(&claim));
    let v = plan.volume.expect("written");
    assert!(v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).is_none());
    assert_eq!(v.metadata.annotations, None);
    assert_eq!(v.status.and_then(|s| s.phase).as_deref(), Some("Available"));
    // A user pre-bound it: the claimRef stays, without its uid.
    let mut by_user = claimed_by("c");
    merge(&mut by_user, json!({"status": {"phase": "Bound"}}));
    let plan = volume_sync(&pv("v", "1Gi", by_user), Some(&claim));
    let v = plan.volume.expect("written");
    let r = v.spec.and_then(|s| s.claim_ref).expect("kept");
    assert_eq!((r.name.as_deref(), r.uid), (Some("c"), None));
}

#[test]
fn reclaim_policies() {
    let base = |policy: &str, extra: Value| {
        let mut b = json!({"spec": {"persistentVolumeReclaimPolicy": policy}});
        merge(&mut b, extra);
        pv("v", "1Gi", b)
    };
    let cases = [
        ("Retain", base("Retain", json!({})), None),
        (
            "Recycle",
            base("Recycle", json!({})),
            Some("VolumeFailedRecycle"),
        ),
        (
            "unknown",
            base("Shred", json!({})),
            Some("VolumeUnknownReclaimPolicy"),
        ),
        (
            "Delete, hostPath in /tmp",
            base("Delete", json!({"spec": {"hostPath": {"path": "/tmp/x"}}})),
            Some("VolumeFailedDelete"),
        ),
        (
            "Delete, in-tree provisioner",
            base(
                "Delete",
                json!({"metadata": {"annotations": {"pv.kubernetes.io/provisioned-by": "kubernetes.io/host-path"}}}),
            ),
            Some("VolumeFailedDelete"),
        ),
        (
            "migrated to CSI",
            base(
                "Delete",
                json!({"metadata": {"annotations": {"pv.kubernetes.io/migrated-to": "ebs.csi.aws.com"}}}),
            ),
            None,
        ),
    ];
    for (name, v, want) in cases {
        assert_eq!(reclaim::reclaim(&v).fail.map(|(r, _)| r), want, "{name}");
    }
    let no_policy: PersistentVolume =
        serde_json::from_value(json!({"metadata": {"name": "v"}, "spec": {}})).expect("pv");
    assert_eq!(reclaim::policy(&no_policy), "Retain");
}

#[test]
fn events_name_their_object() {
    let e = binder::wait_for_consumer_event(&[]);
    assert_eq!(
        e,
        Event::new(
            On::Claim,
            EventType::Normal,
            "WaitForFirstConsumer",
            "waiting for first consumer to be created before binding"
        )
    );
}
