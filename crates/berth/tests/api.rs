//! API semantics over HTTP against a real `berth server` process.

mod common;

use std::time::Duration;

use common::Server;
use serde_json::{Value, json};

fn cm(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"n": name}}, "data": {"k": "v"}}).to_string()
}

#[test]
fn kill_9_keeps_every_acknowledged_create() {
    let s = Server::start("crash");
    // A background writer creates objects as fast as it can; we kill the server under it.
    let http = s.http.clone();
    let writer = std::thread::spawn(move || {
        let mut acked = Vec::new();
        for i in 0..100_000 {
            let name = format!("c{i}");
            let code =
                common::post_code(&http, "/api/v1/namespaces/default/configmaps", &cm(&name));
            match code.as_str() {
                "201" => acked.push(name),
                _ => break,
            }
        }
        acked
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    let mut s = s;
    s.kill9();
    let acked = writer.join().unwrap();
    assert!(
        acked.len() > 10,
        "too few writes before the kill: {}",
        acked.len()
    );
    let s = s.restart();
    let (code, list) = s.request("GET", "/api/v1/namespaces/default/configmaps", "", None);
    assert_eq!(code, 200);
    let names: std::collections::HashSet<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    let missing: Vec<&String> = acked
        .iter()
        .filter(|n| !names.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged creates lost after kill -9: {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
}

#[test]
fn optimistic_concurrency_paging_and_watch_from_rv() {
    // No controllers: the root CA publisher's `kube-root-ca.crt` would be one
    // more ConfigMap in the pages counted below.
    let s = Server::start_with(
        common::temp_dir("semantics"),
        &["--disable-controller-manager"],
    );
    let base = "/api/v1/namespaces/default/configmaps";
    for i in 0..7 {
        let (code, _) = s.request(
            "POST",
            base,
            "application/json",
            Some(&cm(&format!("p{i}"))),
        );
        assert_eq!(code, 201);
    }
    let (code, again) = s.request("POST", base, "application/json", Some(&cm("p0")));
    assert_eq!(
        (code, again["reason"].as_str()),
        (409, Some("AlreadyExists"))
    );

    // Paging: 3 + 3 + 1, a consistent snapshot, remainingItemCount as upstream.
    let (_, page1) = s.request("GET", &format!("{base}?limit=3"), "", None);
    assert_eq!(page1["items"].as_array().unwrap().len(), 3);
    assert_eq!(page1["metadata"]["remainingItemCount"], 4);
    let token = page1["metadata"]["continue"].as_str().unwrap().to_string();
    // A write between pages is not visible in the snapshot.
    s.request("POST", base, "application/json", Some(&cm("p9")));
    let (_, page2) = s.request("GET", &format!("{base}?limit=3&continue={token}"), "", None);
    let token2 = page2["metadata"]["continue"].as_str().unwrap().to_string();
    let (_, page3) = s.request(
        "GET",
        &format!("{base}?limit=3&continue={token2}"),
        "",
        None,
    );
    assert_eq!(page3["items"].as_array().unwrap().len(), 1);
    assert!(page3["metadata"].get("continue").is_none());
    assert_eq!(
        page1["metadata"]["resourceVersion"],
        page3["metadata"]["resourceVersion"]
    );

    // Stale resourceVersion → 409 Conflict with upstream's message.
    let (_, obj) = s.request("GET", &format!("{base}/p1"), "", None);
    let mut a = obj.clone();
    a["data"]["k"] = json!("A");
    let (code, _) = s.request(
        "PUT",
        &format!("{base}/p1"),
        "application/json",
        Some(&a.to_string()),
    );
    assert_eq!(code, 200);
    let mut b = obj.clone();
    b["data"]["k"] = json!("B");
    let (code, err) = s.request(
        "PUT",
        &format!("{base}/p1"),
        "application/json",
        Some(&b.to_string()),
    );
    assert_eq!(code, 409);
    assert_eq!(
        err["message"],
        "Operation cannot be fulfilled on configmaps \"p1\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // Label selectors: equality and set-based.
    let (_, sel) = s.request(
        "GET",
        &format!("{base}?labelSelector=n%20in%20(p1,p2)"),
        "",
        None,
    );
    assert_eq!(sel["items"].as_array().unwrap().len(), 2);
    let (_, sel) = s.request(
        "GET",
        &format!("{base}?fieldSelector=metadata.name%3Dp3"),
        "",
        None,
    );
    assert_eq!(sel["items"].as_array().unwrap().len(), 1);

    // Watch from the paged list's snapshot replays what happened after it, in order.
    let rv = page1["metadata"]["resourceVersion"].as_str().unwrap();
    let out = s.curl(&[
        "-s",
        "--max-time",
        "3",
        &format!(
            "{}{base}?watch=true&resourceVersion={rv}&timeoutSeconds=1",
            s.http
        ),
    ]);
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["object"]["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(seen, [("ADDED", "p9"), ("MODIFIED", "p1")], "{events:?}");
    assert_eq!(events[1]["object"]["data"]["k"], "A");

    // Delete returns a Success status for a configmap; the object is gone.
    let (code, st) = s.request("DELETE", &format!("{base}/p2"), "application/json", None);
    assert_eq!((code, st["status"].as_str()), (200, Some("Success")));
    let (code, _) = s.request("GET", &format!("{base}/p2"), "", None);
    assert_eq!(code, 404);

    // dryRun=All validates and stores nothing.
    let (code, _) = s.request(
        "POST",
        &format!("{base}?dryRun=All"),
        "application/json",
        Some(&cm("dry")),
    );
    assert_eq!(code, 201);
    let (code, _) = s.request("GET", &format!("{base}/dry"), "", None);
    assert_eq!(code, 404);
}

#[test]
fn finalizers_and_pod_defaults() {
    let s = Server::start("finalizers");
    let base = "/api/v1/namespaces/default/configmaps";
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "f", "finalizers": ["example.com/hold"]}}).to_string();
    assert_eq!(
        s.request("POST", base, "application/json", Some(&body)).0,
        201
    );
    let (code, held) = s.request("DELETE", &format!("{base}/f"), "application/json", None);
    assert_eq!(code, 200);
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    // Removing the finalizer lets the object go.
    let (code, _) = s.request(
        "PATCH",
        &format!("{base}/f"),
        "application/merge-patch+json",
        Some(r#"{"metadata":{"finalizers":null}}"#),
    );
    assert_eq!(code, 200);
    assert_eq!(s.request("GET", &format!("{base}/f"), "", None).0, 404);

    // A pod gets upstream's defaults and QoS class at creation.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]}});
    let (code, created) = s.request(
        "POST",
        "/api/v1/namespaces/default/pods",
        "application/json",
        Some(&pod.to_string()),
    );
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["status"]["qosClass"], "Guaranteed");
    assert_eq!(created["status"]["phase"], "Pending");
    assert_eq!(created["spec"]["restartPolicy"], "Always");
    assert_eq!(created["spec"]["dnsPolicy"], "ClusterFirst");
    assert_eq!(created["spec"]["securityContext"], json!({}));
    assert_eq!(
        created["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    assert_eq!(
        created["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "100m"
    );
}

#[test]
fn watch_from_a_revision_older_than_the_cache_window_is_gone() {
    let s = Server::start_with(
        common::temp_dir("gone"),
        &["--watch-cache-events", "5", "--disable-controller-manager"],
    );
    let base = "/api/v1/namespaces/default/configmaps";
    let (_, first) = s.request("POST", base, "application/json", Some(&cm("g0")));
    let old_rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    for i in 1..20 {
        assert_eq!(
            s.request(
                "POST",
                base,
                "application/json",
                Some(&cm(&format!("g{i}")))
            )
            .0,
            201
        );
    }
    let out = s.curl(&[
        "-s",
        "--max-time",
        "5",
        &format!("{}{base}?watch=true&resourceVersion={old_rv}", s.http),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let ev: Value = serde_json::from_str(text.lines().next().unwrap_or("")).unwrap_or(Value::Null);
    assert_eq!(ev["type"], "ERROR", "{text}");
    assert_eq!(ev["object"]["code"], 410, "{text}");
    assert_eq!(ev["object"]["reason"], "Expired", "{text}");
    assert!(
        ev["object"]["message"]
            .as_str()
            .unwrap()
            .starts_with("too old resource version"),
        "{text}"
    );
    // A list then a watch from its resourceVersion works (what clients do after a 410).
    let (_, list) = s.request("GET", base, "", None);
    assert_eq!(list["items"].as_array().unwrap().len(), 20);
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    let out = s.curl(&[
        "-s",
        "--max-time",
        "3",
        &format!(
            "{}{base}?watch=true&resourceVersion={rv}&timeoutSeconds=1",
            s.http
        ),
    ]);
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn metrics_and_clean_shutdown_on_sigterm() {
    let mut s = Server::start("sigterm");
    s.request("GET", "/api/v1/namespaces/default/configmaps", "", None);
    let out = s.curl(&["-s", &format!("{}/metrics", s.http)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("apiserver_request_total{")
                && l.contains("verb=\"LIST\"")
                && l.contains("resource=\"configmaps\"")
                && l.contains("code=\"200\"")),
        "{text}"
    );
    assert!(
        text.contains("apiserver_request_duration_seconds_bucket{"),
        "{text}"
    );
    let pid = s.child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "server did not stop on SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
}

#[test]
fn both_event_apis_and_both_hpa_versions_share_storage() {
    let s = Server::start("shared");
    let ev = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "p.1"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"}, "reason": "Started",
        "message": "Started container c", "type": "Normal", "count": 2, "source": {"component": "kubelet"}});
    assert_eq!(
        s.request(
            "POST",
            "/api/v1/namespaces/default/events",
            "application/json",
            Some(&ev.to_string())
        )
        .0,
        201
    );
    let (code, got) = s.request(
        "GET",
        "/apis/events.k8s.io/v1/namespaces/default/events/p.1",
        "",
        None,
    );
    assert_eq!(code, 200, "{got}");
    assert_eq!(got["apiVersion"], "events.k8s.io/v1");
    assert_eq!(
        (
            got["regarding"]["name"].as_str(),
            got["note"].as_str(),
            got["deprecatedCount"].as_i64()
        ),
        (Some("p"), Some("Started container c"), Some(2))
    );
    let (_, list) = s.request("GET", "/apis/events.k8s.io/v1/events", "", None);
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");

    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "minReplicas": 1, "maxReplicas": 4,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]}});
    let (code, created) = s.request(
        "POST",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
        "application/json",
        Some(&hpa.to_string()),
    );
    assert_eq!(code, 201, "{created}");
    let (code, v1) = s.request(
        "GET",
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/h",
        "",
        None,
    );
    assert_eq!(code, 200, "{v1}");
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 70);
}

/// Request fields near i64::MAX (grace periods, watch timeouts) answer like
/// any other value instead of panicking a request task.
#[test]
fn overflowing_grace_periods_and_timeouts_do_not_panic() {
    let s = Server::start("api-overflow");
    let max = i64::MAX.to_string();
    let pod = |name: &str, grace: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}"}},"spec":{{"nodeName":"n1","terminationGracePeriodSeconds":{grace},"containers":[{{"name":"c","image":"busybox"}}]}}}}"#
        )
    };
    let pods = "/api/v1/namespaces/default/pods";
    for (name, grace, query) in [
        ("spec-grace", max.as_str(), String::new()),
        ("query-grace", "30", format!("?gracePeriodSeconds={max}")),
    ] {
        let (code, _) = s.request("POST", pods, "application/json", Some(&pod(name, grace)));
        assert_eq!(code, 201, "{name}");
        // Running on a node: deleted gracefully, so the grace period counts.
        let (code, _) = s.request(
            "PATCH",
            &format!("{pods}/{name}/status"),
            "application/merge-patch+json",
            Some(r#"{"status":{"phase":"Running"}}"#),
        );
        assert_eq!(code, 200, "{name}");
        let (code, body) = s.request("DELETE", &format!("{pods}/{name}{query}"), "", None);
        assert_eq!(code, 200, "{name}: {body}");
        assert_eq!(
            body["metadata"]["deletionTimestamp"], "9999-12-30T22:00:00Z",
            "{name}: saturated"
        );
        assert_eq!(body["metadata"]["deletionGracePeriodSeconds"], i64::MAX);
    }
    // A watch with the largest timeout is an ordinary watch.
    let out = s.curl(&[
        "-s",
        "-m",
        "2",
        &format!("{}{pods}?watch=1&timeoutSeconds={max}", s.http),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(r#""type":"ADDED""#), "{text}");
    let (code, _) = s.request("GET", "/readyz", "", None);
    assert_eq!(code, 200, "the server still serves");
    // The controllers' pod informers still decode every pod: a ReplicaSet
    // counts the pod it creates.
    let rs = r#"{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"rs"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"rs"}},"template":{"metadata":{"labels":{"app":"rs"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}"#;
    let (code, _) = s.request(
        "POST",
        "/apis/apps/v1/namespaces/default/replicasets",
        "application/json",
        Some(rs),
    );
    assert_eq!(code, 201);
    common::wait_until(
        Duration::from_secs(30),
        "the ReplicaSet sees its pod",
        || {
            let (_, rs) = s.request(
                "GET",
                "/apis/apps/v1/namespaces/default/replicasets/rs",
                "",
                None,
            );
            rs["status"]["replicas"] == 1
        },
    );
}
