use super::*;

fn res(s: &str) -> Resources {
    parse_resources(s).expect("resources")
}

fn cfg(capacity: &str, kube: &str, system: &str, eviction: &str) -> NodeConfig {
    let mut c = NodeConfig::new("n1", res(capacity));
    c.kube_reserved = res(kube);
    c.system_reserved = res(system);
    c.eviction_hard = EvictionThreshold::parse_list(eviction).expect("eviction");
    c
}

#[test]
fn allocatable_table() {
    // (capacity, kube-reserved, system-reserved, eviction-hard, expected allocatable)
    let cases = [
        (
            "cpu=4,memory=8Gi",
            "cpu=500m,memory=1Gi",
            "cpu=500m,memory=500Mi",
            "memory.available<100Mi",
            "cpu=3,memory=6568Mi,pods=110",
        ),
        // Nothing reserved: only the default eviction threshold comes off memory.
        (
            "cpu=2,memory=4Gi",
            "",
            "",
            "memory.available<100Mi",
            "cpu=2,memory=3996Mi,pods=110",
        ),
        // nodefs.available is a share of ephemeral-storage capacity.
        (
            "cpu=8,memory=16Gi,ephemeral-storage=100Gi",
            "ephemeral-storage=1Gi",
            "",
            "memory.available<100Mi,nodefs.available<10%",
            "cpu=8,memory=16284Mi,ephemeral-storage=89Gi,pods=110",
        ),
        // Huge pages are taken out of allocatable memory.
        (
            "cpu=4,memory=8Gi,hugepages-2Mi=1Gi",
            "",
            "",
            "memory.available<100Mi",
            "cpu=4,memory=7068Mi,hugepages-2Mi=1Gi,pods=110",
        ),
        // Reservations beyond capacity clamp at zero.
        (
            "cpu=1,memory=1Gi",
            "cpu=2",
            "",
            "memory.available<2Gi",
            "cpu=0,memory=0,pods=110",
        ),
        // Explicit pods capacity is kept.
        (
            "cpu=1,memory=1Gi,pods=250",
            "",
            "",
            "",
            "cpu=1,memory=1Gi,pods=250",
        ),
    ];
    for (cap, kube, system, ev, want) in cases {
        let got = allocatable(&cfg(cap, kube, system, ev));
        let got: Vec<String> = got
            .iter()
            .map(|(k, v)| format!("{k}={}", v.canonical()))
            .collect();
        let mut want: Vec<String> = want.split(',').map(String::from).collect();
        want.sort();
        assert_eq!(
            got, want,
            "capacity {cap}, kube {kube}, system {system}, eviction {ev}"
        );
    }
}

#[test]
fn default_eviction_is_upstreams() {
    let d = EvictionThreshold::defaults();
    assert_eq!(
        d,
        EvictionThreshold::parse_list(
            "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%"
        )
        .expect("parse")
    );
    assert!(EvictionThreshold::parse_list("memory.available>1").is_err());
    assert!(EvictionThreshold::parse_list("nodefs.available<200%").is_err());
}

#[test]
fn conditions_table() {
    let now = Timestamp::now();
    // (health, [(type, status, reason, message)])
    let healthy = NodeHealth::default();
    let pressured = NodeHealth {
        memory_pressure: true,
        disk_pressure: true,
        pid_pressure: true,
        not_ready: vec!["container runtime is down".into()],
    };
    let cases = [
        (
            healthy,
            [
                (
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                (
                    "DiskPressure",
                    "False",
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                ),
                (
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                ),
                (
                    "Ready",
                    "True",
                    "KubeletReady",
                    "kubelet is posting ready status",
                ),
            ],
        ),
        (
            pressured,
            [
                (
                    "MemoryPressure",
                    "True",
                    "KubeletHasInsufficientMemory",
                    "kubelet has insufficient memory available",
                ),
                (
                    "DiskPressure",
                    "True",
                    "KubeletHasDiskPressure",
                    "kubelet has disk pressure",
                ),
                (
                    "PIDPressure",
                    "True",
                    "KubeletHasInsufficientPID",
                    "kubelet has insufficient PID available",
                ),
                (
                    "Ready",
                    "False",
                    "KubeletNotReady",
                    "container runtime is down",
                ),
            ],
        ),
    ];
    for (health, want) in cases {
        let got = conditions(&health, &[], now);
        let got: Vec<_> = got
            .iter()
            .map(|c| {
                (
                    c.type_.as_str(),
                    c.status.as_str(),
                    c.reason.as_deref().unwrap_or(""),
                    c.message.as_deref().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(got, want.to_vec());
    }
}

#[test]
fn transition_time_kept_until_status_changes() {
    let t0 = Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(60);
    let first = conditions(&NodeHealth::default(), &[], t0);
    let now = Timestamp::now();
    let again = conditions(&NodeHealth::default(), &first, now);
    for c in &again {
        assert_eq!(c.last_transition_time, Some(Time(t0)), "{}", c.type_);
        assert_eq!(c.last_heartbeat_time, Some(Time(now)));
    }
    let sick = NodeHealth {
        memory_pressure: true,
        ..Default::default()
    };
    let changed = conditions(&sick, &first, now);
    assert_eq!(changed[0].last_transition_time, Some(Time(now)));
    assert_eq!(changed[3].last_transition_time, Some(Time(t0)));
}

#[test]
fn labels_and_object() {
    let mut c = NodeConfig::new("worker-1", res("cpu=2,memory=2Gi"));
    c.node_info.operating_system = "linux".into();
    c.node_info.architecture = "amd64".into();
    c.roles = vec!["worker".into()];
    c.labels
        .insert("kubernetes.io/hostname".into(), "spoofed".into());
    c.labels.insert("zone".into(), "a".into());
    let l = node_labels(&c);
    assert_eq!(l["kubernetes.io/hostname"], "worker-1");
    assert_eq!(l["kubernetes.io/os"], "linux");
    assert_eq!(l["kubernetes.io/arch"], "amd64");
    assert_eq!(l["beta.kubernetes.io/os"], "linux");
    assert_eq!(l["beta.kubernetes.io/arch"], "amd64");
    assert_eq!(l["node-role.kubernetes.io/worker"], "");
    assert_eq!(l["zone"], "a");
    let n = node_object(&c, &NodeHealth::default(), Timestamp::now());
    let st = n.status.expect("status");
    assert_eq!(st.capacity.expect("capacity")["pods"].0, "110");
    assert_eq!(st.allocatable.expect("allocatable")["memory"].0, "1948Mi");
}

#[test]
fn status_change_ignores_heartbeats() {
    let c = NodeConfig::new("n", res("cpu=1,memory=1Gi"));
    let a = node_status(
        &c,
        &NodeHealth::default(),
        &[],
        Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(5),
    );
    let b = node_status(
        &c,
        &NodeHealth::default(),
        a.conditions.as_deref().unwrap_or_default(),
        Timestamp::now(),
    );
    assert!(!status_changed(&a, &b));
    let sick = NodeHealth {
        disk_pressure: true,
        ..Default::default()
    };
    let d = node_status(
        &c,
        &sick,
        a.conditions.as_deref().unwrap_or_default(),
        Timestamp::now(),
    );
    assert!(status_changed(&a, &d));
}
