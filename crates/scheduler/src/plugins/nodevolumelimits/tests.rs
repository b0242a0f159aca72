use k8s_openapi::api::core::v1::{Node, PersistentVolume};

use super::*;
use crate::plugins::testing::*;

const DRIVER: &str = "ebs.csi.example.com";

/// Claims `c0..c4` bound to CSI volumes `v0..v4` of DRIVER, `shared` bound to
/// `vs`, `other` on another driver, `unbound` of the `csi` class (DRIVER
/// provisions it) and `plain` bound to a non-CSI volume.
fn storage(csi_nodes: Vec<CSINode>) -> StorageSnapshot {
    let mut claims = Vec::new();
    let mut volumes: Vec<PersistentVolume> = Vec::new();
    let mut bind = |claim: &str, volume: &str, driver: Option<&str>| {
        claims.push(bound_pvc(pvc(claim, "csi", "1Gi"), volume));
        let v = pv(volume, "csi", "1Gi");
        volumes.push(match driver {
            Some(d) => csi_pv(v, d, &format!("handle-{volume}")),
            None => v,
        });
    };
    for i in 0..5 {
        bind(&format!("c{i}"), &format!("v{i}"), Some(DRIVER));
    }
    bind("shared", "vs", Some(DRIVER));
    bind("other", "vo", Some("other.csi.example.com"));
    bind("plain", "vp", None);
    claims.push(pvc("unbound", "csi", "1Gi"));
    StorageSnapshot::of(
        claims,
        volumes,
        vec![storage_class("csi", DRIVER, "WaitForFirstConsumer", &[])],
        csi_nodes,
    )
}

fn run(new: &[&str], placed: &[&[&str]], csi_nodes: Vec<CSINode>, n: Node) -> Status {
    let pods = placed
        .iter()
        .enumerate()
        .map(|(i, c)| with_claims(pod(&format!("old{i}"), &[]), c))
        .collect();
    let snap = Snapshot::new(vec![node_info(n, pods)]).with_storage(storage(csi_nodes));
    let pl = CsiLimits::default();
    let pi = PodInfo::new(with_claims(pod("new", &[]), new));
    let mut state = CycleState::default();
    let s = pl.pre_filter(&mut state, &pi, &snap);
    match s.code() {
        Code::Skip => Status::success(),
        Code::Success => pl.filter(&state, &pi, &snap.nodes[0]),
        _ => s,
    }
}

/// (case, new pod's claims, placed pods' claims, CSINodes, over the limit)
type Row<'a> = (
    &'a str,
    &'a [&'a str],
    Vec<&'a [&'a str]>,
    Vec<CSINode>,
    bool,
);

#[test]
fn csi_attach_limits() {
    let limit = |n: i32| vec![csi_node("n1", &[(DRIVER, Some(n))])];
    let n1 = || node("n1", &[]);
    // (case, new pod's claims, placed pods' claims, CSINodes, over the limit)
    let cases: Vec<Row<'_>> = vec![
        ("under the limit", &["c0"], vec![&["c1"]], limit(2), false),
        (
            "at the limit",
            &["c0", "c1"],
            vec![&["c2"]],
            limit(3),
            false,
        ),
        (
            "over the limit",
            &["c0", "c1"],
            vec![&["c2", "c3"]],
            limit(3),
            true,
        ),
        ("limit 0", &["c0"], vec![], limit(0), true),
        (
            "a volume already on the node counts once",
            &["shared"],
            vec![&["shared", "c1"]],
            limit(2),
            false,
        ),
        (
            "an unbound claim counts for its class's provisioner",
            &["unbound"],
            vec![&["c1"]],
            limit(1),
            true,
        ),
        (
            "other drivers have their own limit",
            &["other"],
            vec![&["c1"]],
            limit(1),
            false,
        ),
        (
            "non-CSI volumes do not count",
            &["plain"],
            vec![],
            limit(0),
            false,
        ),
        (
            "no CSINode: no limit",
            &["c0", "c1"],
            vec![&["c2"]],
            vec![],
            false,
        ),
        (
            "a driver without allocatable: no limit",
            &["c0", "c1"],
            vec![&["c2"]],
            vec![csi_node("n1", &[(DRIVER, None)])],
            false,
        ),
        (
            "the CSINode of another node",
            &["c0"],
            vec![],
            vec![csi_node("n2", &[(DRIVER, Some(0))])],
            false,
        ),
        (
            "a placed pod's missing claim is skipped",
            &["c0"],
            vec![&["gone"]],
            limit(1),
            false,
        ),
    ];
    for (case, new, placed, csi_nodes, over) in cases {
        let s = run(new, &placed, csi_nodes, n1());
        if over {
            assert_eq!(s.code(), Code::Unschedulable, "{case}: {s}");
            assert_eq!(s.message(), ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, "{case}");
        } else {
            assert!(s.is_success(), "{case}: {s}");
        }
    }
}

#[test]
fn legacy_node_allocatable_limits_and_missing_claims() {
    let n = node(
        "n1",
        &[(&format!("{CSI_ATTACH_LIMIT_PREFIX}{DRIVER}"), "1")],
    );
    let s = run(&["c0"], &[&["c1"]], vec![], n.clone());
    assert_eq!(s.message(), ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
    // The CSINode's count wins over the Node's.
    let s = run(
        &["c0"],
        &[&["c1"]],
        vec![csi_node("n1", &[(DRIVER, Some(2))])],
        n.clone(),
    );
    assert!(s.is_success(), "{s}");
    let s = run(&["gone"], &[], vec![], n);
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(
        s.message(),
        "looking up PVC default/gone: persistentvolumeclaim \"gone\" not found"
    );
}
