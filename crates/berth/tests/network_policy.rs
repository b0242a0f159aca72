//! NetworkPolicy enforcement on a real node: `berth server` with its agent
//! programs policies into nftables (table `inet berth-netpol`), and busybox
//! pods' connections to a busybox `httpd` pod pass or time out as upstream's
//! semantics say. Needs root, nft, br_netfilter and `scripts/install-deps`.
//! Probes are `kubectl exec … timeout 2 wget` by pod IP (no DNS: an egress
//! policy would have to allow it). One test (one agent server) to keep the
//! machine-wide agent lock short.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Server, wait_until};

const TABLE: &str = "berth-netpol";

fn get(s: &Server, what: &[&str], path: &str) -> String {
    let jp = format!("jsonpath={path}");
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", &jp]);
    String::from_utf8_lossy(&s.kubectl(&args).stdout).into_owned()
}

fn apply(s: &Server, yaml: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(yaml));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The policy table as `nft list table` prints it ("" when it does not exist).
fn table() -> String {
    let out = Command::new("nft")
        .args(["list", "table", "inet", TABLE])
        .output()
        .expect("nft");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A long-running busybox pod in `ns` with `labels`, serving its name with
/// httpd on ports 80 and 8080.
fn pod(ns: &str, name: &str, labels: &str) -> String {
    let script = "mkdir -p /www; hostname > /www/index.html; \
        httpd -p 8080 -h /www; exec httpd -f -p 80 -h /www";
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {ns}
  labels: {{{labels}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: [\"sh\", \"-c\", {script:?}]
---
"
    )
}

/// Whether `ns/from` gets `to`'s page on `port` within 2 s.
fn reaches(s: &Server, ns: &str, from: &str, to: &str, port: u16) -> bool {
    let url = format!("http://{to}:{port}/");
    let out = s.kubectl(&[
        "exec", "-n", ns, from, "--", "timeout", "2", "wget", "-qO-", &url,
    ]);
    out.status.success() && !out.stdout.is_empty()
}

/// Every `(ns, from, port, allowed)` of `cases` against `to`, once the
/// controller has applied the change (waited for up to 15 s), then checked
/// again at once.
fn expect(s: &Server, what: &str, to: &str, cases: &[(&str, &str, u16, bool)]) {
    let all_as_expected = || {
        cases
            .iter()
            .all(|&(ns, from, port, ok)| reaches(s, ns, from, to, port) == ok)
    };
    wait_until(Duration::from_secs(15), what, all_as_expected);
    for &(ns, from, port, ok) in cases {
        assert_eq!(
            reaches(s, ns, from, to, port),
            ok,
            "{what}: {ns}/{from} -> {to}:{port}\n{}",
            table()
        );
    }
}

#[test]
fn network_policies_on_a_real_node() {
    let started = Instant::now();
    let s = Server::start_with_agent("netpol");
    s.wait_node_ready(Duration::from_secs(60));
    wait_until(Duration::from_secs(20), "the policy table", || {
        table().contains("chain ingress")
    });
    let mut yaml = String::from(
        "apiVersion: v1
kind: Namespace
metadata:
  name: friends
  labels: {team: friends}
---
",
    );
    yaml.push_str(&pod("default", "srv", "app: srv"));
    yaml.push_str(&pod("default", "client", "role: client"));
    yaml.push_str(&pod("default", "other", "role: other"));
    yaml.push_str(&pod("friends", "remote", "role: other"));
    apply(&s, &yaml);
    wait_until(Duration::from_secs(90), "pods Running", || {
        [
            ("default", "srv"),
            ("default", "client"),
            ("default", "other"),
            ("friends", "remote"),
        ]
        .iter()
        .all(|(ns, p)| get(&s, &["pod", "-n", ns, p], "{.status.phase}") == "Running")
    });
    let ip = |ns: &str, p: &str| get(&s, &["pod", "-n", ns, p], "{.status.podIP}");
    let srv = ip("default", "srv");
    let other_ip = ip("default", "other");
    assert!(srv.parse::<std::net::Ipv4Addr>().is_ok(), "{srv:?}");

    // No policy: everyone reaches srv on both ports.
    expect(
        &s,
        "no policy: open",
        &srv,
        &[
            ("default", "client", 80, true),
            ("default", "other", 8080, true),
            ("friends", "remote", 80, true),
        ],
    );

    // Default deny ingress in `default`: nobody reaches srv.
    apply(
        &s,
        "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: default}
spec:
  podSelector: {}
  policyTypes: [Ingress]
",
    );
    expect(
        &s,
        "default deny ingress",
        &srv,
        &[
            ("default", "client", 80, false),
            ("default", "other", 80, false),
            ("friends", "remote", 80, false),
        ],
    );

    // Allows (a union with the deny): role=client on 80; any pod of a
    // namespace labelled team=friends on 80; every address but `other`'s on
    // 8080 (ipBlock with except).
    apply(
        &s,
        &format!(
            "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: allow-srv, namespace: default}}
spec:
  podSelector: {{matchLabels: {{app: srv}}}}
  ingress:
  - from:
    - podSelector: {{matchLabels: {{role: client}}}}
    - namespaceSelector: {{matchLabels: {{team: friends}}}}
    ports: [{{protocol: TCP, port: 80}}]
  - from:
    - ipBlock: {{cidr: 0.0.0.0/0, except: [{other_ip}/32]}}
    ports: [{{port: 8080}}]
"
        ),
    );
    expect(
        &s,
        "allow client, friends and an ipBlock",
        &srv,
        &[
            ("default", "client", 80, true),
            ("default", "other", 80, false),
            ("friends", "remote", 80, true),
            ("default", "client", 8080, true),
            ("default", "other", 8080, false),
            ("friends", "remote", 8080, true),
        ],
    );

    // Egress of the client: only srv on 80 (so 8080, open on srv's side, is
    // now closed on the client's); other pods' egress stays open.
    apply(
        &s,
        "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: client-egress, namespace: default}
spec:
  podSelector: {matchLabels: {role: client}}
  policyTypes: [Egress]
  egress:
  - to: [{podSelector: {matchLabels: {app: srv}}}]
    ports: [{protocol: TCP, port: 80}]
",
    );
    expect(
        &s,
        "client egress to srv:80 only",
        &srv,
        &[
            ("default", "client", 80, true),
            ("default", "client", 8080, false),
            ("friends", "remote", 8080, true),
        ],
    );
    let remote = ip("friends", "remote");
    assert!(
        !reaches(&s, "default", "client", &remote, 80),
        "egress deny"
    );
    assert!(
        reaches(&s, "default", "other", &remote, 80),
        "other's egress"
    );

    // Deleting the policies restores traffic.
    s.k(&["delete", "networkpolicy", "--all", "-n", "default"]);
    expect(
        &s,
        "policies deleted: open again",
        &srv,
        &[
            ("default", "client", 8080, true),
            ("default", "other", 80, true),
            ("friends", "remote", 80, true),
        ],
    );

    // A clean stop removes the table (pods first, as the harness does).
    s.k(&[
        "delete",
        "pods",
        "--all",
        "-A",
        "--grace-period=1",
        "--wait=true",
        "--timeout=60s",
    ]);
    let mut s = s;
    let _ = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && matches!(s.child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(matches!(s.child.try_wait(), Ok(Some(_))), "server stopped");
    assert_eq!(table(), "", "table removed on a clean stop");
    drop(s);
    eprintln!("network policy e2e: {:?}", started.elapsed());
}
