//! The scheduler inside `berth server`, on simulated nodes, seen through kubectl.

mod common;

use std::time::{Duration, Instant};

use common::{Server, stderr};

fn pod(name: &str, cpu: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      requests:\n        cpu: {cpu}\n"
    )
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn spreads_pods_reports_unschedulable_and_runs_them_on_simulated_nodes() {
    let s = Server::start_with(common::temp_dir("sched"), &["--simulate-nodes", "3"]);
    wait_for("3 nodes", || {
        s.k(&["get", "nodes", "-o", "name"]).lines().count() == 3
    });
    for i in 0..3 {
        let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&pod(&format!("p{i}"), "500m")));
        assert!(out.status.success(), "{}", stderr(&out));
    }
    wait_for("3 running pods", || {
        s.k(&[
            "get",
            "pods",
            "-o",
            "jsonpath={range .items[*]}{.status.phase}{\"\\n\"}{end}",
        ])
        .lines()
        .filter(|l| *l == "Running")
        .count()
            == 3
    });
    // LeastAllocated spreads them: one per node.
    let nodes = s.k(&[
        "get",
        "pods",
        "-o",
        "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}",
    ]);
    let mut nodes: Vec<&str> = nodes.lines().collect();
    nodes.sort_unstable();
    nodes.dedup();
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    let events = s.k(&[
        "get",
        "events",
        "--field-selector",
        "reason=Scheduled",
        "-o",
        "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
    ]);
    assert!(
        events.contains("Successfully assigned default/p0 to sim-node-"),
        "{events}"
    );

    // More CPU than any node has: Pending, with upstream's message in describe.
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&pod("huge", "100")));
    assert!(out.status.success(), "{}", stderr(&out));
    let want = "0/3 nodes are available: 3 Insufficient cpu.";
    wait_for("FailedScheduling", || {
        s.k(&["describe", "pod", "huge"]).contains(want)
    });
    let desc = s.k(&["describe", "pod", "huge"]);
    assert!(
        desc.contains("FailedScheduling") && desc.contains("default-scheduler"),
        "{desc}"
    );
    assert_eq!(
        s.k(&[
            "get",
            "pod",
            "huge",
            "-o",
            "jsonpath={.status.phase} {.status.conditions[0].reason}"
        ]),
        "Pending Unschedulable"
    );
}

#[test]
fn most_allocated_configuration_packs_pods_onto_one_node() {
    let dir = common::temp_dir("sched-most");
    let cfg = dir.join("scheduler.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n        resources:\n        - name: cpu\n          weight: 1\n        - name: memory\n          weight: 1\n  plugins:\n    score:\n      disabled:\n      - name: NodeResourcesBalancedAllocation\n",
    )
    .unwrap();
    let s = Server::start_with(
        dir,
        &[
            "--simulate-nodes",
            "3",
            "--scheduler-config",
            cfg.to_str().unwrap(),
        ],
    );
    wait_for("3 nodes", || {
        s.k(&["get", "nodes", "-o", "name"]).lines().count() == 3
    });
    for i in 0..3 {
        let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&pod(&format!("m{i}"), "500m")));
        assert!(out.status.success(), "{}", stderr(&out));
        // One at a time, so each decision sees the previous pod.
        wait_for("bound", || {
            !s.k(&[
                "get",
                "pod",
                &format!("m{i}"),
                "-o",
                "jsonpath={.spec.nodeName}",
            ])
            .is_empty()
        });
    }
    let nodes = s.k(&[
        "get",
        "pods",
        "-o",
        "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}",
    ]);
    let mut nodes: Vec<&str> = nodes.lines().collect();
    nodes.dedup();
    assert_eq!(nodes.len(), 1, "MostAllocated should pack: {nodes:?}");
}

#[test]
fn deployment_replicas_land_one_per_node() {
    let s = Server::start_with(common::temp_dir("sched-deploy"), &["--simulate-nodes", "3"]);
    wait_for("3 nodes", || {
        s.k(&["get", "nodes", "-o", "name"]).lines().count() == 3
    });
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: c\n        image: nginx:1.27\n        resources:\n          requests: {cpu: 500m}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(deploy));
    assert!(out.status.success(), "{}", stderr(&out));
    let status = s.k(&["rollout", "status", "deploy/web", "--timeout=60s"]);
    assert!(status.contains("successfully rolled out"), "{status}");
    let nodes = s.k(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}",
    ]);
    let mut nodes: Vec<&str> = nodes.lines().collect();
    nodes.sort_unstable();
    nodes.dedup();
    assert_eq!(
        nodes.len(),
        3,
        "least-allocated spreads the replicas: {nodes:?}"
    );
}

fn three_nodes(tag: &str) -> Server {
    let s = Server::start_with(common::temp_dir(tag), &["--simulate-nodes", "3"]);
    wait_for("3 nodes", || {
        s.k(&["get", "nodes", "-o", "name"]).lines().count() == 3
    });
    s
}

fn apply(s: &Server, yaml: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(yaml));
    assert!(out.status.success(), "{}", stderr(&out));
}

fn node_of(s: &Server, pod: &str) -> String {
    s.k(&["get", "pod", pod, "-o", "jsonpath={.spec.nodeName}"])
}

fn wait_bound(s: &Server, pod: &str) -> String {
    wait_for(&format!("{pod} bound"), || !node_of(s, pod).is_empty());
    node_of(s, pod)
}

/// Node names of the pods with `selector`, sorted.
fn nodes_of(s: &Server, selector: &str) -> Vec<String> {
    let out = s.k(&[
        "get",
        "pods",
        "-l",
        selector,
        "-o",
        "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}",
    ]);
    let mut v: Vec<String> = out.lines().map(String::from).collect();
    v.sort();
    v
}

fn wait_message(s: &Server, pod: &str, want: &str) {
    wait_for(&format!("{pod}: {want}"), || {
        s.k(&["describe", "pod", pod]).contains(want)
    });
}

#[test]
fn taints_tolerations_and_node_affinity_decide_placement() {
    let s = three_nodes("sched-taints");
    for n in ["sim-node-0", "sim-node-1"] {
        s.k(&["taint", "nodes", n, "dedicated=infra:NoSchedule"]);
    }
    s.k(&["label", "node", "sim-node-0", "disk=ssd"]);
    // No toleration: only the untainted node.
    apply(&s, &pod("plain", "100m"));
    assert_eq!(wait_bound(&s, "plain"), "sim-node-2");
    // "Why here": the Binding's annotation lands on the pod; the only
    // feasible node is named as such.
    let why = s.k(&[
        "get",
        "pod",
        "plain",
        "-o",
        "jsonpath={.metadata.annotations.scheduler\\.berth\\.dev/candidates}",
    ]);
    assert_eq!(why, "sim-node-2 (only feasible node)");
    // Tolerating the taint and requiring ssd: only sim-node-0.
    let ssd = |name: &str, tolerate: bool| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{}  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions:\n          - {{key: disk, operator: In, values: [ssd]}}\n  containers:\n  - name: c\n    image: busybox\n",
            if tolerate {
                "  tolerations:\n  - {key: dedicated, operator: Equal, value: infra, effect: NoSchedule}\n"
            } else {
                ""
            }
        )
    };
    apply(&s, &ssd("ssd", true));
    assert_eq!(wait_bound(&s, "ssd"), "sim-node-0");
    // Without the toleration nothing fits; upstream's message, reasons sorted as strings.
    apply(&s, &ssd("ssd-untolerated", false));
    wait_message(
        &s,
        "ssd-untolerated",
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) had untolerated taint {dedicated: infra}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling..",
    );
    // Removing the taint lets it schedule (node updates re-activate parked pods).
    s.k(&[
        "taint",
        "nodes",
        "sim-node-0",
        "dedicated=infra:NoSchedule-",
    ]);
    assert_eq!(wait_bound(&s, "ssd-untolerated"), "sim-node-0");
}

#[test]
fn topology_spread_puts_two_replicas_in_each_zone() {
    let s = three_nodes("sched-spread");
    for (n, z) in [
        ("sim-node-0", "a"),
        ("sim-node-1", "b"),
        ("sim-node-2", "c"),
    ] {
        s.k(&[
            "label",
            "node",
            n,
            &format!("topology.kubernetes.io/zone=zone-{z}"),
        ]);
    }
    // A filler makes LeastAllocated prefer the other nodes: only the spread
    // constraint keeps two replicas on sim-node-0.
    apply(
        &s,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: filler\nspec:\n  nodeName: sim-node-0\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      requests: {cpu: '3'}\n",
    );
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: spread\nspec:\n  replicas: 6\n  selector:\n    matchLabels: {app: spread}\n  template:\n    metadata:\n      labels: {app: spread}\n    spec:\n      topologySpreadConstraints:\n      - maxSkew: 1\n        topologyKey: topology.kubernetes.io/zone\n        whenUnsatisfiable: DoNotSchedule\n        labelSelector:\n          matchLabels: {app: spread}\n      containers:\n      - name: c\n        image: busybox\n        resources:\n          requests: {cpu: 100m}\n";
    apply(&s, deploy);
    let status = s.k(&["rollout", "status", "deploy/spread", "--timeout=60s"]);
    assert!(status.contains("successfully rolled out"), "{status}");
    let nodes = nodes_of(&s, "app=spread");
    assert_eq!(
        nodes,
        vec![
            "sim-node-0",
            "sim-node-0",
            "sim-node-1",
            "sim-node-1",
            "sim-node-2",
            "sim-node-2"
        ],
        "2 per zone"
    );
}

#[test]
fn required_pod_anti_affinity_leaves_the_fourth_replica_pending() {
    let s = three_nodes("sched-anti");
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: solo\nspec:\n  replicas: 4\n  selector:\n    matchLabels: {app: solo}\n  template:\n    metadata:\n      labels: {app: solo}\n    spec:\n      affinity:\n        podAntiAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n          - topologyKey: kubernetes.io/hostname\n            labelSelector:\n              matchLabels: {app: solo}\n      containers:\n      - name: c\n        image: busybox\n";
    apply(&s, deploy);
    wait_for("3 bound replicas and 1 pending", || {
        let nodes = nodes_of(&s, "app=solo");
        nodes.len() == 4 && nodes.iter().filter(|n| n.is_empty()).count() == 1
    });
    let mut bound: Vec<String> = nodes_of(&s, "app=solo")
        .into_iter()
        .filter(|n| !n.is_empty())
        .collect();
    bound.dedup();
    assert_eq!(bound.len(), 3, "one replica per node: {bound:?}");
    let pending = s.k(&[
        "get",
        "pods",
        "-l",
        "app=solo",
        "--field-selector",
        "spec.nodeName=",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    wait_message(
        &s,
        &pending,
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod..",
    );
    let desc = s.k(&["describe", "pod", &pending]);
    assert!(desc.contains("FailedScheduling"), "{desc}");
}

#[test]
fn high_priority_pod_preempts_a_low_priority_one() {
    let s = three_nodes("sched-preempt");
    apply(
        &s,
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: low\nvalue: 100\n---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: high\nvalue: 1000\n",
    );
    let prio_pod = |name: &str, class: &str, cpu: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{tier: {class}}}\nspec:\n  priorityClassName: {class}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      requests: {{cpu: '{cpu}'}}\n"
        )
    };
    // Fill every node: 3 of 4 CPUs each.
    for i in 0..3 {
        let name = format!("low-{i}");
        apply(&s, &prio_pod(&name, "low", "3"));
        wait_bound(&s, &name);
    }
    assert_eq!(nodes_of(&s, "tier=low").len(), 3);
    apply(&s, &prio_pod("vip", "high", "2"));
    let node = wait_bound(&s, "vip");
    // Exactly one victim, on the node the preemptor was nominated to and bound on.
    wait_for("one low pod left per other node", || {
        nodes_of(&s, "tier=low").len() == 2
    });
    let remaining = nodes_of(&s, "tier=low");
    assert!(!remaining.contains(&node), "{remaining:?} vs {node}");
    assert_eq!(
        s.k(&[
            "get",
            "pod",
            "vip",
            "-o",
            "jsonpath={.status.nominatedNodeName}"
        ]),
        node
    );
    let uid = s.k(&["get", "pod", "vip", "-o", "jsonpath={.metadata.uid}"]);
    let events = s.k(&[
        "get",
        "events",
        "--field-selector",
        "reason=Preempted",
        "-o",
        "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
    ]);
    assert!(
        events.contains(&format!("Preempted by pod {uid} on node {node}")),
        "{events}"
    );
    // The preemptor's FailedScheduling event carries the filter reasons only.
    let desc = s.k(&["describe", "pod", "vip"]);
    assert!(
        desc.contains("0/3 nodes are available: 3 Insufficient cpu."),
        "{desc}"
    );
}

#[test]
fn scheduling_gates_hold_a_pod_until_removed() {
    let s = three_nodes("sched-gates");
    apply(
        &s,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: gated\nspec:\n  schedulingGates:\n  - name: example.com/wait\n  containers:\n  - name: c\n    image: busybox\n",
    );
    apply(&s, &pod("ungated", "100m"));
    wait_bound(&s, "ungated");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(node_of(&s, "gated"), "", "a gated pod is not scheduled");
    let desc = s.k(&["describe", "pod", "gated"]);
    assert!(!desc.contains("FailedScheduling"), "{desc}");
    s.k(&[
        "patch",
        "pod",
        "gated",
        "--type=json",
        "-p",
        "[{\"op\":\"remove\",\"path\":\"/spec/schedulingGates\"}]",
    ]);
    wait_bound(&s, "gated");
}
