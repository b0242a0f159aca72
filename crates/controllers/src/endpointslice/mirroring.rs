//! The EndpointSlice mirroring controller (upstream
//! `pkg/controller/endpointslicemirroring`): a Service without a selector
//! whose Endpoints someone wrote by hand gets those addresses as
//! EndpointSlices too (managed by `endpointslicemirroring-controller.k8s.io`,
//! owned by the Endpoints), so consumers of slices — the proxy, DNS — see
//! them. Endpoints labelled `endpointslice.kubernetes.io/skip-mirror: "true"`
//! (like the API server's own) are not mirrored.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ListParams};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::compute::{self, Changes, Groups, MANAGED_BY, SERVICE_NAME, SliceMeta};
use crate::Error;
use crate::endpoints::compute::TRIGGER_TIME;
use crate::endpoints::driver::{self, Key, Queue};

pub const CONTROLLER: &str = "endpointslicemirroring-controller.k8s.io";
pub const SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
/// Upstream mirrors at most this many addresses of each subset.
pub const MAX_PER_SUBSET: usize = 1000;

/// Whether these Endpoints are mirrored: their Service exists without a
/// selector and they do not opt out.
pub fn should_mirror(svc: Option<&Service>, ep: Option<&Endpoints>) -> bool {
    let (Some(svc), Some(ep)) = (svc, ep) else {
        return false;
    };
    let selectorless = svc.spec.as_ref().is_none_or(|s| s.selector.is_none());
    let skip = ep
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(SKIP_MIRROR))
        .is_some_and(|v| v == "true");
    selectorless && !skip && ep.metadata.deletion_timestamp.is_none()
}

fn address_type(ip: &str) -> Option<&'static str> {
    match ip.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(_) => Some("IPv4"),
        std::net::IpAddr::V6(_) => Some("IPv6"),
    }
}

/// The endpoints to mirror, by address type then port set.
pub fn desired(ep: &Endpoints) -> BTreeMap<String, Groups> {
    let mut by_type: BTreeMap<String, Vec<(Vec<EndpointPort>, Endpoint)>> = BTreeMap::new();
    for subset in ep.subsets.iter().flatten() {
        let ports: Vec<EndpointPort> = subset
            .ports
            .iter()
            .flatten()
            .map(|p| EndpointPort {
                name: Some(p.name.clone().unwrap_or_default()),
                port: Some(p.port),
                protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: p.app_protocol.clone(),
            })
            .collect();
        let addrs = subset
            .addresses
            .iter()
            .flatten()
            .map(|a| (a, true))
            .chain(
                subset
                    .not_ready_addresses
                    .iter()
                    .flatten()
                    .map(|a| (a, false)),
            )
            .take(MAX_PER_SUBSET);
        for (a, ready) in addrs {
            let Some(ty) = address_type(&a.ip) else {
                continue;
            };
            let endpoint = Endpoint {
                addresses: vec![a.ip.clone()],
                conditions: Some(EndpointConditions {
                    ready: Some(ready),
                    ..EndpointConditions::default()
                }),
                hostname: a.hostname.clone().filter(|h| !h.is_empty()),
                node_name: a.node_name.clone(),
                target_ref: a.target_ref.clone(),
                ..Endpoint::default()
            };
            by_type
                .entry(ty.to_string())
                .or_default()
                .push((ports.clone(), endpoint));
        }
    }
    by_type
        .into_iter()
        .map(|(ty, items)| (ty, compute::group(items)))
        .collect()
}

/// The labels of a mirrored slice: the Endpoints' own, plus ours.
pub fn labels(ep: &Endpoints) -> BTreeMap<String, String> {
    let mut l: BTreeMap<String, String> = ep
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k != SERVICE_NAME && k != MANAGED_BY && k != SKIP_MIRROR)
        .collect();
    l.insert(
        SERVICE_NAME.into(),
        ep.metadata.name.clone().unwrap_or_default(),
    );
    l.insert(MANAGED_BY.into(), CONTROLLER.into());
    l
}

/// The writes that make `existing` mirror `ep` (or go, when not mirrored).
pub fn reconcile(
    svc: Option<&Service>,
    ep: Option<&Endpoints>,
    existing: &[EndpointSlice],
) -> Changes {
    let mut changes = Changes::default();
    let Some(ep) = ep.filter(|e| should_mirror(svc, Some(e))) else {
        changes
            .delete
            .extend(existing.iter().filter_map(|s| s.metadata.name.clone()));
        return changes;
    };
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "Endpoints".into(),
        name: ep.metadata.name.clone().unwrap_or_default(),
        uid: ep.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let mut want = desired(ep);
    let mut types: Vec<String> = want.keys().cloned().collect();
    for s in existing {
        if !types.contains(&s.address_type) {
            types.push(s.address_type.clone());
        }
    }
    for ty in types {
        let meta = SliceMeta {
            namespace: ep.metadata.namespace.clone(),
            generate_name: format!("{}-", ep.metadata.name.as_deref().unwrap_or_default()),
            labels: labels(ep),
            owner: owner.clone(),
            address_type: ty.clone(),
        };
        let mine: Vec<&EndpointSlice> = existing.iter().filter(|s| s.address_type == ty).collect();
        compute::plan(
            &meta,
            want.remove(&ty).unwrap_or_default(),
            mine,
            false,
            &mut changes,
        );
    }
    changes
}

fn key(m: &kube::api::ObjectMeta) -> Option<Key> {
    Some((m.namespace.clone()?, m.name.clone()?))
}

/// Runs the controller: Services, Endpoints and mirrored slices trigger a
/// sync of their (namespace, name).
pub async fn run(client: kube::Client) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let tasks = [
        tokio::spawn(driver::watch_owned(
            Api::<Service>::all(client.clone()),
            |s: &Service| key(&s.metadata),
            tx.clone(),
        )),
        tokio::spawn(driver::watch_owned(
            Api::<Endpoints>::all(client.clone()),
            |e: &Endpoints| key(&e.metadata),
            tx.clone(),
        )),
        tokio::spawn(driver::watch_owned(
            Api::<EndpointSlice>::all(client.clone()),
            |s: &EndpointSlice| {
                let l = s.metadata.labels.as_ref()?;
                (l.get(MANAGED_BY).map(String::as_str) == Some(CONTROLLER))
                    .then(|| Some((s.metadata.namespace.clone()?, l.get(SERVICE_NAME)?.clone())))?
            },
            tx.clone(),
        )),
    ];
    let mut queue = Queue::default();
    loop {
        while let Ok(k) = rx.try_recv() {
            queue.push(k);
        }
        let Some(k) = queue.pop() else {
            match rx.recv().await {
                Some(k) => queue.push(k),
                None => break,
            }
            continue;
        };
        if let Err(e) = sync(&client, &k).await {
            warn!(endpoints = %format!("{}/{}", k.0, k.1), error = %e, "mirroring failed; retrying");
            let tx = tx.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let _ = tx.send(k);
            });
        }
    }
    for t in tasks {
        t.abort();
    }
}

async fn sync(client: &kube::Client, key: &Key) -> Result<(), Error> {
    let (ns, name) = key;
    // Read as upstream's informers would (its role may not get them).
    let svc = crate::lister::get(&Api::<Service>::namespaced(client.clone(), ns), name).await?;
    let ep = crate::lister::get(&Api::<Endpoints>::namespaced(client.clone(), ns), name).await?;
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    let existing = api
        .list(
            &ListParams::default()
                .labels(&format!("{SERVICE_NAME}={name},{MANAGED_BY}={CONTROLLER}")),
        )
        .await?
        .items;
    if existing.is_empty() && !should_mirror(svc.as_ref(), ep.as_ref()) {
        return Ok(());
    }
    let changes = reconcile(svc.as_ref(), ep.as_ref(), &existing);
    if changes.is_empty() {
        return Ok(());
    }
    let trigger = ep
        .as_ref()
        .and_then(|e| e.metadata.annotations.as_ref())
        .and_then(|a| a.get(TRIGGER_TIME).cloned());
    super::apply(&api, changes, trigger.as_deref()).await?;
    debug!(namespace = %ns, endpoints = %name, "mirrored EndpointSlices");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(selector: bool) -> Service {
        let mut spec = json!({"ports": [{"port": 80}]});
        if selector {
            spec["selector"] = json!({"app": "x"});
        }
        serde_json::from_value(json!({"metadata": {"name": "ext", "namespace": "a"}, "spec": spec}))
            .unwrap()
    }

    fn endpoints(labels: serde_json::Value) -> Endpoints {
        serde_json::from_value(json!({
            "metadata": {"name": "ext", "namespace": "a", "uid": "ep-uid", "labels": labels},
            "subsets": [{
                "addresses": [{"ip": "192.168.1.1", "hostname": "h1"}, {"ip": "fd00::1"}],
                "notReadyAddresses": [{"ip": "192.168.1.2"}],
                "ports": [{"name": "http", "port": 8080}]
            }]
        }))
        .unwrap()
    }

    #[test]
    fn mirrors_selectorless_services_only() {
        let ep = endpoints(json!({"team": "a"}));
        assert!(should_mirror(Some(&svc(false)), Some(&ep)));
        assert!(!should_mirror(Some(&svc(true)), Some(&ep)));
        assert!(!should_mirror(None, Some(&ep)));
        let skip = endpoints(json!({SKIP_MIRROR: "true"}));
        assert!(!should_mirror(Some(&svc(false)), Some(&skip)));

        let c = reconcile(Some(&svc(false)), Some(&ep), &[]);
        // One slice per address type.
        let mut types: Vec<&str> = c.create.iter().map(|s| s.address_type.as_str()).collect();
        types.sort();
        assert_eq!(types, vec!["IPv4", "IPv6"]);
        let v4 = c.create.iter().find(|s| s.address_type == "IPv4").unwrap();
        let ready: Vec<(String, bool)> = v4
            .endpoints
            .iter()
            .map(|e| {
                (
                    e.addresses[0].clone(),
                    e.conditions.as_ref().unwrap().ready.unwrap(),
                )
            })
            .collect();
        assert_eq!(
            ready,
            vec![("192.168.1.1".into(), true), ("192.168.1.2".into(), false)]
        );
        assert_eq!(v4.endpoints[0].hostname.as_deref(), Some("h1"));
        assert_eq!(v4.ports.as_ref().unwrap()[0].port, Some(8080));
        let l = v4.metadata.labels.as_ref().unwrap();
        assert_eq!(l[MANAGED_BY], CONTROLLER);
        assert_eq!(l[SERVICE_NAME], "ext");
        assert_eq!(l["team"], "a");
        let owner = &v4.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Endpoints", "ep-uid")
        );

        // Once mirrored, nothing to do; a selector appearing removes the mirror.
        let mut existing: Vec<EndpointSlice> = c.create.clone();
        for (i, s) in existing.iter_mut().enumerate() {
            s.metadata.name = Some(format!("ext-{i}"));
        }
        assert!(reconcile(Some(&svc(false)), Some(&ep), &existing).is_empty());
        let gone = reconcile(Some(&svc(true)), Some(&ep), &existing);
        assert_eq!(gone.delete.len(), 2);
    }
}
