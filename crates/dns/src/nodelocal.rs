//! NodeLocal DNSCache: a cache on each node, on a link-local address of a dummy
//! interface (`nodelocaldns`, 169.254.20.10; `lo` on kernels without dummy
//! links, see [`crate::iface`]), that answers pods from its cache
//! and sends misses to the cluster DNS over TCP (upstream's node-local-dns runs
//! CoreDNS with `cache 30` / `denial … 5` and `forward … { force_tcp }`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Message, ResponseCode};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::Error;
use crate::cache::{self, Cache, Clock, Key, Kind, SystemClock};
use crate::forward::{self, Forwarder};
use crate::iface::{Links, Placed};
use crate::metrics::{self, Metrics};
use crate::serve::{Handler, Listeners, Proto};
use crate::wire;

pub const DEFAULT_IP: &str = "169.254.20.10";
pub const DEFAULT_INTERFACE: &str = "nodelocaldns";

#[derive(Debug, Clone)]
pub struct Config {
    /// UDP and TCP address served (169.254.20.10:53).
    pub bind: SocketAddr,
    /// Dummy link created to hold the bind address (or `lo`, see
    /// [`crate::iface`]); None: the address is already on the machine (loopback
    /// in tests).
    pub interface: Option<String>,
    /// The cluster DNS, asked over TCP.
    pub upstreams: Vec<SocketAddr>,
    /// Largest TTL a positive answer is kept for.
    pub max_ttl: Duration,
    /// Largest TTL a negative answer is kept for.
    pub negative_ttl: Duration,
    /// Where `/metrics` is served (node-local-dns: 9253); None: nowhere.
    pub metrics: Option<SocketAddr>,
}

/// A running cache; [`NodeLocalDns::shutdown`] removes its address.
pub struct NodeLocalDns {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
    placed: Option<Placed>,
    ip: std::net::IpAddr,
    links: Box<dyn Links>,
}

impl NodeLocalDns {
    /// Puts the address on its interface, binds and starts serving.
    pub async fn start(cfg: Config, links: Box<dyn Links>) -> Result<NodeLocalDns, Error> {
        let ip = cfg.bind.ip();
        let placed = match &cfg.interface {
            Some(name) => Some(links.add(name, ip)?),
            None => None,
        };
        let started = Self::serve(&cfg).await;
        match started {
            Ok((addr, metrics_addr, tasks)) => {
                info!(%addr, ?placed, upstreams = ?cfg.upstreams, "NodeLocal DNSCache serving");
                Ok(NodeLocalDns {
                    addr,
                    metrics_addr,
                    tasks,
                    placed,
                    ip,
                    links,
                })
            }
            Err(e) => {
                if let Some(p) = &placed {
                    let _ = links.remove(p, ip);
                }
                Err(e)
            }
        }
    }

    async fn serve(
        cfg: &Config,
    ) -> Result<(SocketAddr, Option<SocketAddr>, Vec<JoinHandle<()>>), Error> {
        let listeners = Listeners::bind(cfg.bind)
            .await
            .map_err(|source| Error::Bind {
                addr: cfg.bind,
                source,
            })?;
        let metrics_listener = match cfg.metrics {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .map_err(|source| Error::Bind { addr, source })?,
            ),
            None => None,
        };
        let addr = listeners.local_addr();
        let metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
        let metrics = Arc::new(Metrics::new(true));
        let handler = Arc::new(CacheHandler {
            cache: Cache::new(
                cfg.max_ttl,
                cfg.negative_ttl,
                cache::DEFAULT_CAPACITY,
                SystemClock,
            ),
            forwarder: Forwarder::new(cfg.upstreams.clone(), forward::TIMEOUT),
            metrics: metrics.clone(),
        });
        let mut tasks = vec![tokio::spawn(listeners.serve(handler))];
        if let Some(l) = metrics_listener {
            tasks.push(tokio::spawn(metrics::serve(l, metrics)));
        }
        Ok((addr, metrics_addr, tasks))
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Stops serving and removes the address (and the dummy link).
    pub async fn shutdown(self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Some(p) = &self.placed {
            match self.links.remove(p, self.ip) {
                Ok(()) => info!(placed = ?p, "removed the NodeLocal DNSCache address"),
                Err(e) => warn!(placed = ?p, error = %e, "removing the NodeLocal DNSCache address"),
            }
        }
    }
}

struct CacheHandler<C: Clock> {
    cache: Cache<C>,
    forwarder: Forwarder,
    metrics: Arc<Metrics>,
}

impl<C: Clock + 'static> Handler for CacheHandler<C> {
    async fn handle(&self, raw: &[u8], proto: Proto) -> Option<Vec<u8>> {
        crate::serve::respond(&self.metrics, raw, |req| async move {
            self.answer(&req, raw, proto).await
        })
        .await
    }
}

impl<C: Clock> CacheHandler<C> {
    async fn answer(&self, req: &Message, raw: &[u8], proto: Proto) -> Vec<u8> {
        let qtype = req.queries[0].query_type();
        self.metrics
            .requests
            .get_or_create(&metrics::labels(&[
                ("proto", proto.label()),
                ("type", &qtype.to_string()),
            ]))
            .inc();
        let limit = (proto == Proto::Udp).then(|| wire::udp_limit(req));
        let key = Key::of(req);
        if let Some((mut cached, kind)) = key.as_ref().and_then(|k| self.cache.get(k)) {
            let label = match kind {
                Kind::Positive => "success",
                Kind::Negative => "denial",
            };
            self.metrics
                .cache_hits
                .get_or_create(&metrics::labels(&[("type", label)]))
                .inc();
            cached.metadata.id = req.metadata.id;
            cached.metadata.recursion_desired = req.metadata.recursion_desired;
            cached.queries = req.queries.clone();
            cached.edns = wire::response_to(req).edns;
            return wire::encode(&cached, limit);
        }
        self.metrics.cache_misses.inc();
        // Always TCP to the cluster DNS: no UDP conntrack entries, no truncation.
        match self.forwarder.tcp(raw).await {
            Ok((reply, to)) => {
                self.metrics
                    .forwards
                    .get_or_create(&metrics::labels(&[
                        ("to", &to.to_string()),
                        ("proto", "tcp"),
                    ]))
                    .inc();
                match Message::from_vec(&reply) {
                    Ok(msg) => {
                        if let Some(k) = key {
                            self.cache.insert(k, &msg);
                            self.metrics.cache_entries.set(self.cache.len() as i64);
                        }
                        if limit.is_some_and(|l| reply.len() > l) {
                            wire::encode(&msg, limit)
                        } else {
                            reply
                        }
                    }
                    Err(e) => {
                        debug!(error = %e, "upstream reply does not parse");
                        wire::error(req, ResponseCode::ServFail)
                    }
                }
            }
            Err(e) => {
                debug!(error = %e, "forwarding to the cluster DNS");
                wire::error(req, ResponseCode::ServFail)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default, Clone)]
    struct FakeLinks(Arc<Mutex<Vec<String>>>);

    impl Links for FakeLinks {
        fn add(&self, name: &str, ip: std::net::IpAddr) -> Result<Placed, Error> {
            self.0.lock().unwrap().push(format!("add {name} {ip}"));
            Ok(Placed::Dummy(name.into()))
        }
        fn remove(&self, placed: &Placed, ip: std::net::IpAddr) -> Result<(), Error> {
            self.0
                .lock()
                .unwrap()
                .push(format!("remove {placed:?} {ip}"));
            Ok(())
        }
    }

    fn cfg(bind: &str) -> Config {
        Config {
            bind: bind.parse().unwrap(),
            interface: Some("nodelocaldns".into()),
            upstreams: vec!["127.0.0.1:1".parse().unwrap()],
            max_ttl: cache::DEFAULT_MAX_TTL,
            negative_ttl: cache::DEFAULT_NEGATIVE_TTL,
            metrics: None,
        }
    }

    #[tokio::test]
    async fn the_interface_lives_as_long_as_the_cache() {
        let links = FakeLinks::default();
        let n = NodeLocalDns::start(cfg("127.0.0.1:0"), Box::new(links.clone()))
            .await
            .unwrap();
        assert_ne!(n.local_addr().port(), 0);
        n.shutdown().await;
        assert_eq!(
            *links.0.lock().unwrap(),
            vec![
                "add nodelocaldns 127.0.0.1",
                "remove Dummy(\"nodelocaldns\") 127.0.0.1"
            ]
        );
    }

    #[tokio::test]
    async fn a_failed_bind_removes_the_interface_again() {
        let taken = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let links = FakeLinks::default();
        let err = NodeLocalDns::start(cfg(&format!("127.0.0.1:{port}")), Box::new(links.clone()))
            .await
            .err()
            .expect("bind fails");
        assert!(err.to_string().contains("binding"), "{err}");
        assert_eq!(
            *links.0.lock().unwrap(),
            vec![
                "add nodelocaldns 127.0.0.1",
                "remove Dummy(\"nodelocaldns\") 127.0.0.1"
            ]
        );
    }
}
