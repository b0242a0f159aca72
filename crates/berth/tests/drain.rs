//! The Eviction API, PodDisruptionBudgets and `kubectl drain`, end to end:
//! the API server's `pods/<n>/eviction`, the disruption controller keeping
//! PDB status, and real kubectl cordoning, evicting (retrying on 429 as
//! upstream's kubectl does) and waiting. The drain of a real node runs real
//! containers on the node agent, with a simulated node for the replacements
//! (Berth is one real node per machine); the rest runs on simulated nodes.

mod common;

use std::time::Duration;

use common::{Server, stderr, stdout, wait_until};
use serde_json::{Value, json};

fn apply(s: &Server, yaml: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(yaml));
    assert!(out.status.success(), "{}", stderr(&out));
}

fn get(s: &Server, path: &str) -> Option<Value> {
    let (code, v) = s.request("GET", path, "", None);
    (code == 200).then_some(v)
}

fn pdb(s: &Server, name: &str) -> Value {
    get(
        s,
        &format!("/apis/policy/v1/namespaces/default/poddisruptionbudgets/{name}"),
    )
    .unwrap_or(Value::Null)
}

fn pods(s: &Server, selector: &str) -> Vec<Value> {
    get(
        s,
        &format!("/api/v1/namespaces/default/pods?labelSelector={selector}"),
    )
    .and_then(|l| l["items"].as_array().cloned())
    .unwrap_or_default()
}

fn is_ready(p: &Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// Pods of `selector` Ready, not being deleted, on `node` (any node if empty).
fn ready_on(s: &Server, selector: &str, node: &str) -> Vec<String> {
    pods(s, selector)
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null() && is_ready(p))
        .filter(|p| node.is_empty() || p["spec"]["nodeName"] == node)
        .map(|p| p["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Waits until the PDB's status says (currentHealthy, desiredHealthy,
/// disruptionsAllowed, expectedPods) for its current generation.
fn wait_pdb(s: &Server, name: &str, want: (i64, i64, i64, i64)) -> Value {
    let mut last = Value::Null;
    wait_until(
        Duration::from_secs(30),
        &format!("PDB {name} {want:?}"),
        || {
            last = pdb(s, name);
            let st = &last["status"];
            let n = |k: &str| st[k].as_i64().unwrap_or(-1);
            st["observedGeneration"] == last["metadata"]["generation"]
                && (
                    n("currentHealthy"),
                    n("desiredHealthy"),
                    n("disruptionsAllowed"),
                    n("expectedPods"),
                ) == want
        },
    );
    last
}

fn evict(s: &Server, pod: &str, body: Value, query: &str) -> (u16, Value) {
    s.request(
        "POST",
        &format!("/api/v1/namespaces/default/pods/{pod}/eviction{query}"),
        "application/json",
        Some(&body.to_string()),
    )
}

fn eviction(api_version: &str, name: &str, delete_options: Value) -> Value {
    json!({"apiVersion": api_version, "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"}, "deleteOptions": delete_options})
}

fn sim_pod(name: &str, node: &str, app: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{app: {app}}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: busybox\n"
    )
}

fn sim_pdb(name: &str, app: &str, min_available: &str) -> String {
    format!(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: {name}\nspec:\n  minAvailable: {min_available}\n  selector:\n    matchLabels: {{app: {app}}}\n"
    )
}

fn condition(p: &Value, kind: &str) -> Value {
    p["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind).cloned())
        .unwrap_or(Value::Null)
}

#[test]
fn eviction_api_answers_as_upstream() {
    let s = Server::start_with(common::temp_dir("evict-api"), &["--simulate-nodes", "1"]);
    wait_until(Duration::from_secs(30), "a Ready simulated node", || {
        stdout(&s.kubectl(&["get", "nodes"])).contains(" Ready ")
    });
    for (name, app) in [
        ("free", "free"),
        ("dry", "guarded"),
        ("twice", "twice"),
        ("old", "old"),
        ("spent", "spent"),
        ("spent2", "spent"),
    ] {
        apply(&s, &sim_pod(name, "sim-node-0", app));
    }
    apply(&s, &sim_pdb("guard", "guarded", "0"));
    apply(&s, &sim_pdb("twice-a", "twice", "0"));
    apply(&s, &sim_pdb("twice-b", "twice", "0"));
    apply(&s, &sim_pdb("spent", "spent", "2"));
    wait_until(
        Duration::from_secs(30),
        "the pods Running and Ready",
        || {
            ["free", "dry", "twice", "old", "spent", "spent2"]
                .iter()
                .all(|n| {
                    get(&s, &format!("/api/v1/namespaces/default/pods/{n}"))
                        .is_some_and(|p| is_ready(&p))
                })
        },
    );
    // The disruption controller keeps the budgets.
    let guard = wait_pdb(&s, "guard", (1, 0, 1, 1));
    let c = condition(&guard, "DisruptionAllowed");
    assert_eq!(
        (&c["status"], &c["reason"]),
        (&json!("True"), &json!("SufficientPods")),
        "{guard}"
    );
    wait_pdb(&s, "spent", (2, 2, 0, 2));
    let table = s.k(&["get", "pdb", "guard"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "MIN",
            "AVAILABLE",
            "MAX",
            "UNAVAILABLE",
            "ALLOWED",
            "DISRUPTIONS",
            "AGE"
        ],
        "{table}"
    );
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().nth(3) == Some("1")),
        "{table}"
    );

    // A missing pod: 404 NotFound.
    let (code, body) = evict(&s, "ghost", eviction("policy/v1", "ghost", json!({})), "");
    assert_eq!(code, 404, "{body}");
    assert_eq!(body["reason"], "NotFound");
    assert_eq!(body["message"], "pods \"ghost\" not found");

    // The body names another pod: 400.
    let (code, body) = evict(&s, "free", eviction("policy/v1", "dry", json!({})), "");
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["message"],
        "name in URL does not match name in Eviction object"
    );

    // A dry run answers 201 and changes neither the pod nor the budget.
    let before = pdb(&s, "guard");
    for (opts, query) in [(json!({"dryRun": ["All"]}), ""), (json!({}), "?dryRun=All")] {
        let (code, body) = evict(&s, "dry", eviction("policy/v1", "dry", opts), query);
        assert_eq!(code, 201, "{body}");
        assert_eq!(body["status"], "Success");
    }
    assert_eq!(
        pdb(&s, "guard")["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    let dry = get(&s, "/api/v1/namespaces/default/pods/dry").unwrap();
    assert!(dry["metadata"]["deletionTimestamp"].is_null(), "{dry}");
    assert!(condition(&dry, "DisruptionTarget").is_null(), "{dry}");

    // Two budgets select the pod: 500, the pod stays.
    let (code, body) = evict(&s, "twice", eviction("policy/v1", "twice", json!({})), "");
    assert_eq!(code, 500, "{body}");
    assert_eq!(
        body["message"],
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
    assert!(
        get(&s, "/api/v1/namespaces/default/pods/twice").unwrap()["metadata"]["deletionTimestamp"]
            .is_null()
    );

    // A budget with nothing to spare: 429 with upstream's cause.
    let (code, body) = evict(&s, "spent", eviction("policy/v1", "spent", json!({})), "");
    assert_eq!(code, 429, "{body}");
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(
        body["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(body["details"]["causes"][0]["reason"], "DisruptionBudget");
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "The disruption budget spent needs 2 healthy pods and has 2 currently"
    );

    // Budgeted: spent, the pod recorded, then deleted with the condition.
    let (code, body) = evict(&s, "dry", eviction("policy/v1", "dry", json!({})), "");
    assert_eq!(code, 201, "{body}");
    let after = pdb(&s, "guard");
    assert!(
        after["status"]["disruptedPods"]["dry"].is_string()
            || after["status"]["disruptionsAllowed"] == 0,
        "{after}"
    );
    if let Some(p) = get(&s, "/api/v1/namespaces/default/pods/dry") {
        assert!(!p["metadata"]["deletionTimestamp"].is_null(), "{p}");
        assert_eq!(
            condition(&p, "DisruptionTarget")["reason"],
            "EvictionByEvictionAPI",
            "{p}"
        );
    }
    wait_until(Duration::from_secs(30), "the evicted pod gone", || {
        get(&s, "/api/v1/namespaces/default/pods/dry").is_none()
    });
    // Once the pod is gone the controller forgets it.
    wait_pdb(&s, "guard", (0, 0, 0, 0));
    assert!(
        pdb(&s, "guard")["status"]
            .get("disruptedPods")
            .is_none_or(|d| d.as_object().is_none_or(|m| m.is_empty()))
    );

    // No budget, and a policy/v1beta1 body as older kubectl sends: deleted.
    let (code, body) = evict(
        &s,
        "free",
        eviction("policy/v1", "free", json!({"gracePeriodSeconds": 0})),
        "",
    );
    assert_eq!(code, 201, "{body}");
    assert!(get(&s, "/api/v1/namespaces/default/pods/free").is_none());
    let (code, body) = evict(&s, "old", eviction("policy/v1beta1", "old", json!({})), "");
    assert_eq!(code, 201, "{body}");
    wait_until(
        Duration::from_secs(30),
        "the v1beta1-evicted pod gone",
        || get(&s, "/api/v1/namespaces/default/pods/old").is_none(),
    );
}

#[test]
fn drain_waits_on_a_budget_until_it_is_relaxed() {
    let s = Server::start_with(common::temp_dir("drain-sim"), &["--simulate-nodes", "1"]);
    wait_until(Duration::from_secs(30), "a Ready simulated node", || {
        stdout(&s.kubectl(&["get", "nodes"])).contains(" Ready ")
    });
    apply(
        &s,
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: solo
spec:
  replicas: 1
  selector:
    matchLabels: {app: solo}
  template:
    metadata:
      labels: {app: solo}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: app
        image: busybox
",
    );
    apply(&s, &sim_pdb("solo", "solo", "1"));
    wait_until(Duration::from_secs(30), "solo Ready", || {
        ready_on(&s, "app%3Dsolo", "sim-node-0").len() == 1
    });
    wait_pdb(&s, "solo", (1, 1, 0, 1));

    // The budget allows nothing: drain cordons, retries on 429, times out.
    let out = s.kubectl(&[
        "drain",
        "sim-node-0",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=12s",
    ]);
    let (o, e) = (stdout(&out), stderr(&out));
    eprintln!("kubectl drain:\n{o}{e}");
    assert!(!out.status.success(), "{o}\n{e}");
    assert!(o.contains("node/sim-node-0 cordoned"), "{o}\n{e}");
    let pod = ready_on(&s, "app%3Dsolo", "sim-node-0")
        .pop()
        .expect("solo still running");
    assert!(
        e.contains(&format!("error when evicting pods/\"{pod}\" -n \"default\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.")),
        "{o}\n{e}"
    );
    assert!(e.contains("global timeout reached: 12s"), "{o}\n{e}");
    let node = get(&s, "/api/v1/nodes/sim-node-0").unwrap();
    assert_eq!(node["spec"]["unschedulable"], true);

    // Relaxed, the budget is recomputed for the new generation; drain ends.
    s.k(&[
        "patch",
        "pdb",
        "solo",
        "--type=merge",
        "-p",
        "{\"spec\":{\"minAvailable\":0}}",
    ]);
    wait_pdb(&s, "solo", (1, 0, 1, 1));
    let out = s.kubectl(&[
        "drain",
        "sim-node-0",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=60s",
    ]);
    let (o, e) = (stdout(&out), stderr(&out));
    eprintln!("kubectl drain:\n{o}{e}");
    assert!(out.status.success(), "{o}\n{e}");
    assert!(o.contains(&format!("pod/{pod} evicted")), "{o}\n{e}");
    assert!(o.contains("node/sim-node-0 drained"), "{o}\n{e}");
    // The replacement waits for a schedulable node.
    let pending: Vec<Value> = pods(&s, "app%3Dsolo")
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect();
    assert_eq!(pending.len(), 1);
    assert!(pending[0]["spec"]["nodeName"].is_null(), "{}", pending[0]);
    s.k(&["uncordon", "sim-node-0"]);
    wait_until(
        Duration::from_secs(30),
        "the replacement running after uncordon",
        || ready_on(&s, "app%3Dsolo", "sim-node-0").len() == 1,
    );
}

const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: app
        image: busybox
        command: [sleep, '3600']
        volumeMounts:
        - {name: scratch, mountPath: /scratch}
      volumes:
      - name: scratch
        emptyDir: {}
";

const AGENT_DS: &str = "apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      terminationGracePeriodSeconds: 1
      nodeSelector: {drain.berth.dev/real: 'true'}
      containers:
      - name: agent
        image: busybox
        command: [sleep, '3600']
";

/// [`wait_until`], but a timeout shows the pods and the events.
fn wait_or_dump(s: &Server, limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "timed out waiting for {what}\n{}\n{}",
        stdout(&s.kubectl(&["get", "pods", "-o", "wide"])),
        stdout(&s.kubectl(&["get", "events"]))
    );
}

/// Ends the `berth sim` process however the test ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn taints(s: &Server, node: &str) -> Vec<String> {
    get(s, &format!("/api/v1/nodes/{node}"))
        .and_then(|n| n["spec"]["taints"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|t| {
            format!(
                "{}:{}",
                t["key"].as_str().unwrap_or(""),
                t["effect"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn drain_of_a_real_node_evicts_within_the_budget() {
    let s = Server::start_with_agent("drain");
    let node = {
        let mut name = String::new();
        wait_until(Duration::from_secs(60), "the real node Ready", || {
            let out = s.kubectl(&[
                "get",
                "nodes",
                "-o",
                "jsonpath={.items[0].metadata.name} {.items[0].status.conditions[?(@.type==\"Ready\")].status}",
            ]);
            let text = stdout(&out);
            match text.split_once(' ') {
                Some((n, "True")) => {
                    name = n.to_string();
                    true
                }
                _ => false,
            }
        });
        name
    };
    s.k(&["label", "node", &node, "drain.berth.dev/real=true"]);
    // A simulated node for the replacements, cordoned until the pods run on the real one.
    let _sim = KillOnDrop(s.sim(1, "drain-sim-"));
    wait_until(Duration::from_secs(30), "the simulated node", || {
        s.kubectl(&["cordon", "drain-sim-0"]).status.success()
    });
    apply(&s, WEB);
    apply(&s, AGENT_DS);
    apply(&s, &sim_pdb("web", "web", "1"));
    wait_or_dump(&s, Duration::from_secs(90), "web on the real node", || {
        ready_on(&s, "app%3Dweb", &node).len() == 2 && ready_on(&s, "app%3Dagent", &node).len() == 1
    });
    wait_pdb(&s, "web", (2, 1, 1, 2));
    let before = ready_on(&s, "app%3Dweb", &node);
    s.k(&["uncordon", "drain-sim-0"]);

    let out = s.kubectl(&[
        "drain",
        &node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=120s",
    ]);
    let (o, e) = (stdout(&out), stderr(&out));
    eprintln!("kubectl drain:\n{o}{e}");
    assert!(out.status.success(), "{o}\n{e}");
    assert!(o.contains(&format!("node/{node} cordoned")), "{o}\n{e}");
    assert!(
        e.contains("Warning: ignoring DaemonSet-managed Pods: default/agent-"),
        "{o}\n{e}"
    );
    for p in &before {
        assert!(o.contains(&format!("evicting pod default/{p}")), "{o}\n{e}");
        assert!(o.contains(&format!("pod/{p} evicted")), "{o}\n{e}");
    }
    // Both evictions were asked at once; the budget let one go and refused
    // the other until its replacement was Ready elsewhere.
    assert!(
        e.contains("(will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget."),
        "{o}\n{e}"
    );
    assert!(o.contains(&format!("node/{node} drained")), "{o}\n{e}");
    // The replacements run on the simulated node (drain does not wait for
    // the last one); the DaemonSet pod stayed.
    let mut moved = Vec::new();
    wait_or_dump(
        &s,
        Duration::from_secs(30),
        "both replacements Ready",
        || {
            moved = ready_on(&s, "app%3Dweb", "drain-sim-0");
            moved.len() == 2
        },
    );
    assert!(before.iter().all(|p| !moved.contains(p)));
    assert!(ready_on(&s, "app%3Dweb", &node).is_empty());
    assert_eq!(ready_on(&s, "app%3Dagent", &node).len(), 1);
    wait_pdb(&s, "web", (2, 1, 1, 2));
    // Cordoned: unschedulable, with the taint the node lifecycle controller adds.
    let n = get(&s, &format!("/api/v1/nodes/{node}")).unwrap();
    assert_eq!(n["spec"]["unschedulable"], true);
    wait_until(Duration::from_secs(30), "the unschedulable taint", || {
        taints(&s, &node).contains(&"node.kubernetes.io/unschedulable:NoSchedule".to_string())
    });

    let out = s.k(&["uncordon", &node]);
    assert!(out.contains(&format!("node/{node} uncordoned")), "{out}");
    let n = get(&s, &format!("/api/v1/nodes/{node}")).unwrap();
    assert!(
        n["spec"]["unschedulable"].is_null() || n["spec"]["unschedulable"] == false,
        "{n}"
    );
    wait_until(
        Duration::from_secs(30),
        "the unschedulable taint gone",
        || {
            !taints(&s, &node)
                .iter()
                .any(|t| t.starts_with("node.kubernetes.io/unschedulable"))
        },
    );
}
