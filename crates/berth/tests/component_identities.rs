//! Each component inside `berth server` acts as its own user (issue 13 item
//! 6), read back from the audit log of a real server with its node agent: the
//! scheduler as `system:kube-scheduler`, every controller as its ServiceAccount
//! `kube-system/<controller>`, the node agent as `system:node:<name>`, the
//! service proxy as `system:kube-proxy`, the cluster DNS as
//! `system:berth-dns`, the ingress controller as `system:berth-ingress` — and
//! none of them is refused (a 403 would mean its role lacks a right it uses).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{Server, wait_until};
use serde_json::Value;

/// Every request, at Metadata, once answered.
const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"#;

const APP: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: ids
spec:
  replicas: 1
  selector:
    matchLabels: {app: ids}
  template:
    metadata:
      labels: {app: ids}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: busybox
        imagePullPolicy: IfNotPresent
        command: [sleep, '3600']
---
apiVersion: v1
kind: Service
metadata:
  name: ids
spec:
  selector: {app: ids}
  ports:
  - port: 80
";

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn events(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The component a User-Agent names (`kube-scheduler/v1.33.0 (berth …)`).
fn component(ua: &str) -> &str {
    ua.split('/').next().unwrap_or("")
}

/// The policy and log, beside the server's own data dir (removed with it).
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn each_component_acts_as_its_own_user() {
    let dir = common::temp_dir("component-ids-audit");
    let _remove = RemoveOnDrop(dir.clone());
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, POLICY).expect("write the policy");
    let log = dir.join("audit.log");
    let (policy_arg, log_arg) = (policy.display().to_string(), log.display().to_string());
    let node = "ids-node";
    let srv = Server::start_with_agent_args(
        "component-ids",
        &[
            "--audit-policy-file",
            &policy_arg,
            "--audit-log-path",
            &log_arg,
            "--node-name",
            node,
            "--ingress-http-port",
            "0",
            "--ingress-https-port",
            "0",
        ],
    );
    srv.kubectl_stdin(&["apply", "-f", "-"], Some(APP));
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while srv.k(&[
        "get",
        "pods",
        "-l",
        "app=ids",
        "-o",
        "jsonpath={.items[*].status.phase}",
    ]) != "Running"
    {
        if std::time::Instant::now() > deadline {
            // What stalled, and who was refused what.
            let state = srv.k(&["get", "all,events", "-A", "-o", "wide"]);
            let errors: Vec<String> = events(&log)
                .iter()
                .filter(|e| {
                    e.pointer("/responseStatus/code")
                        .and_then(Value::as_i64)
                        .is_some_and(|c| c >= 400 && c != 404 && c != 409)
                })
                .map(|e| {
                    format!(
                        "{} {} {} {}",
                        s(e, "/user/username"),
                        s(e, "/verb"),
                        s(e, "/requestURI"),
                        s(e, "/responseStatus/message")
                    )
                })
                .collect();
            panic!("the pod is not Running:\n{state}\nrefused: {errors:#?}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    wait_until(Duration::from_secs(60), "the Service's endpoints", || {
        !srv.k(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=ids",
            "-o",
            "jsonpath={.items[*].endpoints[*].addresses[*]}",
        ])
        .is_empty()
    });
    // The controllers' ServiceAccounts, as kubeadm's cluster lists them.
    let sas = srv.k(&["get", "serviceaccounts", "-n", "kube-system", "-o", "name"]);
    for sa in [
        "replicaset-controller",
        "deployment-controller",
        "endpointslice-controller",
        "node-controller",
        "namespace-controller",
        "generic-garbage-collector",
    ] {
        assert!(
            sas.contains(&format!("serviceaccount/{sa}")),
            "no ServiceAccount {sa}: {sas}"
        );
    }
    // Let the periodic components (node status, DNS upkeep) have their turn.
    std::thread::sleep(Duration::from_secs(3));

    let all = events(&log);
    assert!(!all.is_empty(), "no audit events in {}", log.display());
    let mut users: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut refused = Vec::new();
    for e in &all {
        let ua = s(e, "/userAgent");
        let c = component(ua);
        if c.is_empty() || c.starts_with("kubectl") || c.starts_with("curl") {
            continue;
        }
        users
            .entry(c.to_string())
            .or_default()
            .insert(s(e, "/user/username").to_string());
        if e.pointer("/responseStatus/code").and_then(Value::as_i64) == Some(403) {
            refused.push(format!(
                "{} {} {} {}/{}: {}",
                s(e, "/user/username"),
                s(e, "/verb"),
                s(e, "/requestURI"),
                s(e, "/objectRef/namespace"),
                s(e, "/objectRef/name"),
                s(e, "/responseStatus/message"),
            ));
        }
    }
    assert!(refused.is_empty(), "components refused: {refused:#?}");
    let only = |c: &str, want: &str| {
        let got = users
            .get(c)
            .unwrap_or_else(|| panic!("no request from {c}: {users:#?}"));
        assert_eq!(
            got,
            &BTreeSet::from([want.to_string()]),
            "{c}'s requests were made as"
        );
    };
    only("kube-scheduler", "system:kube-scheduler");
    only("kubelet", &format!("system:node:{node}"));
    only("kube-proxy", "system:kube-proxy");
    only("berth-network-policy", "system:kube-proxy");
    only("coredns", "system:berth-dns");
    only("berth-ingress", "system:berth-ingress");
    // The controller-manager's own user leads and makes the accounts; each
    // controller acts as its ServiceAccount.
    let cm = users
        .get("kube-controller-manager")
        .expect("no request from the controller-manager");
    assert!(cm.contains("system:kube-controller-manager"), "{cm:?}");
    for u in cm {
        assert!(
            u == "system:kube-controller-manager"
                || u.starts_with("system:serviceaccount:kube-system:"),
            "controller-manager request as {u}"
        );
    }
    // Who made what: the ReplicaSet by the deployment controller, its pod
    // by the ReplicaSet controller, the binding by the scheduler.
    let creator = |resource: &str, sub: &str| -> BTreeSet<String> {
        all.iter()
            .filter(|e| {
                s(e, "/verb") == "create"
                    && s(e, "/objectRef/resource") == resource
                    && s(e, "/objectRef/subresource") == sub
                    && s(e, "/objectRef/namespace") == "default"
            })
            .map(|e| s(e, "/user/username").to_string())
            .collect()
    };
    let sa = |n: &str| BTreeSet::from([format!("system:serviceaccount:kube-system:{n}")]);
    assert_eq!(creator("replicasets", ""), sa("deployment-controller"));
    assert_eq!(creator("pods", ""), sa("replicaset-controller"));
    assert_eq!(
        creator("pods", "binding"),
        BTreeSet::from(["system:kube-scheduler".to_string()])
    );
    assert_eq!(
        creator("endpointslices", ""),
        sa("endpointslice-controller")
    );
    // Each component's own kubeconfig, private to the server's user.
    for f in [
        "kube-scheduler",
        "kube-controller-manager",
        "kubelet",
        "kube-proxy",
        "berth-dns",
        "berth-ingress",
    ] {
        let path = srv.data_dir.join("cred").join(format!("{f}.kubeconfig"));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .permissions(),
        );
        assert_eq!(mode & 0o077, 0, "{} is readable by others", path.display());
    }
}
