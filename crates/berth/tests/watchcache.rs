//! The watch cache keeps a window per resource: a storm of Lease renewals does
//! not push Node or Pod events out, so their watches resume from an older
//! resourceVersion without 410 Gone, while the Leases' own window is bounded.

mod common;

use common::{Server, temp_dir};
use serde_json::Value;

/// Watch events from `path` (a watch URL on the plain port) until the server
/// ends the watch (`timeoutSeconds`).
fn watch_events(s: &Server, path: &str) -> Vec<Value> {
    let out = s.curl(&["-s", "--max-time", "20", &format!("{}{path}", s.http)]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("watch line is JSON"))
        .collect()
}

fn rv(obj: &Value) -> String {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .to_string()
}

#[test]
fn node_and_pod_watches_survive_a_lease_storm() {
    let s = Server::start_with(
        temp_dir("watchcache"),
        &["--watch-cache-events", "100", "--disable-scheduler"],
    );
    let (code, node) = s.request(
        "POST",
        "/api/v1/nodes",
        "application/json",
        Some(r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"wc-node"}}"#),
    );
    assert_eq!(code, 201, "{node}");
    let before = rv(&node);
    let (code, pod) = s.request(
        "POST",
        "/api/v1/namespaces/default/pods",
        "application/json",
        Some(
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"wc-pod"},
               "spec":{"containers":[{"name":"c","image":"nginx"}]}}"#,
        ),
    );
    assert_eq!(code, 201, "{pod}");
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let (code, lease) = s.request(
        "POST",
        leases,
        "application/json",
        Some(r#"{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"churn"},"spec":{"holderIdentity":"wc-node","leaseDurationSeconds":40}}"#),
    );
    assert_eq!(code, 201, "{lease}");
    // Three times the whole cache's cap in Lease renewals.
    let mut near_the_end = String::new();
    for i in 0..300 {
        let body = format!(r#"{{"spec":{{"leaseDurationSeconds":{}}}}}"#, 41 + i);
        let (code, patched) = s.request(
            "PATCH",
            &format!("{leases}/churn"),
            "application/merge-patch+json",
            Some(&body),
        );
        assert_eq!(code, 200);
        if i == 296 {
            near_the_end = rv(&patched);
        }
    }
    // A Lease watch from a recent revision (the last three renewals) replays.
    // Checked at once: the server's own components keep writing, and each of
    // their events takes one from the Leases' window, the largest.
    let recent = watch_events(
        &s,
        &format!("{leases}?watch=1&resourceVersion={near_the_end}&timeoutSeconds=2"),
    );
    let churn: Vec<&Value> = recent
        .iter()
        .filter(|e| e["object"]["metadata"]["name"] == "churn")
        .collect();
    assert!(
        recent.iter().all(|e| e["type"] == "MODIFIED")
            && churn.len() == 3
            && churn[2]["object"]["spec"]["leaseDurationSeconds"] == 340,
        "{recent:?}"
    );
    let (code, _) = s.request(
        "PATCH",
        "/api/v1/nodes/wc-node",
        "application/merge-patch+json",
        Some(r#"{"metadata":{"labels":{"after":"storm"}}}"#),
    );
    assert_eq!(code, 200);

    let nodes = watch_events(
        &s,
        &format!("/api/v1/nodes?watch=1&resourceVersion={before}&timeoutSeconds=2"),
    );
    assert!(
        nodes.iter().all(|e| e["type"] != "ERROR"),
        "node watch failed: {nodes:?}"
    );
    assert!(
        nodes
            .iter()
            .any(|e| e["type"] == "MODIFIED"
                && e["object"]["metadata"]["labels"]["after"] == "storm"),
        "node watch missed the label change: {nodes:?}"
    );

    let pods = watch_events(
        &s,
        &format!(
            "/api/v1/namespaces/default/pods?watch=1&resourceVersion={before}&timeoutSeconds=2"
        ),
    );
    assert!(
        pods.iter().all(|e| e["type"] != "ERROR"),
        "pod watch failed: {pods:?}"
    );
    assert_eq!(pods[0]["type"], "ADDED", "{pods:?}");
    assert_eq!(pods[0]["object"]["metadata"]["name"], "wc-pod");

    // The Leases' own window is bounded: from before the storm they are gone.
    let leases_watch = watch_events(
        &s,
        &format!("{leases}?watch=1&resourceVersion={before}&timeoutSeconds=2"),
    );
    assert_eq!(leases_watch.len(), 1, "{leases_watch:?}");
    assert_eq!(leases_watch[0]["type"], "ERROR");
    assert_eq!(leases_watch[0]["object"]["code"], 410);
}
