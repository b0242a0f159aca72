//! `berth agent --server URL --token T --server-ca FILE`: the agent verifies the
//! API server's certificate against the cluster CA it is given, as a joining
//! node must (a wrong CA is refused; the right one joins the node, and its
//! kubelet server accepts the API server's client certificate from that CA).
//! Needs root and the node agent's dependencies, as `tests/node.rs`.

mod common;

use std::time::{Duration, Instant};

use common::{AgentProcess, Server};

#[test]
fn agent_joins_only_a_server_whose_certificate_chains_to_server_ca() {
    let s = Server::start("join");
    let other = Server::start("join-other");
    let token = std::fs::read_to_string(s.data_dir.join("token")).expect("admin token");
    let token = token.trim();
    let right_ca = s.data_dir.join("tls/server-ca.crt");
    let wrong_ca = other.data_dir.join("tls/server-ca.crt");
    let join = |ca: &std::path::Path| {
        let ca = ca.to_string_lossy().into_owned();
        AgentProcess::join(
            &s,
            "join-agent",
            &[
                "--server",
                &s.https,
                "--token",
                token,
                "--server-ca",
                &ca,
                "--disable-ingress",
            ],
        )
    };

    // Another cluster's CA: the TLS handshake fails and the agent exits.
    let mut agent = join(&wrong_ca);
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(st) = agent.child.try_wait().expect("wait") {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "agent with a wrong CA kept running"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let err = agent.log();
    assert!(!status.success(), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    let nodes = s.k(&["get", "nodes", "-o", "name"]);
    assert!(nodes.trim().is_empty(), "no node joined: {nodes}");
    drop(agent);

    // The cluster's own CA: the node registers and becomes Ready.
    let agent = join(&right_ca);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let ready = s.k(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        if ready == "True" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node never Ready with the right CA: {ready}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // The agent's kubelet server trusts the same CA: the API server's client
    // certificate gets a pod's logs from it.
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: busybox, command: [sh, -c, 'echo hello from the joined node; sleep 3600']}
",
        ),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = s.kubectl(&["logs", "hello"]);
        if common::stdout(&out).contains("hello from the joined node") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no logs through the kubelet server: {}{}\n{}",
            common::stdout(&out),
            common::stderr(&out),
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(agent);
}
