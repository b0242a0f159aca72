use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, GCEPersistentDiskVolumeSource, ISCSIVolumeSource,
    PersistentVolumeClaim, RBDVolumeSource,
};

use super::*;
use crate::framework::StorageSnapshot;
use crate::plugins::testing::*;

fn with_volume(mut p: Pod, v: Volume) -> Pod {
    p.spec
        .get_or_insert_default()
        .volumes
        .get_or_insert_default()
        .push(v);
    p
}

fn gce(name: &str, read_only: bool) -> Volume {
    Volume {
        name: "disk".into(),
        gce_persistent_disk: Some(GCEPersistentDiskVolumeSource {
            pd_name: name.into(),
            read_only: Some(read_only),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn ebs(id: &str) -> Volume {
    Volume {
        name: "disk".into(),
        aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
            volume_id: id.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn iscsi(iqn: &str, read_only: bool) -> Volume {
    Volume {
        name: "disk".into(),
        iscsi: Some(ISCSIVolumeSource {
            iqn: iqn.into(),
            target_portal: "10.0.0.1:3260".into(),
            read_only: Some(read_only),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn rbd(monitors: &[&str], pool: &str, image: &str, read_only: bool) -> Volume {
    Volume {
        name: "disk".into(),
        rbd: Some(RBDVolumeSource {
            monitors: monitors.iter().map(|m| m.to_string()).collect(),
            pool: (!pool.is_empty()).then(|| pool.to_string()),
            image: image.into(),
            read_only: Some(read_only),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn run(p: Pod, node_pods: Vec<Pod>, claims: Vec<PersistentVolumeClaim>) -> Status {
    let snap = Snapshot::new(vec![node_info(node("n1", &[]), node_pods)])
        .with_storage(StorageSnapshot::of(claims, vec![], vec![], vec![]));
    let pi = PodInfo::new(p);
    let mut state = CycleState::default();
    let s = VolumeRestrictions.pre_filter(&mut state, &pi, &snap);
    match s.code() {
        Code::Skip => Status::success(),
        Code::Success => VolumeRestrictions.filter(&state, &pi, &snap.nodes[0]),
        _ => s,
    }
}

#[test]
fn disk_conflicts() {
    // (case, new pod's volume, existing pod's volume, conflict)
    let cases = [
        ("same GCE disk", gce("d", false), gce("d", false), true),
        (
            "same GCE disk, both read-only",
            gce("d", true),
            gce("d", true),
            false,
        ),
        (
            "same GCE disk, one read-only",
            gce("d", true),
            gce("d", false),
            true,
        ),
        ("other GCE disk", gce("d", false), gce("e", false), false),
        ("same EBS volume", ebs("vol-1"), ebs("vol-1"), true),
        ("other EBS volume", ebs("vol-1"), ebs("vol-2"), false),
        (
            "same iSCSI IQN",
            iscsi("iqn.a", false),
            iscsi("iqn.a", false),
            true,
        ),
        (
            "same iSCSI IQN read-only",
            iscsi("iqn.a", true),
            iscsi("iqn.a", true),
            false,
        ),
        (
            "other iSCSI IQN",
            iscsi("iqn.a", false),
            iscsi("iqn.b", false),
            false,
        ),
        (
            "RBD image sharing a monitor",
            rbd(&["m1", "m2"], "p", "img", false),
            rbd(&["m2", "m3"], "p", "img", false),
            true,
        ),
        (
            "RBD default pool on both",
            rbd(&["m1"], "", "img", false),
            rbd(&["m1"], "rbd", "img", false),
            true,
        ),
        (
            "RBD read-only on both",
            rbd(&["m1"], "p", "img", true),
            rbd(&["m1"], "p", "img", true),
            false,
        ),
        (
            "RBD other monitors",
            rbd(&["m1"], "p", "img", false),
            rbd(&["m9"], "p", "img", false),
            false,
        ),
        (
            "RBD other image",
            rbd(&["m1"], "p", "img", false),
            rbd(&["m1"], "p", "other", false),
            false,
        ),
        ("different kinds", gce("d", false), ebs("d"), false),
    ];
    for (case, new, existing, conflict) in cases {
        let s = run(
            with_volume(pod("new", &[]), new),
            vec![with_volume(pod("old", &[]), existing)],
            vec![],
        );
        if conflict {
            assert_eq!(s.code(), Code::Unschedulable, "{case}");
            assert_eq!(s.message(), ERR_REASON_DISK_CONFLICT, "{case}");
        } else {
            assert!(s.is_success(), "{case}: {s}");
        }
    }
}

fn rwop(name: &str) -> PersistentVolumeClaim {
    let mut c = pvc(name, "", "1Gi");
    c.spec.get_or_insert_default().access_modes = Some(vec!["ReadWriteOncePod".into()]);
    c
}

/// (case, new pod's claims, claims of the pod already placed, code, message)
type RwopRow<'a> = (&'a str, &'a [&'a str], &'a [&'a str], Code, &'a str);

#[test]
fn read_write_once_pod_claims() {
    let claims = || vec![rwop("once"), pvc("shared", "", "1Gi")];
    // (case, new pod's claims, claims of the pod already placed, code, message)
    let cases: [RwopRow<'_>; 5] = [
        (
            "a ReadWriteOncePod claim in use",
            &["once"],
            &["once"],
            Code::Unschedulable,
            ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
        ),
        (
            "a ReadWriteOncePod claim free",
            &["once"],
            &["shared"],
            Code::Success,
            "",
        ),
        (
            "a ReadWriteOnce claim in use",
            &["shared"],
            &["shared"],
            Code::Success,
            "",
        ),
        (
            "a missing claim",
            &["nope"],
            &[],
            Code::UnschedulableAndUnresolvable,
            "persistentvolumeclaim \"nope\" not found",
        ),
        ("no claims", &[], &["once"], Code::Success, ""),
    ];
    for (case, mine, theirs, code, message) in cases {
        let s = run(
            with_claims(pod("new", &[]), mine),
            vec![with_claims(pod("old", &[]), theirs)],
            claims(),
        );
        assert_eq!(s.code(), code, "{case}: {s}");
        assert_eq!(s.message(), message, "{case}");
    }
}

#[test]
fn read_write_once_pod_users_elsewhere_count_and_preemption_can_free_them() {
    // The user is on another node: the claim is taken for every node.
    let user = with_claims(pod("old", &[]), &["once"]);
    let snap = Snapshot::new(vec![
        node_info(node("n1", &[]), vec![]),
        node_info(node("n2", &[]), vec![user.clone()]),
    ])
    .with_storage(StorageSnapshot::of(
        vec![rwop("once")],
        vec![],
        vec![],
        vec![],
    ));
    let pi = PodInfo::new(with_claims(pod("new", &[]), &["once"]));
    let mut state = CycleState::default();
    assert!(
        VolumeRestrictions
            .pre_filter(&mut state, &pi, &snap)
            .is_success()
    );
    let s = VolumeRestrictions.filter(&state, &pi, &snap.nodes[0]);
    assert_eq!(s.message(), ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT);
    // Preemption's dry run removes the user: the claim is free.
    let victim = PodInfo::new(user);
    VolumeRestrictions.remove_pod(&mut state, &pi, &victim, &snap.nodes[1]);
    assert!(
        VolumeRestrictions
            .filter(&state, &pi, &snap.nodes[0])
            .is_success()
    );
    VolumeRestrictions.add_pod(&mut state, &pi, &victim, &snap.nodes[1]);
    assert_eq!(
        VolumeRestrictions
            .filter(&state, &pi, &snap.nodes[0])
            .code(),
        Code::Unschedulable
    );
}
