//! The static policy on the seed's 2-socket machine (4 CPUs each, no SMT)
//! and an SMT one, the checkpoint across restarts, and the reconcile loop
//! on the fake runtime.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use berth_topology::machine::FakeSysfs;
use serde_json::json;

use super::*;
use crate::cgroups::Qos;
use crate::runtime::fake::FakeRuntime;
use crate::testutil::TempDir;

fn machine(threads: usize) -> Machine {
    Machine::discover(&FakeSysfs::machine(2, 1, 4, threads, 0)).unwrap()
}

fn static_cfg(reserved: &str) -> CpuManagerConfig {
    CpuManagerConfig {
        policy: "static".into(),
        reserved_cpus: Some(reserved.parse().unwrap()),
        ..Default::default()
    }
}

/// A pod `uid` whose containers ask for these CPUs (requests = limits).
fn pod(uid: &str, init: &[(&str, &str)], containers: &[(&str, &str)]) -> Pod {
    let list = |cs: &[(&str, &str)]| -> Vec<serde_json::Value> {
        cs.iter()
            .map(|(name, cpu)| {
                let r = json!({"cpu": cpu, "memory": "64Mi"});
                json!({"name": name, "resources": {"requests": r, "limits": r}})
            })
            .collect()
    };
    serde_json::from_value(json!({
        "metadata": {"name": uid, "namespace": "ns", "uid": uid},
        "spec": {"initContainers": list(init), "containers": list(containers)},
    }))
    .unwrap()
}

/// Admission as the agent does it (the Topology Manager, policy none).
fn admit(m: &Arc<CpuManager>, pod: &Pod, qos: Qos) -> Option<(String, String)> {
    let tm = crate::cm::topologymanager::Manager::new(
        Default::default(),
        m.machine().numa.clone(),
        m.clone(),
        None,
    )
    .unwrap();
    tm.admit(pod, qos)
}

fn set(m: &CpuManager, uid: &str, name: &str) -> String {
    m.container_cpuset(uid, name)
        .map(|s| s.to_string())
        .unwrap_or_default()
}

#[test]
fn static_policy_packs_exclusive_cpus_and_shrinks_the_shared_pool() {
    let dir = TempDir::new("cpumanager");
    let m = Arc::new(CpuManager::new(static_cfg("0"), machine(1), dir.path()).unwrap());
    // (pod, its containers' CPUs, QoS, admitted, the container's cpuset, the shared pool after)
    let cases: [(&str, &str, Qos, bool, &str, &str); 6] = [
        // Whole cores from the socket with fewest free CPUs (0 is reserved).
        ("a", "2", Qos::Guaranteed, true, "1-2", "0,3-7"),
        // A whole free socket first.
        ("b", "4", Qos::Guaranteed, true, "4-7", "0,3"),
        // Fractional CPUs and other QoS classes share the pool.
        ("c", "1500m", Qos::Guaranteed, true, "0,3", "0,3"),
        ("d", "1", Qos::Burstable, true, "0,3", "0,3"),
        // The reserved CPU is never handed out.
        ("e", "1", Qos::Guaranteed, true, "3", "0"),
        ("f", "1", Qos::Guaranteed, false, "0", "0"),
    ];
    for (uid, cpu, qos, admitted, cpus, shared) in cases {
        let refused = admit(&m, &pod(uid, &[], &[("app", cpu)]), qos);
        assert_eq!(refused.is_none(), admitted, "{uid}: {refused:?}");
        assert_eq!(set(&m, uid, "app"), cpus, "{uid}");
        assert_eq!(m.state().default_set.to_string(), shared, "{uid}");
    }
    let refused = admit(&m, &pod("f", &[], &[("app", "1")]), Qos::Guaranteed);
    assert_eq!(
        refused,
        Some((
            "UnexpectedAdmissionError".into(),
            "Allocate failed due to not enough cpus available to satisfy request: requested=1, available=0, which is unexpected".into()
        ))
    );
    // Admission again (every sync) keeps what a pod has.
    assert!(admit(&m, &pod("a", &[], &[("app", "2")]), Qos::Guaranteed).is_none());
    assert_eq!(set(&m, "a", "app"), "1-2");
    // A finished pod's CPUs go back to the pool.
    m.remove_pod("b");
    assert_eq!(m.state().default_set.to_string(), "0,4-7");
    assert_eq!(set(&m, "c", "app"), "0,4-7");
}

#[test]
fn init_containers_cpus_are_reused_and_a_sidecars_are_not() {
    let dir = TempDir::new("cpumanager");
    let m = Arc::new(CpuManager::new(static_cfg("0"), machine(1), dir.path()).unwrap());
    let p = pod("p", &[("setup", "2")], &[("app", "2")]);
    assert!(admit(&m, &p, Qos::Guaranteed).is_none());
    assert_eq!(set(&m, "p", "setup"), "1-2");
    assert_eq!(
        set(&m, "p", "app"),
        "1-2",
        "the init container's CPUs, reused"
    );
    assert_eq!(m.state().default_set.to_string(), "0,3-7");

    let mut s = pod("s", &[("proxy", "1")], &[("app", "1")]);
    if let Some(init) = s.spec.as_mut().and_then(|s| s.init_containers.as_mut()) {
        init[0].restart_policy = Some("Always".into());
    }
    assert!(admit(&m, &s, Qos::Guaranteed).is_none());
    let (proxy, app) = (set(&m, "s", "proxy"), set(&m, "s", "app"));
    assert_ne!(proxy, app, "a sidecar runs beside the app: {proxy} {app}");
    // All or nothing: a pod that does not fit leaves the state as it was.
    let before = m.state();
    assert!(
        admit(
            &m,
            &pod("big", &[], &[("a", "2"), ("b", "9")]),
            Qos::Guaranteed
        )
        .is_some()
    );
    assert_eq!(m.state(), before);
}

#[test]
fn full_pcpus_only_takes_whole_cores_on_smt_machines() {
    let dir = TempDir::new("cpumanager");
    let mut cfg = static_cfg("0,8");
    cfg.full_pcpus_only = true;
    let m = Arc::new(CpuManager::new(cfg, machine(2), dir.path()).unwrap());
    let refused = admit(&m, &pod("odd", &[], &[("app", "1")]), Qos::Guaranteed);
    let (reason, msg) = refused.unwrap();
    assert_eq!(reason, "SMTAlignmentError");
    assert_eq!(
        msg,
        "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2"
    );
    assert!(admit(&m, &pod("even", &[], &[("app", "2")]), Qos::Guaranteed).is_none());
    // CPU n and n+8 are one core's threads on this machine.
    let got: CpuSet = set(&m, "even", "app").parse().unwrap();
    let ids: Vec<usize> = got.iter().collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[1], ids[0] + 8, "{got}");
}

#[test]
fn the_checkpoint_keeps_assignments_across_restarts_and_refuses_a_changed_policy() {
    let dir = TempDir::new("cpumanager");
    {
        let m = Arc::new(CpuManager::new(static_cfg("0"), machine(1), dir.path()).unwrap());
        assert!(admit(&m, &pod("a", &[], &[("app", "2")]), Qos::Guaranteed).is_none());
    }
    let text = std::fs::read_to_string(dir.path().join(CHECKPOINT_FILE)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["policyName"], "static");
    assert_eq!(v["defaultCpuSet"], "0,3-7");
    assert_eq!(v["entries"]["a"]["app"], "1-2");
    let m = Arc::new(CpuManager::new(static_cfg("0"), machine(1), dir.path()).unwrap());
    assert_eq!(set(&m, "a", "app"), "1-2");
    drop(m);
    let err = CpuManager::new(CpuManagerConfig::default(), machine(1), dir.path())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.starts_with("could not restore state from checkpoint: configured policy \"none\" differs from state checkpoint policy \"static\""),
        "{err}"
    );
    // A checkpoint for another machine, or an edited one.
    let err = CpuManager::new(static_cfg("0"), machine(2), dir.path())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("doesn't match with CPUs in state"), "{err}");
    std::fs::write(dir.path().join(CHECKPOINT_FILE), text.replace("1-2", "1-3")).unwrap();
    let err = CpuManager::new(static_cfg("0"), machine(1), dir.path())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("is corrupted"), "{err}");
}

#[test]
fn the_static_policy_needs_reserved_cpus() {
    let dir = TempDir::new("cpumanager");
    let cfg = CpuManagerConfig {
        policy: "static".into(),
        ..Default::default()
    };
    let err = CpuManager::new(cfg.clone(), machine(1), dir.path())
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "[cpumanager] unable to determine reserved CPU resources for static policy"
    );
    // Without --reserved-cpus the count comes from kube- and system-reserved (rounded up).
    let cfg = CpuManagerConfig {
        reserved_cpu_millis: 1500,
        ..cfg
    };
    let m = Arc::new(CpuManager::new(cfg, machine(1), dir.path()).unwrap());
    let Policy::Static(p) = m.policy() else {
        panic!("static")
    };
    assert_eq!(p.reserved.len(), 2);
    let err = CpuManager::new(static_cfg("9"), machine(1), TempDir::new("c").path())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("not all on this machine"), "{err}");
}

#[tokio::test]
async fn reconcile_sends_changed_cpusets_and_drops_stale_pods() {
    let dir = TempDir::new("cpumanager");
    let m = Arc::new(CpuManager::new(static_cfg("0"), machine(1), dir.path()).unwrap());
    let rt = FakeRuntime::new();
    rt.add_image("busybox");
    let sandbox = rt
        .run_sandbox(&crate::runtime::SandboxConfig::default())
        .await
        .unwrap();
    let labels = BTreeMap::from([
        (LABEL_POD_UID.to_string(), "shared".to_string()),
        (LABEL_CONTAINER_NAME.to_string(), "web".to_string()),
    ]);
    let cfg = crate::runtime::ContainerConfig {
        name: "web".into(),
        image: "busybox".into(),
        labels,
        ..Default::default()
    };
    let id = rt
        .create_container(&sandbox, &cfg, &Default::default())
        .await
        .unwrap();
    rt.start_container(&id).await.unwrap();
    let updates = |rt: &FakeRuntime| -> Vec<String> {
        rt.calls()
            .into_iter()
            .filter(|c| c.starts_with("update_container_resources"))
            .collect()
    };
    m.reconcile(&rt, None).await;
    m.reconcile(&rt, None).await;
    assert_eq!(
        updates(&rt),
        [format!("update_container_resources {id} cpuset=0-7")]
    );
    assert!(admit(&m, &pod("g", &[], &[("app", "4")]), Qos::Guaranteed).is_none());
    let live = || HashSet::from(["g".to_string()]);
    m.reconcile(&rt, Some(&live)).await;
    assert_eq!(
        updates(&rt).last().unwrap(),
        &format!("update_container_resources {id} cpuset=0-3")
    );
    // Once no worker runs g, its CPUs return and the shared container follows.
    let none = HashSet::new;
    m.reconcile(&rt, Some(&none)).await;
    assert_eq!(
        updates(&rt).last().unwrap(),
        &format!("update_container_resources {id} cpuset=0-7")
    );
    assert!(m.state().assignments.is_empty());
}

#[test]
fn the_none_policy_sets_no_cpusets() {
    let dir = TempDir::new("cpumanager");
    let m = Arc::new(CpuManager::new(CpuManagerConfig::default(), machine(1), dir.path()).unwrap());
    assert!(admit(&m, &pod("a", &[], &[("app", "2")]), Qos::Guaranteed).is_none());
    assert_eq!(m.container_cpuset("a", "app"), None);
}
