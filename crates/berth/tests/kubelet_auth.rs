//! The kubelet API's authentication and authorization on a real node agent:
//! webhook mode as upstream's kubelet (TokenReview for bearer tokens,
//! SubjectAccessReview on `nodes/<subresource>`), called directly on the
//! kubelet port with curl. Needs root and `scripts/install-deps`, as
//! `tests/streams.rs`.

mod common;

use std::time::Duration;

use common::{Server, stderr, stdout, wait_until};

/// A ClusterRole for nodes/healthz only (upstream's fine-grained subresource).
const HEALTHZ_READER: &str = r#"apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: kubelet-healthz-reader}
rules:
- apiGroups: [""]
  resources: ["nodes/healthz"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kubelet-healthz-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kubelet-healthz-reader}
subjects:
- {kind: ServiceAccount, name: reader, namespace: default}
"#;

fn jsonpath(s: &Server, what: &str, path: &str) -> String {
    stdout(&s.kubectl(&["get", what, "-o", &format!("jsonpath={path}")]))
}

/// (HTTP code, body) of a GET on the kubelet server, with extra curl args.
fn kubelet(port: &str, path: &str, args: &[&str]) -> (u16, String) {
    let url = format!("https://127.0.0.1:{port}{path}");
    let out = std::process::Command::new("curl")
        .args(["-sk", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(args)
        .arg(&url)
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[test]
fn kubelet_api_authenticates_and_authorizes_like_webhook_mode() {
    let s = Server::start_with_agent("kubelet-auth");
    let mut node = String::new();
    wait_until(Duration::from_secs(60), "node Ready", || {
        node = jsonpath(&s, "nodes", "{.items[0].metadata.name}");
        !node.is_empty()
            && jsonpath(
                &s,
                &format!("node/{node}"),
                "{.status.conditions[?(@.type==\"Ready\")].status}",
            ) == "True"
    });
    let port = jsonpath(
        &s,
        &format!("node/{node}"),
        "{.status.daemonEndpoints.kubeletEndpoint.Port}",
    );

    // No credentials: upstream's plain-text 401.
    assert_eq!(
        kubelet(&port, "/healthz", &[]),
        (401, "Unauthorized".into())
    );
    assert_eq!(
        kubelet(&port, "/pods", &["-H", "Authorization: Bearer not-a-token"]),
        (401, "Unauthorized".into())
    );

    // The API server's kubelet client certificate (system:masters).
    let tls = s.data_dir.join("tls");
    let cert = tls.join("client-kube-apiserver-kubelet.crt");
    let key = tls.join("client-kube-apiserver-kubelet.key");
    let (cert, key) = (cert.to_string_lossy(), key.to_string_lossy());
    assert_eq!(
        kubelet(&port, "/healthz", &["--cert", &cert, "--key", &key]),
        (200, "ok".into())
    );

    // The admin token (system:masters): allowed; /pods is not served here.
    let admin = std::fs::read_to_string(s.data_dir.join("token")).expect("admin token");
    let admin = format!("Authorization: Bearer {}", admin.trim());
    assert_eq!(
        kubelet(&port, "/healthz", &["-H", &admin]),
        (200, "ok".into())
    );
    assert_eq!(
        kubelet(&port, "/pods", &["-H", &admin]),
        (404, "404 page not found".into())
    );

    // A ServiceAccount without nodes/* rights: 403 naming every subresource tried.
    s.k(&["create", "serviceaccount", "reader"]);
    let out = s.kubectl(&["create", "token", "reader"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let sa = format!("Authorization: Bearer {}", stdout(&out).trim());
    let who = "system:serviceaccount:default:reader";
    assert_eq!(
        kubelet(&port, "/pods", &["-H", &sa]),
        (
            403,
            format!(
                "Forbidden (user={who}, verb=get, resource=nodes, subresource(s)=[pods proxy])\n"
            )
        )
    );
    assert_eq!(
        kubelet(
            &port,
            "/exec/default/p/c?command=true",
            &["-X", "POST", "-H", &sa]
        ),
        (
            403,
            format!(
                "Forbidden (user={who}, verb=create, resource=nodes, subresource(s)=[proxy])\n"
            )
        )
    );

    // Granted nodes/healthz: /healthz (never asked before, so nothing cached)
    // is allowed, exec still is not.
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(HEALTHZ_READER));
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until(Duration::from_secs(10), "nodes/healthz granted", || {
        stdout(&s.kubectl(&[
            "auth",
            "can-i",
            "get",
            "nodes",
            "--subresource=healthz",
            &format!("--as={who}"),
        ]))
        .trim()
            == "yes"
    });
    assert_eq!(kubelet(&port, "/healthz", &["-H", &sa]), (200, "ok".into()));
    assert_eq!(
        kubelet(&port, "/exec/default/p/c?command=true", &["-H", &sa]),
        (
            403,
            format!("Forbidden (user={who}, verb=get, resource=nodes, subresource(s)=[proxy])\n")
        )
    );
}
