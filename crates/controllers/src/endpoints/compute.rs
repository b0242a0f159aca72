//! The Endpoints object a Service should have (pure): upstream's
//! `syncService` of the endpoints controller, `RepackSubsets` and
//! `truncateEndpoints`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Pod, Service,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::pods;

/// Most addresses an Endpoints object holds (upstream's `maxCapacity`).
pub const MAX_CAPACITY: usize = 1000;
pub const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
pub const TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
pub const HEADLESS: &str = "service.kubernetes.io/headless";

/// Whether the controller manages endpoints for this Service at all: not
/// ExternalName and with a selector (Services without one are left alone).
pub fn managed(svc: &Service) -> bool {
    let Some(spec) = svc.spec.as_ref() else {
        return false;
    };
    spec.type_.as_deref() != Some("ExternalName") && spec.selector.is_some()
}

/// A cluster IP is set (not empty, not `None`).
pub fn has_cluster_ip(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .is_some_and(|ip| !ip.is_empty() && ip != "None")
}

/// Pods the Service selects, among `pods` of any namespace.
pub fn selected<'a>(svc: &Service, pods: &'a [Pod]) -> Vec<&'a Pod> {
    let Some(sel) = svc.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return Vec::new();
    };
    pods.iter()
        .filter(|p| p.metadata.namespace == svc.metadata.namespace)
        .filter(|p| pods::selector_matches(sel, p.metadata.labels.as_ref()))
        .collect()
}

/// One (address, ports, ready?) entry before repacking.
struct Entry {
    addr: EndpointAddress,
    port: Option<EndpointPort>,
    ready: bool,
}

/// Upstream's subsets for the Service from its selected pods.
pub fn subsets(svc: &Service, selected: &[&Pod]) -> Vec<EndpointSubset> {
    let Some(spec) = svc.spec.as_ref() else {
        return Vec::new();
    };
    let tolerate_unready = spec.publish_not_ready_addresses.unwrap_or(false);
    let family = pods::service_family(svc);
    let mut entries = Vec::new();
    for pod in selected {
        if !pods::should_be_in_endpoints(pod, tolerate_unready) {
            continue;
        }
        let Some(ip) = pods::pod_ip(pod, family) else {
            continue;
        };
        let addr = EndpointAddress {
            ip,
            hostname: pods::hostname(pod, svc),
            node_name: pods::node_name(pod),
            target_ref: Some(pods::target_ref(pod)),
        };
        let ready = tolerate_unready || pods::is_ready(pod);
        let ports = spec.ports.as_deref().unwrap_or_default();
        if ports.is_empty() && !has_cluster_ip(svc) {
            entries.push(Entry {
                addr,
                port: None,
                ready,
            });
            continue;
        }
        for sp in ports {
            // A named port the pod does not have: this pod serves no such port.
            let Some(port) = pods::find_port(pod, sp) else {
                continue;
            };
            entries.push(Entry {
                addr: addr.clone(),
                port: Some(EndpointPort {
                    name: sp.name.clone(),
                    port,
                    protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
                    app_protocol: sp.app_protocol.clone(),
                }),
                ready,
            });
        }
    }
    repack(entries)
}

fn port_key(p: &EndpointPort) -> (String, i32, String) {
    (
        p.name.clone().unwrap_or_default(),
        p.port,
        p.protocol.clone().unwrap_or_default(),
    )
}

fn addr_key(a: &EndpointAddress) -> (String, String) {
    let uid = a
        .target_ref
        .as_ref()
        .and_then(|r| r.uid.clone())
        .unwrap_or_default();
    (a.ip.clone(), uid)
}

/// `RepackSubsets`: addresses with the same set of ports share one subset;
/// addresses sorted by IP, subsets in a stable order.
fn repack(entries: Vec<Entry>) -> Vec<EndpointSubset> {
    type AddrKey = (String, String);
    let mut addrs: BTreeMap<(AddrKey, bool), (EndpointAddress, Vec<EndpointPort>)> =
        BTreeMap::new();
    for e in entries {
        let slot = addrs
            .entry((addr_key(&e.addr), e.ready))
            .or_insert_with(|| (e.addr.clone(), Vec::new()));
        if let Some(p) = e.port
            && !slot.1.iter().any(|q| port_key(q) == port_key(&p))
        {
            slot.1.push(p);
        }
    }
    let mut by_ports: BTreeMap<Vec<(String, i32, String)>, EndpointSubset> = BTreeMap::new();
    for ((_, ready), (addr, mut ports)) in addrs {
        ports.sort_by_key(port_key);
        let key: Vec<_> = ports.iter().map(port_key).collect();
        let subset = by_ports.entry(key).or_insert_with(|| EndpointSubset {
            ports: (!ports.is_empty()).then_some(ports),
            ..EndpointSubset::default()
        });
        let list = if ready {
            subset.addresses.get_or_insert_with(Vec::new)
        } else {
            subset.not_ready_addresses.get_or_insert_with(Vec::new)
        };
        list.push(addr);
    }
    by_ports.into_values().collect()
}

/// `truncateEndpoints`: at most [`MAX_CAPACITY`] addresses, ready ones first,
/// each subset keeping its share. Returns whether anything was cut.
pub fn truncate(subsets: &mut [EndpointSubset]) -> bool {
    let len = |v: &Option<Vec<EndpointAddress>>| v.as_ref().map_or(0, Vec::len);
    let total_ready: usize = subsets.iter().map(|s| len(&s.addresses)).sum();
    let total_not_ready: usize = subsets.iter().map(|s| len(&s.not_ready_addresses)).sum();
    if total_ready + total_not_ready <= MAX_CAPACITY {
        return false;
    }
    let truncate_ready = total_ready > MAX_CAPACITY;
    let (max, total) = if truncate_ready {
        (MAX_CAPACITY, total_ready)
    } else {
        (MAX_CAPACITY - total_ready, total_not_ready)
    };
    let mut room = max;
    for s in subsets.iter_mut() {
        let n = if truncate_ready {
            len(&s.addresses)
        } else {
            len(&s.not_ready_addresses)
        };
        // Each subset's share rounded up; the last one gets what is left.
        let share = (n * max).div_ceil(total.max(1)).min(room);
        if truncate_ready {
            if let Some(a) = s.addresses.as_mut() {
                a.truncate(share);
            }
            s.not_ready_addresses = None;
            room -= len(&s.addresses);
        } else {
            if let Some(a) = s.not_ready_addresses.as_mut() {
                a.truncate(share);
            }
            room -= len(&s.not_ready_addresses);
        }
    }
    true
}

/// The whole desired Endpoints object (labels, annotations, subsets), with
/// the trigger-time annotation left to the caller (it changes only on writes).
pub fn desired(svc: &Service, selected: &[&Pod]) -> Endpoints {
    let mut subsets = subsets(svc, selected);
    let truncated = truncate(&mut subsets);
    let mut labels = svc.metadata.labels.clone().unwrap_or_default();
    if has_cluster_ip(svc) {
        labels.remove(HEADLESS);
    } else {
        labels.insert(HEADLESS.into(), String::new());
    }
    let mut annotations = BTreeMap::new();
    if truncated {
        annotations.insert(OVER_CAPACITY.into(), "truncated".into());
    }
    Endpoints {
        metadata: ObjectMeta {
            name: svc.metadata.name.clone(),
            namespace: svc.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..ObjectMeta::default()
        },
        subsets: (!subsets.is_empty()).then_some(subsets),
    }
}

/// Whether `current` already says what `want` says (subsets, labels, the
/// capacity annotation), so no write is needed.
pub fn up_to_date(current: &Endpoints, want: &Endpoints) -> bool {
    let empty = |s: &Option<Vec<EndpointSubset>>| s.as_ref().is_none_or(Vec::is_empty);
    let same_subsets =
        current.subsets == want.subsets || (empty(&current.subsets) && empty(&want.subsets));
    let ann = |e: &Endpoints| {
        e.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(OVER_CAPACITY).cloned())
    };
    let labels = |e: &Endpoints| e.metadata.labels.clone().unwrap_or_default();
    same_subsets && labels(current) == labels(want) && ann(current) == ann(want)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn svc(extra: Value) -> Service {
        let mut v = json!({"metadata": {"name": "web", "namespace": "a", "labels": {"app": "web"}},
            "spec": {"selector": {"app": "web"}, "clusterIP": "10.43.1.1", "ipFamilies": ["IPv4"],
                "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]}});
        if let (Some(s), Some(e)) = (v["spec"].as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        serde_json::from_value(v).unwrap()
    }

    fn pod(name: &str, ip: &str, ready: bool, port: i32) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "a", "uid": format!("uid-{name}"), "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": port}]}]},
            "status": {"phase": "Running", "podIP": ip,
                "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
        }))
        .unwrap()
    }

    fn ips(v: &Option<Vec<EndpointAddress>>) -> Vec<String> {
        v.iter().flatten().map(|a| a.ip.clone()).collect()
    }

    #[test]
    fn ready_and_not_ready_with_named_ports() {
        let pods = vec![
            pod("p1", "10.42.0.2", true, 8080),
            pod("p2", "10.42.0.3", false, 8080),
            pod("p3", "10.42.0.1", true, 9090),
        ];
        let s = svc(json!({}));
        let sel = selected(&s, &pods);
        let subsets = subsets(&s, &sel);
        // Two port sets (8080 and 9090) → two subsets.
        assert_eq!(subsets.len(), 2);
        let s8080 = subsets
            .iter()
            .find(|x| x.ports.as_ref().unwrap()[0].port == 8080)
            .unwrap();
        assert_eq!(ips(&s8080.addresses), vec!["10.42.0.2"]);
        assert_eq!(ips(&s8080.not_ready_addresses), vec!["10.42.0.3"]);
        assert_eq!(
            s8080.ports.as_ref().unwrap()[0].name.as_deref(),
            Some("http")
        );
        let addr = &s8080.addresses.as_ref().unwrap()[0];
        assert_eq!(addr.node_name.as_deref(), Some("n1"));
        assert_eq!(
            addr.target_ref.as_ref().unwrap().name.as_deref(),
            Some("p1")
        );

        // publishNotReadyAddresses: everyone is ready.
        let s = svc(json!({"publishNotReadyAddresses": true}));
        let subsets = subsets_of(&s, &pods);
        let all: Vec<String> = subsets.iter().flat_map(|x| ips(&x.addresses)).collect();
        assert_eq!(all.len(), 3);
        assert!(subsets.iter().all(|x| x.not_ready_addresses.is_none()));
    }

    fn subsets_of(s: &Service, pods: &[Pod]) -> Vec<EndpointSubset> {
        subsets(s, &selected(s, pods))
    }

    #[test]
    fn unmatched_named_port_and_other_namespace() {
        let mut other = pod("x", "10.42.0.9", true, 8080);
        other.metadata.namespace = Some("b".into());
        let mut unnamed = pod("y", "10.42.0.8", true, 8080);
        unnamed.spec.as_mut().unwrap().containers[0].ports = None;
        let s = svc(json!({}));
        assert!(subsets_of(&s, &[other, unnamed]).is_empty());
    }

    #[test]
    fn headless_without_ports() {
        let s = svc(json!({"clusterIP": "None", "ports": []}));
        let subsets = subsets_of(&s, &[pod("p1", "10.42.0.2", true, 80)]);
        assert_eq!(subsets.len(), 1);
        assert!(subsets[0].ports.is_none());
        let d = desired(&s, &[]);
        assert_eq!(
            d.metadata.labels.unwrap().get(HEADLESS).map(String::as_str),
            Some("")
        );
    }

    #[test]
    fn over_capacity_truncates_ready_first() {
        let pods: Vec<Pod> = (0..1200)
            .map(|i| {
                pod(
                    &format!("p{i}"),
                    &format!("10.42.{}.{}", i / 250, i % 250 + 1),
                    i < 900,
                    8080,
                )
            })
            .collect();
        let s = svc(json!({}));
        let sel = selected(&s, &pods);
        let d = desired(&s, &sel);
        let sub = &d.subsets.as_ref().unwrap()[0];
        assert_eq!(ips(&sub.addresses).len(), 900);
        assert_eq!(ips(&sub.not_ready_addresses).len(), 100);
        assert_eq!(
            d.metadata
                .annotations
                .unwrap()
                .get(OVER_CAPACITY)
                .map(String::as_str),
            Some("truncated")
        );
        let few = desired(&s, &sel[..10]);
        assert!(few.metadata.annotations.is_none());
    }

    #[test]
    fn unchanged_needs_no_write() {
        let s = svc(json!({}));
        let pods = vec![pod("p1", "10.42.0.2", true, 8080)];
        let sel = selected(&s, &pods);
        let want = desired(&s, &sel);
        assert!(up_to_date(&want, &want));
        let other = desired(&s, &[]);
        assert!(!up_to_date(&other, &want));
    }
}
