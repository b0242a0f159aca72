//! The HTTPS server the aggregator proxies metrics.k8s.io to: a self-signed
//! serving certificate (metrics-server's default; the APIService says
//! `insecureSkipTLSVerify`, as metrics-server's manifest does), client
//! certificates of the request-header CA or the cluster CA, delegated
//! authentication and authorization ([`crate::auth`]), then [`crate::api`].

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector::Store;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

use crate::api::{self, ApiError, Options, Target};
use crate::auth::{self, ApiReviewer, Attributes, Delegation, Peer, Refusal};
use crate::storage::Storage;

pub type Body = Full<Bytes>;

#[derive(Debug, thiserror::Error)]
#[error("metrics server TLS: {0}")]
pub struct TlsError(pub String);

/// What requests are answered from.
pub struct Shared {
    pub storage: Arc<RwLock<Storage>>,
    pub nodes: Store<Node>,
    pub pods: Store<Pod>,
    pub delegation: Delegation<ApiReviewer>,
    pub request_header_ca_subject: Vec<u8>,
    pub client_ca_subject: Vec<u8>,
}

/// TLS trusting client certificates of either CA (optional at the TLS layer:
/// bearer tokens and anonymous health checks come without one).
pub fn tls_config(
    request_header_ca_pem: &str,
    client_ca_pem: &str,
    sans: &[String],
) -> Result<rustls::ServerConfig, TlsError> {
    let tls = |e: &dyn std::fmt::Display| TlsError(e.to_string());
    let mut roots = rustls::RootCertStore::empty();
    for pem in [request_header_ca_pem, client_ca_pem] {
        for c in rustls_pemfile::certs(&mut pem.as_bytes()) {
            roots.add(c.map_err(|e| tls(&e))?).map_err(|e| tls(&e))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .map_err(|e| tls(&e))?;
    let (cert, key_der) =
        berth_runtime::tls::self_signed(sans, "metrics-server").map_err(TlsError)?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(&e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![cert], key_der)
        .map_err(|e| tls(&e))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

fn json(code: u16, v: &Value) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(v.to_string())))
        .unwrap_or_default()
}

fn text(code: StatusCode, s: &str) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(s.to_string())))
        .unwrap_or_default()
}

fn status(code: u16, reason: &'static str, message: String) -> Response<Body> {
    let e = ApiError {
        code,
        reason,
        message,
        details: Value::Null,
    };
    json(code, &e.body())
}

/// What a request is authorized as.
fn attributes(target: &Target<'_>, path: &str, watch: bool) -> Attributes {
    match target.resource() {
        Some(resource) => Attributes::Resource {
            verb: match (target.name(), watch) {
                (_, true) => "watch",
                (Some(_), _) => "get",
                (None, _) => "list",
            }
            .into(),
            resource: resource.into(),
            namespace: target.namespace().unwrap_or("").into(),
            name: target.name().unwrap_or("").into(),
        },
        None => Attributes::NonResource {
            verb: "get".into(),
            path: path.into(),
        },
    }
}

pub async fn handle(shared: &Shared, peer: &Peer, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_string();
    // Health needs no credentials (upstream's always-allowed paths).
    match path.as_str() {
        "/healthz" | "/livez" => return text(StatusCode::OK, "ok"),
        "/readyz" => {
            let ready = shared.storage.read().map(|s| s.ready()).unwrap_or(false);
            return if ready {
                text(StatusCode::OK, "ok")
            } else {
                text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "[-]metric-storage-ready failed: reason withheld\nreadyz check failed\n",
                )
            };
        }
        _ => {}
    }
    let user = match shared.delegation.authenticate(peer, req.headers()).await {
        Ok(u) => u,
        Err(Refusal::Failed(e)) => return status(500, "InternalError", e),
        Err(_) => return status(401, "Unauthorized", "Unauthorized".into()),
    };
    let q = berth_runtime::query::pairs(req.uri().query());
    let watch = q
        .iter()
        .any(|(k, v)| k == "watch" && (v == "true" || v == "1"));
    let Some(target) = api::target(&path) else {
        let attrs = attributes(&Target::GroupList, &path, false);
        if let Err(r) = shared.delegation.authorize(&user, &attrs).await {
            return refused(r);
        }
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        );
    };
    if let Err(r) = shared
        .delegation
        .authorize(&user, &attributes(&target, &path, watch))
        .await
    {
        return refused(r);
    }
    if req.method() != Method::GET || watch {
        return json(405, &ApiError::method_not_allowed().body());
    }
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let opts = match Options::parse(&q, accept) {
        Ok(o) => o,
        Err(e) => return json(e.code, &e.body()),
    };
    let (nodes, pods) = (shared.nodes.state(), shared.pods.state());
    let Ok(storage) = shared.storage.read() else {
        return status(500, "InternalError", "metrics storage unavailable".into());
    };
    match api::get(&target, &opts, &nodes, &pods, &storage, chrono::Utc::now()) {
        Ok(v) => json(200, &v),
        Err(e) => json(e.code, &e.body()),
    }
}

fn refused(r: Refusal) -> Response<Body> {
    match r {
        Refusal::Forbidden(m) => status(403, "Forbidden", m),
        Refusal::Unauthorized => status(401, "Unauthorized", "Unauthorized".into()),
        Refusal::Failed(e) => status(500, "InternalError", e),
    }
}

/// Serves until the process ends.
pub async fn serve(listener: TcpListener, acceptor: TlsAcceptor, shared: Arc<Shared>) {
    loop {
        let (tcp, remote) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %e, "metrics server accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let (acceptor, shared) = (acceptor.clone(), shared.clone());
        tokio::spawn(async move {
            let tls = match acceptor.accept(tcp).await {
                Ok(t) => t,
                Err(e) => {
                    debug!(%remote, error = %e, "metrics server TLS handshake failed");
                    return;
                }
            };
            let peer = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| {
                    auth::classify(
                        c.as_ref(),
                        &shared.request_header_ca_subject,
                        &shared.client_ca_subject,
                    )
                })
                .unwrap_or(Peer::None);
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (shared, peer) = (shared.clone(), peer.clone());
                async move { Ok::<_, std::convert::Infallible>(handle(&shared, &peer, req).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Err(e) = builder.serve_connection(TokioIo::new(tls), svc).await {
                debug!(%remote, error = %e, "metrics server connection ended");
            }
        });
    }
}

/// The address a listener is bound to, for logs.
pub fn local(listener: &TcpListener) -> Option<SocketAddr> {
    listener.local_addr().ok()
}
