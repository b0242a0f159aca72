//! Protobuf request bodies: `kubectl create <generator>` (and helm 4) send
//! `application/vnd.kubernetes.protobuf` with no JSON fallback.

mod common;

use common::Server;

#[test]
fn kubectl_create_generators_send_protobuf() {
    let s = Server::start("protobuf");
    s.k(&["create", "namespace", "team"]);
    s.k(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=2",
        "-n",
        "team",
    ]);
    s.k(&[
        "create",
        "secret",
        "generic",
        "s",
        "--from-literal=password=hunter2",
    ]);
    s.k(&["create", "configmap", "c", "--from-literal=a=b"]);
    s.k(&["create", "service", "clusterip", "svc", "--tcp=80:8080"]);

    let out = s.k(&[
        "get",
        "deploy",
        "web",
        "-n",
        "team",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image} {.spec.replicas} {.spec.selector.matchLabels.app}",
    ]);
    assert_eq!(out, "nginx:1.27 2 web");
    let out = s.k(&["get", "ns", "team", "-o", "jsonpath={.status.phase}"]);
    assert_eq!(out, "Active");
    let out = s.k(&[
        "get",
        "secret",
        "s",
        "-o",
        "go-template={{.data.password | base64decode}} {{.type}}",
    ]);
    assert_eq!(out, "hunter2 Opaque");
    let out = s.k(&["get", "cm", "c", "-o", "jsonpath={.data.a}"]);
    assert_eq!(out, "b");
    let out = s.k(&[
        "get",
        "svc",
        "svc",
        "-o",
        "jsonpath={.spec.ports[0].port} {.spec.ports[0].targetPort}",
    ]);
    assert_eq!(out, "80 8080");
}

#[test]
fn malformed_protobuf_is_a_bad_request() {
    let s = Server::start("protobuf-bad");
    let dir = common::temp_dir("protobuf-bad-body");
    let file = dir.join("body");
    // The magic, then a length that runs past the end.
    std::fs::write(&file, b"k8s\0\x12\x05ab").expect("write body");
    let (code, body) = s.request(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/vnd.kubernetes.protobuf",
        Some(&format!("@{}", file.display())),
    );
    assert_eq!(code, 400, "{body}");
    assert_eq!(body["reason"], "BadRequest", "{body}");
    let msg = body["message"].as_str().unwrap_or("");
    assert!(msg.contains("protobuf"), "{msg}");
    let _ = std::fs::remove_dir_all(dir);
}
