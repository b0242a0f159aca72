//! The request side of auditing over a channel backend: which events one
//! request makes, in which order, and what they carry.

use super::*;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use http_body_util::Full;
use serde_json::json;

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  users: [quiet]
- level: RequestResponse
  resources: [{group: "", resources: [pods, pods/log]}]
- level: Metadata
  resources: [{group: "", resources: [secrets]}]
  omitStages: [RequestReceived]
- level: Request
"#;

fn auditor() -> (Auditor, Receiver<Event>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let policy = Policy::parse(POLICY).expect("policy");
    (
        Auditor::with_sink(policy, log::spawn(log::Output::Channel(tx), 16)),
        rx,
    )
}

fn events(rx: &Receiver<Event>, n: usize) -> Vec<Event> {
    let out: Vec<Event> = (0..n)
        .map(|i| {
            rx.recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|_| panic!("event {i} of {n}"))
        })
        .collect();
    assert!(
        rx.recv_timeout(Duration::from_millis(50)).is_err(),
        "more than {n} events"
    );
    out
}

fn request(method: &str, uri: &str) -> http::Request<()> {
    http::Request::builder()
        .method(method)
        .uri(uri)
        .header("user-agent", "kubectl/v1.33.0 (linux/amd64) kubernetes/abc")
        .header("content-type", "application/json")
        .body(())
        .expect("request")
}

fn peer() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 7], 50123))
}

fn json_response(code: u16, v: &serde_json::Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(v.to_string())).boxed())
        .expect("response")
}

fn alice() -> UserInfo {
    UserInfo::new("alice", &["devs", "system:authenticated"])
}

#[tokio::test]
async fn a_create_makes_received_and_complete_with_one_id() {
    let (a, rx) = auditor();
    let req = request(
        "POST",
        "/api/v1/namespaces/default/pods?fieldManager=kubectl-run",
    );
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let mut audit = Request::new(Some(&a), &req, peer());
    audit.authenticated(&alice(), &req).await;
    audit.impersonated(&alice());
    let body = Bytes::from(pod.to_string());
    audit
        .serve(async {
            request_body(&body);
            assert_eq!(level(), Some(Level::RequestResponse));
            add_annotation(
                "pod-security.kubernetes.io/enforce-policy",
                "privileged:latest",
            );
            // The first value of a key stays.
            add_annotation(
                "pod-security.kubernetes.io/enforce-policy",
                "restricted:latest",
            );
        })
        .await;
    let resp = audit.finish(json_response(201, &pod)).await;
    let id = resp.headers()[HEADER_AUDIT_ID]
        .to_str()
        .expect("id")
        .to_string();
    assert_eq!(id.len(), 36, "a UUID: {id}");
    let evs = events(&rx, 2);
    let stages: Vec<Stage> = evs.iter().map(|e| e.stage).collect();
    assert_eq!(stages, [Stage::RequestReceived, Stage::ResponseComplete]);
    for e in &evs {
        assert_eq!(e.audit_id, id);
        assert_eq!(e.level, Level::RequestResponse);
        assert_eq!(e.verb, "create");
        assert_eq!(e.user.username, "alice");
        assert_eq!(e.impersonated_user, None);
        assert_eq!(e.source_ips, ["10.0.0.7"]);
        assert_eq!(
            e.request_uri,
            "/api/v1/namespaces/default/pods?fieldManager=kubectl-run"
        );
        assert_eq!(e.user_agent, "kubectl/v1.33.0 (linux/amd64) kubernetes/abc");
    }
    let (received, complete) = (&evs[0], &evs[1]);
    assert_eq!(
        received.stage_timestamp,
        received.request_received_timestamp
    );
    assert!(received.response_status.is_none() && received.request_object.is_none());
    assert_eq!(
        received.object_ref.as_ref().map(|r| r.name.as_str()),
        Some("")
    );
    let r = complete.object_ref.as_ref().expect("objectRef");
    assert_eq!(
        (
            r.resource.as_str(),
            r.namespace.as_str(),
            r.name.as_str(),
            r.api_version.as_str()
        ),
        ("pods", "default", "web", "v1")
    );
    assert_eq!(complete.response_status, Some(ResponseStatus::code(201)));
    assert_eq!(complete.request_object.as_ref(), Some(&pod));
    assert_eq!(complete.response_object.as_ref(), Some(&pod));
    assert_eq!(
        complete
            .annotations
            .get("pod-security.kubernetes.io/enforce-policy")
            .map(String::as_str),
        Some("privileged:latest")
    );
    assert!(complete.stage_timestamp >= complete.request_received_timestamp);
}

#[tokio::test]
async fn metadata_level_keeps_no_bodies_and_omits_its_stage() {
    let (a, rx) = auditor();
    let req = request("GET", "/api/v1/namespaces/default/secrets/s1");
    let mut audit = Request::new(Some(&a), &req, peer());
    audit.authenticated(&alice(), &req).await;
    audit.impersonated(&UserInfo::new("bob", &["system:authenticated"]));
    audit.serve(async {}).await;
    let secret = json!({"kind": "Secret", "metadata": {"name": "s1"}, "data": {"k": "dg=="}});
    audit.finish(json_response(200, &secret)).await;
    let evs = events(&rx, 1);
    let e = &evs[0];
    assert_eq!(
        (e.stage, e.level, e.verb.as_str()),
        (Stage::ResponseComplete, Level::Metadata, "get")
    );
    assert_eq!(
        e.user.username, "alice",
        "the policy and user are the authenticated ones"
    );
    assert_eq!(
        e.impersonated_user.as_ref().map(|u| u.username.as_str()),
        Some("bob")
    );
    assert!(e.request_object.is_none() && e.response_object.is_none());
    assert!(!serde_json::to_string(e).expect("json").contains("dg=="));
}

#[tokio::test]
async fn level_none_and_no_auditor_only_set_the_header() {
    let (a, rx) = auditor();
    let quiet = UserInfo::new("quiet", &[]);
    for auditor in [Some(&a), None] {
        let req = request("GET", "/api/v1/namespaces/default/pods");
        let mut audit = Request::new(auditor, &req, peer());
        audit.authenticated(&quiet, &req).await;
        audit
            .serve(async {
                assert_eq!(level(), None);
                add_annotation("k", "v")
            })
            .await;
        let resp = audit.finish(json_response(200, &json!({}))).await;
        assert!(resp.headers().contains_key(HEADER_AUDIT_ID));
    }
    events(&rx, 0);
}

#[tokio::test]
async fn a_client_audit_id_is_kept() {
    let (a, rx) = auditor();
    let mut req = request("GET", "/api/v1/namespaces/default/pods/p");
    req.headers_mut()
        .insert(HEADER_AUDIT_ID, HeaderValue::from_static("my-trace-1"));
    let mut audit = Request::new(Some(&a), &req, peer());
    audit.authenticated(&alice(), &req).await;
    let resp = audit
        .finish(json_response(200, &json!({"kind": "Pod"})))
        .await;
    assert_eq!(resp.headers()[HEADER_AUDIT_ID], "my-trace-1");
    assert!(events(&rx, 2).iter().all(|e| e.audit_id == "my-trace-1"));
}

#[tokio::test]
async fn a_watch_starts_then_completes_when_its_body_ends() {
    let (a, rx) = auditor();
    let req = request("GET", "/api/v1/namespaces/default/pods?watch=true");
    let mut audit = Request::new(Some(&a), &req, peer());
    audit.authenticated(&alice(), &req).await;
    let (tx, body_rx) =
        tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(1);
    let stream =
        http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(body_rx));
    let resp = audit.finish(Response::new(BoxBody::new(stream))).await;
    let started = events(&rx, 2);
    assert_eq!(
        started
            .iter()
            .map(|e| (e.stage, e.verb.as_str()))
            .collect::<Vec<_>>(),
        [
            (Stage::RequestReceived, "watch"),
            (Stage::ResponseStarted, "watch")
        ]
    );
    assert_eq!(started[1].response_status, Some(ResponseStatus::code(200)));
    tx.send(Ok(Frame::data(Bytes::from_static(b"{}\n"))))
        .await
        .expect("send");
    drop(tx);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(&body[..], b"{}\n");
    let done = events(&rx, 1);
    assert_eq!(done[0].stage, Stage::ResponseComplete);
    assert_eq!(done[0].audit_id, started[0].audit_id);
}

#[tokio::test]
async fn a_dropped_log_stream_completes_too() {
    let (a, rx) = auditor();
    let req = request("GET", "/api/v1/namespaces/default/pods/p/log?follow=true");
    let mut audit = Request::new(Some(&a), &req, peer());
    audit.authenticated(&alice(), &req).await;
    let (_tx, body_rx) =
        tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(1);
    let stream =
        http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(body_rx));
    let resp = audit.finish(Response::new(BoxBody::new(stream))).await;
    events(&rx, 2);
    drop(resp);
    let done = events(&rx, 1);
    assert_eq!(
        (done[0].stage, done[0].verb.as_str()),
        (Stage::ResponseComplete, "get")
    );
    assert_eq!(
        done[0].object_ref.as_ref().map(|r| r.subresource.as_str()),
        Some("log")
    );
}

#[tokio::test]
async fn failed_authentication_is_one_response_started() {
    let (a, rx) = auditor();
    let req = request("GET", "/api/v1/namespaces/default/pods");
    let mut audit = Request::new(Some(&a), &req, peer());
    audit.failed_authentication(&req);
    let status = ApiError::unauthorized().to_status();
    audit.finish(json_response(401, &status)).await;
    let evs = events(&rx, 1);
    let e = &evs[0];
    assert_eq!(
        (e.stage, e.level),
        (Stage::ResponseStarted, Level::RequestResponse)
    );
    assert_eq!(e.user, event::User::default());
    let rs = e.response_status.as_ref().expect("status");
    assert_eq!(
        (rs.code, rs.reason.as_str(), rs.status.as_str()),
        (401, "Unauthorized", "Failure")
    );
}

#[tokio::test]
async fn a_panic_is_recorded_and_goes_on() {
    let (a, rx) = auditor();
    let req = request("DELETE", "/api/v1/namespaces/default/pods/p");
    let mut audit = Request::new(Some(&a), &req, peer());
    audit.authenticated(&alice(), &req).await;
    let caught = AssertUnwindSafe(audit.serve(async { panic!("index out of range") }))
        .catch_unwind()
        .await;
    assert!(caught.is_err(), "the panic goes on to the connection");
    let evs = events(&rx, 2);
    assert_eq!(evs[1].stage, Stage::Panic);
    assert_eq!(evs[1].verb, "delete");
    let rs = evs[1].response_status.as_ref().expect("status");
    assert_eq!(
        (rs.code, rs.reason.as_str(), rs.message.as_str()),
        (
            500,
            "InternalError",
            "APIServer panic'd: index out of range"
        )
    );
}

#[tokio::test]
async fn a_request_dropped_mid_handler_completes_as_closed_early() {
    let (a, rx) = auditor();
    let req = request("GET", "/api/v1/namespaces/default/pods/p");
    let mut audit = Request::new(Some(&a), &req, peer());
    audit.authenticated(&alice(), &req).await;
    // The client goes away while the handler waits: hyper drops the request's future.
    let cancelled = tokio::time::timeout(
        Duration::from_millis(20),
        audit.serve(std::future::pending::<()>()),
    )
    .await;
    assert!(cancelled.is_err());
    drop(audit);
    let evs = events(&rx, 2);
    assert_eq!(evs[1].stage, Stage::ResponseComplete);
    let rs = evs[1].response_status.as_ref().expect("status");
    assert_eq!(
        (rs.code, rs.status.as_str(), rs.message.as_str()),
        (200, "Success", "Connection closed early")
    );
}

#[tokio::test]
async fn non_resource_requests_have_no_object_ref() {
    let (a, rx) = auditor();
    let req = request("GET", "/healthz");
    let mut audit = Request::new(Some(&a), &req, peer());
    audit.authenticated(&alice(), &req).await;
    audit.finish(json_response(200, &json!("ok"))).await;
    let evs = events(&rx, 2);
    assert!(
        evs.iter()
            .all(|e| e.object_ref.is_none() && e.verb == "get")
    );
    assert_eq!(evs[1].level, Level::Request);
}

/// One SourceIPs case: X-Forwarded-For, X-Real-Ip, peer, result.
type SourceIpsCase<'a> = (Option<&'a str>, Option<&'a str>, &'a str, &'a [&'a str]);

/// Upstream's SourceIPs.
#[test]
fn source_ips_table() {
    let cases: [SourceIpsCase; 6] = [
        (None, None, "10.0.0.7", &["10.0.0.7"]),
        (
            Some("1.1.1.1, 2.2.2.2"),
            None,
            "10.0.0.7",
            &["1.1.1.1", "2.2.2.2", "10.0.0.7"],
        ),
        (
            Some("1.1.1.1, bogus, 10.0.0.7"),
            None,
            "10.0.0.7",
            &["1.1.1.1", "10.0.0.7"],
        ),
        (None, Some("3.3.3.3"), "10.0.0.7", &["3.3.3.3", "10.0.0.7"]),
        (
            Some("3.3.3.3"),
            Some("3.3.3.3"),
            "10.0.0.7",
            &["3.3.3.3", "10.0.0.7"],
        ),
        (None, None, "::1", &["::1"]),
    ];
    for (xff, real, peer, want) in cases {
        let mut h = HeaderMap::new();
        if let Some(v) = xff {
            h.insert("x-forwarded-for", HeaderValue::from_static(v));
        }
        if let Some(v) = real {
            h.insert("x-real-ip", HeaderValue::from_static(v));
        }
        assert_eq!(
            source_ips(&h, peer.parse().expect("ip")),
            want,
            "{xff:?} {real:?}"
        );
    }
}
