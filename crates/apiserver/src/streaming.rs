//! `pods/{name}/log`, `exec`, `attach` and `portforward`: proxied to the
//! kubelet server of the pod's node (its InternalIP and
//! `status.daemonEndpoints.kubeletEndpoint.Port`), as kube-apiserver does.
//!
//! The API server authenticates to kubelets with its own client certificate
//! from the cluster CA and, as upstream without `--kubelet-certificate-authority`,
//! does not verify their (self-signed) serving certificates. Upgrades are passed
//! through byte for byte once the kubelet answers 101; any other answer goes
//! back to the client as it came.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty, Full, Limited, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tracing::debug;

use crate::request::{Query, ResourcePath};
use crate::server::{Body, State};
use crate::status::{ApiError, ApiResult};

/// The kubelet port when a Node publishes none (upstream's default).
pub const DEFAULT_KUBELET_PORT: u16 = 10250;
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// Most of a kubelet's error body kept (upstream's maxReadLength).
const MAX_ERROR_BODY: usize = 50_000;
/// What stays as is in a path segment or query value (RFC 3986 unreserved).
const UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
/// Log options passed on to the kubelet.
const LOG_PARAMS: &[&str] = &[
    "follow",
    "previous",
    "timestamps",
    "tailLines",
    "sinceSeconds",
    "sinceTime",
    "limitBytes",
];

/// TLS to kubelets with the API server's kubelet client certificate.
pub struct KubeletClient {
    tls: TlsConnector,
}

impl KubeletClient {
    pub fn new(cert_pem: &str, key_pem: &str) -> anyhow::Result<Self> {
        let cfg = berth_runtime::tls::kubelet_client_config(cert_pem, key_pem)
            .map_err(|e| anyhow::anyhow!("kubelet client certificate: {e}"))?;
        Ok(KubeletClient {
            tls: TlsConnector::from(Arc::new(cfg)),
        })
    }

    pub(crate) async fn connect(&self, addr: SocketAddr) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        let _ = tcp.set_nodelay(true);
        self.tls
            .connect(ServerName::IpAddress(addr.ip().into()), tcp)
            .await
    }
}

pub(crate) use berth_runtime::tls::AnyServerCert;

/// Whether a pod subresource is served here.
pub fn is_streaming(rp: &ResourcePath) -> bool {
    rp.rt.plural == "pods"
        && rp.rt.group.is_empty()
        && matches!(
            rp.subresource.as_deref(),
            Some("log" | "exec" | "attach" | "portforward")
        )
}

fn names(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(String::from))
        .collect()
}

/// The container a request is for, as upstream's LogLocation/streamLocation
/// pick it: the one named (it must exist), else the only one.
pub fn pick_container(pod: &Value, requested: Option<&str>) -> ApiResult<String> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("");
    let spec = &pod["spec"];
    let containers = names(spec.get("containers"));
    if let Some(c) = requested {
        let all = containers
            .iter()
            .chain(&names(spec.get("initContainers")))
            .chain(&names(spec.get("ephemeralContainers")))
            .any(|n| n == c);
        return if all {
            Ok(c.to_string())
        } else {
            Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )))
        };
    }
    match containers.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}"
        ))),
        many => {
            let mut msg = format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                many.join(" ")
            );
            let init = names(spec.get("initContainers"));
            if !init.is_empty() {
                msg.push_str(&format!(
                    " or one of the init containers: [{}]",
                    init.join(" ")
                ));
            }
            Err(ApiError::bad_request(msg))
        }
    }
}

/// Where the node's kubelet listens; `Err` carries why it cannot be reached.
pub fn kubelet_address(node: &Value) -> Result<SocketAddr, String> {
    let status = &node["status"];
    let addrs = status["addresses"].as_array().cloned().unwrap_or_default();
    let port = status["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .unwrap_or(DEFAULT_KUBELET_PORT);
    let ip = ["InternalIP", "ExternalIP"].iter().find_map(|t| {
        addrs
            .iter()
            .filter(|a| a["type"] == *t)
            .find_map(|a| a["address"].as_str()?.parse::<IpAddr>().ok())
    });
    let Some(ip) = ip else {
        let known: Vec<String> = addrs
            .iter()
            .map(|a| {
                format!(
                    "{{{} {}}}",
                    a["type"].as_str().unwrap_or(""),
                    a["address"].as_str().unwrap_or("")
                )
            })
            .collect();
        return Err(format!(
            "no preferred addresses found; known addresses: [{}]",
            known.join(" ")
        ));
    };
    Ok(SocketAddr::new(ip, port))
}

/// Simulated nodes (`berth server --simulate-nodes`) have no kubelet: nothing
/// is ever sent to their made-up addresses.
pub fn simulated(node: &Value) -> bool {
    node["status"]["nodeInfo"]["containerRuntimeVersion"]
        .as_str()
        .is_some_and(|r| r.starts_with("sim://"))
}

/// The dial error for a node's kubelet, before any dialing: a simulated node's.
fn unreachable(node: &Value, addr: SocketAddr) -> Option<String> {
    simulated(node)
        .then(|| format!("dial tcp {addr}: connect: simulated node has no kubelet server"))
}

/// Go's wording for common dial errors (`dial tcp …: connect: connection refused`).
pub(crate) fn dial_error(addr: SocketAddr, e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    let why = match e.kind() {
        K::ConnectionRefused => "connect: connection refused".to_string(),
        K::TimedOut => "i/o timeout".to_string(),
        K::HostUnreachable => "connect: no route to host".to_string(),
        K::NetworkUnreachable => "connect: network is unreachable".to_string(),
        _ => e.to_string(),
    };
    format!("dial tcp {addr}: {why}")
}

fn unknown(message: String) -> ApiError {
    ApiError::new(500, "", message)
}

/// Serves a streaming pod subresource.
pub async fn serve(
    state: &State,
    req: Request<Incoming>,
    rp: &ResourcePath,
    q: &Query,
) -> ApiResult<Response<Body>> {
    let sub = rp.subresource.clone().unwrap_or_default();
    let method = req.method();
    let allowed = method == http::Method::GET || (sub != "log" && method == http::Method::POST);
    if !allowed {
        return Err(ApiError::method_not_allowed());
    }
    let pod_rp = ResourcePath {
        subresource: None,
        ..rp.clone()
    };
    let pod = state.rest.get(&pod_rp).await?;
    let ns = rp.namespace.clone().unwrap_or_default();
    let name = rp.name.clone().unwrap_or_default();
    let container = if sub == "portforward" {
        None
    } else {
        Some(pick_container(&pod, q.get("container"))?)
    };
    let node_name = pod["spec"]["nodeName"].as_str().unwrap_or("").to_string();
    if node_name.is_empty() {
        if sub == "log" {
            // Upstream answers an unscheduled pod's log with an empty stream.
            return Ok(text_response(200, Bytes::new()));
        }
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    let nodes = berth_api::registry::lookup("", "v1", "nodes")
        .ok_or_else(|| ApiError::internal("nodes are not registered"))?;
    let node = state
        .rest
        .get(&ResourcePath {
            rt: nodes,
            namespace: None,
            name: Some(node_name),
            subresource: None,
            legacy_watch: false,
        })
        .await?;
    let client = state
        .kubelet
        .as_ref()
        .ok_or_else(|| ApiError::internal("no kubelet client credentials"))?;
    let enc = |s: &str| percent_encoding::utf8_percent_encode(s, UNRESERVED).to_string();
    let container = container.unwrap_or_default();
    if sub == "log" {
        let query: Vec<String> = LOG_PARAMS
            .iter()
            .filter_map(|k| q.params.get(*k).map(|v| format!("{k}={}", enc(v))))
            .collect();
        let mut path = format!(
            "/containerLogs/{}/{}/{}",
            enc(&ns),
            enc(&name),
            enc(&container)
        );
        if !query.is_empty() {
            path = format!("{path}?{}", query.join("&"));
        }
        return logs(client, &node, &path, &name).await;
    }
    let path = match sub.as_str() {
        "portforward" => format!("/portForward/{}/{}", enc(&ns), enc(&name)),
        kind => format!("/{kind}/{}/{}/{}", enc(&ns), enc(&name), enc(&container)),
    };
    let path = match req.uri().query() {
        Some(raw) if !raw.is_empty() => format!("{path}?{raw}"),
        _ => path,
    };
    if !req.headers().contains_key(header::UPGRADE) {
        return Err(ApiError::bad_request("Upgrade request required"));
    }
    let dial_failed = |e: String| unknown(format!("error dialing backend: {e}"));
    let addr = kubelet_address(&node).map_err(dial_failed)?;
    if let Some(e) = unreachable(&node, addr) {
        return Err(dial_failed(e));
    }
    upgrade(client, addr, req, &path).await
}

fn text_response(code: u16, body: Bytes) -> Response<Body> {
    let mut r = Response::new(Full::new(body).boxed());
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r
}

/// Errors from the kubelet as upstream's GenericHttpResponseChecker words them.
fn kubelet_error(code: u16, body: &[u8], pod: &str) -> ApiError {
    let text = String::from_utf8_lossy(body).trim().to_string();
    match code {
        400 => ApiError::bad_request(text),
        500 => ApiError::internal(text),
        404 => ApiError {
            code: 404,
            reason: "NotFound",
            message: "the server could not find the requested resource".into(),
            details: Some(json!({"name": pod, "kind": "pods", "causes": [{"message": text}]})),
        },
        _ => ApiError {
            code,
            reason: "",
            message: format!(
                "the server responded with the status code {code} but did not return more information"
            ),
            details: Some(json!({"name": pod, "kind": "pods", "causes": [{"message": text}]})),
        },
    }
}

async fn logs(
    client: &KubeletClient,
    node: &Value,
    path: &str,
    pod: &str,
) -> ApiResult<Response<Body>> {
    let addr = kubelet_address(node).map_err(unknown)?;
    let url = format!("https://{addr}{path}");
    if let Some(e) = unreachable(node, addr) {
        return Err(unknown(format!("Get \"{url}\": {e}")));
    }
    let io = client
        .connect(addr)
        .await
        .map_err(|e| unknown(format!("Get \"{url}\": {}", dial_error(addr, &e))))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| unknown(format!("Get \"{url}\": {e}")))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            debug!(error = %e, "kubelet log connection ended");
        }
    });
    let req = Request::get(path)
        .header(header::HOST, addr.to_string())
        .body(Empty::<Bytes>::new())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| unknown(format!("Get \"{url}\": {e}")))?;
    let code = resp.status().as_u16();
    if !(200..=206).contains(&code) {
        let body = Limited::new(resp.into_body(), MAX_ERROR_BODY)
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        return Err(kubelet_error(code, &body, pod));
    }
    // Relay the stream; a client that goes away drops the kubelet connection.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let mut body = resp.into_body();
    tokio::spawn(async move {
        loop {
            // A follower of a quiet container notices the client leaving too.
            let frame = tokio::select! {
                f = body.frame() => f,
                _ = tx.closed() => break,
            };
            let Some(Ok(frame)) = frame else { break };
            if let Ok(data) = frame.into_data()
                && tx.send(data).await.is_err()
            {
                break;
            }
        }
    });
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
        .map(|b| Ok::<_, Infallible>(Frame::data(b)));
    let mut r = Response::new(BoxBody::new(StreamBody::new(stream)));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(r)
}

/// Headers an upgrade carries to the kubelet.
fn forwarded(name: &str) -> bool {
    name == "connection"
        || name == "upgrade"
        || name == "x-stream-protocol-version"
        || (name.starts_with("sec-websocket-") && name != "sec-websocket-extensions")
}

async fn upgrade(
    client: &KubeletClient,
    addr: SocketAddr,
    mut req: Request<Incoming>,
    path: &str,
) -> ApiResult<Response<Body>> {
    let dial_failed = |e: String| unknown(format!("error dialing backend: {e}"));
    let io = client
        .connect(addr)
        .await
        .map_err(|e| dial_failed(dial_error(addr, &e)))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| dial_failed(e.to_string()))?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            debug!(error = %e, "kubelet stream connection ended");
        }
    });
    let mut out = Request::builder()
        .method(req.method().clone())
        .uri(path)
        .header(header::HOST, addr.to_string());
    for (k, v) in req.headers() {
        if forwarded(k.as_str()) {
            out = out.header(k, v);
        }
    }
    let out = out
        .body(Empty::<Bytes>::new())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let client_upgrade = hyper::upgrade::on(&mut req);
    let mut resp = sender
        .send_request(out)
        .await
        .map_err(|e| dial_failed(e.to_string()))?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        let status = resp.status();
        let ct = resp.headers().get(header::CONTENT_TYPE).cloned();
        let body = Limited::new(resp.into_body(), MAX_ERROR_BODY)
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let mut r = Response::new(Full::new(body).boxed());
        *r.status_mut() = status;
        if let Some(ct) = ct {
            r.headers_mut().insert(header::CONTENT_TYPE, ct);
        }
        return Ok(r);
    }
    let mut r = Response::new(Empty::new().boxed());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    for (k, v) in resp.headers() {
        r.headers_mut().append(k.clone(), v.clone());
    }
    splice(client_upgrade, hyper::upgrade::on(&mut resp));
    Ok(r)
}

/// Joins a client's and a backend's upgraded connections byte for byte once
/// both sides have switched protocols.
pub(crate) fn splice(client: hyper::upgrade::OnUpgrade, backend: hyper::upgrade::OnUpgrade) {
    tokio::spawn(async move {
        let (Ok(a), Ok(b)) = tokio::join!(client, backend) else {
            return;
        };
        let (mut a, mut b) = (TokioIo::new(a), TokioIo::new(b));
        let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn container_choice() {
        let one = pod(json!({"containers": [{"name": "a"}]}));
        let two = pod(json!({"containers": [{"name": "a"}, {"name": "b"}],
            "initContainers": [{"name": "i"}]}));
        let cases: Vec<(&Value, Option<&str>, Result<&str, &str>)> = vec![
            (&one, None, Ok("a")),
            (&one, Some("a"), Ok("a")),
            (&two, Some("i"), Ok("i")),
            (&one, Some("x"), Err("container x is not valid for pod p")),
            (
                &two,
                None,
                Err(
                    "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]",
                ),
            ),
        ];
        for (p, req, want) in cases {
            let got = pick_container(p, req).map_err(|e| (e.code, e.message));
            match want {
                Ok(w) => assert_eq!(got, Ok(w.to_string())),
                Err(m) => assert_eq!(got, Err((400, m.to_string()))),
            }
        }
        let none = pod(json!({"containers": []}));
        assert_eq!(
            pick_container(&none, None).unwrap_err().message,
            "a container name must be specified for pod p"
        );
    }

    #[test]
    fn kubelet_addresses() {
        let node = |addrs: Value, port: Value, runtime: &str| {
            json!({"metadata": {"name": "n"}, "status": {"addresses": addrs,
                "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
                "nodeInfo": {"containerRuntimeVersion": runtime}}})
        };
        let internal = json!([{"type": "Hostname", "address": "n"},
            {"type": "InternalIP", "address": "127.0.0.1"}]);
        assert_eq!(
            kubelet_address(&node(internal.clone(), json!(12345), "containerd://1.6")),
            Ok("127.0.0.1:12345".parse().unwrap())
        );
        assert_eq!(
            kubelet_address(&node(internal, json!(0), "containerd://1.6")),
            Ok("127.0.0.1:10250".parse().unwrap())
        );
        assert_eq!(
            kubelet_address(&node(
                json!([{"type": "Hostname", "address": "n"}]),
                json!(10250),
                ""
            )),
            Err("no preferred addresses found; known addresses: [{Hostname n}]".into())
        );
        let sim = node(
            json!([{"type": "InternalIP", "address": "10.40.0.1"}]),
            json!(10250),
            "sim://0.1.0",
        );
        let addr = kubelet_address(&sim).unwrap();
        assert_eq!(
            unreachable(&sim, addr).as_deref(),
            Some("dial tcp 10.40.0.1:10250: connect: simulated node has no kubelet server")
        );
        let real = node(
            json!([{"type": "InternalIP", "address": "127.0.0.1"}]),
            json!(10250),
            "containerd://1.6",
        );
        assert_eq!(unreachable(&real, addr), None);
    }

    #[test]
    fn kubelet_errors_as_upstream() {
        let e = kubelet_error(
            400,
            b"container \"c\" in pod \"p\" is waiting to start: ContainerCreating\n",
            "p",
        );
        assert_eq!(
            (e.code, e.reason, e.message.as_str()),
            (
                400,
                "BadRequest",
                "container \"c\" in pod \"p\" is waiting to start: ContainerCreating"
            )
        );
        let e = kubelet_error(500, b"boom", "p");
        assert_eq!(
            (e.code, e.message.as_str()),
            (500, "Internal error occurred: boom")
        );
        let e = kubelet_error(404, b"pod \"p\" does not exist", "p");
        assert_eq!((e.code, e.reason), (404, "NotFound"));
    }

    #[test]
    fn dial_errors_in_go_words() {
        let addr: SocketAddr = "10.0.0.1:10250".parse().unwrap();
        let e = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            dial_error(addr, &e),
            "dial tcp 10.0.0.1:10250: connect: connection refused"
        );
    }
}
