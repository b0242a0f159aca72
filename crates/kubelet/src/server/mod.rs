//! The node agent's own HTTPS server on the kubelet port (10250), as upstream's
//! kubelet serves the API server: `/containerLogs`, `/exec`, `/attach`,
//! `/portForward`, `/healthz`, `/stats/summary` and `/metrics/resource`.
//!
//! TLS: a self-signed serving certificate made at start (upstream's default
//! without serving-certificate bootstrap; the API server does not verify it
//! unless told to). A client certificate is optional at the TLS layer but, when
//! presented, must chain to the cluster CA. Every request is then
//! authenticated and authorized as upstream's kubelet in webhook mode
//! ([`auth`]): the certificate's user or a bearer token checked with a
//! TokenReview, then a SubjectAccessReview on `nodes/<subresource>`.

pub mod auth;
pub mod filewatch;
pub mod logs;
pub mod spdy;
pub mod stats;
pub mod streams;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::Api;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use crate::agent::podspec::{LABEL_CONTAINER_NAME, LABEL_POD_NAME, LABEL_POD_NAMESPACE};
use crate::prober::exec::strip_runtime_prefix;
use crate::runtime::{ContainerState, Filter, Runtime, SandboxState};
use streams::{Body, Session, Upgrade, text};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("binding the kubelet port {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("kubelet server TLS: {0}")]
    Tls(String),
}

/// What handlers need from the agent.
pub struct Deps {
    pub client: kube::Client,
    pub runtime: Arc<dyn Runtime>,
    /// The node's stats (`/stats/summary`, `/metrics/resource`).
    pub stats: Arc<crate::stats::StatsProvider>,
}

/// A bound, not yet serving, kubelet server.
pub struct KubeletServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    /// The Node requests are authorized against (`nodes/<name>`).
    node_name: String,
}

fn tls_config(client_ca_pem: &str, sans: &[String]) -> Result<rustls::ServerConfig, ServerError> {
    let tls = |e: &dyn std::fmt::Display| ServerError::Tls(e.to_string());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut client_ca_pem.as_bytes()) {
        roots.add(c.map_err(|e| tls(&e))?).map_err(|e| tls(&e))?;
    }
    if roots.is_empty() {
        return Err(ServerError::Tls(
            "no CA certificate in the client CA".into(),
        ));
    }
    // Clients without a certificate get through the handshake so that bearer
    // tokens can be used; the HTTP layer answers them 401 without one. A
    // certificate that is presented must still chain to the CA.
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
        .allow_unauthenticated()
        .build()
        .map_err(|e| tls(&e))?;
    let host = sans.first().cloned().unwrap_or_else(|| "localhost".into());
    let (cert, key_der) = berth_runtime::tls::self_signed(sans, &host).map_err(ServerError::Tls)?;
    let mut cfg = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![cert], key_der)
        .map_err(|e| tls(&e))?;
    // Upgrades (exec, attach, port-forward) are HTTP/1.1.
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// DER certificates as PEM (a kubeconfig's CA as kube-rs hands it over).
pub fn pem_from_der(certs: &[Vec<u8>]) -> String {
    use base64::Engine;
    let mut out = String::new();
    for der in certs {
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

impl KubeletServer {
    /// Binds `addr` (port 0 picks a free one) with a fresh self-signed
    /// certificate for `sans`, trusting client certificates of `client_ca_pem`.
    /// The first SAN is the node's name (the agent passes it first): requests
    /// are authorized against `nodes/<it>`.
    pub async fn bind(
        addr: SocketAddr,
        client_ca_pem: &str,
        sans: &[String],
    ) -> Result<Self, ServerError> {
        let cfg = tls_config(client_ca_pem, sans)?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })?;
        Ok(KubeletServer {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(cfg)),
            node_name: sans.first().cloned().unwrap_or_default(),
        })
    }

    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Serves with reviews through the agent's API client and upstream's
    /// cache lifetimes.
    pub async fn serve(self, deps: Arc<Deps>) {
        let auth = auth::KubeletAuth::new(
            self.node_name.clone(),
            Arc::new(auth::ApiReviewer(deps.client.clone())),
            auth::AuthConfig::default(),
        );
        self.serve_with(deps, Arc::new(auth)).await
    }

    /// Serves, authenticating and authorizing every request with `auth`.
    pub async fn serve_with(self, deps: Arc<Deps>, auth: Arc<auth::KubeletAuth>) {
        info!(
            port = self.port(),
            node = auth.node_name(),
            "kubelet server listening (HTTPS)"
        );
        loop {
            let (tcp, peer) = match self.listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    warn!(error = %e, "kubelet server accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let acceptor = self.acceptor.clone();
            let deps = deps.clone();
            let auth = auth.clone();
            tokio::spawn(async move {
                let tls = match acceptor.accept(tcp).await {
                    Ok(t) => t,
                    Err(e) => {
                        debug!(%peer, error = %e, "kubelet server TLS handshake failed");
                        return;
                    }
                };
                // rustls verified it against the CA if one was presented.
                let cert_user: Option<Arc<berth_api::user::UserInfo>> = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .and_then(|c| auth::user_from_cert(c.as_ref()))
                    .map(Arc::new);
                let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                    let deps = deps.clone();
                    let auth = auth.clone();
                    let cert_user = cert_user.clone();
                    async move {
                        let method = req.method().clone();
                        let path = req.uri().path().to_string();
                        let resp = match auth
                            .filter(cert_user.as_deref(), &method, &path, req.headers_mut())
                            .await
                        {
                            Ok(_) => route(&deps, req).await,
                            Err(refused) => refused,
                        };
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                if let Err(e) = builder
                    .serve_connection_with_upgrades(TokioIo::new(tls), svc)
                    .await
                {
                    debug!(%peer, error = %e, "kubelet server connection ended");
                }
            });
        }
    }
}

pub use berth_runtime::query::pairs as query_pairs;

fn first<'a>(q: &'a [(String, String)], k: &str) -> Option<&'a str> {
    q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

fn flag(q: &[(String, String)], names: &[&str]) -> bool {
    names
        .iter()
        .any(|n| matches!(first(q, n), Some("true" | "1" | "")))
}

/// What a path names.
#[derive(Debug, PartialEq, Eq)]
enum Endpoint<'a> {
    Healthz,
    Logs {
        ns: &'a str,
        pod: &'a str,
        container: &'a str,
    },
    Exec {
        attach: bool,
        ns: &'a str,
        pod: &'a str,
        container: &'a str,
    },
    PortForward {
        ns: &'a str,
        pod: &'a str,
    },
    StatsSummary,
    ResourceMetrics,
}

fn endpoint(path: &str) -> Option<Endpoint<'_>> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    Some(match segs.as_slice() {
        ["healthz"] => Endpoint::Healthz,
        ["containerLogs", ns, pod, container] => Endpoint::Logs { ns, pod, container },
        // `/exec/{ns}/{pod}[/{uid}]/{container}`, the same for attach.
        [kind @ ("exec" | "attach"), ns, pod, .., container] if segs.len() <= 5 => Endpoint::Exec {
            attach: *kind == "attach",
            ns,
            pod,
            container,
        },
        ["portForward", ns, pod] | ["portForward", ns, pod, _] => Endpoint::PortForward { ns, pod },
        ["stats", "summary"] => Endpoint::StatsSummary,
        ["metrics", "resource"] => Endpoint::ResourceMetrics,
        _ => return None,
    })
}

async fn route(deps: &Deps, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let q = query_pairs(req.uri().query());
    let method = req.method().clone();
    debug!(%method, %path, "kubelet request");
    match endpoint(&path) {
        Some(Endpoint::Healthz) => text(StatusCode::OK, "ok"),
        Some(Endpoint::Logs { ns, pod, container }) if method == Method::GET => {
            container_logs(deps, ns, pod, container, &q).await
        }
        Some(Endpoint::Exec {
            attach,
            ns,
            pod,
            container,
        }) if method == Method::GET || method == Method::POST => {
            let (ns, pod, container) = (ns.to_string(), pod.to_string(), container.to_string());
            exec(deps, req, attach, &ns, &pod, &container, &q).await
        }
        Some(Endpoint::PortForward { ns, pod })
            if method == Method::GET || method == Method::POST =>
        {
            let (ns, pod) = (ns.to_string(), pod.to_string());
            port_forward(deps, req, &ns, &pod, &q).await
        }
        Some(Endpoint::StatsSummary) if method == Method::GET || method == Method::POST => {
            stats::summary(deps, &q).await
        }
        Some(Endpoint::ResourceMetrics) if method == Method::GET => {
            stats::resource_metrics(deps).await
        }
        Some(_) => text(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed"),
        None => text(StatusCode::NOT_FOUND, "404 page not found"),
    }
}

/// The runtime container whose log a request reads, as upstream's
/// validateContainerLogStatus decides it from the pod's status.
pub fn log_container_id(pod: &Pod, container: &str, previous: bool) -> Result<String, String> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or("");
    let status = pod.status.as_ref();
    let find = |list: Option<&Vec<ContainerStatus>>| {
        list.and_then(|l| l.iter().find(|c| c.name == container))
            .cloned()
    };
    let cs = status
        .and_then(|s| {
            find(s.container_statuses.as_ref())
                .or_else(|| find(s.init_container_statuses.as_ref()))
                .or_else(|| find(s.ephemeral_container_statuses.as_ref()))
        })
        .ok_or_else(|| format!("container {container:?} in pod {pod_name:?} is not available"))?;
    let state = cs.state.clone().unwrap_or_default();
    let last = cs.last_state.clone().unwrap_or_default().terminated;
    let last_id = last
        .as_ref()
        .and_then(|t| t.container_id.clone())
        .filter(|s| !s.is_empty());
    let terminated = || format!("container {container:?} in pod {pod_name:?} is terminated");
    if previous {
        return last_id.ok_or_else(|| {
            format!("previous terminated container {container:?} in pod {pod_name:?} not found")
        });
    }
    if state.running.is_some() {
        return cs
            .container_id
            .clone()
            .filter(|s| !s.is_empty())
            .ok_or_else(terminated);
    }
    if let Some(t) = &state.terminated {
        return match t.container_id.clone().filter(|s| !s.is_empty()) {
            Some(id) => Ok(id),
            None => last_id.ok_or_else(terminated),
        };
    }
    if last.is_some() {
        return last_id.ok_or_else(terminated);
    }
    if let Some(w) = &state.waiting {
        let why = match w.reason.as_deref().unwrap_or("") {
            "ErrImagePull" => "image can't be pulled".to_string(),
            "ImagePullBackOff" => "trying and failing to pull image".to_string(),
            other => other.to_string(),
        };
        return Err(format!(
            "container {container:?} in pod {pod_name:?} is waiting to start: {why}"
        ));
    }
    Err(format!(
        "container {container:?} in pod {pod_name:?} is waiting to start - no logs yet"
    ))
}

fn has_container(pod: &Pod, name: &str) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    spec.containers.iter().any(|c| c.name == name)
        || spec
            .init_containers
            .iter()
            .flatten()
            .any(|c| c.name == name)
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| c.name == name)
}

async fn container_logs(
    deps: &Deps,
    ns: &str,
    pod_name: &str,
    container: &str,
    q: &[(String, String)],
) -> Response<Body> {
    let opts = match logs::LogOptions::parse(|k| first(q, k), chrono::Utc::now()) {
        Ok(o) => o,
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    let pods: Api<Pod> = Api::namespaced(deps.client.clone(), ns);
    let pod = match pods.get_opt(pod_name).await {
        Ok(Some(p)) => p,
        Ok(None) => {
            return text(
                StatusCode::NOT_FOUND,
                format!("pod {pod_name:?} does not exist"),
            );
        }
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    if !has_container(&pod, container) {
        return text(
            StatusCode::NOT_FOUND,
            format!("container {container:?} not found in pod {pod_name:?}"),
        );
    }
    let id = match log_container_id(&pod, container, opts.previous) {
        Ok(id) => strip_runtime_prefix(&id).to_string(),
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    let status = match deps.runtime.container_status(&id).await {
        Ok(s) => s,
        Err(e) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("failed to get container status {id:?}: {e}"),
            );
        }
    };
    let path = std::path::PathBuf::from(&status.log_path);
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let runtime = deps.runtime.clone();
    tokio::spawn(async move {
        let running = || {
            let runtime = runtime.clone();
            let id = id.clone();
            async move {
                matches!(
                    runtime.container_status(&id).await.map(|s| s.state),
                    Ok(ContainerState::Running)
                )
            }
        };
        if let Err(e) = logs::stream(&path, opts, tx, running).await {
            debug!(error = %e, path = %path.display(), "reading a container log");
        }
    });
    let stream = tokio_stream_from(rx).map(|b| Ok::<_, std::convert::Infallible>(Frame::data(b)));
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    r
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Bytes>,
) -> impl futures::Stream<Item = Bytes> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// The pod's ready sandbox on this node (the newest, if several).
async fn sandbox_of(deps: &Deps, ns: &str, pod: &str) -> Option<String> {
    let filter = Filter {
        sandbox_id: None,
        labels: [
            (LABEL_POD_NAMESPACE.to_string(), ns.to_string()),
            (LABEL_POD_NAME.to_string(), pod.to_string()),
        ]
        .into(),
    };
    let mut list = deps.runtime.list_sandboxes(&filter).await.ok()?;
    list.retain(|s| s.state == SandboxState::Ready);
    list.sort_by_key(|s| std::cmp::Reverse(s.created_at));
    list.into_iter().next().map(|s| s.id)
}

/// The running instance of `container` in the pod (upstream's findContainer).
async fn running_container(deps: &Deps, ns: &str, pod: &str, container: &str) -> Option<String> {
    let sandbox = sandbox_of(deps, ns, pod).await?;
    let filter = Filter {
        sandbox_id: Some(sandbox),
        labels: [(LABEL_CONTAINER_NAME.to_string(), container.to_string())].into(),
    };
    let mut list = deps.runtime.list_containers(&filter).await.ok()?;
    list.retain(|c| c.state == ContainerState::Running);
    list.sort_by_key(|c| std::cmp::Reverse(c.attempt));
    list.into_iter().next().map(|c| c.id)
}

async fn exec(
    deps: &Deps,
    req: Request<Incoming>,
    attach: bool,
    ns: &str,
    pod: &str,
    container: &str,
    q: &[(String, String)],
) -> Response<Body> {
    let upgrade = streams::upgrade_kind(req.headers());
    if upgrade == Upgrade::None {
        return text(StatusCode::BAD_REQUEST, "Upgrade request required");
    }
    let stdin = flag(q, &["stdin", "input"]);
    let tty = flag(q, &["tty"]);
    let command: Vec<String> = q
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    if !attach && command.is_empty() {
        return text(
            StatusCode::BAD_REQUEST,
            "you must specify at least one command for the container",
        );
    }
    let Some(id) = running_container(deps, ns, pod, container).await else {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("container not found ({container:?})"),
        );
    };
    let url = if attach {
        deps.runtime.attach(&id, tty, stdin).await
    } else {
        deps.runtime.exec(&id, &command, tty, stdin).await
    };
    let url = match url {
        Ok(u) => u.0,
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    match upgrade {
        Upgrade::WebSocket(p) if p.iter().any(|p| p == streams::V5_PROTOCOL) => {
            streams::serve_v5(req, &url, Session { stdin, tty }).await
        }
        _ => streams::pass_through(req, &url).await,
    }
}

async fn port_forward(
    deps: &Deps,
    req: Request<Incoming>,
    ns: &str,
    pod: &str,
    q: &[(String, String)],
) -> Response<Body> {
    let upgrade = streams::upgrade_kind(req.headers());
    if upgrade == Upgrade::None {
        return text(StatusCode::BAD_REQUEST, "Upgrade request required");
    }
    let Some(sandbox) = sandbox_of(deps, ns, pod).await else {
        return text(
            StatusCode::NOT_FOUND,
            format!("pod {pod:?} does not exist on this node"),
        );
    };
    let ports: Vec<i32> = q
        .iter()
        .filter(|(k, _)| k == "port" || k == "ports")
        .flat_map(|(_, v)| {
            v.split(',')
                .filter_map(|p| p.trim().parse().ok())
                .collect::<Vec<_>>()
        })
        .collect();
    let url = match deps.runtime.port_forward(&sandbox, &ports).await {
        Ok(u) => u.0,
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    match upgrade {
        Upgrade::WebSocket(p) if p.iter().any(|p| p == streams::PORT_FORWARD_TUNNEL_PROTOCOL) => {
            streams::serve_tunnel(req, &url).await
        }
        _ => streams::pass_through(req, &url).await,
    }
}

#[cfg(test)]
mod tests;
