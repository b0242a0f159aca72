//! Hollow nodes: N simulated kubelets in one task set, registering Nodes through
//! the node library, heartbeating their Leases in batches, and driving pods bound
//! to them through ContainerCreating → Running (or Failed) without containers, as
//! kwok does.
//!
//! Pods steer their simulated lifecycle with annotations:
//!
//! | annotation | effect |
//! | --- | --- |
//! | `sim.berth.dev/fail: "true"` | the containers exit 1 (reason `Error`) instead of starting; the pod becomes `Failed` |
//! | `sim.berth.dev/run-seconds: "N"` | the pod runs (Ready) for N seconds, then its containers exit 0 (reason `Completed`), or 1 (reason `Error`) with `fail` also set; with `restartPolicy` `Never` or `OnFailure` the pod becomes `Succeeded` (or `Failed`). Under `Always` a real kubelet would restart the containers, so the annotation is ignored there. |
//! | `sim.berth.dev/exit-code: "N"` | the exit code the containers terminate with (overrides `fail`'s 1); non-zero fails the pod, at once or after `run-seconds` |
//!
//! Jobs use `run-seconds` to finish and `fail` (with or without it) to fail.

mod pods;
pub mod readiness;
pub mod stats;
mod topology;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{NodeAddress, NodeStatus, Taint};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::Api;
use tracing::{info, warn};

use crate::Result;
use crate::node::{
    self, LEASE_NAMESPACE, LeaseHeartbeat, NODE_STATUS_REPORT_FREQUENCY, NodeConfig, NodeHealth,
    RENEW_INTERVAL, Resources,
};

/// Annotation that makes a simulated pod fail (container exits 1).
pub const FAIL_ANNOTATION: &str = "sim.berth.dev/fail";
/// Annotation: the simulated containers' exit code (non-zero fails the pod).
pub const EXIT_CODE_ANNOTATION: &str = "sim.berth.dev/exit-code";
/// Annotation: seconds a simulated pod runs before its containers terminate.
pub const RUN_SECONDS_ANNOTATION: &str = "sim.berth.dev/run-seconds";

/// How many API requests the simulator keeps in flight for node-level work.
const CONCURRENCY: usize = 32;

/// What the simulated nodes look like and how their pods behave.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub count: usize,
    pub name_prefix: String,
    /// Index of the first node (`sim-node-<first_index>`), to add nodes beside others.
    pub first_index: usize,
    pub capacity: Resources,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub numa: Vec<node::NumaNode>,
    /// The nodes' Topology Manager policy: `none` or `single-numa-node`
    /// (`topology.rs`), and its scope.
    pub topology_manager_policy: String,
    pub topology_manager_scope: berth_topology::Scope,
    /// Time a pod spends in ContainerCreating before Running.
    pub start_delay: Duration,
    /// Upper bound on how long a deleted pod takes to stop (its grace period, capped).
    pub max_termination: Duration,
    /// Where the nodes' synthetic stats are served (`https://127.0.0.1:P`), set
    /// by [`Simulator::run`] once its listener is bound.
    pub stats_base: Option<String>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            count: 0,
            name_prefix: "sim-node-".into(),
            first_index: 0,
            // A modest machine; `pods` defaults to upstream's 110.
            capacity: node::parse_resources("cpu=4,memory=16Gi,ephemeral-storage=100Gi")
                .unwrap_or_default(),
            labels: BTreeMap::from([("type".to_string(), "berth-sim".to_string())]),
            taints: Vec::new(),
            numa: Vec::new(),
            topology_manager_policy: "none".into(),
            topology_manager_scope: berth_topology::Scope::Container,
            start_delay: Duration::from_secs(1),
            max_termination: Duration::from_secs(1),
            stats_base: None,
        }
    }
}

impl SimConfig {
    /// The node library's view of simulated node `i`.
    pub fn node_config(&self, i: usize) -> NodeConfig {
        let name = format!("{}{i}", self.name_prefix);
        let mut c = NodeConfig::new(name.clone(), self.capacity.clone());
        c.labels = self.labels.clone();
        c.taints = self.taints.clone();
        c.numa = self.numa.clone();
        c.addresses = vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: node_ip(i),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: name,
            },
        ];
        c.node_info.operating_system = "linux".into();
        c.node_info.architecture = "amd64".into();
        c.node_info.os_image = "Berth simulated node".into();
        c.node_info.kernel_version = "simulated".into();
        c.node_info.container_runtime_version = "sim://0.1.0".into();
        c.pod_cidrs = vec![format!("{}.0/24", pod_subnet(i))];
        if let Some(base) = &self.stats_base {
            c.annotations.insert(
                stats::STATS_ENDPOINT_ANNOTATION.to_string(),
                format!("{base}/nodes/{}", c.name),
            );
        }
        c
    }
}

fn node_ip(i: usize) -> String {
    format!("10.40.{}.{}", i / 250, i % 250 + 1)
}

/// Node `i`'s fake pod /24, without the last octet: 10.42.i for the first 256 nodes.
fn pod_subnet(i: usize) -> String {
    format!("10.{}.{}", 42 + i / 256, i % 256)
}

/// The simulator: `run` registers the nodes and then serves them until dropped.
pub struct Simulator;

impl Simulator {
    pub async fn run(client: Client, mut cfg: SimConfig) -> Result<()> {
        // The synthetic stats listener first: the nodes publish its address.
        let stats_listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let stats_acceptor = stats::acceptor().map_err(crate::Error::Sim)?;
        cfg.stats_base = Some(format!(
            "https://127.0.0.1:{}",
            stats_listener.local_addr()?.port()
        ));
        let health = NodeHealth::default();
        let indices: Vec<usize> = (cfg.first_index..cfg.first_index + cfg.count).collect();
        let registered: Vec<(usize, Option<String>, NodeStatus)> = stream::iter(indices)
            .map(|i| {
                let client = client.clone();
                let nc = cfg.node_config(i);
                let health = health.clone();
                async move {
                    // Registration retries: the API server may still be starting.
                    let mut wait = Duration::from_millis(200);
                    loop {
                        match node::register(&client, &nc, &health).await {
                            Ok(n) => return (i, n.metadata.uid, n.status.unwrap_or_default()),
                            Err(e) => {
                                warn!(node = %nc.name, error = %e, "registering simulated node");
                                tokio::time::sleep(wait).await;
                                wait = (wait * 2).min(Duration::from_secs(7));
                            }
                        }
                    }
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        info!(count = cfg.count, "simulated nodes registered");

        let names: HashSet<String> = registered
            .iter()
            .map(|(i, _, _)| format!("{}{i}", cfg.name_prefix))
            .collect();
        let subnets = registered
            .iter()
            .map(|(i, _, _)| {
                (
                    format!("{}{i}", cfg.name_prefix),
                    (pod_subnet(*i), node_ip(*i)),
                )
            })
            .collect();
        let (pod_store, _pod_reflector) =
            berth_runtime::reflect::notifying_store(&client, Arc::new(tokio::sync::Notify::new()));
        let stats_server = Arc::new(stats::StatsServer::new(pod_store, names.clone()));
        let stats_task = tokio::spawn(stats::serve(stats_listener, stats_acceptor, stats_server));
        let heartbeat = tokio::spawn(heartbeat(client.clone(), cfg.clone(), registered));
        tokio::spawn(readiness::run(client.clone(), names.clone()));
        let driver = pods::PodDriver::new(client, cfg, Arc::new(names), subnets);
        let res = driver.run().await;
        heartbeat.abort();
        stats_task.abort();
        res
    }
}

/// One task for every node's heartbeat: renew all Leases each RENEW_INTERVAL with
/// bounded concurrency, and re-post node status every nodeStatusReportFrequency
/// (simulated nodes never change, so there is nothing to report in between).
async fn heartbeat(
    client: Client,
    cfg: SimConfig,
    nodes: Vec<(usize, Option<String>, NodeStatus)>,
) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let mut state: Vec<(usize, LeaseHeartbeat, NodeStatus)> = nodes
        .into_iter()
        .map(|(i, uid, st)| {
            let name = format!("{}{i}", cfg.name_prefix);
            (i, LeaseHeartbeat::new(name, uid), st)
        })
        .collect();
    let mut last_report = Instant::now();
    let mut tick = tokio::time::interval(RENEW_INTERVAL);
    loop {
        tick.tick().await;
        let report = last_report.elapsed() >= NODE_STATUS_REPORT_FREQUENCY;
        if report {
            last_report = Instant::now();
        }
        let now = Timestamp::now();
        stream::iter(state.iter_mut())
            .for_each_concurrent(CONCURRENCY, |(i, lease, status)| {
                let leases = &leases;
                let client = &client;
                let cfg = &cfg;
                async move {
                    if let Err(e) = lease.renew(leases).await {
                        warn!(node = %lease.node, error = %e, "lease renewal failed");
                    }
                    if report {
                        let prev = status.conditions.clone().unwrap_or_default();
                        let next = node::node_status(
                            &cfg.node_config(*i),
                            &NodeHealth::default(),
                            &prev,
                            now,
                        );
                        match node::patch_status(client, &lease.node, &next).await {
                            Ok(n) => *status = n.status.unwrap_or(next),
                            Err(e) => {
                                warn!(node = %lease.node, error = %e, "node status update failed")
                            }
                        }
                    }
                }
            })
            .await;
    }
}
