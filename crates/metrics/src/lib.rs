//! Berth's resource metrics pipeline, as metrics-server (which k3s bundles):
//! every `resolution` (15 s) it scrapes each node agent's `/metrics/resource`
//! ([`scraper`], [`decode`]), keeps the last two points of every node and
//! container ([`storage`]) and serves `metrics.k8s.io/v1beta1` NodeMetrics and
//! PodMetrics ([`api`]) on its own HTTPS listener ([`server`]) with delegated
//! authentication and authorization ([`auth`]). The API server reaches it as
//! any aggregated API: through the APIService `v1beta1.metrics.k8s.io` and the
//! Service `kube-system/metrics-server` that [`register`] applies, so
//! discovery, RBAC and `kubectl top` work as with metrics-server.

pub mod api;
pub mod auth;
pub mod decode;
pub mod register;
pub mod scraper;
pub mod server;
pub mod storage;

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::Notify;
use tracing::{info, warn};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("binding the metrics server on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] server::TlsError),
    #[error(transparent)]
    Client(#[from] scraper::ClientError),
    #[error("the certificate authority has no certificate")]
    NoCa,
}

/// How the metrics server runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it listens; the address must be reachable from the API server
    /// (it is published in the Service's Endpoints).
    pub bind: SocketAddr,
    /// `--metric-resolution`.
    pub resolution: Duration,
    /// `--kubelet-request-timeout`.
    pub kubelet_request_timeout: Duration,
    /// The scraper's client certificate towards kubelets ([`register::SCRAPER_USER`]).
    pub scraper_cert_pem: String,
    pub scraper_key_pem: String,
    /// `--requestheader-client-ca-file` and `--requestheader-allowed-names`.
    pub request_header_ca_pem: String,
    pub request_header_allowed_names: Vec<String>,
    /// `--client-ca-file`.
    pub client_ca_pem: String,
}

impl Config {
    /// metrics-server's defaults as its manifest sets them (15 s resolution, 10 s timeout).
    pub fn new(bind: SocketAddr) -> Self {
        Config {
            bind,
            resolution: Duration::from_secs(15),
            kubelet_request_timeout: Duration::from_secs(10),
            scraper_cert_pem: String::new(),
            scraper_key_pem: String::new(),
            request_header_ca_pem: String::new(),
            request_header_allowed_names: Vec::new(),
            client_ca_pem: String::new(),
        }
    }
}

/// A bound metrics server: [`MetricsServer::run`] serves it.
pub struct MetricsServer {
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    config: Config,
}

impl MetricsServer {
    pub async fn bind(config: Config) -> Result<Self, Error> {
        let sans = vec![
            "metrics-server.kube-system.svc".to_string(),
            config.bind.ip().to_string(),
        ];
        let tls = server::tls_config(&config.request_header_ca_pem, &config.client_ca_pem, &sans)?;
        let listener = tokio::net::TcpListener::bind(config.bind)
            .await
            .map_err(|source| Error::Bind {
                addr: config.bind,
                source,
            })?;
        Ok(MetricsServer {
            listener,
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(tls)),
            config,
        })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        server::local(&self.listener)
    }

    /// Registers the APIService (with the admin `client`), then scrapes and
    /// serves for the life of the process; `client` also lists nodes and pods
    /// and makes the reviews.
    pub async fn run(self, client: kube::Client) -> Result<(), Error> {
        let addr = self.local_addr().unwrap_or(self.config.bind);
        let kubelets = scraper::KubeletClient::new(
            &self.config.scraper_cert_pem,
            &self.config.scraper_key_pem,
            self.config.kubelet_request_timeout,
        )?;
        let rh_subject = auth::subject_of(&self.config.request_header_ca_pem).ok_or(Error::NoCa)?;
        let client_subject = auth::subject_of(&self.config.client_ca_pem).ok_or(Error::NoCa)?;
        let ignored = Arc::new(Notify::new());
        let (nodes, _node_task) = berth_runtime::reflect::notifying_store(&client, ignored.clone());
        let (pods, _pod_task) = berth_runtime::reflect::notifying_store(&client, ignored);
        let storage = Arc::new(RwLock::new(storage::Storage::new(self.config.resolution)));
        let shared = Arc::new(server::Shared {
            storage: storage.clone(),
            nodes: nodes.clone(),
            pods,
            delegation: auth::Delegation::new(
                auth::ApiReviewer(client.clone()),
                self.config.request_header_allowed_names.clone(),
            ),
            request_header_ca_subject: rh_subject,
            client_ca_subject: client_subject,
        });
        tokio::spawn(scraper::run(
            kubelets,
            nodes,
            storage,
            self.config.resolution,
        ));
        let registering = client.clone();
        tokio::spawn(async move {
            // The API may still be starting: retry until the objects are in.
            let mut delay = Duration::from_millis(200);
            loop {
                match register::apply(&registering, addr).await {
                    Ok(()) => {
                        info!(%addr, "registered APIService v1beta1.metrics.k8s.io");
                        return;
                    }
                    Err(e) => warn!(error = %e, "registering the metrics APIService; retrying"),
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(10));
            }
        });
        info!(%addr, "metrics server listening (HTTPS)");
        server::serve(self.listener, self.acceptor, shared).await;
        Ok(())
    }
}
