//! The [`Model`] as an nftables ruleset in Berth's own table
//! (`inet berth-netpol`), applied with the service proxy's machinery
//! (`berth_proxy::ruleset`: whole-table or incremental `nft -f` transactions).
//!
//! Where pod traffic is judged: pods sit on one Linux bridge (`cni0`), so
//! traffic between two pods of a node is bridged, not routed, and bridged
//! frames reach the inet hooks only through br_netfilter with
//! `net.bridge.bridge-nf-call-iptables=1`. The service proxy already needs
//! that (a same-node ClusterIP reply must be un-DNATed) and sets it, so the
//! policy chains hook `forward` of an `inet` table: there every pod-to-pod
//! packet passes once (bridged on one node, routed across nodes), and after
//! the proxy's `prerouting` DNAT, so ClusterIP and NodePort traffic is judged
//! on the destination pod, as upstream CNIs do; and before its `postrouting`
//! masquerade, so the source is still the client. Traffic from the node
//! itself (kubelet probes, `curl` on the node) goes through `output`, not
//! `forward`: upstream lets a pod's node always reach it.
//!
//! Layout:
//! - base chain `egress` (forward, priority 0): replies pass; a packet from a
//!   subject pod jumps through the `egress-pods` verdict map to that pod's
//!   chain, whose allows `accept` (on to the next base chain) and whose last
//!   rule drops;
//! - base chain `ingress` (forward, priority 1): the same by destination
//!   through `ingress-pods`;
//! - peer pods are named sets (`peers-…`: addresses; `ports-…`: address .
//!   protocol . port for egress named ports), so a pod coming or going
//!   changes set elements, not chains.

use std::fmt::Write as _;

use berth_proxy::ruleset::{Chain, Hook, Map, Ruleset, Set, Table};

use crate::model::{Allow, Model, PeerMatch, PodRules, PortMatch, SetDef};

pub const EGRESS_MAP: &str = "egress-pods";
pub const INGRESS_MAP: &str = "ingress-pods";

pub fn table(name: &str) -> Table {
    Table {
        family: "inet",
        name: name.to_string(),
    }
}

/// The chain of pod `ns/name` in `dir` (`ingress`/`egress`).
pub fn pod_chain(dir: &str, rules: &PodRules) -> String {
    format!(
        "{dir}-{}",
        crate::model::short_hash(&[&rules.namespace, &rules.name])
    )
}

fn peer_match(out: &mut String, field: &str, peer: &PeerMatch) {
    match peer {
        PeerMatch::Any => {}
        PeerMatch::Set(s) => {
            let _ = write!(out, "ip {field} @{s} ");
        }
        PeerMatch::Cidr { cidr, except } => {
            if cidr.len > 0 {
                let _ = write!(out, "ip {field} {cidr} ");
            }
            if !except.is_empty() {
                let list: Vec<String> = except.iter().map(|c| c.to_string()).collect();
                let _ = write!(out, "ip {field} != {{ {} }} ", list.join(", "));
            }
        }
    }
}

fn port_match(out: &mut String, port: &PortMatch) {
    match port {
        PortMatch::Any => {}
        PortMatch::Protocol(p) => {
            let _ = write!(out, "meta l4proto {} ", p.nft());
        }
        PortMatch::Range(p, lo, hi) if lo == hi => {
            let _ = write!(out, "{} dport {lo} ", p.nft());
        }
        PortMatch::Range(p, lo, hi) => {
            let _ = write!(out, "{} dport {lo}-{hi} ", p.nft());
        }
    }
}

/// One allow as an nft rule; `peer_field` is the peer's address (`saddr`
/// for ingress, `daddr` for egress).
pub fn allow_rule(allow: &Allow, peer_field: &str) -> String {
    let mut out = String::new();
    match allow {
        Allow::AddrPorts(set) => {
            let _ = write!(out, "ip {peer_field} . meta l4proto . th dport @{set} ");
        }
        Allow::Match { peer, port } => {
            peer_match(&mut out, peer_field, peer);
            port_match(&mut out, port);
        }
    }
    out.push_str("accept");
    out
}

fn pod_chain_rules(allows: &[Allow], peer_field: &str) -> Vec<String> {
    let mut rules: Vec<String> = allows.iter().map(|a| allow_rule(a, peer_field)).collect();
    rules.push("drop".into());
    rules
}

/// The whole table's content for `model`.
pub fn build(model: &Model) -> Ruleset {
    let mut rs = Ruleset::default();
    for (name, map, field, priority) in [
        ("egress", EGRESS_MAP, "saddr", "0"),
        ("ingress", INGRESS_MAP, "daddr", "1"),
    ] {
        rs.chains.insert(
            name.into(),
            Chain {
                hook: Some(Hook::new("filter", "forward", priority)),
                rules: vec![
                    // Replies (and related ICMP) of allowed connections.
                    "ct state established,related accept".into(),
                    format!("ip {field} vmap @{map}"),
                ],
            },
        );
        rs.maps.insert(map.into(), Map::new("ipv4_addr : verdict"));
    }
    for (ip, pod) in &model.pods {
        for (dir, map, field, allows) in [
            ("egress", EGRESS_MAP, "daddr", &pod.egress),
            ("ingress", INGRESS_MAP, "saddr", &pod.ingress),
        ] {
            let Some(allows) = allows else { continue };
            let chain = pod_chain(dir, pod);
            rs.add_chain(&chain, None, pod_chain_rules(allows, field));
            rs.map_element(map, ip.to_string(), format!("jump {chain}"));
        }
    }
    for (name, def) in &model.sets {
        let set = match def {
            SetDef::Addrs(addrs) => {
                let mut s = Set::plain("ipv4_addr");
                s.elements = addrs.iter().map(|a| a.to_string()).collect();
                s
            }
            SetDef::AddrPorts(entries) => {
                let mut s = Set::plain("ipv4_addr . inet_proto . inet_service");
                s.elements = entries
                    .iter()
                    .map(|(a, p, n)| format!("{a} . {} . {n}", p.nft()))
                    .collect();
                s
            }
        };
        rs.sets.insert(name.clone(), set);
    }
    rs
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::model::{Cidr, Protocol};

    fn cidr(s: &str) -> Cidr {
        Cidr::parse(s).expect("cidr")
    }

    #[test]
    fn allow_rules_render_as_nft() {
        let cases = [
            (
                Allow::Match {
                    peer: PeerMatch::Any,
                    port: PortMatch::Any,
                },
                "accept",
            ),
            (
                Allow::Match {
                    peer: PeerMatch::Set("peers-1".into()),
                    port: PortMatch::Range(Protocol::Tcp, 8080, 8080),
                },
                "ip saddr @peers-1 tcp dport 8080 accept",
            ),
            (
                Allow::Match {
                    peer: PeerMatch::Cidr {
                        cidr: cidr("172.17.0.0/16"),
                        except: vec![cidr("172.17.1.0/24"), cidr("172.17.2.0/24")],
                    },
                    port: PortMatch::Range(Protocol::Udp, 32000, 32768),
                },
                "ip saddr 172.17.0.0/16 ip saddr != { 172.17.1.0/24, 172.17.2.0/24 } udp dport 32000-32768 accept",
            ),
            (
                Allow::Match {
                    peer: PeerMatch::Cidr {
                        cidr: cidr("0.0.0.0/0"),
                        except: vec![],
                    },
                    port: PortMatch::Protocol(Protocol::Sctp),
                },
                "meta l4proto sctp accept",
            ),
            (
                Allow::AddrPorts("ports-2".into()),
                "ip saddr . meta l4proto . th dport @ports-2 accept",
            ),
        ];
        for (allow, want) in cases {
            assert_eq!(allow_rule(&allow, "saddr"), want, "{allow:?}");
        }
    }

    #[test]
    fn the_table_holds_base_chains_maps_pod_chains_and_sets() {
        let ip: std::net::Ipv4Addr = "10.42.0.5".parse().expect("ip");
        let pod = PodRules {
            namespace: "default".into(),
            name: "db".into(),
            ingress: Some(vec![Allow::Match {
                peer: PeerMatch::Set("peers-a".into()),
                port: PortMatch::Range(Protocol::Tcp, 6379, 6379),
            }]),
            egress: Some(vec![]),
        };
        let mut model = Model::default();
        model.pods.insert(ip, pod.clone());
        model.sets.insert(
            "peers-a".into(),
            SetDef::Addrs(BTreeSet::from(["10.42.0.9".parse().expect("ip")])),
        );
        model.sets.insert(
            "ports-b".into(),
            SetDef::AddrPorts(BTreeSet::from([(
                "10.42.0.9".parse().expect("ip"),
                Protocol::Tcp,
                53,
            )])),
        );
        let rs = build(&model);
        let t = table("berth-netpol");
        let script = berth_proxy::ruleset::full(&t, &rs);
        let ing = pod_chain("ingress", &pod);
        let eg = pod_chain("egress", &pod);
        let want = format!(
            "add table inet berth-netpol
delete table inet berth-netpol
add table inet berth-netpol
add chain inet berth-netpol egress {{ type filter hook forward priority 0 ; }}
add chain inet berth-netpol {eg}
add chain inet berth-netpol ingress {{ type filter hook forward priority 1 ; }}
add chain inet berth-netpol {ing}
add map inet berth-netpol egress-pods {{ type ipv4_addr : verdict ; }}
add map inet berth-netpol ingress-pods {{ type ipv4_addr : verdict ; }}
add set inet berth-netpol peers-a {{ type ipv4_addr ; }}
add set inet berth-netpol ports-b {{ type ipv4_addr . inet_proto . inet_service ; }}
add element inet berth-netpol egress-pods {{ 10.42.0.5 : jump {eg} }}
add element inet berth-netpol ingress-pods {{ 10.42.0.5 : jump {ing} }}
add element inet berth-netpol peers-a {{ 10.42.0.9 }}
add element inet berth-netpol ports-b {{ 10.42.0.9 . tcp . 53 }}
add rule inet berth-netpol egress ct state established,related accept
add rule inet berth-netpol egress ip saddr vmap @egress-pods
add rule inet berth-netpol {eg} drop
add rule inet berth-netpol ingress ct state established,related accept
add rule inet berth-netpol ingress ip daddr vmap @ingress-pods
add rule inet berth-netpol {ing} ip saddr @peers-a tcp dport 6379 accept
add rule inet berth-netpol {ing} drop
"
        );
        assert_eq!(script, want);
    }

    #[test]
    fn a_new_peer_pod_changes_only_set_elements() {
        let ip: std::net::Ipv4Addr = "10.42.0.5".parse().expect("ip");
        let mut model = Model::default();
        model.pods.insert(
            ip,
            PodRules {
                namespace: "default".into(),
                name: "db".into(),
                ingress: Some(vec![Allow::Match {
                    peer: PeerMatch::Set("peers-a".into()),
                    port: PortMatch::Any,
                }]),
                egress: None,
            },
        );
        model
            .sets
            .insert("peers-a".into(), SetDef::Addrs(BTreeSet::new()));
        let before = build(&model);
        model.sets.insert(
            "peers-a".into(),
            SetDef::Addrs(BTreeSet::from(["10.42.0.9".parse().expect("ip")])),
        );
        let after = build(&model);
        let inc =
            berth_proxy::ruleset::incremental(&table("t"), &before, &after, &Default::default());
        assert_eq!(inc.script, "add element inet t peers-a { 10.42.0.9 }\n");
    }
}
