//! Pods, Namespaces and NetworkPolicies (k8s-openapi types) as the model's
//! plain data, with upstream's defaulting of `policyTypes` and `protocol`.

use std::net::Ipv4Addr;

use berth_api::selector::LabelSelector;
use k8s_openapi::api::core::v1::{Namespace as K8sNamespace, Pod as K8sPod};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::model::{
    Cidr, ContainerPort, Namespace, Peer, Pod, Policy, Port, PortValue, Protocol, Rule,
};

pub fn pod(p: &K8sPod) -> Pod {
    let spec = p.spec.as_ref();
    let status = p.status.as_ref();
    let ip = status
        .and_then(|s| s.pod_ips.as_ref())
        .into_iter()
        .flatten()
        .map(|i| i.ip.as_str())
        .chain(status.and_then(|s| s.pod_ip.as_deref()))
        .find_map(|ip| ip.parse::<Ipv4Addr>().ok());
    let phase = status.and_then(|s| s.phase.as_deref());
    let ports = spec
        .into_iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|cp| {
            Some(ContainerPort {
                name: cp.name.clone()?,
                protocol: Protocol::parse(cp.protocol.as_deref().unwrap_or("TCP"))?,
                port: u16::try_from(cp.container_port).ok()?,
            })
        })
        .collect();
    Pod {
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        name: p.metadata.name.clone().unwrap_or_default(),
        labels: p.metadata.labels.clone().unwrap_or_default(),
        ip,
        node: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        host_network: spec.and_then(|s| s.host_network).unwrap_or(false),
        finished: matches!(phase, Some("Succeeded" | "Failed")),
        ports,
    }
}

pub fn namespace(n: &K8sNamespace) -> Namespace {
    Namespace {
        name: n.metadata.name.clone().unwrap_or_default(),
        labels: n.metadata.labels.clone().unwrap_or_default(),
    }
}

/// A metav1.LabelSelector as a selector (`None` when it does not parse).
fn selector(s: &K8sSelector) -> Option<LabelSelector> {
    let v = serde_json::to_value(s).ok()?;
    LabelSelector::from_meta(&v).ok()
}

fn peer(p: &NetworkPolicyPeer) -> Peer {
    if let Some(b) = &p.ip_block {
        let Some(cidr) = Cidr::parse(&b.cidr) else {
            // IPv6 blocks (or invalid ones) never match an IPv4 flow.
            return Peer::Invalid;
        };
        let mut except = Vec::new();
        for e in b.except.iter().flatten() {
            match Cidr::parse(e) {
                Some(c) => except.push(c),
                // An IPv6 except cannot carve anything from an IPv4 block;
                // an unreadable one makes the peer match nothing.
                None if e.contains(':') => {}
                None => return Peer::Invalid,
            }
        }
        return Peer::IpBlock { cidr, except };
    }
    let namespaces = match &p.namespace_selector {
        None => None,
        Some(s) => match selector(s) {
            Some(s) => Some(s),
            None => return Peer::Invalid,
        },
    };
    let pods = match &p.pod_selector {
        None => LabelSelector::everything(),
        Some(s) => match selector(s) {
            Some(s) => s,
            None => return Peer::Invalid,
        },
    };
    if namespaces.is_none() && p.pod_selector.is_none() {
        // An empty peer is rejected by validation; never treat it as "all".
        return Peer::Invalid;
    }
    Peer::Pods { namespaces, pods }
}

fn port(p: &NetworkPolicyPort) -> Option<Port> {
    let protocol = Protocol::parse(p.protocol.as_deref().unwrap_or("TCP"))?;
    let port = match &p.port {
        None => None,
        Some(IntOrString::Int(n)) => Some(PortValue::Number(u16::try_from(*n).ok()?)),
        Some(IntOrString::String(s)) => Some(PortValue::Name(s.clone())),
    };
    let end_port = match p.end_port {
        None => None,
        Some(e) => Some(u16::try_from(e).ok()?),
    };
    Some(Port {
        protocol,
        port,
        end_port,
    })
}

fn rule(peers: Option<&Vec<NetworkPolicyPeer>>, ports: Option<&Vec<NetworkPolicyPort>>) -> Rule {
    let mut invalid_ports = false;
    let ports = ports
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let r = port(p);
            invalid_ports |= r.is_none();
            r
        })
        .collect();
    Rule {
        peers: peers.into_iter().flatten().map(peer).collect(),
        ports,
        invalid_ports,
    }
}

fn ingress(r: &NetworkPolicyIngressRule) -> Rule {
    rule(r.from.as_ref(), r.ports.as_ref())
}

pub fn policy(np: &NetworkPolicy) -> Policy {
    let spec = np.spec.as_ref();
    let ingress_rules: Vec<Rule> = spec
        .and_then(|s| s.ingress.as_ref())
        .into_iter()
        .flatten()
        .map(ingress)
        .collect();
    let egress_rules: Vec<Rule> = spec
        .and_then(|s| s.egress.as_ref())
        .into_iter()
        .flatten()
        .map(|r| rule(r.to.as_ref(), r.ports.as_ref()))
        .collect();
    // Upstream's defaulting: Ingress always, Egress when egress rules exist.
    let (ingress_type, egress_type) = match spec.and_then(|s| s.policy_types.as_ref()) {
        Some(t) if !t.is_empty() => (
            t.iter().any(|t| t == "Ingress"),
            t.iter().any(|t| t == "Egress"),
        ),
        _ => (
            true,
            spec.and_then(|s| s.egress.as_ref())
                .is_some_and(|e| !e.is_empty()),
        ),
    };
    // An omitted podSelector selects every pod of the namespace; so does an
    // unreadable one (validation rejects it), each pod then isolated by the
    // rules that can be read: fail closed.
    let pod_selector = spec
        .and_then(|s| s.pod_selector.as_ref())
        .and_then(selector)
        .unwrap_or_else(LabelSelector::everything);
    Policy {
        namespace: np.metadata.namespace.clone().unwrap_or_default(),
        name: np.metadata.name.clone().unwrap_or_default(),
        pod_selector,
        ingress_type,
        egress_type,
        ingress: ingress_rules,
        egress: egress_rules,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_types_default_as_upstream() {
        // (spec, ingress, egress)
        let cases = [
            (serde_json::json!({"podSelector": {}}), true, false),
            (
                serde_json::json!({"podSelector": {}, "egress": [{}]}),
                true,
                true,
            ),
            (
                serde_json::json!({"podSelector": {}, "egress": []}),
                true,
                false,
            ),
            (
                serde_json::json!({"podSelector": {}, "policyTypes": ["Egress"]}),
                false,
                true,
            ),
            (
                serde_json::json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
                true,
                true,
            ),
        ];
        for (spec, ing, eg) in cases {
            let np: NetworkPolicy = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "default"}, "spec": spec
            }))
            .expect("policy");
            let p = policy(&np);
            assert_eq!((p.ingress_type, p.egress_type), (ing, eg), "{spec}");
        }
    }

    #[test]
    fn peers_and_ports_are_read_as_upstream_defines_them() {
        let np: NetworkPolicy = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"podSelector": {}, "ingress": [{
                "from": [
                    {"ipBlock": {"cidr": "10.0.0.7/24", "except": ["10.0.0.128/25", "fd00::/64"]}},
                    {"ipBlock": {"cidr": "fd00::/64"}},
                    {"namespaceSelector": {"matchLabels": {"a": "b"}}},
                    {"podSelector": {"matchExpressions": [{"key": "x", "operator": "Bogus"}]}}
                ],
                "ports": [{"port": 80}, {"protocol": "UDP", "port": "dns"}, {"port": 32000, "endPort": 32768}]
            }]}
        }))
        .expect("policy");
        let p = policy(&np);
        let r = &p.ingress[0];
        assert!(matches!(
            &r.peers[0],
            Peer::IpBlock { cidr, except } if cidr.to_string() == "10.0.0.0/24" && except.len() == 1
        ));
        assert!(matches!(r.peers[1], Peer::Invalid));
        assert!(matches!(&r.peers[2], Peer::Pods { namespaces: Some(_), pods } if pods.is_empty()));
        assert!(matches!(r.peers[3], Peer::Invalid));
        assert_eq!(
            r.ports,
            vec![
                Port {
                    protocol: Protocol::Tcp,
                    port: Some(PortValue::Number(80)),
                    end_port: None
                },
                Port {
                    protocol: Protocol::Udp,
                    port: Some(PortValue::Name("dns".into())),
                    end_port: None
                },
                Port {
                    protocol: Protocol::Tcp,
                    port: Some(PortValue::Number(32000)),
                    end_port: Some(32768)
                },
            ]
        );
        assert!(!r.invalid_ports);
    }
}
