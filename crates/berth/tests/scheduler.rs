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
