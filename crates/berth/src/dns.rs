//! Cluster DNS (`berth server`, a control-plane component as k3s's CoreDNS) and
//! NodeLocal DNSCache (with the node agent, `--node-local-dns`).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Cluster DNS flags (`berth server`).
#[derive(clap::Args, Debug, Clone)]
pub struct ClusterDnsArgs {
    /// Do not run the cluster DNS (as k3s's --disable coredns).
    #[arg(long)]
    pub disable_dns: bool,
    /// UDP and TCP address the cluster DNS serves (default: <node-ip>:53). The
    /// `kube-dns` Service (--cluster-dns) has Endpoints naming it.
    #[arg(long)]
    pub cluster_dns_bind: Option<SocketAddr>,
    /// Where the cluster DNS serves /metrics (default: <node-ip>:9153, CoreDNS's port).
    #[arg(long)]
    pub cluster_dns_metrics_bind: Option<SocketAddr>,
    /// Resolvers for names outside the cluster domain (default: the nameservers
    /// of /etc/resolv.conf), e.g. 127.0.0.1:5353.
    #[arg(long, value_delimiter = ',')]
    pub cluster_dns_upstream: Vec<SocketAddr>,
}

/// NodeLocal DNSCache flags (`berth server` and `berth agent`).
#[derive(clap::Args, Debug, Clone)]
pub struct NodeLocalDnsArgs {
    /// Run NodeLocal DNSCache on this node: pods' nameserver becomes its address.
    #[arg(long)]
    pub node_local_dns: bool,
    /// Its UDP and TCP address. Unless on loopback, the address goes on a dummy
    /// interface (--node-local-dns-interface; on `lo` where the kernel has no
    /// dummy links) at start, and is removed at stop.
    #[arg(long, default_value = "169.254.20.10:53")]
    pub node_local_dns_bind: SocketAddr,
    /// The dummy interface holding the address.
    #[arg(long, default_value = berth_dns::nodelocal::DEFAULT_INTERFACE)]
    pub node_local_dns_interface: String,
    /// Where misses go, over TCP (default: the first --cluster-dns, port 53).
    #[arg(long, value_delimiter = ',')]
    pub node_local_dns_upstream: Vec<SocketAddr>,
    /// Largest TTL (seconds) a positive answer is cached for.
    #[arg(long, default_value_t = 30)]
    pub node_local_dns_ttl: u64,
    /// Largest TTL (seconds) a negative answer (NXDOMAIN, NODATA) is cached for.
    #[arg(long, default_value_t = 5)]
    pub node_local_dns_negative_ttl: u64,
    /// Where it serves /metrics (coredns_cache_hits_total, _misses_total,
    /// coredns_forward_requests_total{proto="tcp"}); node-local-dns's port.
    #[arg(long, default_value = "127.0.0.1:9253")]
    pub node_local_dns_metrics_bind: SocketAddr,
}

fn node_ip() -> IpAddr {
    berth_kubelet::agent::machine::host_ipv4()
        .map(IpAddr::from)
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

/// Binds and starts the cluster DNS; a failure is logged (port 53 may be taken
/// or need privileges) and the server goes on without it.
pub async fn start_cluster_dns(
    client: kube::Client,
    args: &ClusterDnsArgs,
    cluster_dns: &[String],
    cluster_domain: &str,
) {
    if args.disable_dns {
        return;
    }
    let node = node_ip();
    let bind = args.cluster_dns_bind.unwrap_or(SocketAddr::new(node, 53));
    let mut upstreams = if args.cluster_dns_upstream.is_empty() {
        berth_dns::cluster::Config::system_upstreams()
    } else {
        args.cluster_dns_upstream.clone()
    };
    // A node whose resolv.conf names the cluster DNS itself would loop (what
    // CoreDNS's loop plugin detects): such upstreams are dropped.
    let own: Vec<IpAddr> = cluster_dns
        .iter()
        .filter_map(|s| s.parse().ok())
        .chain([bind.ip()])
        .collect();
    upstreams.retain(|u| !(u.port() == bind.port() && own.contains(&u.ip())) && *u != bind);
    if upstreams.is_empty() {
        tracing::warn!(
            "cluster DNS: no upstream resolvers; names outside the cluster get SERVFAIL"
        );
    }
    let cfg = berth_dns::cluster::Config {
        bind,
        metrics: Some(
            args.cluster_dns_metrics_bind
                .unwrap_or(SocketAddr::new(bind.ip(), 9153)),
        ),
        domain: cluster_domain.to_string(),
        service_ip: cluster_dns.first().and_then(|s| s.parse().ok()),
        advertise: if bind.ip().is_unspecified() {
            node
        } else {
            bind.ip()
        },
        upstreams,
    };
    match berth_dns::cluster::ClusterDns::bind(cfg).await {
        Ok(dns) => {
            println!("Cluster DNS at {}", dns.local_addr());
            tokio::spawn(dns.run(client));
        }
        Err(e) => {
            tracing::error!(error = %e, "cluster DNS not started (--cluster-dns-bind, or --disable-dns)")
        }
    }
}

/// The nameserver pods get when NodeLocal DNSCache is on.
pub fn node_local_nameserver(args: &NodeLocalDnsArgs) -> Option<String> {
    args.node_local_dns
        .then(|| args.node_local_dns_bind.ip().to_string())
}

/// Starts NodeLocal DNSCache when enabled; a failure is logged, not fatal.
pub async fn start_node_local_dns(
    args: &NodeLocalDnsArgs,
    cluster_dns: &[String],
) -> Option<berth_dns::nodelocal::NodeLocalDns> {
    if !args.node_local_dns {
        return None;
    }
    let upstreams = if args.node_local_dns_upstream.is_empty() {
        cluster_dns
            .iter()
            .filter_map(|s| s.parse::<IpAddr>().ok())
            .map(|ip| SocketAddr::new(ip, 53))
            .collect()
    } else {
        args.node_local_dns_upstream.clone()
    };
    let cfg = berth_dns::nodelocal::Config {
        bind: args.node_local_dns_bind,
        interface: (!args.node_local_dns_bind.ip().is_loopback())
            .then(|| args.node_local_dns_interface.clone()),
        upstreams,
        max_ttl: Duration::from_secs(args.node_local_dns_ttl),
        negative_ttl: Duration::from_secs(args.node_local_dns_negative_ttl),
        metrics: Some(args.node_local_dns_metrics_bind),
    };
    match berth_dns::nodelocal::NodeLocalDns::start(cfg, Box::new(berth_dns::iface::IpCommand))
        .await
    {
        Ok(n) => {
            println!(
                "NodeLocal DNSCache at {} (metrics http://{}/metrics)",
                n.local_addr(),
                n.metrics_addr().map(|a| a.to_string()).unwrap_or_default()
            );
            Some(n)
        }
        Err(e) => {
            tracing::error!(error = %e, "NodeLocal DNSCache not started");
            None
        }
    }
}
