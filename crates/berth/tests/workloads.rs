//! StatefulSet, DaemonSet, Job and CronJob controllers end to end: a server
//! with three simulated nodes, driven by real kubectl.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

fn server(tag: &str) -> common::Server {
    sim_server(tag, &[])
}

fn sim_server(tag: &str, extra: &[&str]) -> common::Server {
    let mut args = vec!["--simulate-nodes", "3"];
    args.extend_from_slice(extra);
    let s = common::Server::start_with(common::temp_dir(tag), &args);
    wait_for("3 Ready nodes", Duration::from_secs(30), || {
        let out = s.k(&["get", "nodes", "--no-headers"]);
        out.lines()
            .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
            .count()
            == 3
    });
    s
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out waiting for {what}");
}

fn get(s: &common::Server, path: &str) -> Value {
    let (code, v) = s.request("GET", path, "", None);
    assert_eq!(code, 200, "GET {path}: {v}");
    v
}

fn items(s: &common::Server, path: &str) -> Vec<Value> {
    get(s, path)["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn pods(s: &common::Server, selector: &str) -> Vec<Value> {
    items(
        s,
        &format!("/api/v1/namespaces/default/pods?labelSelector={selector}"),
    )
}

fn name(v: &Value) -> String {
    v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn is_ready(p: &Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn apply(s: &common::Server, yaml: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(yaml));
    assert!(
        out.status.success(),
        "apply failed: {}",
        common::stderr(&out)
    );
}

const STATEFULSET: &str = "apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: nginx
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        volumeMounts:
        - name: www
          mountPath: /usr/share/nginx/html
  volumeClaimTemplates:
  - metadata:
      name: www
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
";

#[test]
fn statefulset_ordered_creation_scale_down_and_claims() {
    // Simulated nodes run no provisioner: the claims bind to static volumes
    // (no default class, so the claims are class-less and bind at once).
    let s = sim_server("sts", &["--default-storage-class=false"]);
    for i in 0..6 {
        apply(
            &s,
            &format!(
                "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: pv-{i}}}\nspec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [ReadWriteOnce]\n  hostPath: {{path: /tmp/berth-sts-pv-{i}}}\n"
            ),
        );
    }
    apply(&s, STATEFULSET);

    // Every snapshot in which web-N first appears must already show web-(N-1)
    // Ready: the controller creates each pod only after its predecessor.
    let mut first_seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut snapshot = 0;
    wait_for("web-0..2 Ready", Duration::from_secs(45), || {
        snapshot += 1;
        let ps = pods(&s, "app%3Dweb");
        let by_name: BTreeMap<String, &Value> = ps.iter().map(|p| (name(p), p)).collect();
        for n in by_name.keys() {
            if first_seen.contains_key(n) {
                continue;
            }
            first_seen.insert(n.clone(), snapshot);
            let ord: usize = n.trim_start_matches("web-").parse().expect("ordinal");
            if ord > 0 {
                let prev = format!("web-{}", ord - 1);
                let p = by_name
                    .get(&prev)
                    .unwrap_or_else(|| panic!("{n} exists before {prev}"));
                assert!(is_ready(p), "{n} created before {prev} was Ready");
            }
        }
        ps.len() == 3 && ps.iter().all(is_ready)
    });
    let order: Vec<&String> = {
        let mut v: Vec<(&usize, &String)> = first_seen.iter().map(|(k, v)| (v, k)).collect();
        v.sort();
        v.into_iter().map(|(_, k)| k).collect()
    };
    assert_eq!(order, ["web-0", "web-1", "web-2"]);

    let out = s.k(&["rollout", "status", "sts/web", "--timeout=30s"]);
    assert!(
        // The API server defaults partition to 0, so kubectl reports a partitioned rollout.
        out.contains("partitioned roll out complete: 3 new pods have been updated"),
        "{out}"
    );

    // Identity: hostname, subdomain, labels, claims.
    let p1 = get(&s, "/api/v1/namespaces/default/pods/web-1");
    assert_eq!(p1["spec"]["hostname"], "web-1");
    assert_eq!(p1["spec"]["subdomain"], "nginx");
    assert_eq!(
        p1["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"],
        "web-1"
    );
    assert_eq!(
        p1["metadata"]["labels"]["apps.kubernetes.io/pod-index"],
        "1"
    );
    let claim_vol = p1["spec"]["volumes"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == "www"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(claim_vol["persistentVolumeClaim"]["claimName"], "www-web-1");
    let claims: Vec<String> = items(&s, "/api/v1/namespaces/default/persistentvolumeclaims")
        .iter()
        .map(name)
        .collect();
    assert_eq!(claims, ["www-web-0", "www-web-1", "www-web-2"]);

    let st = get(&s, "/apis/apps/v1/namespaces/default/statefulsets/web")["status"].clone();
    assert_eq!(st["replicas"], 3, "{st}");
    assert_eq!(st["readyReplicas"], 3, "{st}");
    assert_eq!(st["currentReplicas"], 3, "{st}");
    assert_eq!(st["updatedReplicas"], 3, "{st}");
    assert_eq!(st["availableReplicas"], 3, "{st}");
    assert_eq!(st["currentRevision"], st["updateRevision"], "{st}");
    let rev = st["updateRevision"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(rev.starts_with("web-"), "{rev}");
    assert_eq!(
        p1["metadata"]["labels"]["controller-revision-hash"],
        rev.as_str()
    );
    let revs = items(&s, "/apis/apps/v1/namespaces/default/controllerrevisions");
    assert!(revs.iter().any(|r| name(r) == rev), "{revs:?}");

    let events = s.k(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=web",
    ]);
    assert!(
        events.contains("create Pod web-0 in StatefulSet web successful"),
        "{events}"
    );
    assert!(
        events.contains("create Claim www-web-0 Pod web-0 in StatefulSet web success"),
        "{events}"
    );

    // Rolling update: pods move to the new revision from the highest ordinal
    // down, one at a time.
    s.k(&["set", "image", "sts/web", "nginx=nginx:1.28"]);
    let mut updated: Vec<String> = Vec::new();
    wait_for(
        "all pods updated and Ready",
        Duration::from_secs(45),
        || {
            let ps = pods(&s, "app%3Dweb");
            for p in &ps {
                let n = name(p);
                if p["spec"]["containers"][0]["image"] == "nginx:1.28" && !updated.contains(&n) {
                    updated.push(n);
                }
            }
            ps.len() == 3
                && ps.iter().all(|p| {
                    is_ready(p)
                        && p["spec"]["containers"][0]["image"] == "nginx:1.28"
                        && p["metadata"]["deletionTimestamp"].is_null()
                })
        },
    );
    assert_eq!(updated, ["web-2", "web-1", "web-0"]);
    s.k(&["rollout", "status", "sts/web", "--timeout=30s"]);
    let st = get(&s, "/apis/apps/v1/namespaces/default/statefulsets/web")["status"].clone();
    assert_eq!(st["currentRevision"], st["updateRevision"], "{st}");
    assert_ne!(st["updateRevision"], rev.as_str(), "{st}");
    assert_eq!(st["updatedReplicas"], 3, "{st}");

    // Scale down to 1: web-2 goes first, and web-1 only after web-2 is gone.
    s.k(&["scale", "sts/web", "--replicas=1"]);
    wait_for("only web-0 left", Duration::from_secs(30), || {
        let names: Vec<(String, bool)> = pods(&s, "app%3Dweb")
            .iter()
            .map(|p| (name(p), !p["metadata"]["deletionTimestamp"].is_null()))
            .collect();
        let has = |n: &str| names.iter().any(|(x, _)| x == n);
        let terminating = |n: &str| names.iter().any(|(x, t)| x == n && *t);
        if terminating("web-1") || !has("web-1") {
            assert!(
                !has("web-2"),
                "web-1 removed while web-2 still exists: {names:?}"
            );
        }
        assert!(!terminating("web-0"), "web-0 must stay: {names:?}");
        names.len() == 1 && has("web-0")
    });
    // Claims are retained (persistentVolumeClaimRetentionPolicy defaults to Retain).
    let claims = items(&s, "/api/v1/namespaces/default/persistentvolumeclaims");
    assert_eq!(claims.len(), 3);

    // Deleting the set takes its pods and revisions (owned) but not the claims.
    s.k(&["delete", "sts", "web"]);
    wait_for("pods and revisions gone", Duration::from_secs(30), || {
        pods(&s, "app%3Dweb").is_empty()
            && items(&s, "/apis/apps/v1/namespaces/default/controllerrevisions").is_empty()
    });
    assert_eq!(
        items(&s, "/api/v1/namespaces/default/persistentvolumeclaims").len(),
        3
    );

    // Parallel: all pods are created at once, without waiting for readiness.
    // Its claims go with the pods (whenScaled) and the set (whenDeleted).
    apply(
        &s,
        &STATEFULSET
            .replace("name: web\n", "name: par\n")
            .replace("{app: web}", "{app: par}")
            .replace(
                "serviceName: nginx",
                "serviceName: nginx\n  podManagementPolicy: Parallel\n  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete, whenScaled: Delete}",
            ),
    );
    let mut saw_parallel = false;
    wait_for("par-0..2 Ready", Duration::from_secs(30), || {
        let ps = pods(&s, "app%3Dpar");
        let p0_ready = ps.iter().any(|p| name(p) == "par-0" && is_ready(p));
        if ps.len() == 3 && !p0_ready {
            saw_parallel = true;
        }
        ps.len() == 3 && ps.iter().all(is_ready)
    });
    assert!(
        saw_parallel,
        "par-1 and par-2 should exist before par-0 is Ready"
    );
    let claim_names = || -> Vec<String> {
        items(&s, "/api/v1/namespaces/default/persistentvolumeclaims")
            .iter()
            .map(name)
            .filter(|n| n.starts_with("www-par-"))
            .collect()
    };
    assert_eq!(claim_names(), ["www-par-0", "www-par-1", "www-par-2"]);
    s.k(&["scale", "sts/par", "--replicas=1"]);
    wait_for(
        "claims of removed pods deleted",
        Duration::from_secs(30),
        || claim_names() == ["www-par-0"],
    );
    s.k(&["delete", "sts", "par"]);
    wait_for(
        "the last claim deleted with the set",
        Duration::from_secs(30),
        || claim_names().is_empty(),
    );
    // web's claims (Retain) are untouched.
    assert_eq!(
        items(&s, "/api/v1/namespaces/default/persistentvolumeclaims").len(),
        3
    );
}

const DAEMONSET: &str = "apiVersion: apps/v1
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
      containers:
      - name: agent
        image: busybox:1.36
";

fn daemon_nodes(s: &common::Server) -> Vec<String> {
    let mut v: Vec<String> = pods(s, "app%3Dagent")
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| p["spec"]["nodeName"].as_str().unwrap_or("").to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn daemonset_one_pod_per_untainted_node_and_rolling_update() {
    let s = server("ds");
    s.k(&["taint", "nodes", "sim-node-2", "dedicated=infra:NoSchedule"]);
    apply(&s, DAEMONSET);
    s.k(&["rollout", "status", "ds/agent", "--timeout=40s"]);
    assert_eq!(daemon_nodes(&s), ["sim-node-0", "sim-node-1"]);

    let p = pods(&s, "app%3Dagent").remove(0);
    let node = p["spec"]["nodeName"].clone();
    let term = &p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchFields"][0];
    assert_eq!(term["key"], "metadata.name", "{p}");
    assert_eq!(term["operator"], "In");
    assert_eq!(term["values"][0], node);
    let tols: Vec<String> = p["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|t| {
            format!(
                "{}:{}",
                t["key"].as_str().unwrap_or(""),
                t["effect"].as_str().unwrap_or("")
            )
        })
        .collect();
    for want in [
        "node.kubernetes.io/not-ready:NoExecute",
        "node.kubernetes.io/unreachable:NoExecute",
        "node.kubernetes.io/disk-pressure:NoSchedule",
        "node.kubernetes.io/memory-pressure:NoSchedule",
        "node.kubernetes.io/pid-pressure:NoSchedule",
        "node.kubernetes.io/unschedulable:NoSchedule",
    ] {
        assert!(
            tols.iter().any(|t| t == want),
            "{want} missing from {tols:?}"
        );
    }
    let st = get(&s, "/apis/apps/v1/namespaces/default/daemonsets/agent")["status"].clone();
    for (k, want) in [
        ("desiredNumberScheduled", 2),
        ("currentNumberScheduled", 2),
        ("numberReady", 2),
        ("numberAvailable", 2),
        ("updatedNumberScheduled", 2),
        ("numberMisscheduled", 0),
    ] {
        assert_eq!(st[k], want, "{k}: {st}");
    }

    // Removing the taint makes the node eligible: it gets its pod.
    s.k(&["taint", "nodes", "sim-node-2", "dedicated-"]);
    wait_for(
        "a daemon pod on sim-node-2",
        Duration::from_secs(20),
        || daemon_nodes(&s) == ["sim-node-0", "sim-node-1", "sim-node-2"],
    );

    // Rolling update to a new image: rollout status returns and every node
    // runs exactly one pod of the new template.
    s.k(&["set", "image", "ds/agent", "agent=busybox:1.37"]);
    s.k(&["rollout", "status", "ds/agent", "--timeout=45s"]);
    wait_for("one new pod per node", Duration::from_secs(20), || {
        let ps: Vec<Value> = pods(&s, "app%3Dagent")
            .into_iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .collect();
        ps.len() == 3
            && ps
                .iter()
                .all(|p| p["spec"]["containers"][0]["image"] == "busybox:1.37")
    });
    assert_eq!(daemon_nodes(&s), ["sim-node-0", "sim-node-1", "sim-node-2"]);

    // History and undo through the ControllerRevisions.
    let hist = s.k(&["rollout", "history", "ds/agent"]);
    let revisions: Vec<&str> = hist
        .lines()
        .skip_while(|l| !l.starts_with("REVISION"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{hist}");
    s.k(&["rollout", "undo", "ds/agent"]);
    s.k(&["rollout", "status", "ds/agent", "--timeout=45s"]);
    wait_for(
        "pods back on the first image",
        Duration::from_secs(20),
        || {
            let ps: Vec<Value> = pods(&s, "app%3Dagent")
                .into_iter()
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                .collect();
            ps.len() == 3
                && ps
                    .iter()
                    .all(|p| p["spec"]["containers"][0]["image"] == "busybox:1.36")
        },
    );
    let hist = s.k(&["rollout", "history", "ds/agent"]);
    assert!(
        hist.contains("\n2 ") && hist.contains("\n3 "),
        "undo renumbers revision 1 to 3: {hist}"
    );

    let events = s.k(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=agent",
    ]);
    assert!(events.contains("SuccessfulCreate"), "{events}");
    assert!(events.contains("Created pod: agent-"), "{events}");

    // A node that goes away takes its daemon pod with it.
    s.k(&["delete", "node", "sim-node-2"]);
    wait_for("sim-node-2's pod gone", Duration::from_secs(20), || {
        daemon_nodes(&s) == ["sim-node-0", "sim-node-1"]
    });
    wait_for("desiredNumberScheduled 2", Duration::from_secs(10), || {
        get(&s, "/apis/apps/v1/namespaces/default/daemonsets/agent")["status"]["desiredNumberScheduled"]
            == 2
    });
}

fn job(name: &str, extra_spec: &str, annotations: &str) -> String {
    format!(
        "apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
{extra_spec}
  template:
    metadata:
      annotations: {{{annotations}}}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
"
    )
}

fn job_status(s: &common::Server, name: &str) -> Value {
    get(s, &format!("/apis/batch/v1/namespaces/default/jobs/{name}"))["status"].clone()
}

#[test]
fn jobs_complete_fail_and_index() {
    let s = server("job");
    apply(
        &s,
        &job(
            "pi",
            "  completions: 3\n  parallelism: 2",
            "sim.berth.dev/run-seconds: \"1\"",
        ),
    );
    apply(
        &s,
        &job(
            "broken",
            "  backoffLimit: 1",
            "sim.berth.dev/fail: \"true\"",
        ),
    );
    apply(
        &s,
        &job(
            "indexed",
            "  completions: 3\n  parallelism: 3\n  completionMode: Indexed",
            "sim.berth.dev/run-seconds: \"1\"",
        ),
    );

    apply(
        &s,
        &job(
            "policy",
            "  backoffLimit: 6\n  podFailurePolicy:\n    rules:\n    - action: FailJob\n      onExitCodes: {containerName: main, operator: In, values: [42]}",
            "sim.berth.dev/exit-code: \"42\"",
        ),
    );

    // Never more than `parallelism` pods running at once.
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let running = pods(&s, "batch.kubernetes.io%2Fjob-name%3Dpi")
            .iter()
            .filter(|p| {
                p["metadata"]["deletionTimestamp"].is_null()
                    && !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
            })
            .count();
        assert!(running <= 2, "{running} active pods with parallelism 2");
        if job_status(&s, "pi")["succeeded"] == 3 {
            break;
        }
        assert!(Instant::now() < deadline, "pi did not finish");
        std::thread::sleep(Duration::from_millis(200));
    }
    s.k(&[
        "wait",
        "--for=condition=complete",
        "job/pi",
        "--timeout=30s",
    ]);
    let st = job_status(&s, "pi");
    assert_eq!(st["succeeded"], 3, "{st}");
    assert!(st["completionTime"].is_string(), "{st}");
    assert!(st["startTime"].is_string(), "{st}");
    let conds: Vec<(String, String)> = st["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap_or("").into(),
                c["reason"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert!(
        conds.contains(&("Complete".into(), "CompletionsReached".into())),
        "{conds:?}"
    );
    let pi_pods = pods(&s, "batch.kubernetes.io%2Fjob-name%3Dpi");
    assert_eq!(pi_pods.len(), 3, "finished pods are kept");
    for p in &pi_pods {
        assert_eq!(p["status"]["phase"], "Succeeded");
        let fin = p["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            !fin.iter().any(|f| f == "batch.kubernetes.io/job-tracking"),
            "tracking finalizer left on {}",
            name(p)
        );
        assert_eq!(p["metadata"]["labels"]["job-name"], "pi");
        assert!(p["metadata"]["labels"]["batch.kubernetes.io/controller-uid"].is_string());
    }
    let out = s.k(&["get", "job", "pi"]);
    assert!(out.contains("3/3"), "{out}");

    s.k(&[
        "wait",
        "--for=condition=complete",
        "job/indexed",
        "--timeout=30s",
    ]);
    let st = job_status(&s, "indexed");
    assert_eq!(st["completedIndexes"], "0-2", "{st}");
    let mut idx: Vec<String> = pods(&s, "batch.kubernetes.io%2Fjob-name%3Dindexed")
        .iter()
        .map(|p| {
            let i = p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                .as_str()
                .unwrap_or("?")
                .to_string();
            assert_eq!(
                p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"],
                i.as_str()
            );
            assert_eq!(p["spec"]["hostname"], format!("indexed-{i}"));
            i
        })
        .collect();
    idx.sort();
    assert_eq!(idx, ["0", "1", "2"]);

    // Two failures (one back-off of 10 s in between) exceed backoffLimit 1.
    s.k(&[
        "wait",
        "--for=condition=failed",
        "job/broken",
        "--timeout=45s",
    ]);
    let st = job_status(&s, "broken");
    assert_eq!(st["failed"], 2, "{st}");
    let failed = st["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Failed"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(failed["reason"], "BackoffLimitExceeded", "{st}");
    assert_eq!(
        failed["message"],
        "Job has reached the specified backoff limit"
    );
    assert_eq!(pods(&s, "batch.kubernetes.io%2Fjob-name%3Dbroken").len(), 2);

    // A FailJob rule fails the Job on the first matching pod, whatever the backoffLimit.
    s.k(&[
        "wait",
        "--for=condition=failed",
        "job/policy",
        "--timeout=30s",
    ]);
    let st = job_status(&s, "policy");
    let failed = st["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Failed"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(failed["reason"], "PodFailurePolicy", "{st}");
    let pod = name(&pods(&s, "batch.kubernetes.io%2Fjob-name%3Dpolicy")[0]);
    assert_eq!(
        failed["message"],
        format!(
            "Container main for pod default/{pod} failed with exit code 42 matching FailJob rule at index 0"
        )
    );
    assert_eq!(st["failed"], 1, "{st}");
}

fn condition(st: &Value, type_: &str) -> Value {
    st["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or_default()
}

#[test]
fn jobs_deadline_suspend_and_ttl() {
    let s = server("job2");
    apply(
        &s,
        &job(
            "slow",
            "  activeDeadlineSeconds: 3",
            "sim.berth.dev/run-seconds: \"60\"",
        ),
    );
    apply(
        &s,
        &job(
            "held",
            "  suspend: true",
            "sim.berth.dev/run-seconds: \"1\"",
        ),
    );
    apply(
        &s,
        &job(
            "ephemeral",
            "  ttlSecondsAfterFinished: 2",
            "sim.berth.dev/run-seconds: \"1\"",
        ),
    );

    apply(
        &s,
        &job(
            "perindex",
            "  completions: 2\n  parallelism: 2\n  completionMode: Indexed\n  backoffLimitPerIndex: 1",
            "sim.berth.dev/fail: \"true\"",
        ),
    );

    // activeDeadlineSeconds: the running pod is stopped and the Job fails.
    s.k(&[
        "wait",
        "--for=condition=failed",
        "job/slow",
        "--timeout=30s",
    ]);
    let st = job_status(&s, "slow");
    let failed = condition(&st, "Failed");
    assert_eq!(failed["reason"], "DeadlineExceeded", "{st}");
    assert_eq!(
        failed["message"],
        "Job was active longer than specified deadline"
    );
    assert!(
        st["active"].as_i64().unwrap_or(0) == 0,
        "no pod left running: {st}"
    );

    // suspend: no pods until resumed, then it runs to completion.
    wait_for("Suspended condition", Duration::from_secs(10), || {
        condition(&job_status(&s, "held"), "Suspended")["status"] == "True"
    });
    assert!(pods(&s, "batch.kubernetes.io%2Fjob-name%3Dheld").is_empty());
    assert!(job_status(&s, "held")["startTime"].is_null());
    s.k(&[
        "patch",
        "job",
        "held",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ]);
    s.k(&[
        "wait",
        "--for=condition=complete",
        "job/held",
        "--timeout=30s",
    ]);
    let st = job_status(&s, "held");
    assert_eq!(condition(&st, "Suspended")["status"], "False", "{st}");
    assert_eq!(condition(&st, "Suspended")["reason"], "JobResumed", "{st}");

    // backoffLimitPerIndex 1: each index fails twice (10 s apart), then the
    // Job fails with both indexes in failedIndexes.
    s.k(&[
        "wait",
        "--for=condition=failed",
        "job/perindex",
        "--timeout=40s",
    ]);
    let st = job_status(&s, "perindex");
    assert_eq!(st["failedIndexes"], "0,1", "{st}");
    assert_eq!(st["failed"], 4, "{st}");
    let failed = condition(&st, "Failed");
    assert_eq!(failed["reason"], "FailedIndexes", "{st}");
    assert_eq!(failed["message"], "Job has failed indexes");
    let mut counts: Vec<String> = pods(&s, "batch.kubernetes.io%2Fjob-name%3Dperindex")
        .iter()
        .map(|p| {
            format!(
                "{}:{}",
                p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                    .as_str()
                    .unwrap_or("?"),
                p["metadata"]["annotations"]["batch.kubernetes.io/job-index-failure-count"]
                    .as_str()
                    .unwrap_or("?")
            )
        })
        .collect();
    counts.sort();
    assert_eq!(counts, ["0:0", "0:1", "1:0", "1:1"]);

    // ttlSecondsAfterFinished: the finished Job and its pods are deleted.
    wait_for("ephemeral job deleted", Duration::from_secs(30), || {
        let (code, _) = s.request(
            "GET",
            "/apis/batch/v1/namespaces/default/jobs/ephemeral",
            "",
            None,
        );
        code == 404 && pods(&s, "batch.kubernetes.io%2Fjob-name%3Dephemeral").is_empty()
    });
}

#[test]
fn cronjob_every_minute_creates_a_job() {
    let s = server("cron");
    apply(
        &s,
        "apiVersion: batch/v1
kind: CronJob
metadata:
  name: hello
spec:
  schedule: '* * * * *'
  jobTemplate:
    spec:
      template:
        metadata:
          annotations: {sim.berth.dev/run-seconds: '1'}
        spec:
          restartPolicy: Never
          containers:
          - name: hello
            image: busybox:1.36
",
    );
    // The first whole minute after creation (at most ~60 s away).
    let mut job = Value::Null;
    wait_for("the first scheduled job", Duration::from_secs(75), || {
        let jobs = items(&s, "/apis/batch/v1/namespaces/default/jobs");
        match jobs.into_iter().next() {
            Some(j) => {
                job = j;
                true
            }
            None => false,
        }
    });
    let jname = name(&job);
    let minutes: i64 = jname
        .strip_prefix("hello-")
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("job name {jname}"));
    let stamp = job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let scheduled: i64 = stamp
        .parse::<k8s_openapi::jiff::Timestamp>()
        .map(|t| t.as_second())
        .unwrap_or_else(|e| panic!("{stamp}: {e}"));
    assert_eq!(minutes * 60, scheduled, "name encodes the scheduled minute");
    assert_eq!(job["metadata"]["ownerReferences"][0]["kind"], "CronJob");

    wait_for("lastSuccessfulTime", Duration::from_secs(20), || {
        let st = get(&s, "/apis/batch/v1/namespaces/default/cronjobs/hello")["status"].clone();
        st["lastSuccessfulTime"].is_string()
    });
    let st = get(&s, "/apis/batch/v1/namespaces/default/cronjobs/hello")["status"].clone();
    let last: i64 = st["lastScheduleTime"]
        .as_str()
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map(|t| t.as_second())
        .unwrap_or_else(|| panic!("lastScheduleTime in {st}"));
    assert_eq!(last, scheduled, "{st}");
    let out = s.k(&["get", "cronjob", "hello"]);
    assert!(out.contains("* * * * *"), "{out}");
}
