//! Services and EndpointSlices as the model's plain data, as upstream's
//! ServiceChangeTracker / EndpointsChangeTracker read them.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::model::{Endpoint, Protocol, ServicePort};

/// The label naming an EndpointSlice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Upstream's default ClientIP affinity timeout (3 hours).
pub const DEFAULT_AFFINITY_TIMEOUT: u32 = 10800;

/// The ports of `svc` the proxy programs: none for headless, ExternalName and
/// IPv6-only Services; ports with an unknown protocol are skipped.
pub fn service_ports(svc: &Service) -> Vec<ServicePort> {
    let (Some(ns), Some(name), Some(spec)) = (
        svc.metadata.namespace.as_deref(),
        svc.metadata.name.as_deref(),
        svc.spec.as_ref(),
    ) else {
        return Vec::new();
    };
    let ty = spec.type_.as_deref().unwrap_or("ClusterIP");
    if ty == "ExternalName" {
        return Vec::new();
    }
    let cluster_ip = spec
        .cluster_ips
        .iter()
        .flatten()
        .chain(spec.cluster_ip.iter())
        .find_map(|ip| ip.parse::<Ipv4Addr>().ok());
    let Some(cluster_ip) = cluster_ip else {
        return Vec::new();
    };
    let external = ty == "NodePort" || ty == "LoadBalancer";
    let affinity_timeout = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
        spec.session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .and_then(|t| u32::try_from(t).ok())
            .unwrap_or(DEFAULT_AFFINITY_TIMEOUT)
    });
    let external_ips: Vec<Ipv4Addr> = spec
        .external_ips
        .iter()
        .flatten()
        .filter_map(|ip| ip.parse().ok())
        .collect();
    spec.ports
        .iter()
        .flatten()
        .filter_map(|p| {
            let protocol = Protocol::parse(p.protocol.as_deref().unwrap_or("TCP"))?;
            Some(ServicePort {
                namespace: ns.to_string(),
                name: name.to_string(),
                port_name: p.name.clone().unwrap_or_default(),
                protocol,
                cluster_ip,
                port: u16::try_from(p.port).ok()?,
                node_port: p
                    .node_port
                    .filter(|_| external)
                    .and_then(|n| u16::try_from(n).ok())
                    .filter(|n| *n != 0),
                external_ips: external_ips.clone(),
                affinity_timeout,
                internal_local: spec.internal_traffic_policy.as_deref() == Some("Local"),
                external_local: (external || !external_ips.is_empty())
                    && spec.external_traffic_policy.as_deref() == Some("Local"),
            })
        })
        .collect()
}

/// The endpoints of `sp` in `slices` (the Service's own slices): the slice
/// port with the same name and protocol, each endpoint's first address, the
/// conditions defaulted as upstream (ready unset = ready, serving unset =
/// ready, terminating unset = false). An address in several slices counts once.
pub fn endpoints(sp: &ServicePort, slices: &[&EndpointSlice]) -> Vec<Endpoint> {
    let mut out: BTreeMap<(Ipv4Addr, u16), Endpoint> = BTreeMap::new();
    for slice in slices {
        if slice.address_type != "IPv4" {
            continue;
        }
        let port = slice.ports.iter().flatten().find(|p| {
            p.name.as_deref().unwrap_or("") == sp.port_name
                && Protocol::parse(p.protocol.as_deref().unwrap_or("TCP")) == Some(sp.protocol)
        });
        let Some(port) = port
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        for ep in &slice.endpoints {
            let Some(ip) = ep
                .addresses
                .first()
                .and_then(|a| a.parse::<Ipv4Addr>().ok())
            else {
                continue;
            };
            let cond = ep.conditions.as_ref();
            let ready = cond.and_then(|c| c.ready).unwrap_or(true);
            let e = Endpoint {
                ip,
                port,
                ready,
                serving: cond.and_then(|c| c.serving).unwrap_or(ready),
                terminating: cond.and_then(|c| c.terminating).unwrap_or(false),
                node_name: ep.node_name.clone(),
            };
            // A duplicate that is ready wins over one that is not.
            match out.get(&(ip, port)) {
                Some(prev) if prev.ready || !e.ready => {}
                _ => {
                    out.insert((ip, port), e);
                }
            }
        }
    }
    out.into_values().collect()
}

/// Every Service port with its endpoints, in a stable order.
pub fn inputs(
    services: &[Arc<Service>],
    slices: &[Arc<EndpointSlice>],
) -> Vec<(ServicePort, Vec<Endpoint>)> {
    let mut by_service: HashMap<(&str, &str), Vec<&EndpointSlice>> = HashMap::new();
    for s in slices {
        let ns = s.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(svc) = s
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
        {
            by_service.entry((ns, svc.as_str())).or_default().push(s);
        }
    }
    let mut out: Vec<(ServicePort, Vec<Endpoint>)> = services
        .iter()
        .flat_map(|svc| service_ports(svc))
        .map(|sp| {
            let eps = by_service
                .get(&(sp.namespace.as_str(), sp.name.as_str()))
                .map(|s| endpoints(&sp, s))
                .unwrap_or_default();
            (sp, eps)
        })
        .collect();
    out.sort_by_key(|a| a.0.key());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(json: serde_json::Value) -> Service {
        serde_json::from_value(json).expect("service")
    }

    fn slice(json: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json).expect("slice")
    }

    #[test]
    fn service_ports_by_type() {
        let base = |spec: serde_json::Value| {
            svc(serde_json::json!({"metadata": {"namespace": "ns", "name": "web"}, "spec": spec}))
        };
        /// (port name, port, nodePort, affinity timeout, iTP Local, eTP Local)
        type Want = (&'static str, u16, Option<u16>, Option<u32>, bool, bool);
        struct Case {
            what: &'static str,
            spec: serde_json::Value,
            want: Vec<Want>,
        }
        let cases = [
            Case {
                what: "ClusterIP, two ports",
                spec: serde_json::json!({"clusterIP": "10.43.0.5", "ports": [
                    {"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP", "nodePort": 30001}]}),
                want: vec![
                    ("http", 80, None, None, false, false),
                    ("dns", 53, None, None, false, false),
                ],
            },
            Case {
                what: "headless",
                spec: serde_json::json!({"clusterIP": "None", "ports": [{"port": 80}]}),
                want: vec![],
            },
            Case {
                what: "ExternalName",
                spec: serde_json::json!({"type": "ExternalName", "externalName": "x.example", "ports": [{"port": 80}]}),
                want: vec![],
            },
            Case {
                what: "IPv6 only",
                spec: serde_json::json!({"clusterIP": "fd00::5", "ports": [{"port": 80}]}),
                want: vec![],
            },
            Case {
                what: "NodePort, Local policies, affinity with default timeout",
                spec: serde_json::json!({"type": "NodePort", "clusterIP": "10.43.0.5", "sessionAffinity": "ClientIP",
                    "externalTrafficPolicy": "Local", "internalTrafficPolicy": "Local",
                    "ports": [{"port": 80, "nodePort": 30080}]}),
                want: vec![("", 80, Some(30080), Some(10800), true, true)],
            },
            Case {
                what: "affinity timeout from the Service; eTP Local means nothing without external access",
                spec: serde_json::json!({"clusterIP": "10.43.0.5", "sessionAffinity": "ClientIP",
                    "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}},
                    "externalTrafficPolicy": "Local", "ports": [{"port": 80}]}),
                want: vec![("", 80, None, Some(60), false, false)],
            },
        ];
        for c in cases {
            let got: Vec<_> = service_ports(&base(c.spec))
                .into_iter()
                .map(|p| {
                    (
                        if p.port_name == "http" {
                            "http"
                        } else if p.port_name == "dns" {
                            "dns"
                        } else {
                            ""
                        },
                        p.port,
                        p.node_port,
                        p.affinity_timeout,
                        p.internal_local,
                        p.external_local,
                    )
                })
                .collect();
            assert_eq!(got, c.want, "{}", c.what);
        }
        let ports = service_ports(&base(
            serde_json::json!({"clusterIP": "10.43.0.5", "ports": [
            {"name": "dns", "port": 53, "protocol": "UDP"}]}),
        ));
        assert_eq!(ports[0].protocol, Protocol::Udp);
        assert_eq!(ports[0].key(), "ns/web/udp/dns");
    }

    #[test]
    fn endpoints_match_port_name_and_protocol_and_default_conditions() {
        let sp = &service_ports(&svc(
            serde_json::json!({"metadata": {"namespace": "ns", "name": "web"},
            "spec": {"clusterIP": "10.43.0.5", "ports": [{"name": "http", "port": 80}]}}),
        ))[0];
        let a = slice(
            serde_json::json!({"metadata": {"name": "web-a"}, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "other", "port": 9}],
            "endpoints": [
                {"addresses": ["10.42.0.5"], "nodeName": "n1"},
                {"addresses": ["10.42.0.6"], "conditions": {"ready": false}},
                {"addresses": ["10.42.0.7"], "conditions": {"ready": false, "serving": true, "terminating": true}},
                {"addresses": ["not-an-ip"]}]}),
        );
        // The same address again, ready this time, in a second slice.
        let b = slice(
            serde_json::json!({"metadata": {"name": "web-b"}, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": ["10.42.0.6"], "conditions": {"ready": true}}]}),
        );
        let udp = slice(
            serde_json::json!({"metadata": {"name": "web-c"}, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8081, "protocol": "UDP"}],
            "endpoints": [{"addresses": ["10.42.0.9"]}]}),
        );
        let v6 = slice(
            serde_json::json!({"metadata": {"name": "web-d"}, "addressType": "IPv6",
            "ports": [{"name": "http", "port": 8080}], "endpoints": [{"addresses": ["fd00::1"]}]}),
        );
        let got: Vec<(String, u16, bool, bool, bool, Option<String>)> =
            endpoints(sp, &[&a, &b, &udp, &v6])
                .into_iter()
                .map(|e| {
                    (
                        e.ip.to_string(),
                        e.port,
                        e.ready,
                        e.serving,
                        e.terminating,
                        e.node_name,
                    )
                })
                .collect();
        assert_eq!(
            got,
            vec![
                (
                    "10.42.0.5".into(),
                    8080,
                    true,
                    true,
                    false,
                    Some("n1".into())
                ),
                ("10.42.0.6".into(), 8080, true, true, false, None),
                ("10.42.0.7".into(), 8080, false, true, true, None),
            ]
        );
    }

    #[test]
    fn inputs_pair_services_with_their_own_slices() {
        let services = vec![
            Arc::new(svc(
                serde_json::json!({"metadata": {"namespace": "b", "name": "web"},
                "spec": {"clusterIP": "10.43.0.6", "ports": [{"port": 80}]}}),
            )),
            Arc::new(svc(
                serde_json::json!({"metadata": {"namespace": "a", "name": "web"},
                "spec": {"clusterIP": "10.43.0.5", "ports": [{"port": 80}]}}),
            )),
        ];
        let slices = vec![Arc::new(slice(
            serde_json::json!({"metadata": {"namespace": "a", "name": "web-x",
            "labels": {"kubernetes.io/service-name": "web"}}, "addressType": "IPv4",
            "ports": [{"port": 80}], "endpoints": [{"addresses": ["10.42.0.5"]}]}),
        ))];
        let got = inputs(&services, &slices);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0.namespace, "a");
        assert_eq!(got[0].1.len(), 1);
        assert_eq!(got[1].0.namespace, "b");
        assert!(
            got[1].1.is_empty(),
            "another namespace's slice is not b/web's"
        );
    }
}
