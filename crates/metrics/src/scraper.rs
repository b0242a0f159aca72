//! Scrapes every node agent's `/metrics/resource` once per resolution, all
//! nodes at once, as metrics-server's scraper: the address is the node's first
//! InternalIP (then ExternalIP, then an IP Hostname, metrics-server's default
//! `--kubelet-preferred-address-types`), the port its
//! `status.daemonEndpoints.kubeletEndpoint`. The kubelet's self-signed serving
//! certificate is not verified (metrics-server's `--kubelet-insecure-tls`,
//! since Berth's node agents do not get serving certificates from the CA); the
//! client certificate is Berth's `system:metrics-server`, authorized by the
//! kubelet on `nodes/metrics`.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::Store;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tracing::{debug, info, warn};

use crate::decode::{self, Batch};
use crate::storage::Storage;

/// Most a scrape body may hold (100k containers' series fit well within it).
const MAX_BODY: usize = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("kubelet client certificate: {0}")]
    Certificate(String),
}

/// HTTPS to node agents with the scraper's client certificate.
#[derive(Clone)]
pub struct KubeletClient {
    tls: TlsConnector,
    timeout: Duration,
}

impl KubeletClient {
    pub fn new(cert_pem: &str, key_pem: &str, timeout: Duration) -> Result<Self, ClientError> {
        let cfg = berth_runtime::tls::kubelet_client_config(cert_pem, key_pem)
            .map_err(ClientError::Certificate)?;
        Ok(KubeletClient {
            tls: TlsConnector::from(Arc::new(cfg)),
            timeout,
        })
    }

    /// GET `path` from `addr`: the body of a 200, or why not.
    pub async fn get(&self, addr: SocketAddr, path: &str) -> Result<Bytes, String> {
        tokio::time::timeout(self.timeout, self.get_inner(addr, path))
            .await
            .map_err(|_| {
                format!(
                    "request to https://{addr}{path} timed out after {:?}",
                    self.timeout
                )
            })?
    }

    async fn get_inner(&self, addr: SocketAddr, path: &str) -> Result<Bytes, String> {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let _ = tcp.set_nodelay(true);
        let tls = self
            .tls
            .connect(ServerName::IpAddress(addr.ip().into()), tcp)
            .await
            .map_err(|e| e.to_string())?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let req = http::Request::get(path)
            .header(http::header::HOST, addr.to_string())
            .header(http::header::USER_AGENT, "berth-metrics-server")
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = http_body_util::Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        if !status.is_success() {
            return Err(format!(
                "request failed, status: \"{} {}\"",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            ));
        }
        Ok(body)
    }
}

/// On Berth's simulated nodes: the base URL of their synthetic stats
/// (`https://127.0.0.1:P/nodes/<name>`), served by the simulator since
/// simulated nodes have no kubelet port.
pub const SIM_STATS_ENDPOINT_ANNOTATION: &str = "sim.berth.dev/stats-endpoint";

/// Where a node's resource metrics are scraped: its kubelet, or the
/// simulator's endpoint for a simulated node.
pub fn scrape_target(node: &Node) -> Option<(SocketAddr, String)> {
    let sim = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SIM_STATS_ENDPOINT_ANNOTATION));
    if let Some(url) = sim {
        let rest = url.strip_prefix("https://")?;
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        let addr = host.parse().ok()?;
        return Some((addr, format!("/{path}/metrics/resource")));
    }
    Some((kubelet_addr(node)?, "/metrics/resource".to_string()))
}

/// Where a node's kubelet listens.
pub fn kubelet_addr(node: &Node) -> Option<SocketAddr> {
    let status = node.status.as_ref()?;
    let port = status
        .daemon_endpoints
        .as_ref()?
        .kubelet_endpoint
        .as_ref()?
        .port;
    let port = u16::try_from(port).ok().filter(|p| *p != 0)?;
    let addrs = status.addresses.as_deref().unwrap_or(&[]);
    ["InternalIP", "ExternalIP", "Hostname"]
        .iter()
        .find_map(|t| {
            addrs
                .iter()
                .filter(|a| a.type_ == *t)
                .find_map(|a| a.address.parse::<IpAddr>().ok())
        })
        .map(|ip| SocketAddr::new(ip, port))
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// One scrape of every node; nodes that fail are left out (and logged).
pub async fn scrape_all(client: &KubeletClient, nodes: &[Arc<Node>]) -> Vec<(String, Batch)> {
    let scrapes = nodes.iter().filter_map(|n| {
        let name = n.metadata.name.clone()?;
        let target = scrape_target(n);
        let client = client.clone();
        Some(async move {
            let Some((addr, path)) = target else {
                debug!(node = %name, "no kubelet address; not scraped");
                return None;
            };
            let started = now_ms();
            match client.get(addr, &path).await {
                Ok(body) => match decode::decode(&String::from_utf8_lossy(&body), started) {
                    Ok(b) => Some((name, b)),
                    Err(e) => {
                        warn!(node = %name, error = %e, "failed decoding node metrics");
                        None
                    }
                },
                Err(e) => {
                    warn!(node = %name, %addr, error = %e, "failed to scrape node");
                    None
                }
            }
        })
    });
    futures::future::join_all(scrapes)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Scrapes every `resolution` for the life of the process.
pub async fn run(
    client: KubeletClient,
    nodes: Store<Node>,
    storage: Arc<RwLock<Storage>>,
    resolution: Duration,
) {
    let mut tick = tokio::time::interval(resolution);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let started = Instant::now();
        let list = nodes.state();
        let batches = scrape_all(&client, &list).await;
        let scraped = batches.len();
        if let Ok(mut s) = storage.write() {
            s.store(batches);
        }
        info!(
            nodes = list.len(),
            scraped,
            took = ?started.elapsed(),
            "scraped node metrics"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        DaemonEndpoint, NodeAddress, NodeDaemonEndpoints, NodeStatus,
    };

    fn node(addrs: &[(&str, &str)], port: i32) -> Node {
        Node {
            status: Some(NodeStatus {
                addresses: Some(
                    addrs
                        .iter()
                        .map(|(t, a)| NodeAddress {
                            type_: t.to_string(),
                            address: a.to_string(),
                        })
                        .collect(),
                ),
                daemon_endpoints: Some(NodeDaemonEndpoints {
                    kubelet_endpoint: Some(DaemonEndpoint { port }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn simulated_nodes_are_scraped_at_the_simulator() {
        let mut n = node(&[("InternalIP", "10.40.0.1")], 10250);
        n.metadata.annotations = Some(
            [(
                SIM_STATS_ENDPOINT_ANNOTATION.to_string(),
                "https://127.0.0.1:4711/nodes/sim-node-0".to_string(),
            )]
            .into(),
        );
        assert_eq!(
            scrape_target(&n),
            Some((
                "127.0.0.1:4711".parse().unwrap(),
                "/nodes/sim-node-0/metrics/resource".to_string()
            ))
        );
        let real = node(&[("InternalIP", "10.0.0.1")], 10250);
        assert_eq!(
            scrape_target(&real).map(|t| t.1),
            Some("/metrics/resource".to_string())
        );
    }

    #[test]
    fn preferred_address_types() {
        let cases = [
            (
                vec![
                    ("Hostname", "h"),
                    ("ExternalIP", "1.2.3.4"),
                    ("InternalIP", "10.0.0.1"),
                ],
                10250,
                Some("10.0.0.1:10250"),
            ),
            (
                vec![("Hostname", "h"), ("ExternalIP", "1.2.3.4")],
                10250,
                Some("1.2.3.4:10250"),
            ),
            (vec![("Hostname", "10.0.0.9")], 1, Some("10.0.0.9:1")),
            (vec![("Hostname", "h")], 10250, None),
            (vec![("InternalIP", "10.0.0.1")], 0, None),
        ];
        for (addrs, port, want) in cases {
            assert_eq!(
                kubelet_addr(&node(&addrs, port))
                    .map(|a| a.to_string())
                    .as_deref(),
                want,
                "{addrs:?}"
            );
        }
    }
}
