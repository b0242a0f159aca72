//! Dynamic admission end to end: a real HTTPS webhook server (its own CA) called by
//! `berth server` for writes made with real kubectl — a mutating webhook that labels
//! pods through a JSONPatch, a validating one that denies, failure policies with the
//! server gone, a timeout, and a bad configuration.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use common::{Server, stderr};
use serde_json::{Value, json};

/// The answer for one AdmissionReview, by path.
async fn respond(path: &str, review: &Value) -> Value {
    let uid = review["request"]["uid"].clone();
    let response = match path {
        "/label" => {
            let patch = json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]);
            let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch,
                   "warnings": ["labelled by the e2e webhook"]})
        }
        "/deny" => json!({"uid": uid, "allowed": false,
                          "status": {"code": 403, "message": "configmaps are not welcome here"}}),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            json!({"uid": uid, "allowed": true})
        }
        _ => json!({"uid": uid, "allowed": true}),
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// Serves webhooks on 127.0.0.1 until the test ends.
async fn serve(tls: Arc<rustls::ServerConfig>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(common::tls::serve_json(
        listener,
        tls,
        |path, _, review| async move { respond(&path, &review).await },
    ));
    addr
}

fn apply(s: &Server, doc: &Value) -> std::process::Output {
    tokio::task::block_in_place(|| s.kubectl_stdin(&["apply", "-f", "-"], Some(&doc.to_string())))
}

fn webhook(name: &str, url: &str, ca: &str, extra: Value) -> Value {
    let mut w = json!({
        "name": name,
        "clientConfig": {"url": url, "caBundle": base64::engine::general_purpose::STANDARD.encode(ca)},
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
    });
    if let (Some(m), Some(e)) = (w.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            m.insert(k.clone(), v.clone());
        }
    }
    w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_mutate_deny_fail_and_time_out() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let s = tokio::task::spawn_blocking(|| Server::start("webhooks"))
        .await
        .unwrap();
    let (ca, tls) = common::tls::server(&["127.0.0.1"], None);
    let addr = serve(tls).await;
    let url = |p: &str| format!("https://{addr}{p}");
    let k = |args: &[&str]| tokio::task::block_in_place(|| s.kubectl(args));

    // A bad configuration is refused with upstream's message.
    let mut bad = webhook("bad.example.com", &url("/"), &ca, json!({}));
    bad.as_object_mut().unwrap().remove("sideEffects");
    let out = apply(
        &s,
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "bad"}, "webhooks": [bad]}),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"
        ),
        "{}",
        stderr(&out)
    );

    // Mutating: pods in namespaces labelled webhook=on get a label.
    let out = apply(
        &s,
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "label-pods"},
        "webhooks": [webhook("label.example.com", &url("/label"), &ca, json!({
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {"webhook": "on"}},
        }))]}),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = k(&["get", "mutatingwebhookconfigurations"]);
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        table
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["NAME", "WEBHOOKS", "AGE"]
    );
    assert!(table.contains("label-pods"), "{table}");
    k(&["create", "namespace", "hooked"]);
    k(&["label", "namespace", "hooked", "webhook=on"]);
    let pod = |ns: &str, name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": {"app": "x"}},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    };
    let mut created = None;
    for _ in 0..20 {
        // The namespace's default ServiceAccount appears shortly after it.
        let out = apply(&s, &pod("hooked", "p1"));
        if out.status.success() {
            created = Some(out);
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let created = created.expect("pod in hooked namespace");
    // The webhook's warning reaches the client, as upstream's Warning header.
    assert!(
        stderr(&created).contains("Warning: labelled by the e2e webhook"),
        "{}",
        stderr(&created)
    );
    let labels = k(&[
        "get",
        "pod",
        "p1",
        "-n",
        "hooked",
        "-o",
        "jsonpath={.metadata.labels}",
    ]);
    let labels: Value = serde_json::from_slice(&labels.stdout).unwrap();
    assert_eq!(labels, json!({"app": "x", "mutated": "yes"}));
    let out = apply(&s, &pod("default", "p2"));
    assert!(out.status.success(), "{}", stderr(&out));
    let labels = k(&["get", "pod", "p2", "-o", "jsonpath={.metadata.labels}"]);
    assert_eq!(
        serde_json::from_slice::<Value>(&labels.stdout).unwrap(),
        json!({"app": "x"})
    );

    // Validating: labelled ConfigMaps are denied with the webhook's message.
    let out = apply(
        &s,
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "deny-configmaps"},
        "webhooks": [webhook("deny.example.com", &url("/deny"), &ca, json!({
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "objectSelector": {"matchLabels": {"deny": "yes"}},
        }))]}),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let cm = |name: &str, labels: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}});
    let out = apply(&s, &cm("nope", json!({"deny": "yes"})));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("admission webhook \"deny.example.com\" denied the request: configmaps are not welcome here"),
        "{}",
        stderr(&out)
    );
    assert!(
        !k(&["get", "cm", "nope"]).status.success(),
        "a denied object was stored"
    );
    assert!(
        apply(&s, &cm("fine", json!({"deny": "no"})))
            .status
            .success()
    );

    // A server that is gone: Ignore lets the write through, Fail refuses it.
    let down = |policy: &str, path: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": format!("down-{}", policy.to_lowercase())},
        "webhooks": [webhook(&format!("down-{}.example.com", policy.to_lowercase()), &format!("https://127.0.0.1:1{path}"), &ca, json!({
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["secrets"]}],
            "failurePolicy": policy,
        }))]})
    };
    assert!(apply(&s, &down("Ignore", "/ignore")).status.success());
    assert!(
        k(&["create", "secret", "generic", "s1", "--from-literal=a=b"])
            .status
            .success()
    );
    assert!(apply(&s, &down("Fail", "/fail")).status.success());
    let out = k(&["create", "secret", "generic", "s2", "--from-literal=a=b"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("failed calling webhook \"down-fail.example.com\""),
        "{err}"
    );
    assert!(err.contains("connection refused"), "{err}");
    k(&["delete", "validatingwebhookconfiguration", "down-fail"]);

    // A slow webhook is abandoned after its timeoutSeconds.
    let out = apply(
        &s,
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "slow"},
        "webhooks": [webhook("slow.example.com", &url("/slow"), &ca, json!({
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["serviceaccounts"]}],
            "timeoutSeconds": 1,
        }))]}),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let started = Instant::now();
    let out = k(&["create", "serviceaccount", "late"]);
    let took = started.elapsed();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("failed calling webhook \"slow.example.com\""),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("context deadline exceeded"),
        "{}",
        stderr(&out)
    );
    assert!(took < Duration::from_secs(4), "{took:?}");
    // The server keeps serving.
    assert!(k(&["get", "ns", "default"]).status.success());
}
