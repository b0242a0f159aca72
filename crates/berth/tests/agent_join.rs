//! `berth agent --server URL --token T --server-ca FILE`: the agent verifies the
//! API server's certificate against the cluster CA it is given, as a joining
//! node must (a wrong CA is refused; the right one joins the node, and its
//! kubelet server accepts the API server's client certificate from that CA).
//! With a bootstrap token from `berth token create` the agent joins by TLS
//! bootstrapping: its components get client certificates of their own through
//! CertificateSigningRequests, and the node agent is `system:node:<name>`,
//! held to its own objects by the Node authorizer and NodeRestriction.
//! Needs root and the node agent's dependencies, as `tests/node.rs`.

mod common;

use std::process::Command;
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
    // The containerd it started went with it (it was left running once).
    let config = agent.data_dir.join("agent/containerd/config.toml");
    common::wait_until(
        Duration::from_secs(15),
        "the failed agent's containerd exits",
        || {
            let out = std::process::Command::new("pgrep")
                .args(["-f", &config.to_string_lossy()])
                .output()
                .expect("pgrep");
            out.stdout.is_empty()
        },
    );
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

/// `berth token <args>` against `s` with its admin kubeconfig; stdout.
fn berth_token(s: &Server, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_berth"))
        .arg("token")
        .args(args)
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .output()
        .expect("run berth token");
    assert!(
        out.status.success(),
        "berth token {args:?}: {}",
        common::stderr(&out)
    );
    common::stdout(&out)
}

fn node_ready(s: &Server, node: &str) -> bool {
    let out = s.kubectl(&[
        "get",
        "node",
        node,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
    ]);
    common::stdout(&out) == "True"
}

#[test]
fn agent_joins_with_a_bootstrap_token_as_its_own_node() {
    const NODE: &str = "tls-joined";
    let s = Server::start("tlsboot");
    let token = berth_token(&s, &["create", "--description", "e2e join"]);
    let token = token.trim().to_string();
    assert!(
        token.len() == 23 && token.as_bytes()[6] == b'.',
        "a bootstrap token: {token:?}"
    );
    assert!(
        berth_token(&s, &["list"]).contains(&token),
        "berth token list shows it"
    );
    // Another node, for the node agent to be refused on; unschedulable so the
    // pod below lands on the joined node.
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Node\nmetadata: {name: other}\nspec: {unschedulable: true}\n"),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let ca = s.data_dir.join("tls/server-ca.crt");
    let ca = ca.to_string_lossy().into_owned();
    let mut agent = AgentProcess::join(
        &s,
        "tlsboot-agent",
        &[
            "--server",
            &s.https,
            "--token",
            &token,
            "--server-ca",
            &ca,
            "--node-name",
            NODE,
            // Any free ports: the ingress controller runs, under its own user.
            "--ingress-http-port",
            "0",
            "--ingress-https-port",
            "0",
        ],
    );
    common::wait_until(Duration::from_secs(120), "the joined node Ready", || {
        assert!(
            agent.child.try_wait().expect("wait").is_none(),
            "agent exited: {}",
            agent.log()
        );
        node_ready(&s, NODE)
    });

    // One request per component, each approved and issued.
    let csrs = s.k(&["get", "csr"]);
    let id = &token[..6];
    let rows: Vec<&str> = csrs.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{csrs}");
    for row in &rows {
        assert!(row.contains(&format!("system:bootstrap:{id}")), "{csrs}");
        assert!(row.trim_end().ends_with("Approved,Issued"), "{csrs}");
    }
    let kubelet_rows = rows
        .iter()
        .filter(|r| r.contains("kubernetes.io/kube-apiserver-client-kubelet"))
        .count();
    assert_eq!(kubelet_rows, 1, "{csrs}");
    assert!(csrs.starts_with("NAME"), "{csrs}");
    for col in ["SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"] {
        assert!(csrs.lines().next().unwrap_or("").contains(col), "{csrs}");
    }

    // Who each component is.
    let whoami = |component: &str| {
        let out = agent.kubectl_as(component, &["auth", "whoami", "-o", "json"]);
        assert!(
            out.status.success(),
            "{component}: {}",
            common::stderr(&out)
        );
        let v: serde_json::Value = serde_json::from_str(&common::stdout(&out)).expect("json");
        let info = v["status"]["userInfo"].clone();
        let groups: Vec<String> = info["groups"]
            .as_array()
            .map(|g| {
                g.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        (info["username"].as_str().unwrap_or("").to_string(), groups)
    };
    let (user, groups) = whoami("kubelet");
    assert_eq!(user, format!("system:node:{NODE}"));
    assert!(groups.contains(&"system:nodes".to_string()), "{groups:?}");
    assert_eq!(whoami("kube-proxy").0, "system:kube-proxy");
    assert_eq!(whoami("berth-ingress").0, "system:berth-ingress");

    // The node may change only itself. (Its status too, but kubectl reads
    // `nodes/status` before patching it, which no node may: as upstream.)
    let out = agent.kubectl_as(
        "kubelet",
        &[
            "patch",
            "node",
            "other",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"forged":"true"}}}"#,
        ],
    );
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert!(
        err.contains(&format!(
            "nodes \"other\" is forbidden: node \"{NODE}\" is not allowed to modify node \"other\""
        )),
        "{err}"
    );
    assert!(err.contains("Forbidden"), "{err}");
    // Secrets only of its own pods.
    s.k(&[
        "create",
        "secret",
        "generic",
        "unused",
        "--from-literal=k=v",
    ]);
    let out = agent.kubectl_as("kubelet", &["get", "secret", "unused"]);
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert!(err.contains("Forbidden"), "{err}");
    assert!(
        err.contains(&format!(
            "User \"system:node:{NODE}\" cannot get resource \"secrets\""
        )),
        "{err}"
    );
    // The proxy reads Services, not Secrets.
    let out = agent.kubectl_as("kube-proxy", &["get", "secrets", "-A"]);
    assert!(!out.status.success(), "kube-proxy listed secrets");

    // A pod scheduled there starts with its ServiceAccount token: the node
    // agent's TokenRequest and kube-root-ca.crt read pass the Node authorizer.
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: v1
kind: Pod
metadata: {name: tokened}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: [sh, -c, 'd=/var/run/secrets/kubernetes.io/serviceaccount; echo token-bytes=$(wc -c < $d/token) ns=$(cat $d/namespace) ca=$(grep -c BEGIN $d/ca.crt); sleep 3600']
",
        ),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let deadline = Instant::now() + Duration::from_secs(90);
    let logs = loop {
        let out = s.kubectl(&["logs", "tokened"]);
        let text = common::stdout(&out);
        if text.contains("token-bytes=") {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "the pod never ran: {}{}\n{}\n{}",
            text,
            common::stderr(&out),
            s.k(&["get", "pod", "tokened", "-o", "yaml"]),
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let bytes: usize = logs
        .split("token-bytes=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(bytes > 100, "a JWT in the token file: {logs}");
    assert!(logs.contains("ns=default ca=1"), "{logs}");
    let node = s.k(&["get", "pod", "tokened", "-o", "jsonpath={.spec.nodeName}"]);
    assert_eq!(node, NODE);

    // A restart reuses the written kubeconfigs: the token is no longer needed.
    berth_token(&s, &["delete", &token]);
    let lease = |s: &Server| {
        s.k(&[
            "get",
            "lease",
            "-n",
            "kube-node-lease",
            NODE,
            "-o",
            "jsonpath={.spec.renewTime}",
        ])
    };
    let before = lease(&s);
    agent.restart();
    common::wait_until(
        Duration::from_secs(60),
        "the Lease renewed after the restart",
        || {
            assert!(
                agent.child.try_wait().expect("wait").is_none(),
                "restarted agent exited: {}",
                agent.log()
            );
            lease(&s) != before
        },
    );
    let rows = s.k(&["get", "csr", "-o", "name"]);
    assert_eq!(rows.lines().count(), 3, "no new request: {rows}");
    drop(agent);
}

#[test]
fn agent_with_a_bad_bootstrap_token_exits_with_401() {
    let s = Server::start("badtoken");
    let ca = s.data_dir.join("tls/server-ca.crt");
    let ca = ca.to_string_lossy().into_owned();
    let mut agent = AgentProcess::join(
        &s,
        "badtoken-agent",
        &[
            "--server",
            &s.https,
            "--token",
            "abcdef.0123456789abcdef",
            "--server-ca",
            &ca,
            "--disable-ingress",
        ],
    );
    let status = agent.wait_exit(Duration::from_secs(60));
    let log = agent.log();
    assert!(!status.success(), "{log}");
    assert!(log.contains("401 Unauthorized"), "{log}");
    assert!(log.contains("bootstrap token"), "{log}");
    assert!(s.k(&["get", "nodes", "-o", "name"]).trim().is_empty());
    assert!(s.k(&["get", "csr", "-o", "name"]).trim().is_empty());
}

/// A PEM CSR for `cn` in group `org` and its key's PEM.
fn user_request(cn: &str, org: &str) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, org);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    let csr = params.serialize_request(&key).expect("csr");
    (csr.pem().expect("pem"), key.serialize_pem())
}

fn csr_manifest(name: &str, pem: &str) -> String {
    use base64::Engine;
    let request = base64::engine::general_purpose::STANDARD.encode(pem);
    format!(
        "apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {{name: {name}}}
spec:
  request: {request}
  signerName: kubernetes.io/kube-apiserver-client
  expirationSeconds: 3600
  usages: [client auth]
  username: someone-else
"
    )
}

/// `kubectl certificate approve|deny` through `/approval`; only approved
/// requests are issued, and an issued certificate authenticates its subject.
/// (No node agent: no agent lock.)
#[test]
fn kubectl_approves_and_denies_certificate_signing_requests() {
    let s = Server::start("csr-kubectl");
    let (jane, jane_key) = user_request("jane", "dev");
    let (joe, _) = user_request("joe", "dev");
    for (name, pem) in [("jane", &jane), ("joe", &joe)] {
        let out = s.kubectl_stdin(&["create", "-f", "-"], Some(&csr_manifest(name, pem)));
        assert!(out.status.success(), "{}", common::stderr(&out));
    }
    let table = s.k(&["get", "csr", "jane"]);
    let row = table.lines().nth(1).unwrap_or_default();
    // The requester is who sent it, whatever the body said.
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells.get(2..).unwrap_or_default(),
        [
            "kubernetes.io/kube-apiserver-client",
            "system:admin",
            "60m",
            "Pending"
        ],
        "{table}"
    );

    assert!(
        s.k(&["certificate", "approve", "jane"])
            .contains("approved")
    );
    assert!(s.k(&["certificate", "deny", "joe"]).contains("denied"));
    common::wait_until(Duration::from_secs(30), "jane issued", || {
        s.k(&["get", "csr", "jane", "-o", "jsonpath={.status.certificate}"])
            .len()
            > 100
    });
    let cond = s.k(&[
        "get",
        "csr",
        "jane",
        "-o",
        "jsonpath={.status.conditions[0].type}/{.status.conditions[0].reason}",
    ]);
    assert_eq!(cond, "Approved/KubectlApprove");
    // A denied request stays unissued, and cannot be approved as well.
    std::thread::sleep(Duration::from_secs(2));
    let joe_row = s.k(&["get", "csr", "joe", "--no-headers"]);
    assert!(joe_row.trim_end().ends_with(" Denied"), "{joe_row}");
    // kubectl refuses to approve it; so does the server (both conditions).
    let out = s.kubectl(&["certificate", "approve", "joe"]);
    assert!(!out.status.success());
    let path = "/apis/certificates.k8s.io/v1/certificatesigningrequests/joe/approval";
    let (_, mut joe_obj) = s.request("GET", path, "", None);
    joe_obj["status"]["conditions"]
        .as_array_mut()
        .expect("conditions")
        .push(serde_json::json!({"type": "Approved", "status": "True", "reason": "Sneaky"}));
    let (code, body) = s.request("PUT", path, "application/json", Some(&joe_obj.to_string()));
    assert_eq!(code, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Approved and Denied conditions are mutually exclusive"),
        "{body}"
    );

    // Jane's certificate is hers.
    use base64::Engine;
    let cert = base64::engine::general_purpose::STANDARD
        .decode(s.k(&["get", "csr", "jane", "-o", "jsonpath={.status.certificate}"]))
        .expect("base64");
    let (cert_file, key_file) = (s.data_dir.join("jane.crt"), s.data_dir.join("jane.key"));
    std::fs::write(&cert_file, cert).expect("write cert");
    std::fs::write(&key_file, jane_key).expect("write key");
    let ca = s.data_dir.join("tls/server-ca.crt");
    let out = Command::new(common::kubectl_path())
        .args(["--server", &s.https])
        .arg("--certificate-authority")
        .arg(&ca)
        .arg("--client-certificate")
        .arg(&cert_file)
        .arg("--client-key")
        .arg(&key_file)
        .args([
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}/{.status.userInfo.groups}",
        ])
        .output()
        .expect("kubectl");
    assert_eq!(
        common::stdout(&out),
        r#"jane/["dev","system:authenticated"]"#,
        "{}",
        common::stderr(&out)
    );

    // What is not a request is refused at once.
    let out = s.kubectl_stdin(
        &["create", "-f", "-"],
        Some(&csr_manifest("junk", "not a request")),
    );
    assert!(!out.status.success());
    assert!(
        common::stderr(&out).contains("spec.request: Invalid value")
            && common::stderr(&out).contains("PEM block type must be CERTIFICATE REQUEST"),
        "{}",
        common::stderr(&out)
    );
}
