use std::sync::Mutex;

use berth_api::storage::{ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;

use super::binder::{
    ERR_REASON_BIND_CONFLICT, ERR_REASON_NODE_CONFLICT, ERR_REASON_PV_NOT_EXIST,
    ERR_REASON_UNBOUND_IMMEDIATE,
};
use super::*;
use crate::config::Profile;
use crate::framework::{NodeInfo, ScheduleError, SearchState};
use crate::plugins::testing::*;
use crate::plugins::{Handle, new_framework_with};

const ZONE: &str = "topology.kubernetes.io/zone";
const WFFC: &str = "WaitForFirstConsumer";

fn zone_node(name: &str, zone: &str) -> Node {
    labeled(
        node(name, &[("cpu", "4"), ("pods", "10")]),
        &[(ZONE, zone), ("kubernetes.io/hostname", name)],
    )
}

fn claim_pod(name: &str, claims: &[&str]) -> Pod {
    let mut p = with_claims(pod(name, &[]), claims);
    p.metadata.uid = Some(format!("uid-{name}"));
    p
}

/// The classes every table uses: Immediate, WFFC static-only, WFFC
/// dynamic (zone a only), and one without a binding mode.
fn classes() -> Vec<k8s_openapi::api::storage::v1::StorageClass> {
    vec![
        storage_class("immediate", "example.com/csi", "Immediate", &[]),
        storage_class("local", berth_api::storage::NO_PROVISIONER, WFFC, &[]),
        storage_class("dynamic", "example.com/csi", WFFC, &["a"]),
        storage_class("nomode", "example.com/csi", "", &[]),
    ]
}

fn plugin() -> VolumeBinding {
    VolumeBinding::new(Arc::new(api::NoVolumeApi), Duration::from_secs(600))
}

fn storage(claims: Vec<PersistentVolumeClaim>, volumes: Vec<PersistentVolume>) -> StorageSnapshot {
    StorageSnapshot::of(claims, volumes, classes(), vec![])
}

fn snapshot(storage: StorageSnapshot) -> Snapshot {
    Snapshot::new(vec![
        node_info(zone_node("a1", "a"), vec![]),
        node_info(zone_node("b1", "b"), vec![]),
    ])
    .with_storage(storage)
}

#[test]
fn pre_filter_table() {
    let deleting = {
        let mut c = pvc("c", "local", "1Gi");
        c.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        c
    };
    let lost = {
        let mut c = pvc("c", "local", "1Gi");
        c.spec.get_or_insert_default().volume_name = Some("gone".into());
        c.status.get_or_insert_default().phase = Some("Lost".into());
        c
    };
    let owned_by_pod = |mut c: PersistentVolumeClaim| {
        c.metadata.owner_references = Some(vec![OwnerReference {
            uid: "uid-p".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        c
    };
    let p = claim_pod("p", &["c"]);
    let eph = {
        let mut e = with_ephemeral(pod("p", &[]), "scratch");
        e.metadata.uid = Some("uid-p".into());
        e
    };
    // (case, pod, claims, code, message)
    let cases: Vec<(&str, Pod, Vec<PersistentVolumeClaim>, Code, &str)> = vec![
        ("no claims", pod("p", &[]), vec![], Code::Skip, ""),
        (
            "missing claim",
            p.clone(),
            vec![],
            Code::UnschedulableAndUnresolvable,
            "persistentvolumeclaim \"c\" not found",
        ),
        (
            "missing ephemeral claim",
            eph.clone(),
            vec![],
            Code::UnschedulableAndUnresolvable,
            "waiting for ephemeral volume controller to create the persistentvolumeclaim \"p-scratch\"",
        ),
        (
            "ephemeral claim of another pod",
            eph.clone(),
            vec![pvc("p-scratch", "local", "1Gi")],
            Code::UnschedulableAndUnresolvable,
            "PVC default/p-scratch was not created for pod default/p (pod is not owner)",
        ),
        (
            "ephemeral claim of this pod",
            eph,
            vec![owned_by_pod(pvc("p-scratch", "local", "1Gi"))],
            Code::Success,
            "",
        ),
        (
            "claim being deleted",
            p.clone(),
            vec![deleting],
            Code::UnschedulableAndUnresolvable,
            "persistentvolumeclaim \"c\" is being deleted",
        ),
        (
            "lost claim",
            p.clone(),
            vec![lost],
            Code::UnschedulableAndUnresolvable,
            "persistentvolumeclaim \"c\" bound to non-existent persistentvolume \"gone\"",
        ),
        (
            "unbound immediate claim",
            p.clone(),
            vec![pvc("c", "immediate", "1Gi")],
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_UNBOUND_IMMEDIATE,
        ),
        (
            "unbound claim without class is immediate",
            p.clone(),
            vec![pvc("c", "", "1Gi")],
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_UNBOUND_IMMEDIATE,
        ),
        (
            "unbound claim of a missing class is immediate",
            p.clone(),
            vec![pvc("c", "gone", "1Gi")],
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_UNBOUND_IMMEDIATE,
        ),
        (
            "class without binding mode",
            p.clone(),
            vec![pvc("c", "nomode", "1Gi")],
            Code::Error,
            "VolumeBindingMode not set for StorageClass \"nomode\"",
        ),
        (
            "pre-bound delayed claim waits for the PV controller",
            p.clone(),
            vec![{
                let mut c = pvc("c", "local", "1Gi");
                c.spec.get_or_insert_default().volume_name = Some("pv".into());
                c
            }],
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_UNBOUND_IMMEDIATE,
        ),
        (
            "bound immediate claim",
            p.clone(),
            vec![bound_pvc(pvc("c", "immediate", "1Gi"), "pv")],
            Code::Success,
            "",
        ),
        (
            "unbound delayed claim",
            p,
            vec![pvc("c", "local", "1Gi")],
            Code::Success,
            "",
        ),
    ];
    for (case, p, claims, code, message) in cases {
        let snap = snapshot(storage(claims, vec![]));
        let mut state = CycleState::default();
        let s = plugin().pre_filter(&mut state, &PodInfo::new(p), &snap);
        assert_eq!(s.code(), code, "{case}: {s}");
        assert_eq!(s.message(), message, "{case}");
    }
}

/// PreFilter then Filter on every node of the default two-zone snapshot.
fn filter_all(pl: &VolumeBinding, p: &Pod, snap: &Snapshot) -> (CycleState, Vec<(String, Status)>) {
    let mut state = CycleState::default();
    let pi = PodInfo::new(p.clone());
    let s = pl.pre_filter(&mut state, &pi, snap);
    assert!(s.is_success(), "pre_filter: {s}");
    let out = snap
        .nodes
        .iter()
        .map(|n| (n.name().to_string(), pl.filter(&state, &pi, n)))
        .collect();
    (state, out)
}

/// (case, claims of the pod, claims, volumes, reasons on a1, reasons on b1)
type FilterRow<'a> = (
    &'a str,
    Vec<&'a str>,
    Vec<PersistentVolumeClaim>,
    Vec<PersistentVolume>,
    &'a [&'a str],
    &'a [&'a str],
);

#[test]
fn filter_table() {
    let bound_a = bound_pvc(pvc("c", "local", "1Gi"), "pv-a");
    let pv_a = pv_bound_to(pv_on(pv("pv-a", "local", "1Gi"), ZONE, "a"), &bound_a);
    let selected_b = {
        let mut c = pvc("d", "dynamic", "1Gi");
        c.metadata
            .annotations
            .get_or_insert_default()
            .insert(ANN_SELECTED_NODE.into(), "b1".into());
        c
    };
    // (case, claims of the pod, claims, volumes, status on a1, status on b1)
    let ok: &[&str] = &[];
    let cases: Vec<FilterRow<'_>> = vec![
        (
            "bound volume in zone a",
            vec!["c"],
            vec![bound_a.clone()],
            vec![pv_a.clone()],
            ok,
            &[ERR_REASON_NODE_CONFLICT],
        ),
        (
            "bound to a volume that is gone",
            vec!["c"],
            vec![bound_a.clone()],
            vec![],
            &[ERR_REASON_PV_NOT_EXIST],
            &[ERR_REASON_PV_NOT_EXIST],
        ),
        (
            "static volume only in zone a, no provisioner",
            vec!["s"],
            vec![pvc("s", "local", "1Gi")],
            vec![pv_on(pv("local-a", "local", "2Gi"), ZONE, "a")],
            ok,
            &[ERR_REASON_BIND_CONFLICT],
        ),
        (
            "static volume too small",
            vec!["s"],
            vec![pvc("s", "local", "5Gi")],
            vec![pv("small", "local", "2Gi")],
            &[ERR_REASON_BIND_CONFLICT],
            &[ERR_REASON_BIND_CONFLICT],
        ),
        (
            "dynamic class allows zone a only",
            vec!["d"],
            vec![pvc("d", "dynamic", "1Gi")],
            vec![],
            ok,
            &[ERR_REASON_BIND_CONFLICT],
        ),
        (
            "another pod chose b1 for the claim",
            vec!["d"],
            vec![selected_b],
            vec![],
            &[ERR_REASON_BIND_CONFLICT],
            // Selected b1, but the class does not allow zone b.
            &[ERR_REASON_BIND_CONFLICT],
        ),
        (
            "bound in zone a and a static claim only in zone b: both reasons",
            vec!["c", "s"],
            vec![bound_a.clone(), pvc("s", "local", "1Gi")],
            vec![pv_a, pv_on(pv("local-b", "local", "1Gi"), ZONE, "b")],
            &[ERR_REASON_BIND_CONFLICT],
            &[ERR_REASON_NODE_CONFLICT],
        ),
        (
            "two claims cannot share one volume",
            vec!["s", "t"],
            vec![pvc("s", "local", "1Gi"), pvc("t", "local", "1Gi")],
            vec![pv("only", "local", "1Gi")],
            &[ERR_REASON_BIND_CONFLICT],
            &[ERR_REASON_BIND_CONFLICT],
        ),
    ];
    for (case, pod_claims, claims, volumes, want_a, want_b) in cases {
        let snap = snapshot(storage(claims, volumes));
        let (_, got) = filter_all(&plugin(), &claim_pod("p", &pod_claims), &snap);
        for ((node, s), want) in got.iter().zip([want_a, want_b]) {
            let want: Vec<String> = want.iter().map(|w| w.to_string()).collect();
            assert_eq!(s.reasons(), want.as_slice(), "{case} on {node}");
            let code = if want.is_empty() {
                Code::Success
            } else {
                Code::UnschedulableAndUnresolvable
            };
            assert_eq!(s.code(), code, "{case} on {node}");
        }
    }
}

#[test]
fn the_smallest_fitting_volume_goes_to_the_smallest_claim() {
    let snap = snapshot(storage(
        vec![pvc("big", "local", "5Gi"), pvc("small", "local", "1Gi")],
        vec![
            pv("pv-10", "local", "10Gi"),
            pv("pv-1", "local", "1Gi"),
            pv("pv-5", "local", "5Gi"),
        ],
    ));
    let pl = plugin();
    let (state, got) = filter_all(&pl, &claim_pod("p", &["big", "small"]), &snap);
    assert!(got.iter().all(|(_, s)| s.is_success()));
    let data = state.read::<StateData>(NAME).unwrap();
    let v = guard(&data.by_node).get("a1").cloned().unwrap();
    let pairs: Vec<(&str, &str)> = v
        .static_bindings
        .iter()
        .map(|(c, pv)| {
            (
                c.metadata.name.as_deref().unwrap(),
                pv.metadata.name.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(pairs, vec![("small", "pv-1"), ("big", "pv-5")]);
}

#[test]
fn reserve_assumes_volumes_until_unreserve() {
    let snap = snapshot(storage(
        vec![pvc("c1", "local", "1Gi"), pvc("c2", "local", "1Gi")],
        vec![pv("only", "local", "1Gi")],
    ));
    let pl = plugin();
    let first = claim_pod("first", &["c1"]);
    let second = claim_pod("second", &["c2"]);
    let (mut state, got) = filter_all(&pl, &first, &snap);
    assert!(got[0].1.is_success());
    let s = pl.reserve(&mut state, &PodInfo::new(first.clone()), "a1");
    assert!(s.is_success(), "{s}");
    // The reserved volume names the claim, marked as the controller's doing.
    let data = state.read::<StateData>(NAME).unwrap();
    let reserved = guard(&data.reserved).clone().unwrap();
    assert!(!reserved.all_bound);
    let v = reserved.volumes.unwrap();
    let written = &v.static_bindings[0].1;
    let r = written.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
    assert_eq!(
        (r.name.as_deref(), r.namespace.as_deref(), r.uid.as_deref()),
        (Some("c1"), Some("default"), Some("uid-c1"))
    );
    assert_eq!(
        written.metadata.annotations.as_ref().unwrap()[ANN_BOUND_BY_CONTROLLER],
        "yes"
    );
    // The next cycle does not hand the same volume to another claim.
    let (_, got) = filter_all(&pl, &second, &snap);
    assert_eq!(got[0].1.reasons(), [ERR_REASON_BIND_CONFLICT.to_string()]);
    // The same claim (a second pod of it) still finds its volume.
    let (_, got) = filter_all(&pl, &claim_pod("sibling", &["c1"]), &snap);
    assert!(got[0].1.is_success(), "{}", got[0].1);
    pl.unreserve(&mut state, &PodInfo::new(first), "a1");
    let (_, got) = filter_all(&pl, &second, &snap);
    assert!(got[0].1.is_success(), "{}", got[0].1);
}

#[test]
fn reserved_provisioning_pins_the_claim_to_its_node() {
    let snap = Snapshot::new(vec![
        node_info(zone_node("a1", "a"), vec![]),
        node_info(zone_node("a2", "a"), vec![]),
    ])
    .with_storage(storage(vec![pvc("d", "dynamic", "1Gi")], vec![]));
    let pl = plugin();
    let first = claim_pod("first", &["d"]);
    let (mut state, got) = filter_all(&pl, &first, &snap);
    assert!(got.iter().all(|(_, s)| s.is_success()));
    assert!(
        pl.reserve(&mut state, &PodInfo::new(first), "a2")
            .is_success()
    );
    let (_, got) = filter_all(&pl, &claim_pod("second", &["d"]), &snap);
    assert_eq!(got[0].1.reasons(), [ERR_REASON_BIND_CONFLICT.to_string()]);
    assert!(got[1].1.is_success());
}

#[test]
fn bound_claims_need_no_binding() {
    let c = bound_pvc(pvc("c", "local", "1Gi"), "pv");
    let snap = snapshot(storage(
        vec![c.clone()],
        vec![pv_bound_to(pv("pv", "local", "1Gi"), &c)],
    ));
    let api = Arc::new(FakeApi::new(StorageSnapshot::default(), |_| {}));
    let pl = VolumeBinding::new(api.clone(), Duration::from_secs(1));
    let p = claim_pod("p", &["c"]);
    let (mut state, _) = filter_all(&pl, &p, &snap);
    let pi = PodInfo::new(p);
    assert!(pl.reserve(&mut state, &pi, "a1").is_success());
    let s = block_on(pl.pre_bind(&state, &pi, "a1"));
    assert!(s.is_success(), "{s}");
    assert!(api.writes().is_empty());
    // Without a reserved node, PreBind has nothing to go on.
    let mut fresh = CycleState::default();
    pl.pre_filter(
        &mut fresh,
        &pi,
        &snapshot(storage(vec![pvc("c", "local", "1Gi")], vec![])),
    );
    let s = block_on(pl.pre_bind(&fresh, &pi, "a1"));
    assert_eq!(s.code(), Code::Error);
    assert_eq!(s.message(), "no pod volumes found for node \"a1\"");
}

/// The API PreBind writes to: it keeps a storage snapshot, bumps resource
/// versions on writes and lets `react` play the PV controller.
struct FakeApi {
    storage: Mutex<StorageSnapshot>,
    writes: Mutex<Vec<String>>,
    react: Box<dyn Fn(&mut StorageSnapshot) + Send + Sync>,
    fail_writes: bool,
    pod_gone: bool,
}

impl FakeApi {
    fn new(
        s: StorageSnapshot,
        react: impl Fn(&mut StorageSnapshot) + Send + Sync + 'static,
    ) -> Self {
        Self {
            storage: Mutex::new(s),
            writes: Mutex::default(),
            react: Box::new(react),
            fail_writes: false,
            pod_gone: false,
        }
    }

    fn writes(&self) -> Vec<String> {
        self.writes.lock().unwrap().clone()
    }
}

fn bump(rv: &mut Option<String>) {
    let n: u64 = rv.as_deref().and_then(|r| r.parse().ok()).unwrap_or(0);
    *rv = Some((n + 1).to_string());
}

impl api::VolumeApi for FakeApi {
    fn storage(&self) -> Arc<StorageSnapshot> {
        let mut s = self.storage.lock().unwrap();
        (self.react)(&mut s);
        Arc::new(s.clone())
    }

    fn pod_exists(&self, _: &str) -> bool {
        !self.pod_gone
    }

    fn update_volume<'a>(
        &'a self,
        pv: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<PersistentVolume, String>> {
        Box::pin(async move {
            if self.fail_writes {
                return Err("persistentvolumes \"x\" is forbidden".into());
            }
            let mut stored = pv.clone();
            bump(&mut stored.metadata.resource_version);
            self.writes.lock().unwrap().push(format!(
                "pv {} -> {}",
                pv.metadata.name.as_deref().unwrap_or_default(),
                serde_json::to_string(&pv.spec.as_ref().unwrap().claim_ref).unwrap()
            ));
            let name = stored.metadata.name.clone().unwrap_or_default();
            self.storage
                .lock()
                .unwrap()
                .volumes
                .insert(name, Arc::new(stored.clone()));
            Ok(stored)
        })
    }

    fn update_claim<'a>(
        &'a self,
        pvc: &'a PersistentVolumeClaim,
    ) -> BoxFuture<'a, Result<PersistentVolumeClaim, String>> {
        Box::pin(async move {
            if self.fail_writes {
                return Err("persistentvolumeclaims \"x\" is forbidden".into());
            }
            let mut stored = pvc.clone();
            bump(&mut stored.metadata.resource_version);
            self.writes.lock().unwrap().push(format!(
                "pvc {} selected-node={}",
                pvc.metadata.name.as_deref().unwrap_or_default(),
                pvc.metadata.annotations.as_ref().unwrap()[ANN_SELECTED_NODE]
            ));
            self.storage.lock().unwrap().claims.insert(
                crate::framework::storage::claim_key(&stored),
                Arc::new(stored.clone()),
            );
            Ok(stored)
        })
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(f)
}

/// The PV controller's side of a static binding: once the volume names the
/// claim, the claim is bound to it.
fn complete_static_binding(s: &mut StorageSnapshot) {
    let bound: Vec<(String, String)> = s
        .volumes
        .values()
        .filter_map(|pv| {
            let r = pv.spec.as_ref()?.claim_ref.as_ref()?;
            Some((
                format!("{}/{}", r.namespace.as_deref()?, r.name.as_deref()?),
                pv.metadata.name.clone()?,
            ))
        })
        .collect();
    for (claim, volume) in bound {
        if let Some(c) = s.claims.get(&claim)
            && c.spec
                .as_ref()
                .and_then(|sp| sp.volume_name.as_ref())
                .is_none()
        {
            let mut c = bound_pvc((**c).clone(), &volume);
            bump(&mut c.metadata.resource_version);
            s.claims.insert(claim, Arc::new(c));
        }
    }
}

/// A provisioner's side: a claim with a selected node gets a volume there.
fn provision(s: &mut StorageSnapshot) {
    let claims: Vec<PersistentVolumeClaim> = s
        .claims
        .values()
        .filter(|c| {
            c.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(ANN_SELECTED_NODE))
                && c.spec
                    .as_ref()
                    .and_then(|sp| sp.volume_name.as_ref())
                    .is_none()
        })
        .map(|c| (**c).clone())
        .collect();
    for c in claims {
        let name = format!("pvc-{}", c.metadata.uid.as_deref().unwrap_or_default());
        let pv = pv_bound_to(pv_on(pv(&name, "dynamic", "1Gi"), ZONE, "a"), &c);
        s.volumes.insert(name.clone(), Arc::new(pv));
        let mut c = bound_pvc(c, &name);
        bump(&mut c.metadata.resource_version);
        s.claims
            .insert(crate::framework::storage::claim_key(&c), Arc::new(c));
    }
}

/// Runs the cycle's PreFilter, Filter and Reserve on `node`, then PreBind.
fn bind_on(
    pl: &VolumeBinding,
    p: &Pod,
    snap: &Snapshot,
    node: &str,
) -> (CycleState, PodInfo, Status) {
    let (mut state, got) = filter_all(pl, p, snap);
    let filtered = got.iter().find(|(n, _)| n == node).map(|(_, s)| s.clone());
    assert!(
        filtered.is_some_and(|s| s.is_success()),
        "{node} filtered out"
    );
    let pi = PodInfo::new(p.clone());
    assert!(pl.reserve(&mut state, &pi, node).is_success());
    let s = block_on(pl.pre_bind(&state, &pi, node));
    (state, pi, s)
}

#[test]
fn pre_bind_writes_the_claim_ref_and_waits_for_the_bind() {
    let st = storage(
        vec![pvc("c", "local", "1Gi")],
        vec![pv("pv", "local", "1Gi")],
    );
    let api = Arc::new(FakeApi::new(st.clone(), complete_static_binding));
    let pl = VolumeBinding::new(api.clone(), Duration::from_secs(5))
        .with_poll_interval(Duration::from_millis(5));
    let (_, _, s) = bind_on(&pl, &claim_pod("p", &["c"]), &snapshot(st), "a1");
    assert!(s.is_success(), "{s}");
    assert_eq!(
        api.writes(),
        vec![
            r#"pv pv -> {"apiVersion":"v1","kind":"PersistentVolumeClaim","name":"c","namespace":"default","resourceVersion":"1","uid":"uid-c"}"#
        ]
    );
    // Done: nothing is assumed any more.
    assert!(guard(&pl.assumed).is_empty());
}

#[test]
fn pre_bind_selects_the_node_for_provisioning() {
    let st = storage(vec![pvc("d", "dynamic", "1Gi")], vec![]);
    let api = Arc::new(FakeApi::new(st.clone(), provision));
    let pl = VolumeBinding::new(api.clone(), Duration::from_secs(5))
        .with_poll_interval(Duration::from_millis(5));
    let (_, _, s) = bind_on(&pl, &claim_pod("p", &["d"]), &snapshot(st), "a1");
    assert!(s.is_success(), "{s}");
    assert_eq!(api.writes(), vec!["pvc d selected-node=a1"]);
}

#[test]
fn pre_bind_failures() {
    let reset_selected_node = |s: &mut StorageSnapshot| {
        if let Some(c) = s.claims.get("default/d")
            && c.metadata.resource_version.as_deref() == Some("2")
        {
            let mut c = (**c).clone();
            c.metadata
                .annotations
                .get_or_insert_default()
                .remove(ANN_SELECTED_NODE);
            c.metadata.resource_version = Some("3".into());
            s.claims.insert("default/d".into(), Arc::new(c));
        }
    };
    let unbind_volume = |s: &mut StorageSnapshot| {
        if let Some(v) = s.volumes.get("pv")
            && v.metadata.resource_version.as_deref() == Some("2")
        {
            let mut v = (**v).clone();
            v.spec.get_or_insert_default().claim_ref = None;
            v.metadata.resource_version = Some("3".into());
            s.volumes.insert("pv".into(), Arc::new(v));
        }
    };
    type React = Box<dyn Fn(&mut StorageSnapshot) + Send + Sync>;
    // (case, claim, react, fail writes, pod gone, message)
    let cases: Vec<(&str, &str, React, bool, bool, &str)> = vec![
        (
            "nobody binds",
            "c",
            Box::new(|_: &mut StorageSnapshot| {}),
            false,
            false,
            "binding volumes: timed out waiting for the condition",
        ),
        (
            "the provisioner gives up",
            "d",
            Box::new(reset_selected_node),
            false,
            false,
            "binding volumes: provisioning failed for PVC \"d\"",
        ),
        (
            "the PV controller drops the claimRef",
            "c",
            Box::new(unbind_volume),
            false,
            false,
            "binding volumes: ClaimRef got reset for pv \"pv\"",
        ),
        (
            "the write is refused",
            "c",
            Box::new(|_: &mut StorageSnapshot| {}),
            true,
            false,
            "persistentvolumes \"x\" is forbidden",
        ),
        (
            "the pod is deleted",
            "c",
            Box::new(|_: &mut StorageSnapshot| {}),
            false,
            true,
            "binding volumes: pod does not exist any more",
        ),
    ];
    for (case, claim, react, fail_writes, pod_gone, message) in cases {
        let st = storage(
            vec![pvc("c", "local", "1Gi"), pvc("d", "dynamic", "1Gi")],
            vec![pv("pv", "local", "1Gi")],
        );
        let mut api = FakeApi::new(st.clone(), react);
        api.fail_writes = fail_writes;
        api.pod_gone = pod_gone;
        let pl = VolumeBinding::new(Arc::new(api), Duration::from_millis(50))
            .with_poll_interval(Duration::from_millis(5));
        let (mut state, pi, s) = bind_on(&pl, &claim_pod("p", &[claim]), &snapshot(st), "a1");
        assert_eq!(s.code(), Code::Error, "{case}");
        assert_eq!(s.message(), message, "{case}");
        // The framework unreserves a failed binding: the assumptions go.
        assert!(!guard(&pl.assumed).is_empty(), "{case}");
        pl.unreserve(&mut state, &pi, "a1");
        assert!(guard(&pl.assumed).is_empty(), "{case}");
    }
}

#[test]
fn bind_timeout_args() {
    let args = |v: serde_json::Value| -> VolumeBindingArgs { serde_json::from_value(v).unwrap() };
    assert_eq!(
        args(serde_json::json!({})).bind_timeout().unwrap(),
        Duration::from_secs(600)
    );
    assert_eq!(
        args(serde_json::json!({"bindTimeoutSeconds": 30}))
            .bind_timeout()
            .unwrap(),
        Duration::from_secs(30)
    );
    assert!(
        args(serde_json::json!({"bindTimeoutSeconds": -1}))
            .bind_timeout()
            .is_err()
    );
}

#[test]
fn the_default_profile_explains_volume_conflicts() {
    let c = bound_pvc(pvc("c", "local", "1Gi"), "pv-a");
    let snap = Snapshot::new(vec![
        node_info(zone_node("a1", "a"), vec![]),
        node_info(zone_node("b1", "b"), vec![]),
        node_info(zone_node("b2", "b"), vec![]),
    ])
    .with_storage(storage(
        vec![c.clone()],
        vec![pv_bound_to(
            pv_on(pv("pv-a", "local", "1Gi"), ZONE, "a"),
            &c,
        )],
    ));
    let fw = new_framework_with(&Profile::default(), &Handle::default()).unwrap();
    // Upstream's default plugin order, restricted to Berth's plugins.
    let names: Vec<&str> = fw.filter.iter().map(|p| p.name()).collect();
    assert_eq!(
        names,
        [
            "NodeUnschedulable",
            "NodeName",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity"
        ]
    );
    let names: Vec<&str> = fw.pre_filter.iter().map(|p| p.name()).collect();
    assert_eq!(
        names,
        [
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity"
        ]
    );
    let names: Vec<&str> = fw.reserve.iter().map(|p| p.name()).collect();
    assert_eq!(names, [NAME]);
    let names: Vec<&str> = fw.pre_bind.iter().map(|p| p.name()).collect();
    assert_eq!(names, [NAME]);
    let r = fw
        .schedule_pod(
            &PodInfo::new(claim_pod("p", &["c"])),
            &snap,
            &mut SearchState::default(),
        )
        .unwrap();
    assert_eq!(r.suggested_host, "a1");

    let snap = Snapshot::new(
        ["b1", "b2"]
            .iter()
            .map(|n| node_info(zone_node(n, "b"), vec![]))
            .collect::<Vec<NodeInfo>>(),
    )
    .with_storage(snap.storage.as_ref().clone());
    match fw.schedule_pod(
        &PodInfo::new(claim_pod("p", &["c"])),
        &snap,
        &mut SearchState::default(),
    ) {
        Err(ScheduleError::Fit(fe)) => assert_eq!(
            fe.to_string(),
            "0/2 nodes are available: 2 node(s) had volume node affinity conflict. \
             preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
        ),
        other => panic!("{other:?}"),
    }
}
