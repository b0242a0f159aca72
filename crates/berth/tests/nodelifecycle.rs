//! Node lifecycle: a simulated node whose process dies stops renewing its
//! Lease; after --node-monitor-grace-period it is Unknown and tainted
//! unreachable, its pods are evicted after their tolerationSeconds and the
//! Deployment replaces them on the other nodes; when it comes back the taints go.

mod common;

use std::time::{Duration, Instant};

use common::{Server, temp_dir};
use serde_json::Value;

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 6
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 3}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 3}
      containers:
      - name: nginx
        image: nginx:1.27
        resources:
          requests: {cpu: 300m}
";

fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn get(s: &Server, path: &str) -> Value {
    let (code, v) = s.request("GET", path, "", None);
    assert_eq!(code, 200, "GET {path}: {v}");
    v
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn taints(node: &Value) -> Vec<String> {
    node["spec"]["taints"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| {
                    format!(
                        "{}:{}",
                        t["key"].as_str().unwrap_or(""),
                        t["effect"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn pods(s: &Server) -> Vec<Value> {
    get(s, "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb")["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn name(p: &Value) -> String {
    p["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn dead_node_is_tainted_its_pods_replaced_and_it_recovers() {
    let s = Server::start_with(
        temp_dir("nodelifecycle"),
        &[
            "--simulate-nodes",
            "2",
            "--node-monitor-grace-period",
            "15s",
            "--node-monitor-period",
            "1s",
        ],
    );
    let mut doomed = s.sim(2, "doomed-");
    wait_until("four Ready nodes", Duration::from_secs(60), || {
        let nodes = get(&s, "/api/v1/nodes")["items"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let ready = nodes
            .iter()
            .filter(|n| condition(n, "Ready").is_some_and(|c| c["status"] == "True"))
            .count();
        (ready == 4).then_some(())
    });
    s.kubectl_stdin(&["apply", "-f", "-"], Some(DEPLOYMENT));
    let on_doomed: Vec<String> = wait_until("six running pods", Duration::from_secs(60), || {
        let ps = pods(&s);
        let running = ps
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count();
        (running == 6).then(|| {
            ps.iter()
                .filter(|p| {
                    p["spec"]["nodeName"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("doomed-"))
                })
                .map(name)
                .collect()
        })
    });
    assert!(
        !on_doomed.is_empty(),
        "least-allocated spreading put no pod on the doomed nodes"
    );

    // The nodes' process dies: no more Lease renewals.
    let _ = doomed.kill();
    let _ = doomed.wait();
    let killed = Instant::now();
    // Both go Unknown in one pass; the first to get a token is tainted NoExecute.
    let node = wait_until(
        "a doomed node Unknown and tainted",
        Duration::from_secs(45),
        || {
            ["doomed-0", "doomed-1"].iter().find_map(|name| {
                let n = get(&s, &format!("/api/v1/nodes/{name}"));
                let t = taints(&n);
                (condition(&n, "Ready").is_some_and(|c| c["status"] == "Unknown")
                    && t.contains(&"node.kubernetes.io/unreachable:NoExecute".to_string()))
                .then_some(n)
            })
        },
    );
    let silent = killed.elapsed();
    assert!(
        silent >= Duration::from_secs(5),
        "marked Unknown after only {silent:?}"
    );
    for type_ in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        let c = condition(&node, type_).unwrap_or_else(|| panic!("{type_} missing: {node}"));
        assert_eq!(c["status"], "Unknown", "{type_}");
        assert_eq!(c["reason"], "NodeStatusUnknown", "{type_}");
        assert_eq!(
            c["message"], "Kubelet stopped posting node status.",
            "{type_}"
        );
    }
    // The second dead node is tainted one eviction-rate token later (0.1 node/s).
    let time_added = |n: &Value| -> i64 {
        let t = n["spec"]["taints"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["effect"] == "NoExecute"))
            .and_then(|t| t["timeAdded"].as_str())
            .unwrap_or_else(|| panic!("NoExecute taint with timeAdded: {n}"))
            .to_string();
        t.parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap_or_else(|e| panic!("timeAdded {t}: {e}"))
            .as_second()
    };
    let other = if node["metadata"]["name"] == "doomed-0" {
        "doomed-1"
    } else {
        "doomed-0"
    };
    let second = wait_until(
        "the other dead node tainted",
        Duration::from_secs(45),
        || {
            let n = get(&s, &format!("/api/v1/nodes/{other}"));
            taints(&n)
                .contains(&"node.kubernetes.io/unreachable:NoExecute".to_string())
                .then_some(n)
        },
    );
    let gap = (time_added(&second) - time_added(&node)).abs();
    assert!((9..=20).contains(&gap), "NoExecute taints {gap} s apart");
    let t = taints(&node);
    assert!(
        t.contains(&"node.kubernetes.io/unreachable:NoSchedule".to_string()),
        "{t:?}"
    );
    let added = node["spec"]["taints"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["effect"] == "NoExecute"))
        .map(|t| t["timeAdded"].clone());
    assert!(
        added.is_some_and(|a| a.is_string()),
        "NoExecute taint has timeAdded: {node}"
    );

    // Its pods are marked for deletion after tolerationSeconds (3 s) and replaced.
    wait_until("pods evicted and replaced", Duration::from_secs(60), || {
        let ps = pods(&s);
        let evicted = ps
            .iter()
            .filter(|p| on_doomed.contains(&name(p)))
            .all(|p| p["metadata"]["deletionTimestamp"].is_string());
        let healthy = ps
            .iter()
            .filter(|p| {
                p["metadata"]["deletionTimestamp"].is_null()
                    && p["status"]["phase"] == "Running"
                    && p["spec"]["nodeName"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("sim-node-"))
            })
            .count();
        (evicted && healthy == 6).then_some(())
    });
    // The kubelet is gone, so the evicted pods stay Terminating (as upstream),
    // carrying the eviction's condition and Ready=False.
    let old = get(
        &s,
        &format!("/api/v1/namespaces/default/pods/{}", on_doomed[0]),
    );
    let dt =
        condition(&old, "DisruptionTarget").unwrap_or_else(|| panic!("no DisruptionTarget: {old}"));
    assert_eq!(dt["status"], "True");
    assert_eq!(dt["reason"], "DeletionByTaintManager");
    assert_eq!(
        dt["message"],
        "Taint manager: deleting due to NoExecute taint"
    );
    assert_eq!(
        condition(&old, "Ready").map(|c| c["status"].clone()),
        Some("False".into()),
        "{old}"
    );
    let events = get(&s, "/api/v1/namespaces/default/events");
    let messages: Vec<&str> = events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == "TaintManagerEviction")
        .filter_map(|e| e["message"].as_str())
        .collect();
    for p in &on_doomed {
        let want = format!("Marking for deletion Pod default/{p}");
        assert!(
            messages.contains(&want.as_str()),
            "{want} not in {messages:?}"
        );
    }
    let node_events = get(
        &s,
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Ddoomed-0",
    );
    assert!(
        node_events["items"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["reason"] == "NodeNotReady"
                && e["message"] == "Node doomed-0 status is now: NodeNotReady"),
        "{node_events}"
    );

    // The node comes back: Ready again, taints removed; its kubelet finishes the evicted pods.
    let mut back = s.sim(2, "doomed-");
    wait_until(
        "doomed nodes Ready and untainted",
        Duration::from_secs(45),
        || {
            ["doomed-0", "doomed-1"]
                .iter()
                .all(|name| {
                    let n = get(&s, &format!("/api/v1/nodes/{name}"));
                    condition(&n, "Ready").is_some_and(|c| c["status"] == "True")
                        && !taints(&n)
                            .iter()
                            .any(|t| t.starts_with("node.kubernetes.io/"))
                })
                .then_some(())
        },
    );
    wait_until("evicted pods gone", Duration::from_secs(45), || {
        pods(&s)
            .iter()
            .all(|p| !on_doomed.contains(&name(p)))
            .then_some(())
    });
    let _ = back.kill();
    let _ = back.wait();
}
