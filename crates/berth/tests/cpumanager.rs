//! The CPU Manager's static policy on real containerd (this machine has 2
//! CPUs and one NUMA node): with `--reserved-cpus 0` a Guaranteed pod asking
//! for `cpu: 1` runs on CPU 1 alone, the shared pool of every other container
//! shrinks to CPU 0 (UpdateContainerResources) and grows back when the pod
//! goes; the assignment survives an agent restart through its checkpoint.
//! Needs root and `scripts/install-deps`; takes the machine-wide agent lock.

mod common;

use std::time::Duration;

use common::{Server, wait_until};

/// The CPUs a pod's container may run on, as the kernel reports it.
fn allowed_cpus(s: &Server, pod: &str) -> String {
    let out = s.kubectl(&[
        "exec",
        pod,
        "--",
        "grep",
        "Cpus_allowed_list",
        "/proc/self/status",
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split(':').nth(1).unwrap_or("").trim().to_string()
}

fn wait_for_cpus(s: &Server, pod: &str, want: &str) {
    let mut last = String::new();
    let ok = (0..150).any(|_| {
        last = allowed_cpus(s, pod);
        if last == want {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
        false
    });
    assert!(ok, "pod {pod}: Cpus_allowed_list {last:?}, want {want:?}");
}

fn pod(name: &str, resources: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: app
    image: busybox
    imagePullPolicy: Never
    command: [\"sleep\", \"3600\"]
{resources}"
    )
}

const GUARANTEED: &str = "    resources:
      requests: {cpu: \"1\", memory: 32Mi}
      limits: {cpu: \"1\", memory: 32Mi}
";

fn wait_running(s: &Server, name: &str) {
    wait_until(Duration::from_secs(60), &format!("{name} Running"), || {
        s.k(&["get", "pod", name, "-o", "jsonpath={.status.phase}"]) == "Running"
    });
}

#[test]
fn static_policy_gives_a_guaranteed_pod_an_exclusive_cpu() {
    let s = Server::start_with_agent_args(
        "cpumanager",
        &[
            "--cpu-manager-policy",
            "static",
            "--reserved-cpus",
            "0",
            // One NUMA node here: every hint is that node, so the Topology
            // Manager's admit path runs and admits.
            "--topology-manager-policy",
            "single-numa-node",
            "--topology-manager-scope",
            "pod",
        ],
    );
    s.wait_node_ready(Duration::from_secs(60));
    // --reserved-cpus overrides the reserved CPU: allocatable = 2 − 1.
    let capacity = s.k(&[
        "get",
        "nodes",
        "-o",
        "jsonpath={.items[0].status.capacity.cpu}",
    ]);
    let allocatable = s.k(&[
        "get",
        "nodes",
        "-o",
        "jsonpath={.items[0].status.allocatable.cpu}",
    ]);
    assert_eq!((capacity.as_str(), allocatable.as_str()), ("2", "1"));

    for (name, res) in [("shared", ""), ("exclusive", GUARANTEED)] {
        let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&pod(name, res)));
        assert!(out.status.success(), "{}", common::stderr(&out));
        wait_running(&s, name);
    }
    wait_for_cpus(&s, "exclusive", "1");
    // The shared pool no longer holds the exclusive CPU.
    wait_for_cpus(&s, "shared", "0");
    let uid = s.k(&["get", "pod", "exclusive", "-o", "jsonpath={.metadata.uid}"]);
    let checkpoint = s.data_dir.join("agent/cpu_manager_state");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&checkpoint).unwrap()).unwrap();
    assert_eq!(state["policyName"], "static", "{state}");
    assert_eq!(state["defaultCpuSet"], "0", "{state}");
    assert_eq!(state["entries"][&uid]["app"], "1", "{state}");

    // An agent restart keeps the assignment (the checkpoint) and the pods.
    let s = s.restart();
    s.wait_node_ready(Duration::from_secs(60));
    wait_for_cpus(&s, "exclusive", "1");
    wait_for_cpus(&s, "shared", "0");

    // Once the pod is gone its CPU returns to the shared pool.
    let out = s.kubectl(&["delete", "pod", "exclusive", "--wait=true"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    wait_for_cpus(&s, "shared", "0-1");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&checkpoint).unwrap()).unwrap();
    assert_eq!(state["defaultCpuSet"], "0-1", "{state}");
    assert!(state.get("entries").is_none(), "{state}");
    let out = s.kubectl(&["delete", "pod", "shared", "--wait=true"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
}
