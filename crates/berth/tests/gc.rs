//! The garbage collector (background, foreground, orphan) and the default
//! ServiceAccount controller, driven by real kubectl against `berth server`.

mod common;

use std::time::{Duration, Instant};

use serde_json::Value;

/// Polls `f` until it returns true or `secs` pass.
fn eventually(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}");
}

fn get(s: &common::Server, path: &str) -> (u16, Value) {
    s.request("GET", path, "application/json", None)
}

/// Creates ConfigMap `owner` and dependents ConfigMap `dep-cm` and Secret `dep-secret`
/// owned by it (the Secret with blockOwnerDeletion); returns the owner's uid.
fn make_family(s: &common::Server, ns: &str) -> String {
    s.k(&["create", "configmap", "owner", "-n", ns]);
    let uid = s.k(&[
        "get",
        "cm",
        "owner",
        "-n",
        ns,
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    assert!(!uid.is_empty());
    let yaml = format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: dep-cm
  namespace: {ns}
  ownerReferences:
  - apiVersion: v1
    kind: ConfigMap
    name: owner
    uid: {uid}
---
apiVersion: v1
kind: Secret
metadata:
  name: dep-secret
  namespace: {ns}
  ownerReferences:
  - apiVersion: v1
    kind: ConfigMap
    name: owner
    uid: {uid}
    blockOwnerDeletion: true
"#
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    uid
}

fn gone(s: &common::Server, ns: &str) -> [bool; 3] {
    [
        get(s, &format!("/api/v1/namespaces/{ns}/configmaps/owner")).0 == 404,
        get(s, &format!("/api/v1/namespaces/{ns}/configmaps/dep-cm")).0 == 404,
        get(s, &format!("/api/v1/namespaces/{ns}/secrets/dep-secret")).0 == 404,
    ]
}

#[test]
fn garbage_collection_and_default_service_account() {
    let s = common::Server::start("gc");

    // Background: the owner goes at once, its dependents shortly after.
    s.k(&["create", "namespace", "bg"]);
    make_family(&s, "bg");
    s.k(&["delete", "cm", "owner", "-n", "bg"]);
    eventually(10, "background collection", || gone(&s, "bg") == [true; 3]);

    // A dependent with a second, live owner keeps living; the dead reference goes.
    s.k(&["create", "namespace", "multi"]);
    let uid = make_family(&s, "multi");
    s.k(&["create", "configmap", "keeper", "-n", "multi"]);
    let keeper = s.k(&[
        "get",
        "cm",
        "keeper",
        "-n",
        "multi",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let patch = format!(
        r#"{{"metadata":{{"ownerReferences":[{{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"{uid}"}},{{"apiVersion":"v1","kind":"ConfigMap","name":"keeper","uid":"{keeper}"}}]}}}}"#
    );
    s.k(&[
        "patch",
        "cm",
        "dep-cm",
        "-n",
        "multi",
        "--type=merge",
        "-p",
        &patch,
    ]);
    s.k(&["delete", "cm", "owner", "-n", "multi"]);
    eventually(10, "dead reference removed", || {
        let (code, v) = get(&s, "/api/v1/namespaces/multi/configmaps/dep-cm");
        let refs = v["metadata"]["ownerReferences"].as_array().cloned();
        code == 200
            && refs.is_some_and(|r| r.len() == 1 && r[0]["uid"] == Value::String(keeper.clone()))
    });
    eventually(10, "sole-owned secret collected", || gone(&s, "multi")[2]);

    // Foreground: kubectl waits for the owner, which goes only after its dependents.
    s.k(&["create", "namespace", "fg"]);
    make_family(&s, "fg");
    let started = Instant::now();
    s.k(&[
        "delete",
        "cm",
        "owner",
        "-n",
        "fg",
        "--cascade=foreground",
        "--timeout=30s",
    ]);
    assert!(started.elapsed() < Duration::from_secs(30));
    // The blocking Secret had to go before the owner; the other dependent follows.
    assert!(
        gone(&s, "fg")[0] && gone(&s, "fg")[2],
        "{:?}",
        gone(&s, "fg")
    );
    eventually(10, "foreground collection", || gone(&s, "fg") == [true; 3]);

    // Orphan: the owner goes, the dependents stay without the reference.
    s.k(&["create", "namespace", "orph"]);
    make_family(&s, "orph");
    s.k(&[
        "delete",
        "cm",
        "owner",
        "-n",
        "orph",
        "--cascade=orphan",
        "--timeout=30s",
    ]);
    eventually(10, "orphaned owner removed", || gone(&s, "orph")[0]);
    for path in [
        "/api/v1/namespaces/orph/configmaps/dep-cm",
        "/api/v1/namespaces/orph/secrets/dep-secret",
    ] {
        let (code, v) = get(&s, path);
        assert_eq!(code, 200, "{path} should survive orphaning");
        assert!(
            v["metadata"].get("ownerReferences").is_none(),
            "{path}: {}",
            v["metadata"]
        );
    }
    // And they stay: the collector does not take them later.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(gone(&s, "orph"), [true, false, false]);

    // ServiceAccount `default`: in a new namespace, and back after deletion.
    s.k(&["create", "namespace", "sa-test"]);
    let sa = "/api/v1/namespaces/sa-test/serviceaccounts/default";
    eventually(10, "default ServiceAccount", || get(&s, sa).0 == 200);
    let first = get(&s, sa).1["metadata"]["uid"].clone();
    s.k(&["delete", "serviceaccount", "default", "-n", "sa-test"]);
    eventually(10, "default ServiceAccount re-created", || {
        let (code, v) = get(&s, sa);
        code == 200 && v["metadata"]["uid"] != first
    });
    assert_eq!(
        get(&s, "/api/v1/namespaces/default/serviceaccounts/default").0,
        200
    );
}
