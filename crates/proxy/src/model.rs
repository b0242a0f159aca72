//! The desired nftables state for a set of Services, as kube-proxy's nftables
//! mode (pkg/proxy/nftables) shapes it: pure functions from plain data
//! ([`ServicePort`], [`Endpoint`]) to a [`Ruleset`] of chains, verdict maps and
//! sets. Nothing here touches the kernel.
//!
//! Traffic to a ClusterIP (or NodePort) is looked up in the `service-ips`
//! (`service-nodeports`) verdict map, which sends it to the Service port's
//! chain; that chain picks an endpoint chain at random (`numgen random mod N`)
//! or by ClientIP affinity, and the endpoint chain DNATs. Service ports with no
//! usable endpoints are instead in `no-endpoint-services`, checked by filter
//! chains before DNAT, which reject (connection refused at once).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::Ipv4Addr;

use crate::ruleset::{Hook, Map, Ruleset, Set};

#[cfg(test)]
mod tests;

/// The protocols a Service port can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// Upstream's `v1.Protocol` string (`TCP`, `UDP`, `SCTP`); `None` for others.
    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// nft's name for it (`meta l4proto tcp`).
    pub fn nft(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

/// One port of one Service, with what the proxy needs of the Service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicePort {
    pub namespace: String,
    pub name: String,
    /// The port's name (empty for a single unnamed port).
    pub port_name: String,
    pub protocol: Protocol,
    pub cluster_ip: Ipv4Addr,
    pub port: u16,
    /// Set for NodePort and LoadBalancer Services.
    pub node_port: Option<u16>,
    pub external_ips: Vec<Ipv4Addr>,
    /// `sessionAffinity: ClientIP`: how long (seconds) a client sticks to its endpoint.
    pub affinity_timeout: Option<u32>,
    /// `internalTrafficPolicy: Local`.
    pub internal_local: bool,
    /// `externalTrafficPolicy: Local` (only meaningful when externally accessible).
    pub external_local: bool,
}

impl ServicePort {
    /// `ns/name/proto/port`, the base of every chain name of this port.
    pub fn key(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.namespace,
            self.name,
            self.protocol.nft(),
            self.port_name
        )
    }

    /// NodePorts and external IPs: traffic subject to externalTrafficPolicy.
    fn externally_accessible(&self) -> bool {
        self.node_port.is_some() || !self.external_ips.is_empty()
    }
}

/// One endpoint of a Service port, from an EndpointSlice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub ip: Ipv4Addr,
    pub port: u16,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    /// The node the endpoint runs on (`nodeName`), for the Local policies.
    pub node_name: Option<String>,
}

/// What the rules depend on besides Services: this node, and how it tells pod
/// traffic from other traffic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    pub node_name: String,
    /// The cluster's pod network (`--cluster-cidr`): traffic from outside it to a
    /// ClusterIP is masqueraded, as kube-proxy's ClusterCIDR local-traffic detector.
    pub cluster_cidr: Option<(Ipv4Addr, u8)>,
    /// The packet mark bit that asks for masquerade (kube-proxy's --masquerade-bit, 14).
    pub masquerade_bit: u8,
}

impl NodeConfig {
    pub fn new(node_name: impl Into<String>) -> NodeConfig {
        NodeConfig {
            node_name: node_name.into(),
            cluster_cidr: None,
            masquerade_bit: 14,
        }
    }

    fn mark(&self) -> String {
        format!("{:#x}", 1u32 << self.masquerade_bit.min(31))
    }
}

// Well-known names in the table (upstream's).
pub const SERVICES_CHAIN: &str = "services";
pub const MASQUERADING_CHAIN: &str = "masquerading";
pub const MARK_MASQ_CHAIN: &str = "mark-for-masquerade";
pub const ENDPOINTS_CHECK_CHAIN: &str = "service-endpoints-check";
pub const CLUSTER_IPS_CHECK_CHAIN: &str = "cluster-ips-check";
pub const REJECT_CHAIN: &str = "reject-chain";
pub const SERVICE_IPS_MAP: &str = "service-ips";
pub const SERVICE_NODEPORTS_MAP: &str = "service-nodeports";
pub const NO_ENDPOINT_SERVICES_MAP: &str = "no-endpoint-services";
pub const NO_ENDPOINT_NODEPORTS_MAP: &str = "no-endpoint-nodeports";
pub const CLUSTER_IPS_SET: &str = "cluster-ips";

/// Traffic to a local address (a NodePort), but not to 127.0.0.0/8: localhost
/// NodePorts would need route_localnet, which upstream's nftables mode does not
/// support either.
const LOCAL_NOT_LOOPBACK: &str = "fib daddr type local ip daddr != 127.0.0.0/8";

/// A short stable hash in base32, so names that differ only at the end still
/// look different (upstream prefixes a sha256; any stable hash does).
fn hash8(s: &str) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    // FNV-1a, 64 bits.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (0..8)
        .map(|i| ALPHABET[((h >> (i * 5)) & 31) as usize] as char)
        .collect()
}

/// `prefix-HASH-base`. Namespace, Service and port names are DNS labels, so the
/// base only holds characters nft accepts in a name ([a-z0-9-./_]); the longest
/// possible name (~230) is within nft's 256.
fn chain_name(prefix: &str, base: &str) -> String {
    format!("{prefix}-{}-{base}", hash8(base))
}

/// The chain names of one Service port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortChains {
    pub cluster: String,
    pub local: String,
    pub external: String,
}

impl PortChains {
    pub fn of(sp: &ServicePort) -> PortChains {
        let key = sp.key();
        PortChains {
            cluster: chain_name("service", &key),
            local: chain_name("local", &key),
            external: chain_name("external", &key),
        }
    }
}

/// `endpoint-HASH-ns/name/proto/port__ip/port`.
pub fn endpoint_chain(sp: &ServicePort, ep: &Endpoint) -> String {
    chain_name("endpoint", &endpoint_base(sp, ep))
}

/// The ClientIP affinity set of one endpoint.
pub fn affinity_set(sp: &ServicePort, ep: &Endpoint) -> String {
    chain_name("affinity", &endpoint_base(sp, ep))
}

fn endpoint_base(sp: &ServicePort, ep: &Endpoint) -> String {
    format!("{}__{}/{}", sp.key(), ep.ip, ep.port)
}

/// Chains that belong to one Service (they are named with a `/`); the fixed
/// chains are not.
pub fn is_service_chain(name: &str) -> bool {
    name.contains('/')
}

/// The endpoints traffic may go to, as upstream's CategorizeEndpoints: ready
/// ones; when none is ready, serving-and-terminating ones (so connections still
/// succeed during a rolling update that has only terminating pods left).
fn usable<'a>(eps: impl Iterator<Item = &'a Endpoint> + Clone) -> Vec<&'a Endpoint> {
    let ready: Vec<&Endpoint> = eps.clone().filter(|e| e.ready).collect();
    if !ready.is_empty() {
        return ready;
    }
    eps.filter(|e| e.serving && e.terminating).collect()
}

/// The endpoints of one port split by traffic policy.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Categorized<'a> {
    /// For Cluster policy: usable endpoints anywhere.
    pub cluster: Vec<&'a Endpoint>,
    /// For Local policy: usable endpoints on this node.
    pub local: Vec<&'a Endpoint>,
    /// Any usable endpoint anywhere (else: reject).
    pub any: bool,
}

pub fn categorize<'a>(node: &str, eps: &'a [Endpoint]) -> Categorized<'a> {
    let cluster = usable(eps.iter());
    let local = usable(
        eps.iter()
            .filter(move |e| e.node_name.as_deref() == Some(node)),
    );
    let any = !cluster.is_empty();
    Categorized {
        cluster,
        local,
        any,
    }
}

/// The fixed part of the table: base chains on the netfilter hooks, dispatch
/// and check chains, masquerade and reject helpers, the maps and sets they use.
fn base(cfg: &NodeConfig, rs: &mut Ruleset) {
    let hook = |kind, hook, priority| Some(Hook::new(kind, hook, priority));
    let jump = |extra: &str, to: &str| {
        if extra.is_empty() {
            format!("jump {to}")
        } else {
            format!("{extra} jump {to}")
        }
    };
    // Filter chains see the pre-DNAT destination (priority dstnat - 10); reject
    // is only valid in input, forward and output.
    let new = "ct state new";
    rs.add_chain(
        "filter-input",
        hook("filter", "input", "-110"),
        vec![jump(new, ENDPOINTS_CHECK_CHAIN)],
    );
    rs.add_chain(
        "filter-forward",
        hook("filter", "forward", "-110"),
        vec![
            jump(new, ENDPOINTS_CHECK_CHAIN),
            jump(new, CLUSTER_IPS_CHECK_CHAIN),
        ],
    );
    rs.add_chain(
        "filter-output",
        hook("filter", "output", "-110"),
        vec![jump(new, ENDPOINTS_CHECK_CHAIN)],
    );
    // After nat-output's DNAT: what still goes to a ClusterIP had no match.
    rs.add_chain(
        "filter-output-post-dnat",
        hook("filter", "output", "-90"),
        vec![jump(new, CLUSTER_IPS_CHECK_CHAIN)],
    );
    rs.add_chain(
        "nat-prerouting",
        hook("nat", "prerouting", "dstnat"),
        vec![jump("", SERVICES_CHAIN)],
    );
    rs.add_chain(
        "nat-output",
        hook("nat", "output", "-100"),
        vec![jump("", SERVICES_CHAIN)],
    );
    rs.add_chain(
        "nat-postrouting",
        hook("nat", "postrouting", "srcnat"),
        vec![jump("", MASQUERADING_CHAIN)],
    );
    let mark = cfg.mark();
    rs.add_chain(
        MARK_MASQ_CHAIN,
        None,
        vec![format!("mark set mark or {mark}")],
    );
    rs.add_chain(
        MASQUERADING_CHAIN,
        None,
        vec![
            format!("mark and {mark} == 0 return"),
            format!("mark set mark xor {mark}"),
            "masquerade fully-random".to_string(),
        ],
    );
    rs.add_chain(REJECT_CHAIN, None, vec!["reject".to_string()]);
    rs.add_chain(
        SERVICES_CHAIN,
        None,
        vec![
            format!("ip daddr . meta l4proto . th dport vmap @{SERVICE_IPS_MAP}"),
            format!("{LOCAL_NOT_LOOPBACK} meta l4proto . th dport vmap @{SERVICE_NODEPORTS_MAP}"),
        ],
    );
    rs.add_chain(
        ENDPOINTS_CHECK_CHAIN,
        None,
        vec![
            format!("ip daddr . meta l4proto . th dport vmap @{NO_ENDPOINT_SERVICES_MAP}"),
            format!(
                "{LOCAL_NOT_LOOPBACK} meta l4proto . th dport vmap @{NO_ENDPOINT_NODEPORTS_MAP}"
            ),
        ],
    );
    // A ClusterIP on a port no Service has: refused rather than routed off the node.
    rs.add_chain(
        CLUSTER_IPS_CHECK_CHAIN,
        None,
        vec![format!("ip daddr @{CLUSTER_IPS_SET} reject")],
    );
    let addr_map = "ipv4_addr . inet_proto . inet_service : verdict";
    let port_map = "inet_proto . inet_service : verdict";
    rs.maps.insert(SERVICE_IPS_MAP.into(), Map::new(addr_map));
    rs.maps
        .insert(SERVICE_NODEPORTS_MAP.into(), Map::new(port_map));
    rs.maps
        .insert(NO_ENDPOINT_SERVICES_MAP.into(), Map::new(addr_map));
    rs.maps
        .insert(NO_ENDPOINT_NODEPORTS_MAP.into(), Map::new(port_map));
    rs.sets
        .insert(CLUSTER_IPS_SET.into(), Set::plain("ipv4_addr"));
}

fn cidr(c: (Ipv4Addr, u8)) -> String {
    format!("{}/{}", c.0, c.1)
}

/// The whole table for `ports` (each with its endpoints).
pub fn build(cfg: &NodeConfig, ports: &[(ServicePort, Vec<Endpoint>)]) -> Ruleset {
    let mut rs = Ruleset::default();
    base(cfg, &mut rs);
    for (sp, eps) in ports {
        service_port(cfg, sp, eps, &mut rs);
    }
    rs
}

fn element(addr: Ipv4Addr, sp: &ServicePort, port: u16) -> String {
    format!("{addr} . {} . {port}", sp.protocol.nft())
}

fn node_port_element(sp: &ServicePort, port: u16) -> String {
    format!("{} . {port}", sp.protocol.nft())
}

/// Everything one Service port adds: map elements and its chains.
fn service_port(cfg: &NodeConfig, sp: &ServicePort, eps: &[Endpoint], rs: &mut Ruleset) {
    let names = PortChains::of(sp);
    let cat = categorize(&cfg.node_name, eps);
    let proto = sp.protocol.nft();
    rs.set_element(CLUSTER_IPS_SET, sp.cluster_ip.to_string());

    let uses_external = sp.externally_accessible();
    let uses_cluster_chain =
        !cat.cluster.is_empty() && (!sp.internal_local || (uses_external && !sp.external_local));
    let uses_local_chain =
        !cat.local.is_empty() && (sp.internal_local || (uses_external && sp.external_local));
    let (internal_chain, has_internal) = if sp.internal_local {
        (&names.local, !cat.local.is_empty())
    } else {
        (&names.cluster, cat.any)
    };
    let (external_policy_chain, has_external) = if sp.external_local {
        (&names.local, !cat.local.is_empty())
    } else {
        (&names.cluster, cat.any)
    };
    // With no endpoint anywhere: reject. With endpoints elsewhere only (a Local
    // policy): drop, as upstream (the client times out rather than being told).
    let internal_verdict = if cat.any {
        "drop".to_string()
    } else {
        format!("goto {REJECT_CHAIN}")
    };
    let external_verdict = internal_verdict.clone();

    // ClusterIP.
    let cluster_key = element(sp.cluster_ip, sp, sp.port);
    if has_internal {
        rs.map_element(
            SERVICE_IPS_MAP,
            cluster_key,
            format!("goto {internal_chain}"),
        );
    } else {
        rs.map_element(NO_ENDPOINT_SERVICES_MAP, cluster_key, internal_verdict);
    }
    // External IPs go through the external chain like NodePorts.
    for ip in &sp.external_ips {
        let key = element(*ip, sp, sp.port);
        if cat.any {
            rs.map_element(
                SERVICE_IPS_MAP,
                key.clone(),
                format!("goto {}", names.external),
            );
        }
        if !has_external {
            rs.map_element(NO_ENDPOINT_SERVICES_MAP, key, external_verdict.clone());
        }
    }
    if let Some(np) = sp.node_port {
        let key = node_port_element(sp, np);
        if cat.any {
            rs.map_element(
                SERVICE_NODEPORTS_MAP,
                key.clone(),
                format!("goto {}", names.external),
            );
        }
        if !has_external {
            rs.map_element(NO_ENDPOINT_NODEPORTS_MAP, key, external_verdict);
        }
    }

    // Internal traffic from outside the pod network (the node itself) is
    // masqueraded, so replies come back through this node.
    if has_internal {
        let mut rules = Vec::new();
        if let Some(c) = cfg.cluster_cidr {
            rules.push(format!(
                "ip daddr {} {proto} dport {} ip saddr != {} jump {MARK_MASQ_CHAIN}",
                sp.cluster_ip,
                sp.port,
                cidr(c)
            ));
        }
        // The internal chain is the cluster or local chain: its dispatch rules
        // are appended below.
        rs.chain_mut(internal_chain).rules.extend(rules);
    }

    if cat.any && uses_external {
        let mut rules = Vec::new();
        if !sp.external_local {
            // Endpoints may be on other nodes: masquerade so replies return here.
            rules.push(format!("jump {MARK_MASQ_CHAIN}"));
        } else {
            if let Some(c) = cfg.cluster_cidr {
                // Pods reaching a NodePort get Cluster policy (as if through an
                // external load balancer and back).
                rules.push(format!("ip saddr {} goto {}", cidr(c), names.cluster));
            }
            // The node itself: its own address would be the source, masquerade.
            rules.push(format!("fib saddr type local jump {MARK_MASQ_CHAIN}"));
            rules.push(format!("fib saddr type local goto {}", names.cluster));
        }
        if has_external {
            rules.push(format!("goto {external_policy_chain}"));
        }
        rs.add_chain(&names.external, None, rules);
    }
    // The short-circuits above need the cluster chain even under Local policy.
    let needs_cluster_for_external =
        cat.any && uses_external && sp.external_local && !cat.cluster.is_empty();
    if uses_cluster_chain || needs_cluster_for_external {
        dispatch(sp, &names.cluster, &cat.cluster, rs);
    }
    if uses_local_chain {
        dispatch(sp, &names.local, &cat.local, rs);
    }

    // Endpoint chains of every endpoint some chain above can reach.
    let mut reachable: BTreeMap<String, &Endpoint> = BTreeMap::new();
    if uses_cluster_chain || needs_cluster_for_external {
        for ep in &cat.cluster {
            reachable.insert(endpoint_chain(sp, ep), ep);
        }
    }
    if uses_local_chain {
        for ep in &cat.local {
            reachable.insert(endpoint_chain(sp, ep), ep);
        }
    }
    for (chain, ep) in reachable {
        let mut rules = vec![format!("ip saddr {} jump {MARK_MASQ_CHAIN}", ep.ip)];
        if let Some(timeout) = sp.affinity_timeout {
            let set = affinity_set(sp, ep);
            // The timeout rides on the element, so changing it rewrites this
            // rule rather than the set (a set's flags cannot change in place).
            rules.push(format!("update @{set} {{ ip saddr timeout {timeout}s }}"));
            rs.sets.insert(set, Set::affinity());
        }
        rules.push(format!(
            "meta l4proto {proto} dnat to {}:{}",
            ep.ip, ep.port
        ));
        rs.add_chain(&chain, None, rules);
    }
}

/// The rules that pick an endpoint: a client with affinity goes back to its
/// endpoint; otherwise one at random.
fn dispatch(sp: &ServicePort, chain: &str, eps: &[&Endpoint], rs: &mut Ruleset) {
    let mut rules = Vec::new();
    if sp.affinity_timeout.is_some() {
        for ep in eps {
            rules.push(format!(
                "ip saddr @{} goto {}",
                affinity_set(sp, ep),
                endpoint_chain(sp, ep)
            ));
        }
    }
    let mut vmap = String::new();
    for (i, ep) in eps.iter().enumerate() {
        if i > 0 {
            vmap.push_str(", ");
        }
        let _ = write!(vmap, "{i} : goto {}", endpoint_chain(sp, ep));
    }
    rules.push(format!("numgen random mod {} vmap {{ {vmap} }}", eps.len()));
    rs.chain_mut(chain).rules.extend(rules);
}

/// Service chains in `rs` (for stale-chain bookkeeping).
pub fn service_chains(rs: &Ruleset) -> BTreeSet<&str> {
    rs.chains
        .keys()
        .map(String::as_str)
        .filter(|n| is_service_chain(n))
        .collect()
}
