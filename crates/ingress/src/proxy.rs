//! The reverse proxy: HTTP and HTTPS listeners routing each request through the
//! current snapshot to a ready endpoint of its backend.
//!
//! - Endpoints are taken round-robin; a connection that cannot be made (or a
//!   pooled one found closed before the request was sent) moves on to the next
//!   endpoint (cycling when there are fewer), [`MAX_TRIES`] attempts in all; a
//!   request already sent is never retried.
//! - Backend connections are HTTP/1.1, kept alive in a small per-endpoint pool;
//!   hop-by-hop headers are dropped both ways, so a backend that closes each
//!   connection does not close the client's.
//! - `X-Forwarded-For` is the client's address (an incoming value is not
//!   trusted, as ingress-nginx by default), `X-Forwarded-Proto`, `-Host`, `-Port`
//!   describe the request as received.
//! - `Upgrade` requests (WebSocket) are passed through: on 101 both connections
//!   are spliced.
//! - No route: 404. A route whose backend has no ready endpoint: 503. Every
//!   connection attempt failed: 502.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

use crate::Shared;
use crate::model::BackendKey;
use crate::router::Routed;

/// Endpoints tried for one request.
pub const MAX_TRIES: usize = 3;
/// The last attempt's connect timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Earlier attempts give up sooner: a SYN dropped by a full accept queue is
/// otherwise resent only after the kernel's 1 s retransmission timeout, and a new
/// attempt (on the next endpoint, or the same one when it is the only one) is faster.
const FIRST_CONNECT_TIMEOUT: Duration = Duration::from_millis(100);
/// Idle backend connections kept per endpoint.
const POOL_PER_ENDPOINT: usize = 64;

pub type Body = BoxBody<Bytes, hyper::Error>;

fn text(status: StatusCode, msg: &'static str) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from_static(msg.as_bytes()))
            .map_err(|never: Infallible| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Idle keep-alive connections to endpoints.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<HashMap<SocketAddr, Vec<SendRequest<Incoming>>>>,
}

impl Pool {
    fn take(&self, addr: SocketAddr) -> Option<SendRequest<Incoming>> {
        let mut idle = self.idle.lock().ok()?;
        let list = idle.get_mut(&addr)?;
        while let Some(s) = list.pop() {
            if !s.is_closed() && s.is_ready() {
                return Some(s);
            }
        }
        None
    }

    /// Returns the connection once its response has been read to the end.
    fn give_back(self: &Arc<Self>, addr: SocketAddr, mut sender: SendRequest<Incoming>) {
        let pool = self.clone();
        tokio::spawn(async move {
            if sender.ready().await.is_err() {
                return;
            }
            if let Ok(mut idle) = pool.idle.lock() {
                let list = idle.entry(addr).or_default();
                if list.len() < POOL_PER_ENDPOINT {
                    list.push(sender);
                }
            }
        });
    }
}

async fn connect(
    addr: SocketAddr,
    upgrades: bool,
    limit: Duration,
) -> Option<SendRequest<Incoming>> {
    let stream = tokio::time::timeout(limit, TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(async move {
        let r = if upgrades {
            conn.with_upgrades().await
        } else {
            conn.await
        };
        if let Err(e) = r {
            debug!(%addr, error = %e, "backend connection ended");
        }
    });
    Some(sender)
}

/// Per-listener facts a request needs.
#[derive(Clone, Copy)]
struct Listener {
    https: bool,
    port: u16,
}

pub(crate) struct Proxy {
    pub(crate) shared: Arc<Shared>,
    pool: Arc<Pool>,
    next: AtomicUsize,
}

impl Proxy {
    pub(crate) fn new(shared: Arc<Shared>) -> Arc<Self> {
        Arc::new(Self {
            shared,
            pool: Arc::default(),
            next: AtomicUsize::new(0),
        })
    }

    async fn handle(
        &self,
        mut req: Request<Incoming>,
        client: SocketAddr,
        listener: Listener,
    ) -> Response<Body> {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_string)
            .or_else(|| req.uri().authority().map(|a| a.to_string()))
            .unwrap_or_default();
        let path = req.uri().path().to_string();
        let (key, endpoints) = {
            let snap = self.shared.snapshot();
            let key: BackendKey = match snap.router.route(&host, &path) {
                Routed::Rule(k) | Routed::Default(k) => k.clone(),
                Routed::NotFound => return text(StatusCode::NOT_FOUND, "default backend - 404\n"),
            };
            let eps = snap.endpoints.get(&key).cloned().unwrap_or_default();
            (key, eps)
        };
        if endpoints.is_empty() {
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                "503 Service Temporarily Unavailable\n",
            );
        }
        let upgrade = is_upgrade(req.headers());
        let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
        prepare(&mut req, &host, client, listener, upgrade);
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut req = Some(req);
        for i in 0..MAX_TRIES {
            let limit = if i + 1 == MAX_TRIES {
                CONNECT_TIMEOUT
            } else {
                FIRST_CONNECT_TIMEOUT
            };
            let addr = endpoints[(start + i) % endpoints.len()];
            // Pooled connections first, then a new one.
            loop {
                let Some(r) = req.take() else { break };
                let pooled = if upgrade { None } else { self.pool.take(addr) };
                let fresh = pooled.is_none();
                let sender = match pooled {
                    Some(s) => Some(s),
                    None => connect(addr, upgrade, limit).await,
                };
                let Some(mut sender) = sender else {
                    debug!(%addr, service = %key.service, "endpoint refused the connection");
                    req = Some(r);
                    break;
                };
                match sender.try_send_request(r).await {
                    Ok(mut resp) => {
                        if upgrade {
                            if resp.status() == StatusCode::SWITCHING_PROTOCOLS
                                && let Some(client_up) = client_upgrade
                            {
                                let backend_up = hyper::upgrade::on(&mut resp);
                                tokio::spawn(splice(client_up, backend_up));
                            }
                        } else {
                            self.pool.give_back(addr, sender);
                            // The backend's `Connection: close` is about its
                            // connection to us, not the client's to us.
                            for name in HOP_BY_HOP {
                                resp.headers_mut().remove(*name);
                            }
                        }
                        return resp.map(BodyExt::boxed);
                    }
                    Err(mut e) => match e.take_message() {
                        // Not sent: another connection (or endpoint) may take it.
                        Some(r) => {
                            req = Some(r);
                            if fresh {
                                break;
                            }
                        }
                        None => {
                            debug!(%addr, error = %e.error(), "backend request failed");
                            return text(StatusCode::BAD_GATEWAY, "502 Bad Gateway\n");
                        }
                    },
                }
            }
        }
        text(StatusCode::BAD_GATEWAY, "502 Bad Gateway\n")
    }
}

fn is_upgrade(h: &HeaderMap) -> bool {
    h.contains_key(header::UPGRADE)
        && h.get_all(header::CONNECTION).iter().any(|v| {
            v.to_str().is_ok_and(|s| {
                s.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
        })
}

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Rewrites a request for the backend: origin-form URI, HTTP/1.1, no hop-by-hop
/// headers (but the upgrade pair when upgrading), the original Host, and the
/// X-Forwarded-* headers.
fn prepare(
    req: &mut Request<Incoming>,
    host: &str,
    client: SocketAddr,
    l: Listener,
    upgrade: bool,
) {
    let pq = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    if let Ok(uri) = pq.parse() {
        *req.uri_mut() = uri;
    }
    *req.version_mut() = http::Version::HTTP_11;
    let h = req.headers_mut();
    let upgrade_value = h.get(header::UPGRADE).cloned();
    for name in HOP_BY_HOP {
        h.remove(*name);
    }
    if upgrade && let Some(v) = upgrade_value {
        h.insert(header::UPGRADE, v);
        h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
    if let Ok(v) = HeaderValue::from_str(host) {
        h.insert(header::HOST, v);
    }
    let set = |h: &mut HeaderMap, name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(HeaderName::from_static(name), v);
        }
    };
    set(h, "x-forwarded-for", &client.ip().to_string());
    set(
        h,
        "x-forwarded-proto",
        if l.https { "https" } else { "http" },
    );
    set(h, "x-forwarded-host", host);
    set(h, "x-forwarded-port", &l.port.to_string());
    set(h, "x-real-ip", &client.ip().to_string());
}

async fn splice(client: hyper::upgrade::OnUpgrade, backend: hyper::upgrade::OnUpgrade) {
    let (Ok(c), Ok(b)) = (client.await, backend.await) else {
        return;
    };
    let mut c = TokioIo::new(c);
    let mut b = TokioIo::new(b);
    let _ = tokio::io::copy_bidirectional(&mut c, &mut b).await;
}

/// Serves plain HTTP on `listener` until the task is dropped.
pub(crate) async fn serve_http(proxy: Arc<Proxy>, listener: TcpListener) {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    loop {
        let Ok((stream, client)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let proxy = proxy.clone();
        tokio::spawn(serve_conn(
            proxy,
            TokioIo::new(stream),
            client,
            Listener { https: false, port },
        ));
    }
}

/// Serves HTTPS on `listener` with certificates picked by SNI.
pub(crate) async fn serve_https(
    proxy: Arc<Proxy>,
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
) {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    loop {
        let Ok((stream, client)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let proxy = proxy.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            match acceptor.accept(stream).await {
                Ok(tls) => {
                    serve_conn(
                        proxy,
                        TokioIo::new(tls),
                        client,
                        Listener { https: true, port },
                    )
                    .await
                }
                Err(e) => debug!(%client, error = %e, "TLS handshake failed"),
            }
        });
    }
}

async fn serve_conn<I>(proxy: Arc<Proxy>, io: I, client: SocketAddr, listener: Listener)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req| {
        let proxy = proxy.clone();
        async move { Ok::<_, Infallible>(proxy.handle(req, client, listener).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    if let Err(e) = builder.serve_connection_with_upgrades(io, svc).await {
        debug!(%client, error = %e, "connection ended");
    }
}
