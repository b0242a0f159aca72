//! Aggregated APIs end to end: an APIService whose Service's endpoint is a real
//! HTTPS server in this test. It must only accept the front proxy's client
//! certificate (signed by the CA `extension-apiserver-authentication` names), sees
//! the caller in `X-Remote-User`/`X-Remote-Group`, is listed by discovery, and
//! once it is gone the APIService turns Available=False and requests get 503.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use base64::Engine;
use common::{Server, stderr, stdout, wait_until};
use serde_json::{Value, json};

/// An address of this machine other pods and the API server can reach (not
/// loopback, which upstream refuses in endpoints).
fn host_ip() -> IpAddr {
    let out = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .expect("ip addr");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| !l.contains("berth") && !l.contains("cni") && !l.contains("veth"))
        .find_map(|l| {
            let addr = l.split_whitespace().skip_while(|w| *w != "inet").nth(1)?;
            addr.split('/').next()?.parse().ok()
        })
        .expect("a global IPv4 address on this machine")
}

fn answer(path: &str, headers: &hyper::HeaderMap) -> Value {
    let all = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok().map(String::from))
            .collect()
    };
    match path {
        "/apis/berth.example.com/v1" => json!({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "berth.example.com/v1",
            "resources": [{"name": "flowers", "singularName": "flower", "namespaced": false,
                           "kind": "Flower", "verbs": ["get", "list"]}]
        }),
        // Its OpenAPI, which the aggregator merges into /openapi/v3 (kubectl explain).
        "/openapi/v3" => json!({"paths": {"apis/berth.example.com/v1": {
            "serverRelativeURL": "/openapi/v3/apis/berth.example.com/v1?hash=0123ABCD"}}}),
        "/openapi/v3/apis/berth.example.com/v1" => json!({
            "openapi": "3.0.0", "info": {"title": "flowers", "version": "v1"},
            // kubectl explain finds a resource's kind through its path's GET.
            "paths": {"/apis/berth.example.com/v1/flowers": {"get": {
                "x-kubernetes-action": "list",
                "x-kubernetes-group-version-kind": {"group": "berth.example.com", "version": "v1", "kind": "Flower"},
                "responses": {"200": {"description": "OK"}}}}},
            "components": {"schemas": {"com.example.berth.v1.Flower": {
                "type": "object", "description": "A Flower grows in the aggregated server.",
                "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "spec": {"type": "object", "description": "How the flower grows.",
                             "properties": {"petals": {"type": "integer", "description": "Number of petals."}}}},
                "x-kubernetes-group-version-kind": [{"group": "berth.example.com", "version": "v1", "kind": "Flower"}]
            }}}
        }),
        _ => json!({"kind": "FlowerList", "apiVersion": "berth.example.com/v1", "items": [],
                    "seenUser": all("x-remote-user"), "seenGroups": all("x-remote-group"),
                    "sawAuthorization": headers.contains_key("authorization")}),
    }
}

fn apply(s: &Server, doc: &Value) -> std::process::Output {
    tokio::task::block_in_place(|| s.kubectl_stdin(&["apply", "-f", "-"], Some(&doc.to_string())))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiservice_proxies_lists_and_fails_as_upstream() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let s = tokio::task::spawn_blocking(|| Server::start("aggregated"))
        .await
        .unwrap();
    let k = |args: &[&str]| tokio::task::block_in_place(|| s.k(args));

    // Local APIServices stand for what the server serves itself.
    let table = k(&["get", "apiservices"]);
    assert_eq!(
        table
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    );
    wait_until(Duration::from_secs(20), "v1.apps Available", || {
        k(&[
            "get",
            "apiservice",
            "v1.apps",
            "-o",
            "jsonpath={.status.conditions[0].reason}",
        ]) == "Local"
    });

    // A bad APIService is refused with upstream's message.
    let out = apply(
        &s,
        &json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "flowers"}, "spec": {"group": "berth.example.com", "version": "v1",
        "groupPriorityMinimum": 1000, "versionPriority": 15}}),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("metadata.name: Invalid value: \"flowers\": must be `spec.version+\".\"+spec.group`: \"v1.berth.example.com\""),
        "{}",
        stderr(&out)
    );

    // The backend trusts the front proxy's CA, as published.
    let client_ca = k(&[
        "get",
        "configmap",
        "-n",
        "kube-system",
        "extension-apiserver-authentication",
        "-o",
        "jsonpath={.data.requestheader-client-ca-file}",
    ]);
    assert!(client_ca.contains("BEGIN CERTIFICATE"), "{client_ca}");
    // No front proxy certificate, no connection.
    let (serving_ca, tls) = common::tls::server(&["flowers.default.svc"], Some(&client_ca));
    let ip = host_ip();
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(ip, 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(common::tls::serve_json(
        listener,
        tls,
        |path, headers, _| async move { answer(&path, &headers) },
    ));

    for doc in [
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "flowers", "namespace": "default"},
               "spec": {"ports": [{"port": 443, "targetPort": port}]}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "flowers-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "flowers"}},
               "addressType": "IPv4", "ports": [{"name": "", "port": port, "protocol": "TCP"}],
               "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}]}),
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": "v1.berth.example.com"},
               "spec": {"group": "berth.example.com", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15,
                        "service": {"namespace": "default", "name": "flowers", "port": 443},
                        "caBundle": base64::engine::general_purpose::STANDARD.encode(&serving_ca)}}),
    ] {
        let out = apply(&s, &doc);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    wait_until(Duration::from_secs(20), "APIService Available", || {
        k(&[
            "get",
            "apiservice",
            "v1.berth.example.com",
            "-o",
            "jsonpath={.status.conditions[0].status}",
        ]) == "True"
    });
    assert_eq!(
        k(&[
            "get",
            "apiservice",
            "v1.berth.example.com",
            "-o",
            "jsonpath={.status.conditions[0].reason}"
        ]),
        "Passed"
    );

    // Discovery and requests go to the backend, with the caller's identity.
    let doc: Value =
        serde_json::from_str(&k(&["get", "--raw", "/apis/berth.example.com/v1"])).unwrap();
    assert_eq!(doc["resources"][0]["name"], "flowers");
    let groups: Value = serde_json::from_str(&k(&["get", "--raw", "/apis"])).unwrap();
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "berth.example.com"),
        "{groups}"
    );
    let res = k(&["api-resources", "--api-group=berth.example.com"]);
    assert!(res.lines().any(|l| l.starts_with("flowers ")), "{res}");
    wait_until(Duration::from_secs(20), "remote OpenAPI merged", || {
        k(&["get", "--raw", "/openapi/v3"])
            .contains("/openapi/v3/apis/berth.example.com/v1?hash=0123ABCD")
    });
    let explain = k(&["explain", "flowers.spec"]);
    assert!(explain.contains("How the flower grows."), "{explain}");
    assert!(explain.contains("petals"), "{explain}");
    let list: Value =
        serde_json::from_str(&k(&["get", "--raw", "/apis/berth.example.com/v1/flowers"])).unwrap();
    assert_eq!(list["seenUser"], json!(["system:admin"]));
    let seen_groups: Vec<&str> = list["seenGroups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(seen_groups.contains(&"system:masters"), "{seen_groups:?}");
    assert!(
        seen_groups.contains(&"system:authenticated"),
        "{seen_groups:?}"
    );
    assert_eq!(list["sawAuthorization"], false);

    // The backend goes away: Available=False, and 503 as upstream.
    server.abort();
    let _ = server.await;
    wait_until(Duration::from_secs(30), "APIService unavailable", || {
        k(&[
            "get",
            "apiservice",
            "v1.berth.example.com",
            "-o",
            "jsonpath={.status.conditions[0].reason}",
        ]) == "FailedDiscoveryCheck"
    });
    let row = k(&["get", "apiservice", "v1.berth.example.com"]);
    assert!(
        row.contains("default/flowers") && row.contains("False (FailedDiscoveryCheck)"),
        "{row}"
    );
    let out = tokio::task::block_in_place(|| {
        s.kubectl(&["get", "--raw", "/apis/berth.example.com/v1/flowers"])
    });
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("ServiceUnavailable")
            || stderr(&out).contains("the server is currently unable to handle the request"),
        "{}",
        stderr(&out)
    );
    let (code, _) = s.request("GET", "/apis/berth.example.com/v1/flowers", "", None);
    assert_eq!(code, 503);
}
