//! `kubectl delete deploy --cascade=background|foreground|orphan` with a real
//! Deployment on simulated nodes: what happens to its ReplicaSet and pods.

mod common;

use std::time::{Duration, Instant};

use serde_json::Value;

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}");
}

fn list(s: &common::Server, path: &str, app: &str) -> Vec<Value> {
    let (code, v) = s.request(
        "GET",
        &format!("{path}?labelSelector=app%3D{app}"),
        "",
        None,
    );
    assert_eq!(code, 200, "{v}");
    v["items"].as_array().cloned().unwrap_or_default()
}

fn replica_sets(s: &common::Server, app: &str) -> Vec<Value> {
    list(s, "/apis/apps/v1/namespaces/default/replicasets", app)
}

fn pods(s: &common::Server, app: &str) -> Vec<Value> {
    list(s, "/api/v1/namespaces/default/pods", app)
}

fn deployment(s: &common::Server, name: &str) -> Option<Value> {
    let (code, v) = s.request(
        "GET",
        &format!("/apis/apps/v1/namespaces/default/deployments/{name}"),
        "",
        None,
    );
    (code == 200).then_some(v)
}

fn ready(p: &Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// A 2-replica Deployment `name` (label app=name), running and Ready.
fn create(s: &common::Server, name: &str) {
    let yaml = format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: 2
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
"
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    assert!(out.status.success(), "{}", common::stderr(&out));
    wait_for(&format!("{name} ready"), Duration::from_secs(30), || {
        let ps = pods(s, name);
        ps.len() == 2 && ps.iter().all(ready) && replica_sets(s, name).len() == 1
    });
}

#[test]
fn delete_deployment_cascade_modes() {
    let s = common::Server::start_with(common::temp_dir("cascade"), &["--simulate-nodes", "3"]);
    for n in ["bg", "fg", "orphan"] {
        create(&s, n);
    }

    // Background: the Deployment goes at once; the garbage collector then
    // deletes its ReplicaSet (not waiting for pods), then the pods.
    s.k(&["delete", "deploy", "bg", "--cascade=background"]);
    assert!(deployment(&s, "bg").is_none());
    wait_for(
        "bg's ReplicaSet and pods gone",
        Duration::from_secs(30),
        || replica_sets(&s, "bg").is_empty() && pods(&s, "bg").is_empty(),
    );

    // Foreground: the Deployment is marked with the foregroundDeletion
    // finalizer; the garbage collector deletes its ReplicaSet in the
    // foreground too (unblocking the Deployment, as upstream does), so the
    // ReplicaSet waits, marked, until its pods are gone.
    s.k(&[
        "delete",
        "deploy",
        "fg",
        "--cascade=foreground",
        "--wait=false",
    ]);
    if let Some(d) = deployment(&s, "fg") {
        assert!(d["metadata"]["deletionTimestamp"].is_string(), "{d}");
        let fins = d["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(fins.iter().any(|f| f == "foregroundDeletion"), "{d}");
    }
    let mut rs_waited = false;
    wait_for(
        "fg and its dependents gone",
        Duration::from_secs(30),
        || {
            let rss = replica_sets(&s, "fg");
            let ps = pods(&s, "fg");
            if let Some(rs) = rss.first()
                && rs["metadata"]["deletionTimestamp"].is_string()
                && rs["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|f| f == "foregroundDeletion"))
            {
                rs_waited = true;
            }
            assert!(
                !rss.is_empty() || ps.is_empty(),
                "the ReplicaSet went before its pods"
            );
            deployment(&s, "fg").is_none() && rss.is_empty() && ps.is_empty()
        },
    );
    assert!(
        rs_waited,
        "the ReplicaSet was never seen in foreground deletion"
    );

    // Orphan: the Deployment goes, its ReplicaSet stays without an owner and
    // keeps its pods running.
    s.k(&["delete", "deploy", "orphan", "--cascade=orphan"]);
    assert!(deployment(&s, "orphan").is_none());
    wait_for(
        "orphan's ReplicaSet released",
        Duration::from_secs(15),
        || {
            replica_sets(&s, "orphan").first().is_some_and(|rs| {
                rs["metadata"]["ownerReferences"]
                    .as_array()
                    .is_none_or(|r| r.is_empty())
            })
        },
    );
    std::thread::sleep(Duration::from_secs(3));
    let rss = replica_sets(&s, "orphan");
    assert_eq!(rss.len(), 1, "ReplicaSet kept");
    let ps = pods(&s, "orphan");
    assert_eq!(ps.len(), 2, "pods kept");
    let rs_uid = rss[0]["metadata"]["uid"].clone();
    for p in &ps {
        assert!(p["metadata"]["deletionTimestamp"].is_null(), "{p}");
        assert_eq!(
            p["metadata"]["ownerReferences"][0]["uid"], rs_uid,
            "still owned by the RS"
        );
    }
}
