//! The metrics server inside `berth server` (k3s bundles metrics-server; its
//! `--disable metrics-server` is `--disable-metrics-server` here).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use anyhow::{Context, Result};
use tracing::error;

#[derive(clap::Args, Debug, Clone)]
pub struct MetricsArgs {
    /// Do not run the metrics server (metrics.k8s.io, `kubectl top`, resource-metric HPAs).
    #[arg(long)]
    pub disable_metrics_server: bool,
    /// The metrics server's HTTPS port on this machine's address (0 = any free
    /// port; the API server finds it through the Service kube-system/metrics-server).
    #[arg(long, default_value_t = 0)]
    pub metrics_server_port: u16,
    /// How often every node agent is scraped (as metrics-server's --metric-resolution).
    #[arg(long, default_value = "15s", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    pub metric_resolution: std::time::Duration,
    /// How long one scrape may take (as metrics-server's --kubelet-request-timeout).
    #[arg(long, default_value = "10s", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    pub kubelet_request_timeout: std::time::Duration,
}

fn read(dir: &Path, file: &str) -> Result<String> {
    let path = dir.join(file);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// Binds the metrics server on `ip` and runs it with `client` (the admin's).
pub async fn start(
    client: kube::Client,
    args: &MetricsArgs,
    data_dir: &Path,
    ip: IpAddr,
) -> Result<()> {
    let tls = data_dir.join("tls");
    let mut cfg = berth_metrics::Config::new(SocketAddr::new(ip, args.metrics_server_port));
    cfg.resolution = args.metric_resolution;
    cfg.kubelet_request_timeout = args.kubelet_request_timeout;
    cfg.scraper_cert_pem = read(&tls, "client-metrics-server.crt")?;
    cfg.scraper_key_pem = read(&tls, "client-metrics-server.key")?;
    cfg.request_header_ca_pem = read(&tls, "request-header-ca.crt")?;
    cfg.request_header_allowed_names = vec![berth_apiserver::pki::PROXY_CLIENT_NAME.to_string()];
    cfg.client_ca_pem = read(&tls, "server-ca.crt")?;
    let server = berth_metrics::MetricsServer::bind(cfg).await?;
    tokio::spawn(async move {
        if let Err(e) = server.run(client).await {
            error!(error = %e, "metrics server stopped");
        }
    });
    Ok(())
}
