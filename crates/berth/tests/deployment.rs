//! ReplicaSet and Deployment controllers end to end, with real kubectl against
//! a server running one hollow node (pods name `sim-node-0` to skip scheduling).

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const REPLICAS: i64 = 10;
const MAX_SURGE: i64 = 3; // 25% of 10, rounded up
const MAX_UNAVAILABLE: i64 = 2; // 25% of 10, rounded down

fn deployment(replicas: i64, image: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      nodeName: sim-node-0
      containers:
      - name: web
        image: {image}
"#
    )
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("timed out waiting for {what}");
}

fn pods(s: &common::Server) -> Vec<serde_json::Value> {
    let (code, list) = s.request(
        "GET",
        "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb",
        "",
        None,
    );
    assert_eq!(code, 200, "{list}");
    list["items"].as_array().cloned().unwrap_or_default()
}

fn live(pods: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    pods.iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect()
}

fn is_ready(p: &serde_json::Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn images(s: &common::Server) -> Vec<String> {
    live(&pods(s))
        .iter()
        .map(|p| {
            p["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[derive(Default)]
struct Watched {
    /// name -> (live, ready)
    pods: HashMap<String, (bool, bool)>,
    min_ready: i64,
    max_live: i64,
    events: usize,
}

/// Follows every pod event from `rv` on and records the extremes of live
/// (not terminating) and ready-and-live pod counts.
fn watch_pods(
    s: &common::Server,
    rv: &str,
    initial: &[serde_json::Value],
) -> (Arc<Mutex<Watched>>, std::process::Child) {
    let w = Arc::new(Mutex::new(Watched {
        min_ready: i64::MAX,
        ..Watched::default()
    }));
    {
        let mut g = w.lock().unwrap();
        for p in initial {
            let name = p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            g.pods.insert(
                name,
                (p["metadata"]["deletionTimestamp"].is_null(), is_ready(p)),
            );
        }
    }
    let url = format!(
        "{}/api/v1/namespaces/default/pods?watch=1&labelSelector=app%3Dweb&resourceVersion={rv}",
        s.http
    );
    let mut child = Command::new("curl")
        .args(["-sN", &url])
        .stdout(Stdio::piped())
        .spawn()
        .expect("curl watch");
    let out = child.stdout.take().expect("stdout");
    let w2 = w.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let Ok(ev) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            let p = &ev["object"];
            let name = p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let mut g = w2.lock().unwrap();
            if ev["type"] == "DELETED" {
                g.pods.remove(&name);
            } else {
                g.pods.insert(
                    name,
                    (p["metadata"]["deletionTimestamp"].is_null(), is_ready(p)),
                );
            }
            let live = g.pods.values().filter(|(l, _)| *l).count() as i64;
            let ready = g.pods.values().filter(|(l, r)| *l && *r).count() as i64;
            g.min_ready = g.min_ready.min(ready);
            g.max_live = g.max_live.max(live);
            g.events += 1;
        }
    });
    (w, child)
}

#[test]
fn deployment_lifecycle() {
    let s = common::Server::start_with(common::temp_dir("deploy"), &["--simulate-nodes", "1"]);

    // Create: rollout status finishes and get shows N/N.
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&deployment(REPLICAS, "nginx:1.25")),
    );
    let out = s.k(&["rollout", "status", "deploy/web", "--timeout=60s"]);
    assert!(
        out.contains("deployment \"web\" successfully rolled out"),
        "{out}"
    );
    let out = s.k(&["get", "deploy", "web"]);
    assert!(out.contains(&format!("{REPLICAS}/{REPLICAS}")), "{out}");
    let rs = s.k(&["get", "rs", "-o", "jsonpath={.items[*].metadata.name}"]);
    let hash = rs
        .trim()
        .strip_prefix("web-")
        .unwrap_or_else(|| panic!("rs name {rs}"));
    assert!(!hash.is_empty() && !hash.contains(' '), "{rs}");
    // Pods are owned by the RS, named <rs>-<5 chars>.
    for p in pods(&s) {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let suffix = name
            .strip_prefix(&format!("web-{hash}-"))
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!(suffix.len(), 5, "{name}");
        let r = &p["metadata"]["ownerReferences"][0];
        assert_eq!(r["kind"], "ReplicaSet");
        assert_eq!(r["controller"], true);
        assert_eq!(r["blockOwnerDeletion"], true);
        assert_eq!(p["metadata"]["labels"]["pod-template-hash"], hash);
    }
    let (_, d) = s.request(
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/web",
        "",
        None,
    );
    let conds = d["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let reason = |t: &str| {
        conds
            .iter()
            .find(|c| c["type"] == t)
            .map(|c| c["reason"].clone())
    };
    assert_eq!(
        reason("Available"),
        Some("MinimumReplicasAvailable".into()),
        "{d}"
    );
    assert_eq!(
        reason("Progressing"),
        Some("NewReplicaSetAvailable".into()),
        "{d}"
    );
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );

    // Rolling update: every pod event stays within the surge/unavailability bounds.
    let (_, list) = s.request(
        "GET",
        "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb",
        "",
        None,
    );
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let initial = list["items"].as_array().cloned().unwrap_or_default();
    let (watched, mut curl) = watch_pods(&s, &rv, &initial);
    s.k(&["set", "image", "deploy/web", "web=nginx:1.26"]);
    let out = s.k(&["rollout", "status", "deploy/web", "--timeout=90s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    wait_for("old pods gone", Duration::from_secs(30), || {
        let im = images(&s);
        im.len() as i64 == REPLICAS && im.iter().all(|i| i == "nginx:1.26")
    });
    std::thread::sleep(Duration::from_millis(500));
    {
        let g = watched.lock().unwrap();
        assert!(g.events > 0);
        assert!(
            g.min_ready >= REPLICAS - MAX_UNAVAILABLE,
            "ready pods dropped to {} (< {})",
            g.min_ready,
            REPLICAS - MAX_UNAVAILABLE
        );
        assert!(
            g.max_live <= REPLICAS + MAX_SURGE,
            "live pods rose to {} (> {})",
            g.max_live,
            REPLICAS + MAX_SURGE
        );
        eprintln!(
            "rollout: {} events, min ready {}, max live {}",
            g.events, g.min_ready, g.max_live
        );
    }
    let _ = curl.kill();
    let _ = curl.wait();

    // History lists both revisions.
    let out = s.k(&["rollout", "history", "deploy/web"]);
    assert!(
        out.contains("REVISION") && out.contains('1') && out.contains('2'),
        "{out}"
    );

    // Undo restores the previous image as revision 3, reusing the first RS.
    s.k(&["rollout", "undo", "deploy/web"]);
    let out = s.k(&["rollout", "status", "deploy/web", "--timeout=90s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    wait_for("pods back on nginx:1.25", Duration::from_secs(30), || {
        let im = images(&s);
        im.len() as i64 == REPLICAS && im.iter().all(|i| i == "nginx:1.25")
    });
    let out = s.k(&[
        "get",
        "rs",
        &format!("web-{hash}"),
        "-o",
        "jsonpath={.metadata.annotations}",
    ]);
    assert!(
        out.contains(r#""deployment.kubernetes.io/revision":"3""#),
        "{out}"
    );
    assert!(
        out.contains(r#""deployment.kubernetes.io/revision-history":"1""#),
        "{out}"
    );

    // Scale down deletes the surplus.
    s.k(&["scale", "deploy/web", "--replicas=1"]);
    wait_for("one pod", Duration::from_secs(30), || {
        live(&pods(&s)).len() == 1
    });
    let out = s.k(&["rollout", "status", "deploy/web", "--timeout=30s"]);
    assert!(out.contains("successfully rolled out"), "{out}");

    // A deleted pod is replaced by the RS.
    let ps = pods(&s);
    let victim = live(&ps)[0]["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    s.k(&["delete", "pod", &victim, "--wait=false"]);
    wait_for("replacement pod", Duration::from_secs(30), || {
        let ps = pods(&s);
        let l = live(&ps);
        l.len() == 1 && l[0]["metadata"]["name"] != victim.as_str() && is_ready(l[0])
    });
    let out = s.k(&["get", "deploy", "web"]);
    assert!(out.contains("1/1"), "{out}");
}

#[test]
fn replicaset_adopts_and_releases() {
    let s = common::Server::start_with(common::temp_dir("rs"), &["--simulate-nodes", "1"]);
    // An orphan that matches is adopted, so the RS creates only one more.
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Pod\nmetadata:\n  name: orphan\n  labels: {app: rs}\nspec:\n  nodeName: sim-node-0\n  containers: [{name: c, image: busybox}]\n"),
    );
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: rs\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: rs}\n  template:\n    metadata:\n      labels: {app: rs}\n    spec:\n      nodeName: sim-node-0\n      containers: [{name: c, image: busybox}]\n"),
    );
    wait_for("rs ready", Duration::from_secs(30), || {
        let (_, rs) = s.request(
            "GET",
            "/apis/apps/v1/namespaces/default/replicasets/rs",
            "",
            None,
        );
        rs["status"]["readyReplicas"] == 2
            && rs["status"]["availableReplicas"] == 2
            && rs["status"]["replicas"] == 2
    });
    let out = s.k(&[
        "get",
        "pod",
        "orphan",
        "-o",
        "jsonpath={.metadata.ownerReferences[0].name}",
    ]);
    assert_eq!(out.trim(), "rs");
    let (_, list) = s.request(
        "GET",
        "/api/v1/namespaces/default/pods?labelSelector=app%3Drs",
        "",
        None,
    );
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2), "{list}");
    // Relabelled, it is released and replaced.
    s.k(&["label", "pod", "orphan", "app=other", "--overwrite"]);
    wait_for("orphan released", Duration::from_secs(30), || {
        s.k(&[
            "get",
            "pod",
            "orphan",
            "-o",
            "jsonpath={.metadata.ownerReferences}",
        ])
        .trim()
        .is_empty()
    });
    wait_for("replacement", Duration::from_secs(30), || {
        let (_, list) = s.request(
            "GET",
            "/api/v1/namespaces/default/pods?labelSelector=app%3Drs",
            "",
            None,
        );
        list["items"].as_array().map(Vec::len) == Some(2)
    });
}
