//! Berth's ingress controller: serves the Ingresses whose IngressClass has
//! `spec.controller: berth.dev/ingress` with an HTTP(S) reverse proxy on the node.
//!
//! - [`router`]: host and path matching as the Ingress specification (pure).
//! - [`model`]: API objects → a [`model::Snapshot`] (routes, ready endpoints, TLS
//!   certificates, problems) (pure).
//! - [`proxy`]: the listeners and request forwarding.
//! - [`tls`]: Secret certificates by SNI.
//! - [`controller`]: kube-rs watches of Ingresses, IngressClasses, Services,
//!   EndpointSlices and Secrets; every change rebuilds the snapshot, which the
//!   proxy picks up without restarting; events and `status.loadBalancer`.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};

pub mod controller;
pub mod model;
pub mod proxy;
pub mod router;
pub mod tls;

pub use model::CONTROLLER;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("binding {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

/// How the controller runs on this node.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where plain HTTP is served (port 80 by default).
    pub http: SocketAddr,
    /// Where HTTPS is served (port 443 by default).
    pub https: SocketAddr,
    /// The node's address, reported in `status.loadBalancer.ingress`.
    pub node_address: IpAddr,
    /// The node's name (the events' source host).
    pub node_name: String,
}

/// State shared by the listeners and the controller.
#[derive(Default)]
pub struct Shared {
    snapshot: RwLock<Arc<model::Snapshot>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

impl Shared {
    /// The snapshot requests are served from now.
    pub fn snapshot(&self) -> Arc<model::Snapshot> {
        match self.snapshot.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn replace(&self, snap: model::Snapshot) {
        let snap = Arc::new(snap);
        match self.snapshot.write() {
            Ok(mut s) => *s = snap,
            Err(poisoned) => *poisoned.into_inner() = snap,
        }
    }
}

/// The listeners, bound: binding errors surface before anything runs.
pub struct Listeners {
    http: tokio::net::TcpListener,
    https: tokio::net::TcpListener,
}

impl Listeners {
    pub async fn bind(cfg: &Config) -> Result<Self, Error> {
        let bind = |addr: SocketAddr| async move {
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| Error::Bind { addr, source })
        };
        Ok(Self {
            http: bind(cfg.http).await?,
            https: bind(cfg.https).await?,
        })
    }

    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.local_addr().ok()
    }

    pub fn https_addr(&self) -> Option<SocketAddr> {
        self.https.local_addr().ok()
    }
}

/// Runs the proxy and the controller until the task is dropped.
pub async fn run(client: kube::Client, cfg: Config, listeners: Listeners) -> Result<(), Error> {
    let shared = Arc::new(Shared::default());
    let resolver = tls::SniResolver {
        shared: shared.clone(),
        fallback: Arc::new(tls::default_certificate()?),
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls::server_config(resolver)?));
    let proxy = proxy::Proxy::new(shared.clone());
    let http = tokio::spawn(proxy::serve_http(proxy.clone(), listeners.http));
    let https = tokio::spawn(proxy::serve_https(proxy, listeners.https, acceptor));
    controller::run(client, cfg, shared).await;
    http.abort();
    https.abort();
    Ok(())
}
