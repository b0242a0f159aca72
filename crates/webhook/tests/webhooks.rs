//! Real webhook servers on 127.0.0.1 (hyper + rustls, certificates from a
//! throwaway rcgen CA), called through `Webhooks::mutate`/`validate`.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine;
use berth_api::user::UserInfo;
use berth_webhook::{
    AdmissionError, Attributes, GroupVersionKind, GroupVersionResource, Hooks, Operation,
    RootCertStore, ServiceResolver, Webhooks,
};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

struct Pki {
    ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

/// A CA and a serving certificate for `hook.webhooks.svc` and 127.0.0.1.
fn pki() -> Pki {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "webhook test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec![
        "hook.webhooks.svc".to_string(),
        "127.0.0.1".to_string(),
    ])
    .unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::DEFAULT_VERSIONS)
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        server: Arc::new(server),
    }
}

/// The webhook server: its behaviour is chosen by the request path.
struct Server {
    addr: SocketAddr,
    calls: Arc<std::sync::Mutex<HashMap<String, usize>>>,
    reviews: Arc<std::sync::Mutex<Vec<Value>>>,
}

impl Server {
    fn calls(&self, path: &str) -> usize {
        self.calls.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}

async fn start(pki: &Pki) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server.clone());
    let calls: Arc<std::sync::Mutex<HashMap<String, usize>>> = Arc::default();
    let reviews: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
    let (c, r) = (calls.clone(), reviews.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let (calls, reviews) = (c.clone(), r.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (calls, reviews) = (calls.clone(), reviews.clone());
                    async move {
                        let path = req.uri().path().to_string();
                        *calls.lock().unwrap().entry(path.clone()).or_default() += 1;
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let review: Value = serde_json::from_slice(&body).unwrap();
                        reviews.lock().unwrap().push(review.clone());
                        let (status, body) = respond(&path, &review).await;
                        Ok::<_, std::convert::Infallible>(
                            hyper::Response::builder()
                                .status(status)
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(body)))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    Server {
        addr,
        calls,
        reviews,
    }
}

fn b64(v: &Value) -> String {
    base64::engine::general_purpose::STANDARD.encode(v.to_string())
}

async fn respond(path: &str, review: &Value) -> (u16, String) {
    let uid = review["request"]["uid"].clone();
    let reply = |response: Value| {
        let mut r = json!({"uid": uid});
        if let (Some(r), Some(extra)) = (r.as_object_mut(), response.as_object()) {
            r.extend(extra.clone());
        }
        (
            200,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": r})
                .to_string(),
        )
    };
    match path {
        "/allow" => reply(json!({"allowed": true, "warnings": ["mind the gap"],
            "auditAnnotations": {"checked": "yes"}})),
        "/add-label" => {
            let has_labels = review["request"]["object"]["metadata"]["labels"].is_object();
            let patch = if has_labels {
                json!([{"op": "add", "path": "/metadata/labels/webhook", "value": "was-here"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"webhook": "was-here"}}])
            };
            reply(json!({"allowed": true, "patchType": "JSONPatch", "patch": b64(&patch)}))
        }
        // Records how often it ran in an annotation (reinvocation).
        "/count" => {
            let n = review["request"]["object"]["metadata"]["annotations"]["count"]
                .as_str()
                .and_then(|s| s.parse::<u32>().ok())
                .unwrap_or(0);
            let patch = json!([{"op": "add", "path": "/metadata/annotations",
                "value": {"count": (n + 1).to_string()}}]);
            reply(json!({"allowed": true, "patchType": "JSONPatch", "patch": b64(&patch)}))
        }
        "/deny" => reply(json!({"allowed": false,
            "status": {"code": 403, "reason": "Forbidden", "message": "no pods on Fridays"}})),
        "/deny-silently" => reply(json!({"allowed": false})),
        "/bad-patch" => reply(json!({"allowed": true, "patchType": "JSONPatch",
            "patch": b64(&json!([{"op": "replace", "path": "/spec/nothing/here", "value": 1}]))})),
        "/wrong-uid" => (
            200,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": "someone-else", "allowed": true}})
            .to_string(),
        ),
        "/sleep" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            reply(json!({"allowed": true}))
        }
        "/pause" => {
            tokio::time::sleep(Duration::from_millis(600)).await;
            reply(json!({"allowed": true}))
        }
        "/garbage" => (200, "this is not JSON".to_string()),
        "/error" => (500, "internal kaboom".to_string()),
        _ => (404, "404 page not found".to_string()),
    }
}

/// Every Service resolves to the test server; unknown ones are errors.
struct Resolver(SocketAddr);

#[async_trait]
impl ServiceResolver for Resolver {
    async fn resolve_service(
        &self,
        namespace: &str,
        name: &str,
        _port: u16,
    ) -> Result<SocketAddr, String> {
        if (namespace, name) == ("webhooks", "hook") {
            Ok(self.0)
        } else {
            Err(format!("service \"{name}\" not found"))
        }
    }
}

#[derive(Default)]
struct TestHooks {
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

#[async_trait]
impl Hooks for TestHooks {
    async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, String> {
        Ok(self.namespaces.get(name).cloned())
    }
}

struct Env {
    pki: Pki,
    server: Server,
    webhooks: Webhooks,
}

async fn env() -> Env {
    let pki = pki();
    let server = start(&pki).await;
    let webhooks = Webhooks::new(Arc::new(Resolver(server.addr)), RootCertStore::empty());
    Env {
        pki,
        server,
        webhooks,
    }
}

impl Env {
    fn ca(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.pki.ca_pem)
    }

    /// A webhook called through the Service `webhooks/hook` at `path`.
    fn service_hook(&self, name: &str, path: &str, extra: Value) -> Value {
        let mut h = json!({
            "name": name,
            "clientConfig": {"service": {"namespace": "webhooks", "name": "hook", "path": path, "port": 443},
                "caBundle": self.ca()},
            "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        });
        merge(&mut h, extra);
        h
    }

    /// A webhook called by URL on 127.0.0.1.
    fn url_hook(&self, name: &str, url: &str, extra: Value) -> Value {
        let mut h = self.service_hook(name, "", extra);
        h["clientConfig"] = json!({"url": url, "caBundle": self.ca()});
        h
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.server.addr.port())
    }
}

fn merge(h: &mut Value, extra: Value) {
    if let (Some(h), Some(e)) = (h.as_object_mut(), extra.as_object()) {
        h.extend(e.clone());
    }
}

fn configs(kind: &str, hooks: Vec<Value>) -> Vec<Value> {
    vec![json!({"kind": kind, "metadata": {"name": "test"}, "webhooks": hooks})]
}

struct Pod {
    kind: GroupVersionKind,
    resource: GroupVersionResource,
    user: UserInfo,
    obj: Value,
}

fn pod() -> Pod {
    Pod {
        kind: GroupVersionKind::new("", "v1", "Pod"),
        resource: GroupVersionResource::new("", "v1", "pods"),
        user: UserInfo::new("jane", &["system:authenticated"]),
        obj: json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
    }
}

impl Pod {
    fn attrs<'a>(&'a self, op: Operation, object: Option<&'a Value>) -> Attributes<'a> {
        Attributes {
            operation: op,
            kind: &self.kind,
            resource: &self.resource,
            subresource: "",
            namespace: "default",
            name: "web",
            user: &self.user,
            object,
            old_object: None,
            dry_run: false,
            options: None,
        }
    }
}

fn err(r: Result<berth_webhook::Outcome, AdmissionError>) -> AdmissionError {
    match r {
        Ok(o) => panic!("expected an error, got {o:?}"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn mutating_webhook_adds_a_label_with_a_json_patch() {
    let env = env().await;
    env.webhooks.set_mutating_configurations(configs(
        "MutatingWebhookConfiguration",
        vec![env.service_hook("label.example.com", "/add-label", json!({}))],
    ));
    let p = pod();
    let mut obj = p.obj.clone();
    let out = env
        .webhooks
        .mutate(
            &p.attrs(Operation::Create, None),
            &mut obj,
            &TestHooks::default(),
        )
        .await
        .unwrap();
    assert_eq!(obj["metadata"]["labels"], json!({"webhook": "was-here"}));
    assert_eq!(
        out.audit_annotations["mutation.webhook.admission.k8s.io/round_0_index_0"],
        r#"{"configuration":"test","webhook":"label.example.com","mutated":true}"#
    );
    assert_eq!(
        out.audit_annotations["patch.webhook.admission.k8s.io/round_0_index_0"],
        r#"{"configuration":"test","webhook":"label.example.com","patch":[{"op":"add","path":"/metadata/labels","value":{"webhook":"was-here"}}],"patchType":"JSONPatch"}"#
    );

    // What the webhook was sent: an admission.k8s.io/v1 review as upstream's.
    let review = env.server.reviews.lock().unwrap()[0].clone();
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    let r = &review["request"];
    assert!(r["uid"].as_str().is_some_and(|u| u.len() == 36));
    assert_eq!(
        r["kind"],
        json!({"group": "", "version": "v1", "kind": "Pod"})
    );
    assert_eq!(
        r["resource"],
        json!({"group": "", "version": "v1", "resource": "pods"})
    );
    assert_eq!(r["requestKind"], r["kind"]);
    assert_eq!(r["operation"], "CREATE");
    assert_eq!(
        (r["name"].as_str(), r["namespace"].as_str()),
        (Some("web"), Some("default"))
    );
    assert_eq!(
        r["userInfo"],
        json!({"username": "jane", "groups": ["system:authenticated"]})
    );
    assert_eq!(r["object"], p.obj);
    assert_eq!(r["oldObject"], Value::Null);
    assert_eq!(r["dryRun"], false);
    assert_eq!(
        r["options"],
        json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"})
    );
}

#[tokio::test]
async fn validating_webhooks_deny_allow_and_warn() {
    let env = env().await;
    env.webhooks.set_validating_configurations(configs(
        "ValidatingWebhookConfiguration",
        vec![
            env.url_hook("allow.example.com", &env.url("/allow"), json!({})),
            env.url_hook("deny.example.com", &env.url("/deny"), json!({})),
        ],
    ));
    let p = pod();
    let e = err(env
        .webhooks
        .validate(
            &p.attrs(Operation::Create, Some(&p.obj)),
            &TestHooks::default(),
        )
        .await);
    assert_eq!(e.code, 403);
    assert_eq!(e.reason, "Forbidden");
    assert_eq!(
        e.message,
        "admission webhook \"deny.example.com\" denied the request: no pods on Fridays"
    );
    // The allowing webhook's warning and annotation come back with the error.
    assert_eq!(e.outcome.warnings, ["mind the gap"]);
    assert_eq!(
        e.outcome.audit_annotations["allow.example.com/checked"],
        "yes"
    );

    env.webhooks.set_validating_configurations(configs(
        "ValidatingWebhookConfiguration",
        vec![env.url_hook("quiet.example.com", &env.url("/deny-silently"), json!({}))],
    ));
    let e = err(env
        .webhooks
        .validate(
            &p.attrs(Operation::Create, Some(&p.obj)),
            &TestHooks::default(),
        )
        .await);
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            400,
            "admission webhook \"quiet.example.com\" denied the request without explanation"
        )
    );
}

#[tokio::test]
async fn a_webhook_past_its_timeout_fails_the_request() {
    let env = env().await;
    env.webhooks.set_validating_configurations(configs(
        "ValidatingWebhookConfiguration",
        vec![env.url_hook(
            "slow.example.com",
            &env.url("/sleep"),
            json!({"timeoutSeconds": 1}),
        )],
    ));
    let p = pod();
    let started = Instant::now();
    let e = err(env
        .webhooks
        .validate(
            &p.attrs(Operation::Create, Some(&p.obj)),
            &TestHooks::default(),
        )
        .await);
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!((e.code, e.reason.as_str()), (500, "InternalError"));
    assert_eq!(
        e.message,
        format!(
            "Internal error occurred: failed calling webhook \"slow.example.com\": failed to call webhook: Post \"https://127.0.0.1:{}/sleep?timeout=1s\": context deadline exceeded",
            env.server.addr.port()
        )
    );

    // failurePolicy Ignore lets the request through and says so in the audit.
    env.webhooks.set_validating_configurations(configs(
        "ValidatingWebhookConfiguration",
        vec![env.url_hook(
            "slow.example.com",
            &env.url("/sleep"),
            json!({"timeoutSeconds": 1, "failurePolicy": "Ignore"}),
        )],
    ));
    let out = env
        .webhooks
        .validate(
            &p.attrs(Operation::Create, Some(&p.obj)),
            &TestHooks::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        out.audit_annotations["failed-open.validating.webhook.admission.k8s.io/round_0_index_0"],
        "slow.example.com"
    );
}

#[tokio::test]
async fn garbage_and_broken_answers_are_calling_errors() {
    let env = env().await;
    let p = pod();
    let port = env.server.addr.port();
    let cases: Vec<(&str, String)> = vec![
        ("/garbage", "failed to call webhook: couldn't get version/kind; json parse error: expected ident at line 1 column 2".to_string()),
        ("/wrong-uid", "received invalid webhook response: expected response.uid=\"".to_string()),
        ("/error", "failed to call webhook: an error on the server (\"internal kaboom\") has prevented the request from succeeding".to_string()),
        ("/nowhere", "failed to call webhook: the server could not find the requested resource".to_string()),
    ];
    for (path, want) in cases {
        env.webhooks.set_mutating_configurations(configs(
            "MutatingWebhookConfiguration",
            vec![env.url_hook("broken.example.com", &env.url(path), json!({}))],
        ));
        let mut obj = p.obj.clone();
        let e = err(env
            .webhooks
            .mutate(
                &p.attrs(Operation::Create, None),
                &mut obj,
                &TestHooks::default(),
            )
            .await);
        assert_eq!(e.code, 500, "{path}");
        let prefix = "Internal error occurred: failed calling webhook \"broken.example.com\": ";
        assert!(
            e.message.starts_with(&format!("{prefix}{want}")),
            "{path}: {} (port {port})",
            e.message
        );
        assert_eq!(obj, p.obj, "{path}: the object is untouched");
    }
}

#[tokio::test]
async fn a_server_that_is_down_fails_or_is_ignored_by_policy() {
    let env = env().await;
    // A port nobody listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("https://127.0.0.1:{closed}/");
    let p = pod();
    env.webhooks.set_mutating_configurations(configs(
        "MutatingWebhookConfiguration",
        vec![env.url_hook("down.example.com", &url, json!({"failurePolicy": "Fail"}))],
    ));
    let mut obj = p.obj.clone();
    let e = err(env
        .webhooks
        .mutate(
            &p.attrs(Operation::Create, None),
            &mut obj,
            &TestHooks::default(),
        )
        .await);
    assert_eq!(
        (e.code, e.message.as_str()),
        (500, format!("Internal error occurred: failed calling webhook \"down.example.com\": failed to call webhook: Post \"https://127.0.0.1:{closed}/?timeout=10s\": dial tcp 127.0.0.1:{closed}: connect: connection refused").as_str())
    );
    assert_eq!(
        e.status()["details"]["causes"][0]["message"],
        format!(
            "failed calling webhook \"down.example.com\": failed to call webhook: Post \"https://127.0.0.1:{closed}/?timeout=10s\": dial tcp 127.0.0.1:{closed}: connect: connection refused"
        )
    );

    env.webhooks.set_mutating_configurations(configs(
        "MutatingWebhookConfiguration",
        vec![env.url_hook("down.example.com", &url, json!({"failurePolicy": "Ignore"}))],
    ));
    let out = env
        .webhooks
        .mutate(
            &p.attrs(Operation::Create, None),
            &mut obj,
            &TestHooks::default(),
        )
        .await
        .unwrap();
    assert_eq!(obj, p.obj);
    assert_eq!(
        out.audit_annotations["failed-open.mutation.webhook.admission.k8s.io/round_0_index_0"],
        "down.example.com"
    );

    // A Service the resolver does not know fails the same way.
    env.webhooks.set_mutating_configurations(configs(
        "MutatingWebhookConfiguration",
        vec![{
            let mut h = env.service_hook("nosvc.example.com", "/x", json!({}));
            h["clientConfig"]["service"]["name"] = json!("other");
            h
        }],
    ));
    let e = err(env
        .webhooks
        .mutate(
            &p.attrs(Operation::Create, None),
            &mut obj,
            &TestHooks::default(),
        )
        .await);
    assert_eq!(
        e.message,
        "Internal error occurred: failed calling webhook \"nosvc.example.com\": failed to call webhook: Post \"https://other.webhooks.svc:443/x?timeout=10s\": service \"other\" not found"
    );
}

#[tokio::test]
async fn certificates_are_verified_against_the_ca_bundle() {
    let env = env().await;
    let other = pki();
    let p = pod();
    let mut h = env.service_hook("tls.example.com", "/allow", json!({}));
    h["clientConfig"]["caBundle"] =
        json!(base64::engine::general_purpose::STANDARD.encode(&other.ca_pem));
    env.webhooks
        .set_validating_configurations(configs("ValidatingWebhookConfiguration", vec![h]));
    let e = err(env
        .webhooks
        .validate(
            &p.attrs(Operation::Create, Some(&p.obj)),
            &TestHooks::default(),
        )
        .await);
    assert!(
        e.message.ends_with(
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        ),
        "{}",
        e.message
    );
    // Without a caBundle the default roots (empty here) are used.
    let mut h = env.service_hook("tls.example.com", "/allow", json!({}));
    h["clientConfig"]
        .as_object_mut()
        .unwrap()
        .remove("caBundle");
    env.webhooks
        .set_validating_configurations(configs("ValidatingWebhookConfiguration", vec![h]));
    assert_eq!(
        err(env
            .webhooks
            .validate(
                &p.attrs(Operation::Create, Some(&p.obj)),
                &TestHooks::default()
            )
            .await)
        .code,
        500
    );
}

#[tokio::test]
async fn if_needed_webhooks_run_again_after_a_later_change() {
    let env = env().await;
    env.webhooks.set_mutating_configurations(configs(
        "MutatingWebhookConfiguration",
        vec![
            env.service_hook(
                "count.example.com",
                "/count",
                json!({"reinvocationPolicy": "IfNeeded"}),
            ),
            env.service_hook("label.example.com", "/add-label", json!({})),
        ],
    ));
    let p = pod();
    let mut obj = p.obj.clone();
    let out = env
        .webhooks
        .mutate(
            &p.attrs(Operation::Create, None),
            &mut obj,
            &TestHooks::default(),
        )
        .await
        .unwrap();
    assert_eq!(env.server.calls("/count"), 2);
    assert_eq!(env.server.calls("/add-label"), 1);
    assert_eq!(obj["metadata"]["annotations"]["count"], "2");
    assert_eq!(obj["metadata"]["labels"]["webhook"], "was-here");
    assert!(
        out.audit_annotations
            .contains_key("mutation.webhook.admission.k8s.io/round_1_index_0")
    );
    assert!(
        !out.audit_annotations
            .contains_key("mutation.webhook.admission.k8s.io/round_1_index_1")
    );

    // With Never, the first webhook runs once.
    env.webhooks.set_mutating_configurations(configs(
        "MutatingWebhookConfiguration",
        vec![
            env.service_hook(
                "count.example.com",
                "/count",
                json!({"reinvocationPolicy": "Never"}),
            ),
            env.service_hook("label.example.com", "/add-label", json!({})),
        ],
    ));
    let mut obj = p.obj.clone();
    env.webhooks
        .mutate(
            &p.attrs(Operation::Create, None),
            &mut obj,
            &TestHooks::default(),
        )
        .await
        .unwrap();
    assert_eq!(env.server.calls("/count"), 3);
    assert_eq!(obj["metadata"]["annotations"]["count"], "1");
}

#[tokio::test]
async fn bad_patches_and_patches_without_an_object() {
    let env = env().await;
    let p = pod();
    env.webhooks.set_mutating_configurations(configs(
        "MutatingWebhookConfiguration",
        vec![env.url_hook(
            "patch.example.com",
            &env.url("/bad-patch"),
            json!({"failurePolicy": "Ignore"}),
        )],
    ));
    let mut obj = p.obj.clone();
    // A patch that does not apply is an internal error whatever the policy.
    let e = err(env
        .webhooks
        .mutate(
            &p.attrs(Operation::Create, None),
            &mut obj,
            &TestHooks::default(),
        )
        .await);
    assert_eq!(e.code, 500);
    assert!(
        e.message
            .starts_with("Internal error occurred: JSONPatch: "),
        "{}",
        e.message
    );
    assert_eq!(obj, p.obj);

    env.webhooks.set_mutating_configurations(configs(
        "MutatingWebhookConfiguration",
        vec![env.url_hook("label.example.com", &env.url("/add-label"), json!({}))],
    ));
    let mut nothing = Value::Null;
    let e = err(env
        .webhooks
        .mutate(
            &p.attrs(Operation::Delete, None),
            &mut nothing,
            &TestHooks::default(),
        )
        .await);
    assert_eq!(
        e.message,
        "Internal error occurred: admission webhook \"label.example.com\" attempted to modify the object, which is not supported for this operation"
    );
}

#[tokio::test]
async fn validating_webhooks_run_concurrently() {
    let env = env().await;
    env.webhooks.set_validating_configurations(configs(
        "ValidatingWebhookConfiguration",
        (0..4)
            .map(|i| {
                env.url_hook(
                    &format!("pause{i}.example.com"),
                    &env.url("/pause"),
                    json!({}),
                )
            })
            .collect(),
    ));
    let p = pod();
    let started = Instant::now();
    env.webhooks
        .validate(
            &p.attrs(Operation::Create, Some(&p.obj)),
            &TestHooks::default(),
        )
        .await
        .unwrap();
    assert_eq!(env.server.calls("/pause"), 4);
    // Four 600 ms webhooks one after the other would take 2.4 s.
    assert!(
        started.elapsed() < Duration::from_millis(1800),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn dry_run_needs_webhooks_without_side_effects() {
    let env = env().await;
    let p = pod();
    let dry = |op| Attributes {
        dry_run: true,
        ..p.attrs(op, Some(&p.obj))
    };
    env.webhooks.set_validating_configurations(configs(
        "ValidatingWebhookConfiguration",
        vec![env.url_hook(
            "effects.example.com",
            &env.url("/allow"),
            json!({"sideEffects": "Some", "failurePolicy": "Ignore"}),
        )],
    ));
    let e = err(env
        .webhooks
        .validate(&dry(Operation::Create), &TestHooks::default())
        .await);
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (
            400,
            "BadRequest",
            "admission webhook \"effects.example.com\" does not support dry run"
        )
    );
    assert_eq!(env.server.calls("/allow"), 0);

    env.webhooks.set_validating_configurations(configs(
        "ValidatingWebhookConfiguration",
        vec![env.url_hook(
            "dry.example.com",
            &env.url("/allow"),
            json!({"sideEffects": "NoneOnDryRun"}),
        )],
    ));
    env.webhooks
        .validate(&dry(Operation::Create), &TestHooks::default())
        .await
        .unwrap();
    let review = env.server.reviews.lock().unwrap()[0].clone();
    assert_eq!(review["request"]["dryRun"], true);
    assert_eq!(review["request"]["options"]["dryRun"], json!(["All"]));
}

#[tokio::test]
async fn selectors_and_exemptions_decide_who_is_called() {
    let env = env().await;
    env.webhooks.set_validating_configurations(configs(
        "ValidatingWebhookConfiguration",
        vec![
            env.url_hook("prod.example.com", &env.url("/deny"), json!({
                "namespaceSelector": {"matchLabels": {"env": "prod"}}})),
            env.url_hook("everything.example.com", &env.url("/allow"), json!({
                "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]})),
        ],
    ));
    let mut hooks = TestHooks::default();
    hooks.namespaces.insert(
        "default".into(),
        BTreeMap::from([("env".into(), "dev".into())]),
    );
    let p = pod();
    env.webhooks
        .validate(&p.attrs(Operation::Create, Some(&p.obj)), &hooks)
        .await
        .unwrap();
    assert_eq!(
        (env.server.calls("/deny"), env.server.calls("/allow")),
        (0, 1)
    );

    hooks.namespaces.insert(
        "default".into(),
        BTreeMap::from([("env".into(), "prod".into())]),
    );
    assert_eq!(
        err(env
            .webhooks
            .validate(&p.attrs(Operation::Create, Some(&p.obj)), &hooks)
            .await)
        .code,
        403
    );

    // Webhook configurations themselves never go to webhooks.
    let kind = GroupVersionKind::new(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
    );
    let resource = GroupVersionResource::new(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
    );
    let cfg = json!({"metadata": {"name": "x"}});
    let attrs = Attributes {
        kind: &kind,
        resource: &resource,
        namespace: "",
        ..p.attrs(Operation::Create, Some(&cfg))
    };
    let before = env.server.calls("/allow");
    env.webhooks.validate(&attrs, &hooks).await.unwrap();
    assert_eq!(env.server.calls("/allow"), before);
}

/// Serves apps/v1 Deployments as apps/v1beta1 too (matchPolicy Equivalent)
/// and evaluates match conditions from a table.
struct VersionedHooks {
    conditions: BTreeMap<String, Result<bool, String>>,
}

#[async_trait]
impl Hooks for VersionedHooks {
    async fn namespace_labels(
        &self,
        _name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, String> {
        Ok(Some(BTreeMap::new()))
    }

    fn equivalent_resources(
        &self,
        resource: &GroupVersionResource,
        _subresource: &str,
    ) -> Vec<(GroupVersionResource, GroupVersionKind)> {
        if resource.resource != "deployments" {
            return Vec::new();
        }
        ["v1", "v1beta1"]
            .iter()
            .map(|v| {
                (
                    GroupVersionResource::new("apps", v, "deployments"),
                    GroupVersionKind::new("apps", v, "Deployment"),
                )
            })
            .collect()
    }

    fn convert(&self, obj: &Value, to: &GroupVersionKind) -> Result<Value, String> {
        let mut o = obj.clone();
        o["apiVersion"] = json!(to.api_version());
        Ok(o)
    }

    fn evaluate_match_condition(
        &self,
        input: &berth_webhook::MatchConditionInput<'_>,
    ) -> Result<bool, String> {
        assert!(input.request["uid"].is_string());
        self.conditions
            .get(input.expression)
            .cloned()
            .unwrap_or(Err("unknown expression".into()))
    }
}

#[tokio::test]
async fn equivalent_versions_are_converted_there_and_back() {
    let env = env().await;
    let mut hook = env.service_hook("beta.example.com", "/add-label", json!({}));
    hook["rules"] = json!([{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1beta1"], "resources": ["deployments"]}]);
    env.webhooks
        .set_mutating_configurations(configs("MutatingWebhookConfiguration", vec![hook]));
    let kind = GroupVersionKind::new("apps", "v1", "Deployment");
    let resource = GroupVersionResource::new("apps", "v1", "deployments");
    let user = UserInfo::default();
    let attrs = Attributes {
        operation: Operation::Create,
        kind: &kind,
        resource: &resource,
        subresource: "",
        namespace: "default",
        name: "web",
        user: &user,
        object: None,
        old_object: None,
        dry_run: false,
        options: None,
    };
    let mut obj =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
    let hooks = VersionedHooks {
        conditions: BTreeMap::new(),
    };
    env.webhooks.mutate(&attrs, &mut obj, &hooks).await.unwrap();
    assert_eq!(obj["apiVersion"], "apps/v1");
    assert_eq!(obj["metadata"]["labels"]["webhook"], "was-here");
    let review = env.server.reviews.lock().unwrap()[0].clone();
    let r = &review["request"];
    assert_eq!(
        r["kind"],
        json!({"group": "apps", "version": "v1beta1", "kind": "Deployment"})
    );
    assert_eq!(
        r["requestKind"],
        json!({"group": "apps", "version": "v1", "kind": "Deployment"})
    );
    assert_eq!(r["resource"]["version"], "v1beta1");
    assert_eq!(r["requestResource"]["version"], "v1");
    assert_eq!(r["object"]["apiVersion"], "apps/v1beta1");
}

#[tokio::test]
async fn match_conditions_skip_or_fail_before_calling() {
    let env = env().await;
    let p = pod();
    let hooks = VersionedHooks {
        conditions: BTreeMap::from([
            ("no".to_string(), Ok(false)),
            ("yes".to_string(), Ok(true)),
            ("boom".to_string(), Err("no such key: spec.x".to_string())),
        ]),
    };
    let with_conditions = |exprs: &[&str]| {
        let conditions: Vec<Value> = exprs
            .iter()
            .enumerate()
            .map(|(i, e)| json!({"name": format!("c{i}"), "expression": e}))
            .collect();
        configs(
            "ValidatingWebhookConfiguration",
            vec![env.url_hook(
                "cel.example.com",
                &env.url("/deny"),
                json!({"matchConditions": conditions}),
            )],
        )
    };
    env.webhooks
        .set_validating_configurations(with_conditions(&["yes", "no"]));
    env.webhooks
        .validate(&p.attrs(Operation::Create, Some(&p.obj)), &hooks)
        .await
        .unwrap();
    assert_eq!(env.server.calls("/deny"), 0);

    env.webhooks
        .set_validating_configurations(with_conditions(&["yes", "boom"]));
    let e = err(env
        .webhooks
        .validate(&p.attrs(Operation::Create, Some(&p.obj)), &hooks)
        .await);
    assert_eq!(
        (e.code, e.message.as_str()),
        (403, "pods \"web\" is forbidden: no such key: spec.x")
    );
    assert_eq!(env.server.calls("/deny"), 0);

    env.webhooks
        .set_validating_configurations(with_conditions(&["yes"]));
    assert_eq!(
        err(env
            .webhooks
            .validate(&p.attrs(Operation::Create, Some(&p.obj)), &hooks)
            .await)
        .code,
        403
    );
    assert_eq!(env.server.calls("/deny"), 1);
}
