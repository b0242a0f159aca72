//! Watches the objects routing depends on and rebuilds the snapshot after every
//! change (debounced), reports problems as Warning events on the Ingress (each
//! once while it lasts), and sets `status.loadBalancer.ingress` of served
//! Ingresses to the addresses of every node serving them: each controller
//! annotates its own Node with its address ([`model::NODE_ADDRESS_ANNOTATION`])
//! and all of them derive the same list from the Nodes.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use berth_runtime::events::{EventSource, EventType, Recorder};
use berth_runtime::reflect::notifying_store;
use k8s_openapi::api::core::v1::{Node, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::model::{self, Inputs, Problem};
use crate::{Config, Shared};

/// Changes arriving within this window make one rebuild.
const DEBOUNCE: Duration = Duration::from_millis(50);
/// The events' component, as the field manager of status writes.
pub const COMPONENT: &str = "berth-ingress";

struct Stores {
    ingresses: Store<Ingress>,
    classes: Store<IngressClass>,
    services: Store<Service>,
    slices: Store<EndpointSlice>,
    secrets: Store<Secret>,
    nodes: Store<Node>,
}

impl Stores {
    async fn ready(&self) -> bool {
        self.ingresses.wait_until_ready().await.is_ok()
            && self.classes.wait_until_ready().await.is_ok()
            && self.services.wait_until_ready().await.is_ok()
            && self.slices.wait_until_ready().await.is_ok()
            && self.secrets.wait_until_ready().await.is_ok()
            && self.nodes.wait_until_ready().await.is_ok()
    }
}

/// Runs until the task is dropped.
pub async fn run(client: kube::Client, cfg: Config, shared: Arc<Shared>) {
    let changed = Arc::new(Notify::new());
    let stores = Stores {
        ingresses: notifying_store(&client, changed.clone()).0,
        classes: notifying_store(&client, changed.clone()).0,
        services: notifying_store(&client, changed.clone()).0,
        slices: notifying_store(&client, changed.clone()).0,
        secrets: notifying_store(&client, changed.clone()).0,
        nodes: notifying_store(&client, changed.clone()).0,
    };
    if !stores.ready().await {
        warn!("ingress controller: watches never became ready");
        return;
    }
    info!(http = %cfg.http, https = %cfg.https, "ingress controller serving");
    let recorder = Recorder::new(
        client.clone(),
        EventSource::new(COMPONENT, cfg.node_name.clone()),
    );
    let mut reported: HashSet<Problem> = HashSet::new();
    loop {
        let ingresses = stores.ingresses.state();
        let inputs = Inputs {
            ingresses: &ingresses,
            classes: &stores.classes.state(),
            services: &stores.services.state(),
            slices: &stores.slices.state(),
            secrets: &stores.secrets.state(),
        };
        let snap = model::build(&inputs);
        let problems: HashSet<Problem> = snap.problems.iter().cloned().collect();
        let served = snap.served.clone();
        shared.replace(snap);
        for p in problems.difference(&reported) {
            if let Some(ing) = find(&ingresses, &p.namespace, &p.name) {
                warn!(namespace = %p.namespace, ingress = %p.name, reason = p.reason, "{}", p.message);
                recorder.event(
                    ing.as_ref(),
                    EventType::Warning,
                    p.reason,
                    p.message.clone(),
                );
            }
        }
        reported = problems;
        let nodes = stores.nodes.state();
        annotate_own_node(&client, &nodes, &cfg).await;
        let addresses = model::serving_addresses(&nodes, &cfg.node_name, cfg.node_address);
        // Until this node's annotation is seen there is nothing sure to report.
        for (ns, name) in served.iter().filter(|_| !addresses.is_empty()) {
            if let Some(ing) = find(&ingresses, ns, name)
                && !model::status_is(ing, &addresses)
            {
                set_status(&client, ns, name, &addresses).await;
            }
        }
        changed.notified().await;
        tokio::time::sleep(DEBOUNCE).await;
    }
}

fn find<'a>(ingresses: &'a [Arc<Ingress>], ns: &str, name: &str) -> Option<&'a Arc<Ingress>> {
    ingresses.iter().find(|i| {
        i.metadata.namespace.as_deref() == Some(ns) && i.metadata.name.as_deref() == Some(name)
    })
}

/// Puts this node's serving address on its Node (when the Node exists: a server
/// without a node agent has none).
async fn annotate_own_node(client: &kube::Client, nodes: &[Arc<Node>], cfg: &Config) {
    let Some(own) = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(cfg.node_name.as_str()))
    else {
        return;
    };
    let address = cfg.node_address.to_string();
    let current = own
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(model::NODE_ADDRESS_ANNOTATION));
    if current == Some(&address) {
        return;
    }
    let patch =
        serde_json::json!({"metadata": {"annotations": {model::NODE_ADDRESS_ANNOTATION: address}}});
    let api: Api<Node> = Api::all(client.clone());
    let params = PatchParams {
        field_manager: Some(COMPONENT.into()),
        ..Default::default()
    };
    if let Err(e) = api
        .patch(&cfg.node_name, &params, &Patch::Merge(&patch))
        .await
    {
        warn!(node = %cfg.node_name, error = %e, "annotating the Node with the ingress address");
    }
}

async fn set_status(client: &kube::Client, ns: &str, name: &str, addresses: &[IpAddr]) {
    let api: Api<Ingress> = Api::namespaced(client.clone(), ns);
    let patch = model::load_balancer_status(addresses);
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => debug!(namespace = %ns, ingress = %name, "status set"),
        Err(e) => warn!(namespace = %ns, ingress = %name, error = %e, "setting Ingress status"),
    }
}
