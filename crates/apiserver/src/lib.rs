//! Berth's API server: Kubernetes' REST API over a [`berth_store::Store`].
//!
//! Layout: `server` (listeners, authn, routing) → `rest` (verbs) / `watch` /
//! `discovery` / `negotiate` (Table, metadata) → `decode` (bodies, field
//! validation) and `strategy` (per-kind rules) → `objects` (storage keys/bytes).

pub mod admission;
pub mod aggregator;
pub mod alloc;
pub mod apiextensions;
pub mod audit;
pub mod authentication;
pub mod authorization;
pub mod bootstrap;
pub mod csr;
pub mod decode;
pub mod discovery;
pub mod encryption;
pub mod endpoints;
pub mod inflight;
pub mod metrics;
pub mod negotiate;
pub mod node_authorizer;
pub mod objects;
pub mod pki;
pub mod proxy;
pub mod rbac;
pub mod request;
pub mod rest;
pub mod reviews;
pub mod server;
pub mod status;
pub mod strategy;
pub mod streaming;
pub mod tokens;
pub mod warnings;
pub mod watch;
pub mod watchcache;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use berth_store::Store;
use tokio::net::TcpListener;
use tracing::info;

/// Namespaces that exist from the start, as upstream's bootstrap creates them.
pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Most events the watch cache keeps over all resources for watchers resuming
/// from a resourceVersion (each resource keeps its last 75 s within this cap).
pub const WATCH_CACHE_EVENTS: usize = 10_000;

#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    pub bind_address: IpAddr,
    /// 0 picks a free port (tests).
    pub secure_port: u16,
    /// Plain HTTP on 127.0.0.1, trusted as admin; for tests only.
    pub insecure_port: Option<u16>,
    /// Extra names and addresses for the serving certificate.
    pub tls_sans: Vec<String>,
    /// Where the admin kubeconfig is written (default `<data-dir>/kubeconfig.yaml`).
    pub kubeconfig: Option<PathBuf>,
    /// Recent events kept for watches resuming from a resourceVersion.
    pub watch_cache_events: usize,
    /// `--service-cidr` and `--service-node-port-range`.
    pub services: alloc::ServiceRanges,
    /// The enabled admission plugins (from [`admission::Config::resolve`]).
    pub admission_plugins: Vec<&'static str>,
    /// `--admission-control-config-file`: an AdmissionConfiguration (only
    /// PodSecurity's configuration is read from it).
    pub admission_config_file: Option<PathBuf>,
    /// `--authorization-mode`, in order.
    pub authorization_modes: Vec<authorization::Mode>,
    /// `--max-requests-inflight` and `--max-mutating-requests-inflight` (0: no limit).
    pub max_requests_inflight: usize,
    pub max_mutating_requests_inflight: usize,
    /// `--encryption-provider-config`: an EncryptionConfiguration whose
    /// resources are encrypted at rest (none: everything is stored plain).
    pub encryption_provider_config: Option<PathBuf>,
    /// `--audit-policy-file` and the log backend's `--audit-log-*`.
    pub audit: audit::Options,
    /// `--anonymous-auth`: requests without credentials are `system:anonymous`
    /// (upstream's default) or, when false, refused with 401.
    pub anonymous_auth: bool,
}

/// The `iss` of ServiceAccount tokens and their default audience (k3s's and
/// most distributions' choice: the in-cluster name of the API server).
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// A bound, not yet serving, API server.
pub struct ApiServer {
    pub secure_addr: SocketAddr,
    pub insecure_addr: Option<SocketAddr>,
    pub kubeconfig: PathBuf,
    pub admin_token: String,
    state: Arc<server::State>,
    secure: TcpListener,
    insecure: Option<TcpListener>,
    acceptor: tokio_rustls::TlsAcceptor,
}

fn tls_config(pki: &pki::Pki) -> Result<rustls::ServerConfig> {
    let certs = rustls_pemfile::certs(&mut pki.serving_cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()?;
    let key = rustls_pemfile::private_key(&mut pki.serving_key_pem.as_bytes())?
        .context("no serving key")?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in rustls_pemfile::certs(&mut pki.ca_pem.as_bytes()) {
        roots.add(ca?)?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
        .allow_unauthenticated()
        .build()?;
    let mut cfg = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

impl ApiServer {
    /// Prepares PKI and kubeconfig, bootstraps system objects, and binds the ports.
    pub async fn bind(config: Config, store: Arc<dyn Store>) -> Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Every reader and writer below (watch cache, REST, allocators) sees
        // plain values; only the store holds them encrypted.
        let store: Arc<dyn Store> = match &config.encryption_provider_config {
            Some(path) => {
                let transformers = encryption::config::load(path)
                    .with_context(|| format!("--encryption-provider-config {}", path.display()))?;
                for (resource, writer) in transformers.describe() {
                    info!(%resource, %writer, "encryption at rest");
                }
                Arc::new(encryption::EncryptedStore::new(
                    store,
                    Arc::new(transformers),
                ))
            }
            None => store,
        };
        // A bad policy or an unwritable log stops the start, before anything listens.
        let auditor = audit::Auditor::start(&config.audit)?;
        let mut sans = config.tls_sans.clone();
        // In-cluster clients dial the `kubernetes` Service's IP and check it,
        // as upstream puts it in the serving certificate.
        if let Some(ip) = config.services.cidr.nth(0) {
            sans.push(ip.to_string());
        }
        if !config.bind_address.is_unspecified() {
            sans.push(config.bind_address.to_string());
        }
        // A bad admission configuration is a start-up error, before anything listens.
        let admission_config = match &config.admission_config_file {
            Some(path) => admission::config_file::AdmissionConfiguration::load(path)
                .map_err(anyhow::Error::msg)?,
            None => Default::default(),
        };
        let pki = pki::load_or_create(&config.data_dir, &sans)?;
        let secure = TcpListener::bind(SocketAddr::new(config.bind_address, config.secure_port))
            .await
            .with_context(|| format!("binding {}:{}", config.bind_address, config.secure_port))?;
        let secure_addr = secure.local_addr()?;
        let insecure = match config.insecure_port {
            Some(p) => Some(
                TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], p)))
                    .await
                    .with_context(|| format!("binding 127.0.0.1:{p}"))?,
            ),
            None => None,
        };
        let insecure_addr = insecure.as_ref().map(|l| l.local_addr()).transpose()?;
        let host = if config.bind_address.is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            config.bind_address.to_string()
        };
        let server_url = match config.bind_address {
            IpAddr::V6(_) if !config.bind_address.is_unspecified() => {
                format!("https://[{host}]:{}", secure_addr.port())
            }
            _ => format!("https://{host}:{}", secure_addr.port()),
        };
        let kubeconfig = config
            .kubeconfig
            .clone()
            .unwrap_or_else(|| config.data_dir.join("kubeconfig.yaml"));
        pki.write_kubeconfig(&kubeconfig, &server_url)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls_config(&pki)?));
        let authorizer = Arc::new(authorization::Authorizer::new(
            config.authorization_modes.clone(),
        ));
        let state = Arc::new(server::State {
            rest: rest::Rest {
                store: store.clone(),
                cache: watchcache::WatchCache::start(
                    store.clone(),
                    watchcache::HistoryLimits::new(config.watch_cache_events),
                )
                .await?,
                services: Arc::new(alloc::Allocator::new(store.clone(), config.services)),
                admission: admission::Chain::configured(
                    &config.admission_plugins,
                    &admission_config,
                ),
                authorizer: authorizer.clone(),
            },
            metrics: metrics::Metrics::default(),
            authenticator: authentication::Authenticator::new(
                pki.admin_token.clone(),
                Arc::new(
                    berth_authn::serviceaccount::Issuer::load_or_create(
                        &config.data_dir.join("tls"),
                        SERVICE_ACCOUNT_ISSUER,
                        vec![SERVICE_ACCOUNT_ISSUER.to_string()],
                    )
                    .context("loading the service account signing key")?,
                ),
                config.anonymous_auth,
            ),
            authorizer,
            audit: auditor,
            inflight: inflight::Limiter::new(
                config.max_requests_inflight,
                config.max_mutating_requests_inflight,
            ),
            server_address: format!("{host}:{}", secure_addr.port()),
            kubelet: streaming::KubeletClient::new(
                &pki.kubelet_client_cert_pem,
                &pki.kubelet_client_key_pem,
            )
            .map_err(|e| tracing::warn!(error = %e, "kubelet client credentials"))
            .ok(),
            proxy_client: Some((
                pki.proxy_client_cert_pem.clone(),
                pki.proxy_client_key_pem.clone(),
            )),
        });
        bootstrap::run(&state.rest).await?;
        apiextensions::install_from_cache(&state.rest);
        bootstrap::extension_apiserver_authentication(
            &state.rest,
            aggregator::authentication_config_map(&pki.ca_pem, &pki.request_header_ca_pem),
        )
        .await?;
        aggregator::autoregister::sync(&state.rest).await;
        tokio::spawn(apiextensions::run(state.clone()));
        tokio::spawn(aggregator::available::run(state.clone()));
        alloc::kubernetes::start(&state, &config, secure_addr)
            .await
            .map_err(|e| anyhow::anyhow!("creating the kubernetes Service: {e}"))?;
        // Render the OpenAPI documents before kubectl's first apply asks for them.
        tokio::task::spawn_blocking(|| {
            berth_api::openapi::cached();
            release_freed_memory();
        });
        Ok(ApiServer {
            secure_addr,
            insecure_addr,
            kubeconfig,
            admin_token: pki.admin_token,
            state,
            secure,
            insecure,
            acceptor,
        })
    }

    /// Serves until `shutdown` flips to true.
    pub async fn serve(self, shutdown: tokio::sync::watch::Receiver<bool>) {
        info!(address = %self.secure_addr, "API server listening (HTTPS)");
        let tls = tokio::spawn(server::serve_tls(
            self.secure,
            self.acceptor,
            self.state.clone(),
            shutdown.clone(),
        ));
        if let Some(l) = self.insecure {
            info!(address = ?self.insecure_addr, "API server listening (plain HTTP, loopback, trusted)");
            let plain = tokio::spawn(server::serve_plain(l, self.state.clone(), shutdown));
            let _ = plain.await;
        }
        let _ = tls.await;
    }
}

/// An API server on loopback with a temporary SQLite store, served in the
/// background: the real thing, for other crates' integration tests. Its plain
/// port is trusted, so a client needs no credentials.
pub struct LocalApiServer {
    pub http: SocketAddr,
    pub dir: PathBuf,
    _shutdown: tokio::sync::watch::Sender<bool>,
}

impl LocalApiServer {
    pub async fn start(tag: &str) -> Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let dir = std::env::temp_dir().join(format!("berth-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let store = Arc::new(berth_store::sqlite::SqliteStore::open(
            &dir.join("state.db"),
        )?);
        let config = Config {
            data_dir: dir.clone(),
            bind_address: IpAddr::from([127, 0, 0, 1]),
            secure_port: 0,
            insecure_port: Some(0),
            tls_sans: vec![],
            kubeconfig: None,
            watch_cache_events: WATCH_CACHE_EVENTS,
            services: Default::default(),
            admission_plugins: admission::Config::default()
                .resolve()
                .map_err(anyhow::Error::msg)?,
            admission_config_file: None,
            authorization_modes: vec![authorization::Mode::Node, authorization::Mode::Rbac],
            max_requests_inflight: inflight::DEFAULT_MAX_REQUESTS_INFLIGHT,
            max_mutating_requests_inflight: inflight::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
            encryption_provider_config: None,
            audit: Default::default(),
            anonymous_auth: true,
        };
        let api = ApiServer::bind(config, store).await?;
        let http = api.insecure_addr.context("no plain port")?;
        let (shutdown, rx) = tokio::sync::watch::channel(false);
        tokio::spawn(api.serve(rx));
        Ok(LocalApiServer {
            http,
            dir,
            _shutdown: shutdown,
        })
    }
}

impl Drop for LocalApiServer {
    fn drop(&mut self) {
        let _ = self._shutdown.send(true);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Rendering the OpenAPI documents builds large temporary values; glibc keeps
/// the freed pages in the process unless asked to give them back.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it takes no
    // pointers from us and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Compacts store history as kube-apiserver does with etcd: every `interval`,
/// to the revision seen one interval earlier, so at least `interval` of history
/// stays available to watchers resuming from a resourceVersion.
pub async fn compactor(store: Arc<dyn Store>, interval: std::time::Duration) {
    let mut previous: Option<i64> = None;
    let mut tick = tokio::time::interval(interval);
    tick.tick().await;
    loop {
        tick.tick().await;
        if let Some(rev) = previous
            && let Err(e) = store.compact(rev).await
        {
            tracing::warn!(error = %e, revision = rev, "compaction failed");
        }
        previous = store.current_revision().await.ok();
    }
}
