//! NetworkPolicy semantics as plain data (no I/O): from pods, namespaces and
//! policies to what each subject pod may receive ([`PodRules::ingress`]) and
//! send ([`PodRules::egress`]), as upstream's API documents them:
//!
//! - A pod selected by no policy of a direction is not isolated in it (`None`).
//! - A selected pod is isolated; its allowed traffic is the union of every
//!   selecting policy's rules (`Some(vec![])` is default deny).
//! - `policyTypes` defaults to Ingress, plus Egress when egress rules exist.
//! - A rule with no peers allows every peer; one with no ports every port.
//! - A peer with both namespaceSelector and podSelector is one peer (pods
//!   matching in namespaces matching); podSelector alone means the policy's
//!   namespace; ipBlock is a CIDR minus its excepts, for any address.
//! - Named ports resolve against the target pod's container ports for
//!   ingress and against each peer pod's for egress; an ipBlock peer has no
//!   container ports, so a named port never matches it.
//! - hostNetwork pods are neither subjects nor pod peers (their address is
//!   the node's), and neither are pods without an IP or finished ones.
//! - Replies of allowed connections always pass (conntrack, in the ruleset);
//!   so does traffic from the pod's own node (it does not cross the forward
//!   hook the ruleset judges in).
//!
//! [`allows`] evaluates a flow against the result exactly as the nftables
//! ruleset does, so tests of the documented examples here hold for the kernel.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use berth_api::selector::LabelSelector;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// nft's name (`tcp dport`, `meta l4proto udp`).
    pub fn nft(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

/// A container port a named port can resolve to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerPort {
    pub name: String,
    pub protocol: Protocol,
    pub port: u16,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub ip: Option<Ipv4Addr>,
    pub node: String,
    pub host_network: bool,
    /// Succeeded or Failed: its address may already belong to another pod.
    pub finished: bool,
    pub ports: Vec<ContainerPort>,
}

impl Pod {
    /// A pod that takes part in policy (as a subject or a pod peer).
    fn address(&self) -> Option<Ipv4Addr> {
        if self.host_network || self.finished {
            return None;
        }
        self.ip
    }

    fn named_port(&self, name: &str, protocol: Protocol) -> Option<u16> {
        self.ports
            .iter()
            .find(|p| p.name == name && p.protocol == protocol)
            .map(|p| p.port)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Namespace {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// An IPv4 CIDR, normalised (host bits cleared).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Cidr {
    /// Parses `a.b.c.d/len`; `None` for anything else (IPv6 included).
    pub fn parse(s: &str) -> Option<Cidr> {
        let (ip, len) = s.trim().split_once('/')?;
        let len: u8 = len.parse().ok().filter(|l| *l <= 32)?;
        let ip: Ipv4Addr = ip.parse().ok()?;
        Some(Cidr {
            addr: Ipv4Addr::from(u32::from(ip) & mask(len)),
            len,
        })
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & mask(self.len) == u32::from(self.addr)
    }
}

fn mask(len: u8) -> u32 {
    if len == 0 { 0 } else { u32::MAX << (32 - len) }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// A policy peer (`from` / `to` entry).
#[derive(Clone, Debug)]
pub enum Peer {
    /// Pods matching `pods` in the namespaces matching `namespaces`, or in
    /// the policy's own namespace when `namespaces` is `None`.
    Pods {
        namespaces: Option<LabelSelector>,
        pods: LabelSelector,
    },
    IpBlock {
        cidr: Cidr,
        except: Vec<Cidr>,
    },
    /// A peer that could not be read (an invalid selector or CIDR): it
    /// matches nothing, so a broken policy never opens traffic.
    Invalid,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortValue {
    Number(u16),
    Name(String),
}

/// A `ports` entry: `port: None` is every port of the protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub protocol: Protocol,
    pub port: Option<PortValue>,
    pub end_port: Option<u16>,
}

#[derive(Clone, Debug, Default)]
pub struct Rule {
    /// Empty: every peer.
    pub peers: Vec<Peer>,
    /// Empty: every port.
    pub ports: Vec<Port>,
    /// A `ports` entry could not be read: the rule matches nothing.
    pub invalid_ports: bool,
}

#[derive(Clone, Debug)]
pub struct Policy {
    pub namespace: String,
    pub name: String,
    pub pod_selector: LabelSelector,
    /// `policyTypes` after upstream's defaulting.
    pub ingress_type: bool,
    pub egress_type: bool,
    pub ingress: Vec<Rule>,
    pub egress: Vec<Rule>,
}

/// Where a flow may come from (ingress) or go to (egress).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerMatch {
    Any,
    /// Addresses in the named [`SetDef::Addrs`] set.
    Set(String),
    Cidr {
        cidr: Cidr,
        except: Vec<Cidr>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortMatch {
    Any,
    Protocol(Protocol),
    Range(Protocol, u16, u16),
}

/// One alternative of a pod's allowed traffic (an nft rule ending in accept).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Allow {
    Match {
        peer: PeerMatch,
        port: PortMatch,
    },
    /// (peer address, protocol, port) in the named [`SetDef::AddrPorts`] set:
    /// an egress named port resolved against each peer pod.
    AddrPorts(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetDef {
    Addrs(BTreeSet<Ipv4Addr>),
    AddrPorts(BTreeSet<(Ipv4Addr, Protocol, u16)>),
}

/// What one subject pod may receive and send; `None`: not isolated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodRules {
    pub namespace: String,
    pub name: String,
    pub ingress: Option<Vec<Allow>>,
    pub egress: Option<Vec<Allow>>,
}

/// Every subject pod by address, and the peer sets their rules name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    pub pods: BTreeMap<Ipv4Addr, PodRules>,
    pub sets: BTreeMap<String, SetDef>,
}

/// A stable short name (FNV-1a 64) for sets and chains: nft names are
/// length-limited and policy names are not.
pub fn short_hash(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Ingress,
    Egress,
}

impl Direction {
    fn name(self) -> &'static str {
        match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        }
    }
}

struct Builder<'a> {
    pods: &'a [Pod],
    namespaces: BTreeMap<&'a str, &'a Namespace>,
    sets: BTreeMap<String, SetDef>,
}

impl<'a> Builder<'a> {
    /// The pods (with addresses) a pod peer of a policy in `ns` selects.
    fn peer_pods(&self, ns: &str, peer: &Peer) -> Vec<&'a Pod> {
        let Peer::Pods { namespaces, pods } = peer else {
            return Vec::new();
        };
        let empty = BTreeMap::new();
        let all: &'a [Pod] = self.pods;
        all.iter()
            .filter(|p| p.address().is_some())
            .filter(|p| match namespaces {
                None => p.namespace == ns,
                Some(sel) => {
                    let labels = self
                        .namespaces
                        .get(p.namespace.as_str())
                        .map_or(&empty, |n| &n.labels);
                    // A namespace not seen yet (watch lag) matches only an
                    // empty selector.
                    (self.namespaces.contains_key(p.namespace.as_str()) || sel.is_empty())
                        && sel.matches(labels)
                }
            })
            .filter(|p| pods.matches(&p.labels))
            .collect()
    }

    fn addr_set(&mut self, hash: &str, pods: &[&Pod]) -> String {
        let name = format!("peers-{hash}");
        let addrs = pods.iter().filter_map(|p| p.address()).collect();
        self.sets.insert(name.clone(), SetDef::Addrs(addrs));
        name
    }

    /// The alternatives of rule `idx` of `policy` in `dir` for `target`.
    fn rule(
        &mut self,
        policy: &Policy,
        dir: Direction,
        idx: usize,
        rule: &Rule,
        target: &Pod,
        out: &mut Vec<Allow>,
    ) {
        if rule.invalid_ports {
            return;
        }
        let ridx = idx.to_string();
        let key = |peer: &str, extra: &str| {
            short_hash(&[
                &policy.namespace,
                &policy.name,
                dir.name(),
                &ridx,
                peer,
                extra,
            ])
        };
        // Ports: numeric ones (and ingress named ones, resolved on the target)
        // become PortMatch; egress named ones stay by name.
        let mut numeric: Vec<PortMatch> = Vec::new();
        let mut named: Vec<(Protocol, &str)> = Vec::new();
        for p in &rule.ports {
            match &p.port {
                None => numeric.push(PortMatch::Protocol(p.protocol)),
                Some(PortValue::Number(n)) => {
                    let end = p.end_port.filter(|e| e >= n).unwrap_or(*n);
                    numeric.push(PortMatch::Range(p.protocol, *n, end));
                }
                Some(PortValue::Name(name)) => match dir {
                    Direction::Ingress => {
                        if let Some(n) = target.named_port(name, p.protocol) {
                            numeric.push(PortMatch::Range(p.protocol, n, n));
                        }
                    }
                    Direction::Egress => named.push((p.protocol, name)),
                },
            }
        }
        if rule.ports.is_empty() {
            numeric.push(PortMatch::Any);
        }
        // Peers: one PeerMatch each; the pods behind pod peers (for named ports).
        let mut peers: Vec<(PeerMatch, Option<Vec<&'a Pod>>)> = Vec::new();
        if rule.peers.is_empty() {
            let pods: &'a [Pod] = self.pods;
            let all: Vec<&'a Pod> = if named.is_empty() {
                Vec::new()
            } else {
                pods.iter().filter(|p| p.address().is_some()).collect()
            };
            peers.push((PeerMatch::Any, Some(all)));
        }
        for (pidx, peer) in rule.peers.iter().enumerate() {
            match peer {
                Peer::Invalid => {}
                Peer::IpBlock { cidr, except } => peers.push((
                    PeerMatch::Cidr {
                        cidr: *cidr,
                        except: except.clone(),
                    },
                    None,
                )),
                Peer::Pods { .. } => {
                    let pods = self.peer_pods(&policy.namespace, peer);
                    let set = self.addr_set(&key(&pidx.to_string(), ""), &pods);
                    peers.push((PeerMatch::Set(set), Some(pods)));
                }
            }
        }
        for (pidx, (peer, pods)) in peers.into_iter().enumerate() {
            for port in &numeric {
                out.push(Allow::Match {
                    peer: peer.clone(),
                    port: *port,
                });
            }
            let Some(pods) = pods else { continue };
            for (nidx, (proto, name)) in named.iter().enumerate() {
                let entries: BTreeSet<_> = pods
                    .iter()
                    .filter_map(|p| Some((p.address()?, *proto, p.named_port(name, *proto)?)))
                    .collect();
                let set = format!("ports-{}", key(&pidx.to_string(), &nidx.to_string()));
                self.sets.insert(set.clone(), SetDef::AddrPorts(entries));
                out.push(Allow::AddrPorts(set));
            }
        }
    }
}

/// The model for the subject pods on `node` (every node's with `None`).
pub fn build(
    pods: &[Pod],
    namespaces: &[Namespace],
    policies: &[Policy],
    node: Option<&str>,
) -> Model {
    let mut b = Builder {
        pods,
        namespaces: namespaces.iter().map(|n| (n.name.as_str(), n)).collect(),
        sets: BTreeMap::new(),
    };
    let mut out = BTreeMap::new();
    let mut order: Vec<&Policy> = policies.iter().collect();
    order.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    for pod in pods {
        let Some(ip) = pod.address() else { continue };
        if node.is_some_and(|n| n != pod.node) || out.contains_key(&ip) {
            continue;
        }
        let mut rules = PodRules {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            ingress: None,
            egress: None,
        };
        for policy in order
            .iter()
            .filter(|p| p.namespace == pod.namespace && p.pod_selector.matches(&pod.labels))
        {
            for (dir, on, list) in [
                (Direction::Ingress, policy.ingress_type, &policy.ingress),
                (Direction::Egress, policy.egress_type, &policy.egress),
            ] {
                if !on {
                    continue;
                }
                let allows = match dir {
                    Direction::Ingress => rules.ingress.get_or_insert_with(Vec::new),
                    Direction::Egress => rules.egress.get_or_insert_with(Vec::new),
                };
                for (idx, rule) in list.iter().enumerate() {
                    let mut alts = Vec::new();
                    b.rule(policy, dir, idx, rule, pod, &mut alts);
                    for a in alts {
                        if !allows.contains(&a) {
                            allows.push(a);
                        }
                    }
                }
            }
        }
        if rules.ingress.is_some() || rules.egress.is_some() {
            out.insert(ip, rules);
        }
    }
    Model {
        pods: out,
        sets: b.sets,
    }
}

/// A connection attempt (its first packet).
#[derive(Clone, Copy, Debug)]
pub struct Flow {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: Protocol,
    pub port: u16,
}

fn allow_matches(model: &Model, allow: &Allow, peer: Ipv4Addr, flow: &Flow) -> bool {
    match allow {
        Allow::AddrPorts(set) => matches!(
            model.sets.get(set),
            Some(SetDef::AddrPorts(s)) if s.contains(&(peer, flow.protocol, flow.port))
        ),
        Allow::Match { peer: pm, port } => {
            let peer_ok = match pm {
                PeerMatch::Any => true,
                PeerMatch::Set(set) => {
                    matches!(model.sets.get(set), Some(SetDef::Addrs(s)) if s.contains(&peer))
                }
                PeerMatch::Cidr { cidr, except } => {
                    cidr.contains(peer) && !except.iter().any(|e| e.contains(peer))
                }
            };
            let port_ok = match port {
                PortMatch::Any => true,
                PortMatch::Protocol(p) => *p == flow.protocol,
                PortMatch::Range(p, lo, hi) => {
                    *p == flow.protocol && (*lo..=*hi).contains(&flow.port)
                }
            };
            peer_ok && port_ok
        }
    }
}

/// Whether `flow` is allowed: by the source pod's egress and the
/// destination pod's ingress (each only if that pod is isolated).
pub fn allows(model: &Model, flow: &Flow) -> bool {
    let side = |pod: Ipv4Addr, peer: Ipv4Addr, egress: bool| match model.pods.get(&pod) {
        None => true,
        Some(r) => match if egress { &r.egress } else { &r.ingress } {
            None => true,
            Some(list) => list.iter().any(|a| allow_matches(model, a, peer, flow)),
        },
    };
    side(flow.src, flow.dst, true) && side(flow.dst, flow.src, false)
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
