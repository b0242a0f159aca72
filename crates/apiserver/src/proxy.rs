//! The `proxy` subresources: `pods|services/{[scheme:]name[:port]}/proxy[/path]`
//! in a namespace and `nodes/{[scheme:]name[:port]}/proxy[/path]`, as
//! kube-apiserver's ProxyREST handlers serve them.
//!
//! Targets are chosen as upstream's ResourceLocation does: a pod's first IP and
//! the port named (or its first container port); a ready endpoint of a Service
//! that belongs to a pod of the Service's namespace still holding that IP; a
//! Node's kubelet server (HTTPS with the API server's kubelet client
//! certificate) unless another port is asked for. The request is forwarded with
//! its method, query and end-to-end headers (never `Authorization`), and the
//! backend's answer streams back as it comes. Upstream's rewriting of links in
//! HTML bodies is not done; `Location` headers pointing at the backend are
//! rewritten to go through the proxy, as upstream does.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use rand::seq::SliceRandom;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tracing::debug;

use crate::request::{Query, ResourcePath};
use crate::server::{Body, State};
use crate::status::{ApiError, ApiResult};
use crate::streaming::{self, AnyServerCert};

/// How long a backend may take to accept a connection (upstream's proxy dialer).
const DIAL_TIMEOUT: Duration = Duration::from_secs(30);

/// Headers that belong to one connection and are never forwarded (RFC 9110 §7.6.1,
/// the list Go's ReverseProxy drops). `Authorization` goes too, in [`serve`]:
/// the API server consumed the client's credentials, as upstream's
/// authentication filter does, and never hands them to a backend.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// CORS headers of the backend: upstream strips them so a proxied page cannot
/// widen what browsers allow against the API server's origin.
const CORS: &[&str] = &[
    "access-control-allow-credentials",
    "access-control-allow-headers",
    "access-control-allow-methods",
    "access-control-allow-origin",
];

/// Whether a request is for one of the proxy subresources.
pub fn is_proxy(rp: &ResourcePath) -> bool {
    rp.rt.group.is_empty()
        && matches!(rp.rt.plural, "pods" | "services" | "nodes")
        && rp.subresource.as_deref() == Some("proxy")
}

/// `[scheme:]name[:port]`, as upstream's SplitSchemeNamePort reads it: two
/// parts are name and port; a scheme needs all three.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemeNamePort {
    pub scheme: String,
    pub name: String,
    pub port: String,
}

pub fn split_scheme_name_port(id: &str) -> Option<SchemeNamePort> {
    let parts: Vec<&str> = id.split(':').collect();
    let (scheme, name, port) = match parts.as_slice() {
        [name] => ("", *name, ""),
        [name, port] => ("", *name, *port),
        [scheme, name, port] => (*scheme, *name, *port),
        _ => return None,
    };
    (!name.is_empty() && matches!(scheme, "" | "http" | "https")).then(|| SchemeNamePort {
        scheme: scheme.to_string(),
        name: name.to_string(),
        port: port.to_string(),
    })
}

/// How the API server talks to a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Http,
    /// TLS, any serving certificate, no client certificate.
    Https,
    /// TLS with the API server's kubelet client certificate.
    Kubelet,
}

/// Where a proxied request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub transport: Transport,
    pub addr: SocketAddr,
}

fn unavailable(message: impl Into<String>) -> ApiError {
    ApiError::new(503, "ServiceUnavailable", message)
}

/// The error of a backend that could not be reached, in upstream's words.
fn unreachable(why: impl std::fmt::Display) -> ApiError {
    unavailable(format!("error trying to reach service: {why}"))
}

/// Go's `net.IP.IsGlobalUnicast`: what upstream lets the proxy dial.
fn is_global_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_multicast()
                || v4.is_link_local()
                || v4.is_broadcast())
        }
        IpAddr::V6(v6) => {
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || v6.is_unicast_link_local())
        }
    }
}

/// A port as written in the name: empty → the scheme's default; a number; or
/// (pods only) a container port's name. Anything else fails as Go's dialer would.
fn port_number(port: &str, https: bool, named: impl Fn(&str) -> Option<u16>) -> ApiResult<u16> {
    if port.is_empty() {
        return Ok(if https { 443 } else { 80 });
    }
    if port.bytes().all(|b| b.is_ascii_digit()) {
        return port
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| unreachable(format!("dial tcp: address {port}: invalid port")));
    }
    named(port).ok_or_else(|| unreachable(format!("dial tcp: lookup tcp/{port}: unknown port")))
}

fn transport_for(scheme: &str) -> Transport {
    if scheme == "https" {
        Transport::Https
    } else {
        Transport::Http
    }
}

fn container_ports(pod: &Value) -> impl Iterator<Item = &Value> {
    pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["ports"].as_array().into_iter().flatten())
}

/// A pod's first IP (`status.podIPs[0]`, else `status.podIP`).
fn pod_ips(pod: &Value) -> Vec<String> {
    let mut ips: Vec<String> = pod["status"]["podIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["ip"].as_str().map(String::from))
        .collect();
    if ips.is_empty()
        && let Some(ip) = pod["status"]["podIP"].as_str().filter(|s| !s.is_empty())
    {
        ips.push(ip.to_string());
    }
    ips
}

/// Upstream's pod ResourceLocation: the pod's IP and the port asked for, or
/// the first port any container declares, or the scheme's default.
pub fn pod_location(id: &SchemeNamePort, pod: &Value) -> ApiResult<Location> {
    let mut port = id.port.clone();
    if port.is_empty()
        && let Some(first) = container_ports(pod).find_map(|p| p["containerPort"].as_u64())
    {
        port = first.to_string();
    }
    let ip = pod_ips(pod)
        .first()
        .and_then(|s| s.parse::<IpAddr>().ok())
        .filter(|ip| is_global_unicast(*ip))
        .ok_or_else(|| ApiError::bad_request("address not allowed"))?;
    let transport = transport_for(&id.scheme);
    let port = port_number(&port, transport == Transport::Https, |name| {
        container_ports(pod)
            .find(|p| p["name"].as_str() == Some(name))
            .and_then(|p| p["containerPort"].as_u64())
            .and_then(|p| u16::try_from(p).ok())
    })?;
    Ok(Location {
        transport,
        addr: SocketAddr::new(ip, port),
    })
}

/// The Service port name a request's port means: a number names the Service
/// port with that number (upstream answers 503 when there is none).
pub fn service_port_name(svc: &Value, svc_name: &str, port: &str) -> ApiResult<String> {
    let Ok(num) = port.parse::<i64>() else {
        return Ok(port.to_string());
    };
    svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_i64() == Some(num))
        .map(|p| p["name"].as_str().unwrap_or("").to_string())
        .ok_or_else(|| {
            unavailable(format!(
                "no service port {num} found for service \"{svc_name}\""
            ))
        })
}

/// A ready endpoint address that serves the port asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub ip: IpAddr,
    pub port: u16,
    /// The pod behind the address (`targetRef` of kind Pod): namespace, name.
    pub pod: Option<(String, String)>,
}

/// The Service's ready addresses for the named endpoint port across its
/// EndpointSlices, and whether the slices list any address at all (ready or
/// not: upstream tells "no endpoints" for a Service with none apart).
pub fn candidates(slices: &[Value], port_name: &str) -> (Vec<Candidate>, bool) {
    let mut out = Vec::new();
    let mut any = false;
    for slice in slices {
        if !matches!(slice["addressType"].as_str(), Some("IPv4" | "IPv6")) {
            continue;
        }
        let port = slice["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or("") == port_name)
            .and_then(|p| p["port"].as_u64())
            .and_then(|p| u16::try_from(p).ok());
        for ep in slice["endpoints"].as_array().into_iter().flatten() {
            let Some(addr) = ep["addresses"][0].as_str() else {
                continue;
            };
            any = true;
            // As upstream's Endpoints: unset readiness counts as ready.
            let ready = ep["conditions"]["ready"].as_bool().unwrap_or(true);
            let (Some(port), true, Ok(ip)) = (port, ready, addr.parse::<IpAddr>()) else {
                continue;
            };
            let target = &ep["targetRef"];
            let pod = (target["kind"] == "Pod").then(|| {
                (
                    target["namespace"].as_str().unwrap_or("").to_string(),
                    target["name"].as_str().unwrap_or("").to_string(),
                )
            });
            out.push(Candidate { ip, port, pod });
        }
    }
    (out, any)
}

/// Upstream's node ResourceLocation: the kubelet (HTTPS, kubelet client
/// certificate) unless another port is asked for, which is dialed with the
/// scheme given. As upstream, only a global unicast address is dialed: a Node
/// naming loopback would otherwise open the API server's own host.
pub fn node_location(id: &SchemeNamePort, node: &Value) -> ApiResult<Location> {
    let kubelet = streaming::kubelet_address(node).map_err(|e| ApiError::new(500, "", e))?;
    let ip = kubelet.ip();
    if !is_global_unicast(ip) {
        return Err(ApiError::bad_request("address not allowed"));
    }
    if id.port.is_empty() || id.port == kubelet.port().to_string() {
        return Ok(Location {
            transport: Transport::Kubelet,
            addr: kubelet,
        });
    }
    let transport = transport_for(&id.scheme);
    let port = port_number(&id.port, transport == Transport::Https, |_| None)?;
    Ok(Location {
        transport,
        addr: SocketAddr::new(ip, port),
    })
}

/// What follows `/proxy` in the request path, still escaped: `""` for
/// `…/proxy`, `"/"` for `…/proxy/`, `"/a/b"` for `…/proxy/a/b`.
pub fn proxy_tail(path: &str, namespaced: bool) -> Option<&str> {
    // api, v1, [namespaces, ns,] plural, name, proxy
    let fixed = if namespaced { 7 } else { 5 };
    let rest = path.strip_prefix('/')?;
    let mut seen = 0;
    for (i, b) in rest.bytes().enumerate() {
        if b == b'/' {
            seen += 1;
            if seen == fixed {
                return rest[..i].ends_with("/proxy").then(|| &rest[i..]);
            }
        }
    }
    (seen == fixed - 1 && rest.ends_with("/proxy")).then_some("")
}

fn lookup(plural: &str) -> ApiResult<&'static berth_api::registry::ResourceType> {
    berth_api::registry::lookup("", "v1", plural)
        .ok_or_else(|| ApiError::internal(format!("{plural} are not registered")))
}

async fn get(state: &State, plural: &str, ns: Option<&str>, name: &str) -> ApiResult<Value> {
    state
        .rest
        .get(&ResourcePath {
            rt: lookup(plural)?,
            namespace: ns.map(String::from),
            name: Some(name.to_string()),
            subresource: None,
            legacy_watch: false,
        })
        .await
}

/// Simulated nodes' pods have made-up IPs: nothing is ever sent to them.
async fn on_simulated_node(state: &State, pod: &Value) -> bool {
    let Some(node) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) else {
        return false;
    };
    get(state, "nodes", None, node)
        .await
        .is_ok_and(|n| streaming::simulated(&n))
}

fn simulated_error(addr: SocketAddr) -> ApiError {
    unreachable(format!(
        "dial tcp {addr}: connect: simulated node has no pod network"
    ))
}

async fn resolve(state: &State, rp: &ResourcePath) -> ApiResult<Location> {
    let raw = rp.name.as_deref().unwrap_or("");
    let id = percent_encoding::percent_decode_str(raw).decode_utf8_lossy();
    let ns = rp.namespace.as_deref();
    let kind = match rp.rt.plural {
        "pods" => "pod",
        "services" => "service",
        _ => "node",
    };
    let id_parts = split_scheme_name_port(&id)
        .ok_or_else(|| ApiError::bad_request(format!("invalid {kind} request \"{id}\"")))?;
    match rp.rt.plural {
        "pods" => {
            let pod = get(state, "pods", ns, &id_parts.name).await?;
            let loc = pod_location(&id_parts, &pod)?;
            if on_simulated_node(state, &pod).await {
                return Err(simulated_error(loc.addr));
            }
            Ok(loc)
        }
        "services" => resolve_service(state, ns.unwrap_or(""), &id, &id_parts).await,
        _ => {
            let node = get(state, "nodes", None, &id_parts.name).await?;
            let loc = node_location(&id_parts, &node)?;
            if streaming::simulated(&node) {
                return Err(unreachable(format!(
                    "dial tcp {}: connect: simulated node has no kubelet server",
                    loc.addr
                )));
            }
            Ok(loc)
        }
    }
}

async fn resolve_service(
    state: &State,
    ns: &str,
    id: &str,
    id_parts: &SchemeNamePort,
) -> ApiResult<Location> {
    let name = &id_parts.name;
    let svc = get(state, "services", Some(ns), name).await?;
    let port_name = service_port_name(&svc, name, &id_parts.port)?;
    let slices_rt = berth_api::registry::lookup("discovery.k8s.io", "v1", "endpointslices")
        .ok_or_else(|| ApiError::internal("endpointslices are not registered"))?;
    let selector = format!("kubernetes.io/service-name={name}");
    let q = Query {
        params: [("labelSelector".to_string(), selector)].into(),
        user_agent: String::new(),
        user: None,
    };
    let list = state
        .rest
        .list(
            &ResourcePath {
                rt: slices_rt,
                namespace: Some(ns.to_string()),
                name: None,
                subresource: None,
                legacy_watch: false,
            },
            &q,
        )
        .await?;
    let slices = list["items"].as_array().cloned().unwrap_or_default();
    let (mut found, any) = candidates(&slices, &port_name);
    if !any {
        return Err(unavailable(format!(
            "no endpoints available for service \"{name}\""
        )));
    }
    found.shuffle(&mut rand::rng());
    for c in found {
        // Upstream proxies only to an address a pod of this namespace still holds.
        let Some((pod_ns, pod_name)) = &c.pod else {
            continue;
        };
        if pod_ns != ns {
            continue;
        }
        let Ok(pod) = get(state, "pods", Some(ns), pod_name).await else {
            continue;
        };
        if !pod_ips(&pod).iter().any(|ip| ip.parse() == Ok(c.ip)) {
            continue;
        }
        let addr = SocketAddr::new(c.ip, c.port);
        if on_simulated_node(state, &pod).await {
            return Err(simulated_error(addr));
        }
        return Ok(Location {
            transport: transport_for(&id_parts.scheme),
            addr,
        });
    }
    Err(unavailable(format!(
        "no endpoints available for service \"{id}\""
    )))
}

/// TLS to pods and services: any serving certificate, no client certificate.
fn plain_tls() -> ApiResult<TlsConnector> {
    static TLS: OnceLock<Option<TlsConnector>> = OnceLock::new();
    TLS.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .ok()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCert(provider)))
            .with_no_client_auth();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Some(TlsConnector::from(Arc::new(cfg)))
    })
    .clone()
    .ok_or_else(|| ApiError::internal("no TLS client configuration"))
}

trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

async fn dial(state: &State, loc: &Location) -> ApiResult<Box<dyn Io>> {
    let addr = loc.addr;
    let failed = |e: std::io::Error| unreachable(streaming::dial_error(addr, &e));
    if loc.transport == Transport::Kubelet {
        let client = state
            .kubelet
            .as_ref()
            .ok_or_else(|| ApiError::internal("no kubelet client credentials"))?;
        return Ok(Box::new(client.connect(addr).await.map_err(failed)?));
    }
    let tcp = tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| failed(std::io::ErrorKind::TimedOut.into()))?
        .map_err(failed)?;
    let _ = tcp.set_nodelay(true);
    if loc.transport == Transport::Http {
        return Ok(Box::new(tcp));
    }
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    Ok(Box::new(
        plain_tls()?.connect(name, tcp).await.map_err(unreachable)?,
    ))
}

/// Whether the client asks to switch protocols (a WebSocket, SPDY).
fn wants_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// The end-to-end headers of a message: hop-by-hop ones go, and so do those the
/// `Connection` header names.
pub(crate) fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    let mut out = HeaderMap::new();
    for (k, v) in headers {
        let n = k.as_str();
        if !HOP_BY_HOP.contains(&n) && !named.iter().any(|t| t == n) {
            out.append(k.clone(), v.clone());
        }
    }
    out
}

/// A backend's `Location` rewritten through the proxy when it points at the
/// backend itself (no host, or the backend's address), as upstream's Transport.
pub fn rewrite_location(location: &str, backend: SocketAddr, prefix: &str) -> Option<String> {
    let (path_and_query, host) = match location.split_once("://") {
        Some((_, rest)) => {
            let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            (path, Some(host))
        }
        None => (location, None),
    };
    if host.is_some_and(|h| h != backend.to_string()) {
        return None;
    }
    if path_and_query.is_empty() && host.is_some() {
        return Some(prefix.to_string());
    }
    if !path_and_query.starts_with('/') {
        return None;
    }
    if path_and_query.starts_with(&format!("{prefix}/")) {
        return Some(path_and_query.to_string());
    }
    Some(format!("{prefix}{path_and_query}"))
}

/// Serves a proxy subresource.
pub async fn serve(
    state: &State,
    mut req: Request<Incoming>,
    rp: &ResourcePath,
) -> ApiResult<Response<Body>> {
    let method = req.method().clone();
    if ![
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
        Method::HEAD,
        Method::OPTIONS,
    ]
    .contains(&method)
        || rp.legacy_watch
    {
        return Err(ApiError::method_not_allowed());
    }
    let full_path = req.uri().path().to_string();
    let tail = proxy_tail(&full_path, rp.namespace.is_some())
        .ok_or_else(ApiError::path_not_found)?
        .to_string();
    let prefix = full_path[..full_path.len() - tail.len()].to_string();
    let query = req.uri().query().filter(|q| !q.is_empty());
    if tail.is_empty() && (method == Method::GET || method == Method::HEAD) {
        // Upstream sends `…/proxy` on to `…/proxy/` so relative links resolve.
        let to = match query {
            Some(q) => format!("{full_path}/?{q}"),
            None => format!("{full_path}/"),
        };
        return Response::builder()
            .status(StatusCode::MOVED_PERMANENTLY)
            .header(header::LOCATION, to)
            .body(Empty::new().boxed())
            .map_err(|e| ApiError::internal(e.to_string()));
    }
    let loc = resolve(state, rp).await?;
    let path = if tail.is_empty() { "/" } else { tail.as_str() };
    let target = match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let upgrade = wants_upgrade(req.headers());
    let mut headers = end_to_end(req.headers());
    headers.remove(header::AUTHORIZATION);
    if upgrade {
        for h in [header::CONNECTION, header::UPGRADE] {
            if let Some(v) = req.headers().get(&h) {
                headers.insert(h, v.clone());
            }
        }
    }
    // As upstream, the backend sees the Host the client used.
    let host = req
        .headers()
        .get(header::HOST)
        .cloned()
        .or_else(|| {
            req.uri()
                .authority()
                .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        })
        .or_else(|| HeaderValue::from_str(&loc.addr.to_string()).ok());
    if let Some(h) = host {
        headers.insert(header::HOST, h);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("{prefix}{path}")) {
        headers.insert(HeaderName::from_static("x-forwarded-uri"), v);
    }
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
    let io = dial(state, &loc).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(unreachable)?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            debug!(error = %e, "proxied connection ended");
        }
    });
    let mut out = Request::builder()
        .method(method)
        .uri(target)
        .body(req.into_body())
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    *out.headers_mut() = headers;
    let mut resp = sender.send_request(out).await.map_err(unreachable)?;
    let status = resp.status();
    if status == StatusCode::SWITCHING_PROTOCOLS
        && let Some(client_upgrade) = client_upgrade
    {
        let mut r = Response::new(Empty::new().boxed());
        *r.status_mut() = status;
        *r.headers_mut() = resp.headers().clone();
        streaming::splice(client_upgrade, hyper::upgrade::on(&mut resp));
        return Ok(r);
    }
    let mut headers = end_to_end(resp.headers());
    for h in CORS {
        headers.remove(*h);
    }
    if let Some(to) = headers
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|l| rewrite_location(l, loc.addr, &prefix))
        .and_then(|l| HeaderValue::from_str(&l).ok())
    {
        headers.insert(header::LOCATION, to);
    }
    let mut r = Response::new(stream_body(resp.into_body()));
    *r.status_mut() = status;
    *r.headers_mut() = headers;
    Ok(r)
}

/// Relays a backend body frame by frame; a client that goes away drops the
/// backend connection.
pub(crate) fn stream_body(mut body: Incoming) -> Body {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Frame<Bytes>>(16);
    tokio::spawn(async move {
        loop {
            let frame = tokio::select! {
                f = body.frame() => f,
                _ = tx.closed() => break,
            };
            match frame {
                Some(Ok(f)) => {
                    if tx.send(f).await.is_err() {
                        break;
                    }
                }
                Some(Err(e)) => {
                    debug!(error = %e, "proxied body ended early");
                    break;
                }
                None => break,
            }
        }
    });
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).map(Ok::<_, Infallible>);
    BoxBody::new(StreamBody::new(stream))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An expected location, or an error's code and message.
    type Want<'a> = Result<Location, (u16, &'a str)>;

    fn snp(s: &str, n: &str, p: &str) -> SchemeNamePort {
        SchemeNamePort {
            scheme: s.into(),
            name: n.into(),
            port: p.into(),
        }
    }

    #[test]
    fn scheme_name_port() {
        let cases: &[(&str, Option<SchemeNamePort>)] = &[
            ("web", Some(snp("", "web", ""))),
            ("web:8080", Some(snp("", "web", "8080"))),
            ("web:http", Some(snp("", "web", "http"))),
            ("https:web:8443", Some(snp("https", "web", "8443"))),
            ("http:web:", Some(snp("http", "web", ""))),
            // Two parts are always name and port.
            ("https:web", Some(snp("", "https", "web"))),
            ("ftp:web:21", None),
            (":8080", None),
            ("", None),
            ("a:b:c:d", None),
        ];
        for (id, want) in cases {
            assert_eq!(&split_scheme_name_port(id), want, "{id}");
        }
    }

    fn pod(ip: Option<&str>, ports: Value) -> Value {
        let mut p = json!({"metadata": {"name": "web"},
            "spec": {"containers": [{"name": "a"}, {"name": "b", "ports": ports}]}});
        if let Some(ip) = ip {
            p["status"] = json!({"podIP": ip, "podIPs": [{"ip": ip}]});
        }
        p
    }

    #[test]
    fn pod_locations() {
        let ports = json!([{"name": "http", "containerPort": 8080}, {"containerPort": 9090}]);
        let with = pod(Some("10.42.0.7"), ports);
        let bare = pod(Some("10.42.0.7"), json!([]));
        let v6 = pod(Some("fd00::7"), json!([]));
        let http = |a: &str| {
            Ok(Location {
                transport: Transport::Http,
                addr: a.parse().unwrap(),
            })
        };
        let cases: Vec<(&Value, &str, Want)> = vec![
            (&with, "web", http("10.42.0.7:8080")),
            (&with, "web:9090", http("10.42.0.7:9090")),
            (&with, "web:http", http("10.42.0.7:8080")),
            (&bare, "web", http("10.42.0.7:80")),
            (&v6, "web:81", http("[fd00::7]:81")),
            (
                &bare,
                "https:web:",
                Ok(Location {
                    transport: Transport::Https,
                    addr: "10.42.0.7:443".parse().unwrap(),
                }),
            ),
            (
                &with,
                "web:nope",
                Err((
                    503,
                    "error trying to reach service: dial tcp: lookup tcp/nope: unknown port",
                )),
            ),
            (
                &with,
                "web:70000",
                Err((
                    503,
                    "error trying to reach service: dial tcp: address 70000: invalid port",
                )),
            ),
        ];
        for (p, id, want) in cases {
            let got = pod_location(&split_scheme_name_port(id).unwrap(), p)
                .map_err(|e| (e.code, e.message));
            assert_eq!(got, want.map_err(|(c, m)| (c, m.to_string())), "{id}");
        }
        for ip in [
            None,
            Some("127.0.0.1"),
            Some("169.254.1.1"),
            Some("0.0.0.0"),
        ] {
            let e = pod_location(&snp("", "web", "80"), &pod(ip, json!([]))).unwrap_err();
            assert_eq!(
                (e.code, e.message.as_str()),
                (400, "address not allowed"),
                "{ip:?}"
            );
        }
    }

    #[test]
    fn service_ports() {
        let svc = json!({"spec": {"ports": [
            {"name": "http", "port": 80}, {"name": "admin", "port": 9000}]}});
        let single = json!({"spec": {"ports": [{"port": 80}]}});
        assert_eq!(service_port_name(&svc, "web", "80").unwrap(), "http");
        assert_eq!(service_port_name(&svc, "web", "admin").unwrap(), "admin");
        assert_eq!(service_port_name(&svc, "web", "").unwrap(), "");
        assert_eq!(service_port_name(&single, "web", "80").unwrap(), "");
        let e = service_port_name(&svc, "web", "81").unwrap_err();
        assert_eq!(
            (e.code, e.reason, e.message.as_str()),
            (
                503,
                "ServiceUnavailable",
                "no service port 81 found for service \"web\""
            )
        );
    }

    #[test]
    fn endpoint_candidates() {
        let ep = |ip: &str, ready: Value, pod: &str| {
            json!({"addresses": [ip], "conditions": {"ready": ready},
                "targetRef": {"kind": "Pod", "namespace": "default", "name": pod}})
        };
        let slices = vec![
            json!({"addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080}, {"name": "admin", "port": 9000}],
                "endpoints": [ep("10.42.0.5", json!(true), "a"), ep("10.42.0.6", json!(false), "b"),
                    ep("10.42.0.8", Value::Null, "c")]}),
            json!({"addressType": "FQDN", "ports": [{"name": "http", "port": 1}],
                "endpoints": [{"addresses": ["example.com"]}]}),
        ];
        let pod_of = |n: &str| Some(("default".to_string(), n.to_string()));
        let (found, any) = candidates(&slices, "http");
        assert!(any);
        assert_eq!(
            found,
            vec![
                Candidate {
                    ip: "10.42.0.5".parse().unwrap(),
                    port: 8080,
                    pod: pod_of("a")
                },
                Candidate {
                    ip: "10.42.0.8".parse().unwrap(),
                    port: 8080,
                    pod: pod_of("c")
                },
            ]
        );
        assert_eq!(candidates(&slices, "admin").0.len(), 2);
        // No such endpoint port: addresses exist, none fit.
        assert_eq!(candidates(&slices, "").0, vec![]);
        assert!(candidates(&slices, "").1);
        let empty = vec![json!({"addressType": "IPv4", "ports": null, "endpoints": null})];
        assert_eq!(candidates(&empty, ""), (vec![], false));
        // A slice port with no name is the Service's unnamed port.
        let unnamed = vec![json!({"addressType": "IPv4", "ports": [{"port": 80}],
            "endpoints": [{"addresses": ["10.42.0.9"]}]})];
        assert_eq!(
            candidates(&unnamed, ""),
            (
                vec![Candidate {
                    ip: "10.42.0.9".parse().unwrap(),
                    port: 80,
                    pod: None
                }],
                true
            )
        );
    }

    #[test]
    fn node_locations() {
        let node = |ip: &str| {
            json!({"metadata": {"name": "n"}, "status": {
                "addresses": [{"type": "InternalIP", "address": ip}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}})
        };
        let n = node("192.168.1.10");
        let loc = |t: Transport, a: &str| {
            Ok(Location {
                transport: t,
                addr: a.parse().unwrap(),
            })
        };
        let cases: Vec<(&str, Want)> = vec![
            ("n", loc(Transport::Kubelet, "192.168.1.10:10250")),
            ("n:10250", loc(Transport::Kubelet, "192.168.1.10:10250")),
            (
                "http:n:10250",
                loc(Transport::Kubelet, "192.168.1.10:10250"),
            ),
            ("n:9100", loc(Transport::Http, "192.168.1.10:9100")),
            ("https:n:9443", loc(Transport::Https, "192.168.1.10:9443")),
            (
                "n:x",
                Err((
                    503,
                    "error trying to reach service: dial tcp: lookup tcp/x: unknown port",
                )),
            ),
        ];
        for (id, want) in cases {
            let got = node_location(&split_scheme_name_port(id).unwrap(), &n)
                .map_err(|e| (e.code, e.message));
            assert_eq!(got, want.map_err(|(c, m)| (c, m.to_string())), "{id}");
        }
        for ip in ["127.0.0.1", "224.0.0.1", "::1"] {
            let e = node_location(&snp("", "n", ""), &node(ip)).unwrap_err();
            assert_eq!(
                (e.code, e.message.as_str()),
                (400, "address not allowed"),
                "{ip}"
            );
        }
        let none = json!({"status": {"addresses": [{"type": "Hostname", "address": "n"}]}});
        assert_eq!(
            node_location(&snp("", "n", ""), &none).unwrap_err().message,
            "no preferred addresses found; known addresses: [{Hostname n}]"
        );
    }

    #[test]
    fn tails() {
        let cases: &[(&str, bool, Option<&str>)] = &[
            ("/api/v1/namespaces/d/pods/web:80/proxy", true, Some("")),
            ("/api/v1/namespaces/d/pods/web:80/proxy/", true, Some("/")),
            (
                "/api/v1/namespaces/d/pods/web/proxy/a/b%20c/",
                true,
                Some("/a/b%20c/"),
            ),
            ("/api/v1/nodes/n/proxy/healthz", false, Some("/healthz")),
            ("/api/v1/nodes/n/proxy", false, Some("")),
            ("/api/v1/nodes/n/status", false, None),
            ("/api/v1//nodes/n/proxy/x", false, None),
        ];
        for (path, ns, want) in cases {
            assert_eq!(proxy_tail(path, *ns), *want, "{path}");
        }
        // The request parser keeps `:` in names and ignores what follows `proxy`.
        let crate::request::Target::Resource(rp) =
            crate::request::parse_path("/api/v1/namespaces/d/services/https:web:443/proxy/x/y")
                .unwrap()
        else {
            panic!("not a resource path");
        };
        assert!(is_proxy(&rp));
        assert_eq!(rp.name.as_deref(), Some("https:web:443"));
    }

    #[test]
    fn locations_through_the_proxy() {
        let backend: SocketAddr = "10.42.0.5:8080".parse().unwrap();
        let prefix = "/api/v1/namespaces/d/pods/web:8080/proxy";
        let cases: &[(&str, Option<String>)] = &[
            ("/login?x=1", Some(format!("{prefix}/login?x=1"))),
            ("http://10.42.0.5:8080/a", Some(format!("{prefix}/a"))),
            ("http://10.42.0.5:8080", Some(prefix.to_string())),
            (&format!("{prefix}/done"), Some(format!("{prefix}/done"))),
            ("https://example.com/a", None),
            ("relative/page", None),
        ];
        for (l, want) in cases {
            assert_eq!(&rewrite_location(l, backend, prefix), want, "{l}");
        }
    }

    #[test]
    fn forwarded_headers() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("accept", "text/html"),
            ("x-custom", "a"),
        ] {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        let out = end_to_end(&h);
        let mut names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        names.sort();
        assert_eq!(names, vec!["accept", "x-custom"]);
        assert!(!wants_upgrade(&h));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        assert!(wants_upgrade(&h));
    }
}
