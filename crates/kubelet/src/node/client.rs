//! Registering a node and reporting its status through the API server.

use std::time::Instant;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeStatus};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tracing::{debug, info, warn};

use super::{
    LEASE_NAMESPACE, LeaseHeartbeat, NODE_STATUS_REPORT_FREQUENCY, NODE_STATUS_UPDATE_FREQUENCY,
    NodeConfig, NodeHealth, RENEW_INTERVAL, node_labels, node_object, node_status, status_changed,
};
use crate::Result;

/// Creates the Node, or adopts an existing one of the same name (upstream's
/// `tryRegisterWithAPIServer`): its default labels are reconciled and its status
/// replaced with ours, both by patch.
pub async fn register(client: &Client, cfg: &NodeConfig, health: &NodeHealth) -> Result<Node> {
    let api: Api<Node> = Api::all(client.clone());
    let desired = node_object(cfg, health, Timestamp::now());
    let node = match api.create(&PostParams::default(), &desired).await {
        Ok(n) => {
            info!(node = %cfg.name, "registered node");
            n
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let labels = node_labels(cfg);
            let patch = json!({"metadata": {"labels": labels, "annotations": cfg.annotations}});
            let n = api
                .patch(&cfg.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            debug!(node = %cfg.name, "adopted existing node");
            n
        }
        Err(e) => return Err(e.into()),
    };
    // Status is a subresource: a create ignores it, so it is always posted after.
    let previous = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    patch_status(
        client,
        &cfg.name,
        &node_status(cfg, health, &previous, Timestamp::now()),
    )
    .await
}

/// Posts `status` through `nodes/<name>/status` as a strategic merge patch, so
/// conditions merge by type and fields others own (images, volumes) are kept.
pub async fn patch_status(client: &Client, name: &str, status: &NodeStatus) -> Result<Node> {
    let api: Api<Node> = Api::all(client.clone());
    let patch = json!({ "status": status });
    Ok(api
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?)
}

/// One node's kubelet loop: register, renew the Lease every 10 s, and post status
/// on change or every `nodeStatusReportFrequency`. For the real node agent; the
/// simulator batches the same steps over many nodes.
pub struct NodeAgent {
    client: Client,
    cfg: NodeConfig,
    extended: Option<ExtendedResources>,
}

/// The device plugins' resources as (capacity, allocatable), asked at each
/// status update.
pub type ExtendedResources =
    std::sync::Arc<dyn Fn() -> (super::Resources, super::Resources) + Send + Sync>;

impl NodeAgent {
    pub fn new(client: Client, cfg: NodeConfig) -> Self {
        NodeAgent {
            client,
            cfg,
            extended: None,
        }
    }

    /// Adds extended resources (the Device Manager's) to each status update.
    pub fn with_extended_resources(mut self, f: ExtendedResources) -> Self {
        self.extended = Some(f);
        self
    }

    /// Runs until the task is dropped; `health` is polled every status period.
    pub async fn run<F: FnMut() -> NodeHealth>(self, mut health: F) -> Result<()> {
        let node = register(&self.client, &self.cfg, &health()).await?;
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), LEASE_NAMESPACE);
        let mut lease = LeaseHeartbeat::new(self.cfg.name.clone(), node.metadata.uid.clone());
        let mut last = node.status.unwrap_or_default();
        let mut last_report = Instant::now();
        let mut renew = tokio::time::interval(RENEW_INTERVAL);
        let mut status_tick = tokio::time::interval(NODE_STATUS_UPDATE_FREQUENCY);
        loop {
            tokio::select! {
                _ = renew.tick() => {
                    if let Err(e) = lease.renew(&leases).await {
                        warn!(node = %self.cfg.name, error = %e, "lease renewal failed");
                    }
                }
                _ = status_tick.tick() => {
                    let prev = last.conditions.clone().unwrap_or_default();
                    let mut next = node_status(&self.cfg, &health(), &prev, Timestamp::now());
                    if let Some(f) = &self.extended {
                        let (cap, alloc) = f();
                        super::merge_extended(&mut next, &cap, &alloc);
                    }
                    if status_changed(&last, &next) || last_report.elapsed() >= NODE_STATUS_REPORT_FREQUENCY {
                        match patch_status(&self.client, &self.cfg.name, &next).await {
                            Ok(n) => {
                                last = n.status.unwrap_or(next);
                                last_report = Instant::now();
                            }
                            Err(e) => warn!(node = %self.cfg.name, error = %e, "node status update failed"),
                        }
                    }
                }
            }
        }
    }
}
