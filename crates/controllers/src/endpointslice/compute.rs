//! The EndpointSlices a Service should have, and the fewest writes to get
//! there from the current ones (pure; upstream's endpointslice reconciler).
//!
//! Endpoints are grouped by their resolved port set (named target ports can
//! differ per pod); each group fills at most [`MAX_ENDPOINTS`] per slice.
//! Endpoints already in a slice stay there, new ones fill slices with room
//! before new slices are made, emptied slices go, and a Service with no
//! endpoints keeps one empty "placeholder" slice, as upstream.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::endpoints::compute::{HEADLESS, has_cluster_ip};
use crate::endpoints::pods;

/// Upstream's default `--max-endpoints-per-slice`.
pub const MAX_ENDPOINTS: usize = 100;
pub const SERVICE_NAME: &str = "kubernetes.io/service-name";
pub const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
pub const CONTROLLER: &str = "endpointslice-controller.k8s.io";

pub type PortsKey = Vec<(String, i32, String)>;

fn ports_key(ports: &[EndpointPort]) -> PortsKey {
    let mut k: PortsKey = ports
        .iter()
        .map(|p| {
            (
                p.name.clone().unwrap_or_default(),
                p.port.unwrap_or(0),
                p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            )
        })
        .collect();
    k.sort();
    k
}

/// The identity of an endpoint across syncs: its pod, else its address.
fn endpoint_id(e: &Endpoint) -> String {
    e.target_ref
        .as_ref()
        .and_then(|r| r.uid.clone())
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| e.addresses.join(","))
}

/// Every selected pod's endpoint, grouped by port set.
pub fn desired_endpoints(
    svc: &Service,
    selected: &[&Pod],
    zone_of: &dyn Fn(&str) -> Option<String>,
) -> BTreeMap<PortsKey, (Vec<EndpointPort>, Vec<Endpoint>)> {
    let mut out: BTreeMap<PortsKey, (Vec<EndpointPort>, Vec<Endpoint>)> = BTreeMap::new();
    let Some(spec) = svc.spec.as_ref() else {
        return out;
    };
    let publish = spec.publish_not_ready_addresses.unwrap_or(false);
    let family = pods::service_family(svc);
    let mut sorted: Vec<&&Pod> = selected.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for pod in sorted {
        if !pods::should_be_in_endpoints(pod, true) {
            continue;
        }
        let Some(ip) = pods::pod_ip(pod, family) else {
            continue;
        };
        let ports: Vec<EndpointPort> = spec
            .ports
            .iter()
            .flatten()
            .filter_map(|sp| {
                Some(EndpointPort {
                    name: Some(sp.name.clone().unwrap_or_default()),
                    port: Some(pods::find_port(pod, sp)?),
                    protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
                    app_protocol: sp.app_protocol.clone(),
                })
            })
            .collect();
        let serving = pods::is_ready(pod);
        let terminating = pods::is_terminating(pod);
        let node = pods::node_name(pod);
        let ep = Endpoint {
            addresses: vec![ip],
            conditions: Some(EndpointConditions {
                ready: Some(publish || (serving && !terminating)),
                serving: Some(serving),
                terminating: Some(terminating),
            }),
            hostname: pods::hostname(pod, svc),
            zone: node.as_deref().and_then(zone_of),
            node_name: node,
            target_ref: Some(pods::target_ref(pod)),
            ..Endpoint::default()
        };
        out.entry(ports_key(&ports))
            .or_insert_with(|| (ports, Vec::new()))
            .1
            .push(ep);
    }
    out
}

/// The labels a managed slice carries (upstream's `setEndpointSliceLabels`).
pub fn slice_labels(svc: &Service) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = svc
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k != SERVICE_NAME && k != MANAGED_BY)
        .collect();
    if has_cluster_ip(svc) {
        labels.remove(HEADLESS);
    } else {
        labels.insert(HEADLESS.into(), String::new());
    }
    labels.insert(
        SERVICE_NAME.into(),
        svc.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(MANAGED_BY.into(), CONTROLLER.into());
    labels
}

fn owner(svc: &Service) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Service".into(),
        name: svc.metadata.name.clone().unwrap_or_default(),
        uid: svc.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// What every slice of one owner and address type carries.
#[derive(Debug, Clone)]
pub struct SliceMeta {
    pub namespace: Option<String>,
    /// `<service>-`: the server names each slice.
    pub generate_name: String,
    pub labels: BTreeMap<String, String>,
    pub owner: OwnerReference,
    pub address_type: String,
}

impl SliceMeta {
    fn new_slice(&self, ports: Vec<EndpointPort>, eps: Vec<Endpoint>) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                generate_name: Some(self.generate_name.clone()),
                namespace: self.namespace.clone(),
                labels: Some(self.labels.clone()),
                owner_references: Some(vec![self.owner.clone()]),
                ..ObjectMeta::default()
            },
            address_type: self.address_type.clone(),
            endpoints: eps,
            ports: Some(ports),
        }
    }

    fn up_to_date(&self, s: &EndpointSlice) -> bool {
        s.metadata.labels.clone().unwrap_or_default() == self.labels
            && s.metadata.owner_references.as_ref().is_some_and(|o| {
                o.iter()
                    .any(|r| r.uid == self.owner.uid && r.controller == Some(true))
            })
    }

    fn stamp(&self, s: &mut EndpointSlice) {
        s.metadata.labels = Some(self.labels.clone());
        s.metadata.owner_references = Some(vec![self.owner.clone()]);
    }
}

/// The writes that bring `existing` (this Service's managed slices) to the desired state.
#[derive(Debug, Default)]
pub struct Changes {
    pub create: Vec<EndpointSlice>,
    pub update: Vec<EndpointSlice>,
    /// Names of slices to delete.
    pub delete: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }
}

/// Endpoints grouped by port set, as [`desired_endpoints`] returns them.
pub type Groups = BTreeMap<PortsKey, (Vec<EndpointPort>, Vec<Endpoint>)>;

/// Groups `(ports, endpoints)` by port set.
pub fn group(items: Vec<(Vec<EndpointPort>, Endpoint)>) -> Groups {
    let mut out = Groups::new();
    for (ports, ep) in items {
        out.entry(ports_key(&ports))
            .or_insert_with(|| (ports, Vec::new()))
            .1
            .push(ep);
    }
    out
}

pub fn reconcile(
    svc: &Service,
    selected: &[&Pod],
    existing: &[EndpointSlice],
    zone_of: &dyn Fn(&str) -> Option<String>,
) -> Changes {
    let meta = SliceMeta {
        namespace: svc.metadata.namespace.clone(),
        generate_name: format!("{}-", svc.metadata.name.as_deref().unwrap_or_default()),
        labels: slice_labels(svc),
        owner: owner(svc),
        address_type: pods::service_family(svc).to_string(),
    };
    let want = desired_endpoints(svc, selected, zone_of);
    let mut changes = Changes::default();
    // Slices of another address type than the Service's go.
    let (mine, other): (Vec<&EndpointSlice>, Vec<&EndpointSlice>) = existing
        .iter()
        .partition(|s| s.address_type == meta.address_type);
    changes
        .delete
        .extend(other.iter().filter_map(|s| s.metadata.name.clone()));
    plan(&meta, want, mine, true, &mut changes);
    changes
}

/// The slices of one owner and address type: endpoints already in a slice
/// stay there, new ones fill slices with room, then new slices; emptied
/// slices go; with nothing to list, one empty placeholder stays if asked.
pub fn plan(
    meta: &SliceMeta,
    mut want: Groups,
    mut mine: Vec<&EndpointSlice>,
    placeholder: bool,
    changes: &mut Changes,
) {
    mine.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    if want.values().all(|(_, eps)| eps.is_empty()) {
        if !placeholder {
            changes
                .delete
                .extend(mine.iter().filter_map(|s| s.metadata.name.clone()));
            return;
        }
        // The placeholder: one slice, no endpoints, no ports.
        let empty_ports = |s: &EndpointSlice| s.ports.as_ref().is_none_or(Vec::is_empty);
        let keep = mine
            .iter()
            .position(|s| s.endpoints.is_empty() && empty_ports(s))
            .unwrap_or(0);
        if mine.is_empty() {
            changes.create.push(meta.new_slice(Vec::new(), Vec::new()));
        } else {
            let s = mine.remove(keep);
            if !s.endpoints.is_empty() || !empty_ports(s) || !meta.up_to_date(s) {
                let mut u = s.clone();
                u.endpoints.clear();
                u.ports = Some(Vec::new());
                meta.stamp(&mut u);
                changes.update.push(u);
            }
            changes
                .delete
                .extend(mine.iter().filter_map(|s| s.metadata.name.clone()));
        }
        return;
    }

    // Existing slices keep the endpoints still wanted in their port group.
    let mut kept: Vec<(EndpointSlice, bool)> = Vec::new();
    for s in mine {
        let key = ports_key(s.ports.as_deref().unwrap_or_default());
        let Some((_, eps)) = want.get_mut(&key) else {
            if let Some(n) = s.metadata.name.clone() {
                changes.delete.push(n);
            }
            continue;
        };
        let mut next = Vec::new();
        for old in &s.endpoints {
            let id = endpoint_id(old);
            if let Some(pos) = eps.iter().position(|e| endpoint_id(e) == id)
                && next.len() < MAX_ENDPOINTS
            {
                next.push(eps.remove(pos));
            }
        }
        if next.is_empty() {
            if let Some(n) = s.metadata.name.clone() {
                changes.delete.push(n);
            }
            continue;
        }
        let changed = next != s.endpoints || !meta.up_to_date(s);
        let mut u = s.clone();
        u.endpoints = next;
        kept.push((u, changed));
    }
    // New endpoints fill slices with room, then new slices.
    for (key, (ports, eps)) in want.iter_mut() {
        for (s, changed) in kept.iter_mut() {
            if eps.is_empty() {
                break;
            }
            if &ports_key(s.ports.as_deref().unwrap_or_default()) != key {
                continue;
            }
            let room = MAX_ENDPOINTS.saturating_sub(s.endpoints.len());
            if room > 0 {
                let take = room.min(eps.len());
                s.endpoints.extend(eps.drain(..take));
                *changed = true;
            }
        }
        while !eps.is_empty() {
            let take = MAX_ENDPOINTS.min(eps.len());
            let chunk: Vec<Endpoint> = eps.drain(..take).collect();
            changes.create.push(meta.new_slice(ports.clone(), chunk));
        }
    }
    for (mut s, changed) in kept {
        if changed {
            meta.stamp(&mut s);
            changes.update.push(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(headless: bool) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "a", "uid": "svc-uid", "labels": {"tier": "front"}},
            "spec": {"selector": {"app": "web"}, "clusterIP": if headless {"None"} else {"10.43.1.1"},
                "ipFamilies": ["IPv4"],
                "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]}}))
        .unwrap()
    }

    fn pod(i: usize, ready: bool, terminating: bool) -> Pod {
        let mut meta = json!({"name": format!("p{i:04}"), "namespace": "a", "uid": format!("u{i}"), "labels": {"app": "web"}});
        if terminating {
            meta["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({
            "metadata": meta,
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": {"phase": "Running", "podIP": format!("10.42.{}.{}", i / 200, i % 200 + 1),
                "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
        }))
        .unwrap()
    }

    fn zone(_: &str) -> Option<String> {
        Some("z1".into())
    }

    fn apply(existing: &mut Vec<EndpointSlice>, c: Changes) {
        existing.retain(|s| !c.delete.contains(s.metadata.name.as_ref().unwrap()));
        for u in c.update {
            let slot = existing
                .iter_mut()
                .find(|s| s.metadata.name == u.metadata.name)
                .unwrap();
            *slot = u;
        }
        for (i, mut s) in c.create.into_iter().enumerate() {
            s.metadata.name = Some(format!("web-{}{i}", existing.len()));
            existing.push(s);
        }
    }

    #[test]
    fn conditions_and_metadata() {
        let pods = [
            pod(0, true, false),
            pod(1, false, false),
            pod(2, true, true),
        ];
        let sel: Vec<&Pod> = pods.iter().collect();
        let c = reconcile(&svc(false), &sel, &[], &zone);
        assert_eq!(c.create.len(), 1);
        let s = &c.create[0];
        assert_eq!(s.address_type, "IPv4");
        assert_eq!(s.metadata.generate_name.as_deref(), Some("web-"));
        let labels = s.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[SERVICE_NAME], "web");
        assert_eq!(labels[MANAGED_BY], CONTROLLER);
        assert_eq!(labels["tier"], "front");
        assert!(!labels.contains_key(HEADLESS));
        assert_eq!(
            s.metadata.owner_references.as_ref().unwrap()[0].uid,
            "svc-uid"
        );
        assert_eq!(s.ports.as_ref().unwrap()[0].port, Some(8080));
        let cond: Vec<(bool, bool, bool)> = s
            .endpoints
            .iter()
            .map(|e| {
                let c = e.conditions.as_ref().unwrap();
                (c.ready.unwrap(), c.serving.unwrap(), c.terminating.unwrap())
            })
            .collect();
        // ready/serving/terminating: ready pod, unready pod, terminating ready pod.
        assert_eq!(
            cond,
            vec![
                (true, true, false),
                (false, false, false),
                (false, true, true)
            ]
        );
        assert_eq!(s.endpoints[0].zone.as_deref(), Some("z1"));
        assert_eq!(s.endpoints[0].node_name.as_deref(), Some("n1"));
        let h = reconcile(&svc(true), &sel, &[], &zone);
        assert!(
            h.create[0]
                .metadata
                .labels
                .as_ref()
                .unwrap()
                .contains_key(HEADLESS)
        );
    }

    #[test]
    fn hundred_per_slice_and_minimal_churn() {
        let pods: Vec<Pod> = (0..250).map(|i| pod(i, true, false)).collect();
        let s = svc(false);
        let mut slices = Vec::new();
        let sel: Vec<&Pod> = pods.iter().collect();
        let c = reconcile(&s, &sel, &slices, &zone);
        apply(&mut slices, c);
        let mut sizes: Vec<usize> = slices.iter().map(|x| x.endpoints.len()).collect();
        sizes.sort();
        assert_eq!(sizes, vec![50, 100, 100]);
        // Steady state: nothing to write.
        assert!(reconcile(&s, &sel, &slices, &zone).is_empty());
        // Scale down to 30: only slices holding survivors stay, one write each.
        let sel: Vec<&Pod> = pods[..30].iter().collect();
        let c = reconcile(&s, &sel, &slices, &zone);
        assert!(c.create.is_empty());
        apply(&mut slices, c);
        let total: usize = slices.iter().map(|x| x.endpoints.len()).sum();
        assert_eq!(total, 30);
        assert_eq!(slices.len(), 1);
        // New pods fill the slice with room before a new slice is made.
        let sel: Vec<&Pod> = pods[..130].iter().collect();
        let c = reconcile(&s, &sel, &slices, &zone);
        assert_eq!((c.create.len(), c.update.len()), (1, 1));
        apply(&mut slices, c);
        assert_eq!(slices.iter().map(|x| x.endpoints.len()).sum::<usize>(), 130);
    }

    #[test]
    fn placeholder_when_no_endpoints() {
        let s = svc(false);
        let c = reconcile(&s, &[], &[], &zone);
        assert_eq!(c.create.len(), 1);
        assert!(c.create[0].endpoints.is_empty());
        let mut slices = Vec::new();
        apply(&mut slices, c);
        assert!(reconcile(&s, &[], &slices, &zone).is_empty());
        // A pod appears: the placeholder has other (no) ports, so it goes.
        let pods = [pod(0, true, false)];
        let sel: Vec<&Pod> = pods.iter().collect();
        let c = reconcile(&s, &sel, &slices, &zone);
        assert_eq!((c.create.len(), c.delete.len()), (1, 1));
    }
}
