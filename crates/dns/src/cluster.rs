//! The cluster DNS component: serves the zone built from watches of Services and
//! EndpointSlices, forwards other names to the node's resolvers, and keeps the
//! `kube-dns` Service (the cluster DNS IP) with Endpoints pointing at itself.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use berth_runtime::reflect::notifying_store;
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, Record, RecordType};
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::Store;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::Error;
use crate::forward::{self, Forwarder};
use crate::metrics::{self, Metrics};
use crate::records::{Data, Lookup, Zone};
use crate::serve::{Handler, Listeners, Proto};
use crate::wire;

/// Changes arriving within this window make one rebuild.
const DEBOUNCE: Duration = Duration::from_millis(20);
/// How often the kube-dns Service and Endpoints are checked.
const UPKEEP: Duration = Duration::from_secs(30);
pub const SERVICE: &str = "kube-dns";
pub const NAMESPACE: &str = "kube-system";

#[derive(Debug, Clone)]
pub struct Config {
    /// UDP and TCP address served (k3s's CoreDNS: port 53).
    pub bind: SocketAddr,
    /// Where `/metrics` is served (CoreDNS: 9153); None: nowhere.
    pub metrics: Option<SocketAddr>,
    /// The cluster domain, e.g. `cluster.local`.
    pub domain: String,
    /// The `kube-dns` Service's ClusterIP (`--cluster-dns`); None: no Service.
    pub service_ip: Option<IpAddr>,
    /// The address the Service's Endpoints name (the node's, when `bind` is 0.0.0.0).
    pub advertise: IpAddr,
    /// Resolvers for names outside the cluster domain.
    pub upstreams: Vec<SocketAddr>,
}

impl Config {
    /// The resolvers of the node's /etc/resolv.conf.
    pub fn system_upstreams() -> Vec<SocketAddr> {
        std::fs::read_to_string("/etc/resolv.conf")
            .map(|t| forward::nameservers(&t))
            .unwrap_or_default()
    }
}

/// Bound listeners, ready to [`ClusterDns::run`].
pub struct ClusterDns {
    cfg: Config,
    listeners: Listeners,
    metrics_listener: Option<TcpListener>,
}

impl ClusterDns {
    pub async fn bind(cfg: Config) -> Result<ClusterDns, Error> {
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
        Ok(ClusterDns {
            cfg,
            listeners,
            metrics_listener,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listeners.local_addr()
    }

    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    /// Starts the listeners with an empty (not yet synced) zone.
    fn start(self) -> (Arc<ClusterHandler>, Config, SocketAddr, Option<u16>) {
        let served = self.local_addr();
        let metrics_port = self.metrics_addr().map(|a| a.port());
        let metrics = Arc::new(Metrics::new(false));
        let handler = Arc::new(ClusterHandler {
            zone: RwLock::new(None),
            empty: Zone::empty(&self.cfg.domain),
            forwarder: Forwarder::new(self.cfg.upstreams.clone(), forward::TIMEOUT),
            metrics: metrics.clone(),
        });
        tokio::spawn(self.listeners.serve(handler.clone()));
        if let Some(l) = self.metrics_listener {
            tokio::spawn(metrics::serve(l, metrics));
        }
        (handler, self.cfg, served, metrics_port)
    }

    /// Serves a fixed zone, without the API (benchmarks). Returns at once.
    pub fn serve_zone(self, zone: Zone) {
        let (handler, ..) = self.start();
        *handler.zone.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(zone));
    }

    /// Serves until the task is dropped.
    pub async fn run(self, client: kube::Client) {
        let (handler, cfg, served, metrics_port) = self.start();
        if let Some(ip) = cfg.service_ip {
            let kube_dns = KubeDns {
                client: client.clone(),
                cluster_ip: ip,
                advertise: cfg.advertise,
                dns_port: served.port(),
                metrics_port,
            };
            tokio::spawn(async move {
                loop {
                    kube_dns.upkeep().await;
                    tokio::time::sleep(UPKEEP).await;
                }
            });
        }
        info!(addr = %served, domain = %cfg.domain, "cluster DNS serving");
        watch_zone(client, &cfg.domain, &handler).await;
    }
}

/// Rebuilds the zone after every change to Services or EndpointSlices.
async fn watch_zone(client: kube::Client, domain: &str, handler: &ClusterHandler) {
    let changed = Arc::new(Notify::new());
    let services: Store<Service> = notifying_store(&client, changed.clone()).0;
    let slices: Store<EndpointSlice> = notifying_store(&client, changed.clone()).0;
    if services.wait_until_ready().await.is_err() || slices.wait_until_ready().await.is_err() {
        warn!("cluster DNS: watches never became ready");
        return;
    }
    loop {
        let svcs = services.state();
        let eps = slices.state();
        let svc_refs: Vec<&Service> = svcs.iter().map(|s| s.as_ref()).collect();
        let ep_refs: Vec<&EndpointSlice> = eps.iter().map(|s| s.as_ref()).collect();
        let zone = Arc::new(Zone::build(domain, &svc_refs, &ep_refs));
        *handler.zone.write().unwrap_or_else(|e| e.into_inner()) = Some(zone);
        changed.notified().await;
        tokio::time::sleep(DEBOUNCE).await;
    }
}

struct ClusterHandler {
    /// None until the first sync: cluster names get SERVFAIL, not a wrong NXDOMAIN.
    zone: RwLock<Option<Arc<Zone>>>,
    empty: Zone,
    forwarder: Forwarder,
    metrics: Arc<Metrics>,
}

impl Handler for ClusterHandler {
    async fn handle(&self, raw: &[u8], proto: Proto) -> Option<Vec<u8>> {
        crate::serve::respond(&self.metrics, raw, |req| async move {
            self.answer(&req, raw, proto).await
        })
        .await
    }
}

impl ClusterHandler {
    async fn answer(&self, req: &Message, raw: &[u8], proto: Proto) -> Vec<u8> {
        let q = &req.queries[0];
        let qtype = q.query_type();
        self.metrics
            .requests
            .get_or_create(&metrics::labels(&[
                ("proto", proto.label()),
                ("type", &qtype.to_string()),
            ]))
            .inc();
        let name = q.name().to_ascii();
        let zone = self.zone.read().unwrap_or_else(|e| e.into_inner()).clone();
        let lookup = match &zone {
            Some(z) => z.lookup(&name, qtype),
            None => match self.empty.lookup(&name, qtype) {
                Lookup::Forward => Lookup::Forward,
                Lookup::Answer(_) => return wire::error(req, ResponseCode::ServFail),
            },
        };
        match lookup {
            Lookup::Answer(ans) => {
                let mut m = wire::answer(req, self.empty.domain(), &ans);
                wire::spread_srv_weights(&mut m);
                if let (Some(z), [(_, Data::Cname(target))]) = (&zone, ans.answers.as_slice())
                    && qtype != RecordType::CNAME
                {
                    let chased = self.chase(z, target, qtype, proto).await;
                    m.answers.extend(chased);
                }
                let limit = (proto == Proto::Udp).then(|| wire::udp_limit(req));
                wire::encode(&m, limit)
            }
            Lookup::Forward => {
                let result = match proto {
                    Proto::Udp => self.forwarder.udp(raw).await,
                    Proto::Tcp => self.forwarder.tcp(raw).await,
                };
                match result {
                    Ok((reply, to)) => {
                        self.metrics
                            .forwards
                            .get_or_create(&metrics::labels(&[
                                ("to", &to.to_string()),
                                ("proto", proto.label()),
                            ]))
                            .inc();
                        reply
                    }
                    Err(e) => {
                        debug!(name = %name, error = %e, "forwarding");
                        wire::error(req, ResponseCode::ServFail)
                    }
                }
            }
        }
    }
}

impl ClusterHandler {
    /// The records of an ExternalName Service's target, so stub resolvers (which
    /// do not follow CNAMEs) get addresses, as CoreDNS's kubernetes plugin
    /// resolves them through its upstream. Nothing when that fails.
    async fn chase(
        &self,
        zone: &Zone,
        target: &str,
        qtype: RecordType,
        proto: Proto,
    ) -> Vec<Record> {
        if let Lookup::Answer(ans) = zone.lookup(target, qtype) {
            let Ok(name) = Name::from_ascii(format!("{target}.")) else {
                return Vec::new();
            };
            let q = query_for(name, qtype);
            return wire::answer(&q, zone.domain(), &ans).answers;
        }
        let Ok(name) = Name::from_ascii(format!("{target}.")) else {
            return Vec::new();
        };
        let Ok(raw) = query_for(name, qtype).to_vec() else {
            return Vec::new();
        };
        let result = match proto {
            Proto::Udp => self.forwarder.udp(&raw).await,
            Proto::Tcp => self.forwarder.tcp(&raw).await,
        };
        match result.map(|(reply, to)| (Message::from_vec(&reply), to)) {
            Ok((Ok(reply), to)) => {
                self.metrics
                    .forwards
                    .get_or_create(&metrics::labels(&[
                        ("to", &to.to_string()),
                        ("proto", proto.label()),
                    ]))
                    .inc();
                reply.answers
            }
            _ => Vec::new(),
        }
    }
}

fn query_for(name: Name, qtype: RecordType) -> Message {
    let mut m = Message::query();
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(name, qtype));
    m
}

/// The `kube-dns` Service (as k3s's CoreDNS manifest names it), without a
/// selector, and its Endpoints naming this server; EndpointSlice mirroring
/// makes the slices the service proxy reads.
struct KubeDns {
    client: kube::Client,
    cluster_ip: IpAddr,
    advertise: IpAddr,
    dns_port: u16,
    metrics_port: Option<u16>,
}

impl KubeDns {
    fn service(&self) -> Result<Service, serde_json::Error> {
        let ip = self.cluster_ip.to_string();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": SERVICE,
                "namespace": NAMESPACE,
                "labels": {
                    "k8s-app": "kube-dns",
                    "kubernetes.io/cluster-service": "true",
                    "kubernetes.io/name": "CoreDNS",
                },
                "annotations": {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"},
            },
            "spec": {
                "clusterIP": ip,
                "clusterIPs": [ip],
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": self.dns_port},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": self.dns_port},
                    {"name": "metrics", "port": 9153, "protocol": "TCP",
                     "targetPort": self.metrics_port.unwrap_or(9153)},
                ],
            },
        }))
    }

    fn endpoints(&self) -> Result<Endpoints, serde_json::Error> {
        let mut ports = vec![
            serde_json::json!({"name": "dns", "port": self.dns_port, "protocol": "UDP"}),
            serde_json::json!({"name": "dns-tcp", "port": self.dns_port, "protocol": "TCP"}),
        ];
        if let Some(p) = self.metrics_port {
            ports.push(serde_json::json!({"name": "metrics", "port": p, "protocol": "TCP"}));
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {
                "name": SERVICE,
                "namespace": NAMESPACE,
                "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"},
            },
            "subsets": [{"addresses": [{"ip": self.advertise.to_string()}], "ports": ports}],
        }))
    }

    async fn upkeep(&self) {
        if let Err(e) = self.ensure_service().await {
            warn!(error = %e, "cluster DNS: creating Service kube-system/kube-dns");
        }
        // Endpoints may not name loopback addresses (API validation): a server
        // serving on loopback (tests) has no Endpoints.
        if self.advertise.is_loopback() || self.advertise.is_unspecified() {
            return;
        }
        if let Err(e) = self.ensure_endpoints().await {
            warn!(error = %e, "cluster DNS: updating Endpoints kube-system/kube-dns");
        }
    }

    async fn ensure_service(&self) -> Result<(), kube::Error> {
        let api: Api<Service> = Api::namespaced(self.client.clone(), NAMESPACE);
        if api.get_opt(SERVICE).await?.is_some() {
            return Ok(());
        }
        let svc = self.service().map_err(kube::Error::SerdeError)?;
        match api.create(&PostParams::default(), &svc).await {
            Ok(_) => {
                info!(cluster_ip = %self.cluster_ip, "created Service kube-system/kube-dns");
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn ensure_endpoints(&self) -> Result<(), kube::Error> {
        let api: Api<Endpoints> = Api::namespaced(self.client.clone(), NAMESPACE);
        let mut want = self.endpoints().map_err(kube::Error::SerdeError)?;
        match api.get_opt(SERVICE).await? {
            None => {
                api.create(&PostParams::default(), &want).await?;
            }
            Some(have) if have.subsets != want.subsets => {
                want.metadata.resource_version = have.metadata.resource_version;
                api.replace(SERVICE, &PostParams::default(), &want).await?;
            }
            Some(_) => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::RData;

    fn handler(services: serde_json::Value) -> ClusterHandler {
        let svcs: Vec<Service> = serde_json::from_value(services).unwrap();
        let refs: Vec<&Service> = svcs.iter().collect();
        ClusterHandler {
            zone: RwLock::new(Some(Arc::new(Zone::build("cluster.local", &refs, &[])))),
            empty: Zone::empty("cluster.local"),
            forwarder: Forwarder::new(vec![], forward::TIMEOUT),
            metrics: Arc::new(Metrics::new(false)),
        }
    }

    async fn ask(h: &ClusterHandler, name: &str, t: RecordType, proto: Proto) -> Message {
        let raw = query_for(Name::from_ascii(name).unwrap(), t)
            .to_vec()
            .unwrap();
        Message::from_vec(&h.handle(&raw, proto).await.unwrap()).unwrap()
    }

    #[tokio::test]
    async fn external_names_inside_the_cluster_are_chased_and_unsynced_zones_fail() {
        let h = handler(serde_json::json!([
            {"metadata": {"name": "web", "namespace": "default"},
             "spec": {"clusterIP": "10.43.0.20"}},
            {"metadata": {"name": "alias", "namespace": "other"},
             "spec": {"type": "ExternalName", "externalName": "web.default.svc.cluster.local"}},
        ]));
        let m = ask(
            &h,
            "alias.other.svc.cluster.local.",
            RecordType::A,
            Proto::Tcp,
        )
        .await;
        let data: Vec<String> = m
            .answers
            .iter()
            .map(|r| format!("{} {}", r.name, r.data))
            .collect();
        assert_eq!(
            data,
            vec![
                "alias.other.svc.cluster.local. web.default.svc.cluster.local.",
                "web.default.svc.cluster.local. 10.43.0.20"
            ]
        );
        assert!(matches!(m.answers[1].data, RData::A(_)));
        // Outside names with no upstream: SERVFAIL, not a hang.
        let m = ask(&h, "example.test.", RecordType::A, Proto::Udp).await;
        assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
        // Before the first sync, cluster names get SERVFAIL rather than NXDOMAIN.
        *h.zone.write().unwrap() = None;
        let m = ask(
            &h,
            "web.default.svc.cluster.local.",
            RecordType::A,
            Proto::Udp,
        )
        .await;
        assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    }
}
