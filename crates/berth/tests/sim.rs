//! The built-in node simulator (`berth server --simulate-nodes N`) seen through
//! real kubectl: Ready nodes, renewing Leases, and the simulated pod lifecycle.

mod common;

use std::time::{Duration, Instant};

use serde_json::Value;

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn pod_json(s: &common::Server, name: &str) -> Option<Value> {
    let (code, v) = s.request(
        "GET",
        &format!("/api/v1/namespaces/default/pods/{name}"),
        "",
        None,
    );
    (code == 200).then_some(v)
}

fn pod_yaml(name: &str, node: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\nspec:\n  nodeName: {node}\n  containers:\n  - name: app\n    image: nginx:1.27\n"
    )
}

#[test]
fn simulated_nodes_leases_and_pod_lifecycle() {
    let s = common::Server::start_with(common::temp_dir("sim"), &["--simulate-nodes", "3"]);

    // Three Ready nodes, with upstream's columns.
    let out = wait_for("3 Ready nodes", Duration::from_secs(30), || {
        let out = s.k(&["get", "nodes"]);
        (out.lines()
            .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
            .count()
            == 3)
            .then_some(out)
    });
    let header: Vec<&str> = out
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{out}"
    );
    for i in 0..3 {
        assert!(out.contains(&format!("sim-node-{i} ")), "{out}");
    }
    let (_, node) = s.request("GET", "/api/v1/nodes/sim-node-0", "", None);
    assert_eq!(
        node["metadata"]["labels"]["kubernetes.io/hostname"],
        "sim-node-0"
    );
    assert_eq!(node["metadata"]["labels"]["kubernetes.io/os"], "linux");
    assert_eq!(node["status"]["allocatable"]["cpu"], "4");
    assert_eq!(node["status"]["allocatable"]["memory"], "16284Mi");
    assert_eq!(node["spec"]["podCIDR"], "10.42.0.0/24");
    let ready = node["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready").cloned())
        .unwrap_or_default();
    assert_eq!(ready["reason"], "KubeletReady");
    assert_eq!(ready["message"], "kubelet is posting ready status");

    // Leases in kube-node-lease.
    let leases = wait_for("3 leases", Duration::from_secs(30), || {
        let out = s.k(&["get", "leases", "-n", "kube-node-lease", "-o", "json"]);
        let v: Value = serde_json::from_str(&out).ok()?;
        let items = v["items"].as_array()?.clone();
        (items.len() == 3).then_some(items)
    });
    let first_renew = leases
        .iter()
        .find(|l| l["metadata"]["name"] == "sim-node-0")
        .map(|l| l["spec"]["renewTime"].clone())
        .unwrap_or_default();
    assert_eq!(leases[0]["spec"]["leaseDurationSeconds"], 40);
    assert!(first_renew.is_string(), "{leases:?}");

    // A pod bound to sim-node-0 becomes Running and Ready with an IP from its /24.
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&pod_yaml("web", "sim-node-0", "")),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let pod = wait_for("web Running", Duration::from_secs(30), || {
        pod_json(&s, "web").filter(|p| p["status"]["phase"] == "Running")
    });
    let ip = pod["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(ip.starts_with("10.42.0."), "{pod}");
    for t in [
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodScheduled",
    ] {
        let c = pod["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == t).cloned())
            .unwrap_or_default();
        assert_eq!(c["status"], "True", "{t}: {pod}");
        assert!(c["lastTransitionTime"].is_string(), "{t}: {pod}");
    }
    assert!(pod["status"]["startTime"].is_string());
    assert_eq!(pod["status"]["containerStatuses"][0]["ready"], true);
    assert!(pod["status"]["containerStatuses"][0]["state"]["running"].is_object());
    let wide = s.k(&["get", "pod", "web", "-o", "wide"]);
    assert!(
        wide.contains("1/1") && wide.contains("Running") && wide.contains(&ip),
        "{wide}"
    );

    // Graceful delete completes: the node confirms with grace 0.
    let started = Instant::now();
    s.k(&["delete", "pod", "web", "--timeout=30s"]);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(pod_json(&s, "web").is_none());

    // A pod annotated to fail ends Failed with exit code 1.
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&pod_yaml(
            "boom",
            "sim-node-1",
            "sim.berth.dev/fail: \"true\"",
        )),
    );
    let pod = wait_for("boom Failed", Duration::from_secs(30), || {
        pod_json(&s, "boom").filter(|p| p["status"]["phase"] == "Failed")
    });
    let term = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(term["exitCode"], 1, "{pod}");
    assert_eq!(term["reason"], "Error", "{pod}");
    assert!(
        pod["status"]["podIP"]
            .as_str()
            .unwrap_or_default()
            .starts_with("10.42.1.")
    );

    // Leases renew (every 10 s).
    wait_for("lease renewal", Duration::from_secs(30), || {
        let (_, l) = s.request(
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/sim-node-0",
            "",
            None,
        );
        (l["spec"]["renewTime"] != first_renew).then_some(())
    });
}

#[test]
fn fifty_simulated_nodes() {
    let s = common::Server::start_with(common::temp_dir("sim50"), &["--simulate-nodes", "50"]);
    wait_for("50 Ready nodes", Duration::from_secs(60), || {
        let out = s.k(&["get", "nodes", "--no-headers"]);
        (out.lines()
            .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
            .count()
            == 50)
            .then_some(())
    });
    wait_for("50 leases", Duration::from_secs(60), || {
        let out = s.k(&["get", "leases", "-n", "kube-node-lease", "--no-headers"]);
        (out.lines().count() == 50).then_some(())
    });
    let (_, node) = s.request("GET", "/api/v1/nodes/sim-node-49", "", None);
    assert_eq!(node["spec"]["podCIDR"], "10.42.49.0/24");
}

/// Simulated nodes shaped by flags: capacity, labels, taints and NUMA cells (the
/// cells in the Node annotation `node.berth.dev/numa-topology`); a bad flag stops
/// the server with a message naming it.
#[test]
fn simulated_node_shape_from_flags() {
    let s = common::Server::start_with(
        common::temp_dir("sim-shape"),
        &[
            "--simulate-nodes",
            "2",
            "--sim-node-capacity",
            "cpu=8,memory=32Gi",
            "--sim-node-labels",
            "topology.kubernetes.io/zone=z1,disk=ssd",
            "--sim-node-taints",
            "gpu=true:NoSchedule",
            "--sim-numa-nodes",
            "2",
        ],
    );
    // TaintNodesByCondition gives a new node `node.kubernetes.io/not-ready`
    // until the node lifecycle controller sees it Ready: wait for that to go.
    let node = wait_for(
        "sim-node-1 Ready and untainted",
        Duration::from_secs(30),
        || {
            let out = s.kubectl(&["get", "node", "sim-node-1", "-o", "json"]);
            let node = serde_json::from_slice::<Value>(&out.stdout).ok()?;
            let not_ready = node["spec"]["taints"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["key"] == "node.kubernetes.io/not-ready"));
            (!not_ready).then_some(node)
        },
    );
    assert_eq!(node["status"]["capacity"]["cpu"], "8");
    assert_eq!(node["status"]["capacity"]["memory"], "32Gi");
    assert_eq!(node["status"]["capacity"]["pods"], "110");
    let labels = &node["metadata"]["labels"];
    assert_eq!(labels["topology.kubernetes.io/zone"], "z1");
    assert_eq!(labels["disk"], "ssd");
    assert_eq!(labels["type"], "berth-sim");
    assert_eq!(
        node["spec"]["taints"],
        serde_json::json!([{"key": "gpu", "value": "true", "effect": "NoSchedule"}])
    );
    let numa: Value = serde_json::from_str(
        node["metadata"]["annotations"]["node.berth.dev/numa-topology"]
            .as_str()
            .expect("NUMA annotation"),
    )
    .expect("NUMA JSON");
    assert_eq!(
        numa,
        serde_json::json!([
            {"id": 0, "cpus": "0-3", "memory": "16Gi"},
            {"id": 1, "cpus": "4-7", "memory": "16Gi"}
        ])
    );
    drop(s);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_berth"))
        .args([
            "server",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            "0",
        ])
        .args([
            "--disable-agent",
            "--disable-ingress",
            "--disable-dns",
            "--data-dir",
        ])
        .arg(common::temp_dir("sim-bad"))
        .args([
            "--simulate-nodes",
            "1",
            "--sim-node-taints",
            "gpu:Sometimes",
        ])
        .output()
        .expect("run berth server");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--sim-node-taints")
            && err.contains("NoSchedule, PreferNoSchedule or NoExecute"),
        "{err}"
    );
}

/// A Guaranteed pod of `cpu` CPUs (and one `example.com/gpu` if `gpu`) on
/// `node` (`nodeName`) or scheduled onto a node with that hostname.
fn numa_pod(
    name: &str,
    cpu: &str,
    gpu: bool,
    pinned: Option<&str>,
    selected: Option<&str>,
) -> String {
    let mut r = serde_json::json!({"cpu": cpu, "memory": "1Gi"});
    if gpu {
        r["example.com/gpu"] = "1".into();
    }
    let mut spec = serde_json::json!({
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": r, "limits": r}}],
    });
    if let Some(n) = pinned {
        spec["nodeName"] = n.into();
    }
    if let Some(n) = selected {
        spec["nodeSelector"] = serde_json::json!({"kubernetes.io/hostname": n});
    }
    serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
        .to_string()
}

/// The seed's limit (2) on simulated nodes: `single-numa-node` admission on
/// NUMA cells (4 CPUs and 1 GPU each), the cells' free resources published,
/// a pod that fits the node's totals but no cell rejected with upstream's
/// TopologyAffinityError, and the scheduler's NodeResourceTopologyMatch
/// keeping such a pod off that node.
#[test]
fn simulated_single_numa_node_admission_and_the_topology_aware_filter() {
    let dir = common::temp_dir("sim-numa");
    std::fs::create_dir_all(&dir).expect("data dir");
    let config = dir.join("scheduler.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    filter:\n      enabled:\n      - name: NodeResourceTopologyMatch\n",
    )
    .expect("scheduler config");
    let s = common::Server::start_with(
        dir,
        &[
            "--simulate-nodes",
            "2",
            "--sim-node-capacity",
            "cpu=8,memory=32Gi,example.com/gpu=2",
            "--sim-numa-nodes",
            "2",
            "--sim-topology-manager-policy",
            "single-numa-node",
            "--scheduler-config",
            config.to_str().expect("path"),
        ],
    );
    let cells = |node: &str| -> Option<Value> {
        let out = s.kubectl(&["get", "node", node, "-o", "json"]);
        let node = serde_json::from_slice::<Value>(&out.stdout).ok()?;
        let raw = node["metadata"]["annotations"]["node.berth.dev/numa-resources"].as_str()?;
        serde_json::from_str(raw).ok()
    };
    let published = wait_for("sim-node-0's cells", Duration::from_secs(30), || {
        cells("sim-node-0")
    });
    assert_eq!(
        published,
        serde_json::json!({"policy": "single-numa-node", "scope": "container", "pods": [], "cells": [
            {"id": 0, "cpus": 4, "devices": {"example.com/gpu": 1}},
            {"id": 1, "cpus": 4, "devices": {"example.com/gpu": 1}}
        ]})
    );
    wait_for("sim-node-1 untainted", Duration::from_secs(30), || {
        let out = s.kubectl(&["get", "node", "sim-node-1", "-o", "jsonpath={.spec.taints}"]);
        (!common::stdout(&out).contains("not-ready")).then_some(())
    });
    let phase = |pod: &str| {
        common::stdout(&s.kubectl(&["get", "pod", pod, "-o", "jsonpath={.status.phase}"]))
    };
    let apply = |body: String| {
        let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&body));
        assert!(out.status.success(), "{}", common::stderr(&out));
    };
    // 3 CPUs + the GPU on cell 0, 3 CPUs on cell 1: 2 CPUs and a GPU remain
    // on the node, on no single cell.
    apply(numa_pod("x", "3", true, Some("sim-node-0"), None));
    apply(numa_pod("y", "3", false, Some("sim-node-0"), None));
    for p in ["x", "y"] {
        wait_for(&format!("{p} Running"), Duration::from_secs(30), || {
            (phase(p) == "Running").then_some(())
        });
    }
    apply(numa_pod("z", "2", true, Some("sim-node-0"), None));
    wait_for("z Failed", Duration::from_secs(30), || {
        (phase("z") == "Failed").then_some(())
    });
    let z = s.k(&[
        "get",
        "pod",
        "z",
        "-o",
        "jsonpath={.status.reason}: {.status.message}",
    ]);
    assert_eq!(
        z,
        "TopologyAffinityError: Pod was rejected: Resources cannot be allocated with Topology locality"
    );
    wait_for("x and y published", Duration::from_secs(30), || {
        let c = cells("sim-node-0")?;
        (c["cells"][0]["cpus"] == 1 && c["cells"][1]["cpus"] == 1).then_some(())
    });
    // The scheduler keeps the same pod off sim-node-0 and sends another to
    // sim-node-1.
    apply(numa_pod("w", "2", true, None, Some("sim-node-0")));
    apply(numa_pod("v", "2", true, None, None));
    wait_for("v Running", Duration::from_secs(30), || {
        (phase("v") == "Running").then_some(())
    });
    assert_eq!(
        s.k(&["get", "pod", "v", "-o", "jsonpath={.spec.nodeName}"]),
        "sim-node-1"
    );
    let why = wait_for("w unschedulable", Duration::from_secs(30), || {
        let out = s.kubectl(&[
            "get",
            "pod",
            "w",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].message}",
        ]);
        let m = common::stdout(&out);
        (!m.is_empty()).then_some(m)
    });
    // Container scope (the default), as scheduler-plugins words it.
    assert!(why.contains("1 cannot align container"), "{why}");
    assert_eq!(phase("w"), "Pending");
}
