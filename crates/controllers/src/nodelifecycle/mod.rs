//! The node lifecycle controller and the taint eviction controller (upstream
//! `pkg/controller/nodelifecycle` and `pkg/controller/tainteviction`), as one
//! loop over informers of Nodes and node Leases:
//!
//! - every `--node-monitor-period` (5 s) each node's proof of life (a new
//!   Ready heartbeat or a newer Lease renewTime, timed on our clock) is checked;
//!   a node silent for `--node-monitor-grace-period` (50 s; 60 s before it ever
//!   posted status) gets Ready/MemoryPressure/DiskPressure/PIDPressure Unknown
//!   (`NodeStatusUnknown`, "Kubelet stopped posting node status."), a
//!   `NodeNotReady` event and its pods' Ready condition set False;
//! - taints follow the node's state: `node.kubernetes.io/unreachable`
//!   (Ready Unknown) or `not-ready` (Ready False) as NoSchedule and NoExecute,
//!   pressure/cordon NoSchedule taints; removed when the node recovers. Adding a
//!   NoExecute taint is rate limited per zone (`--node-eviction-rate`, 0.1 node/s
//!   when the zone is healthy, see [`eviction::zone_rate`]);
//! - every second, pods on nodes with NoExecute taints are checked against their
//!   tolerations: deleted at once without a matching toleration, after the
//!   smallest `tolerationSeconds` otherwise, with upstream's
//!   `TaintManagerEviction` event and `DisruptionTarget` condition.
//!
//! Pods are not cached: only the pods of nodes that just became not ready or
//! carry NoExecute taints are listed (field selector `spec.nodeName`; one
//! cluster-wide list at most every 10 s when more than 20 nodes are tainted),
//! so a healthy cluster costs no pod informer (150,000 pods would cost
//! hundreds of MB). Unlike upstream, pods are marked not ready only when their
//! node turns not ready (upstream also marks pods added to it later), and a
//! cluster whose every zone is down gets no new NoExecute taints but keeps
//! those it has (upstream removes them).

pub mod eviction;
pub mod health;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_runtime::events::{EventSource, EventType, Recorder, Regarding};
use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, ObjectReference, Pod, Taint};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tracing::{info, warn};

use eviction::{Eviction, ZoneLimiter};
use health::Observed;

/// Where kubelets keep their heartbeat Leases.
const LEASE_NAMESPACE: &str = "kube-node-lease";
/// How often scheduled evictions are checked.
const EVICTION_TICK: Duration = Duration::from_secs(1);
/// Up to this many NoExecute-tainted nodes, their pods are listed one node at a time.
const PER_NODE_LISTS: usize = 20;
/// With more tainted nodes, how often all pods are listed instead.
const BULK_EVERY: Duration = Duration::from_secs(10);

/// The controller's settings, upstream's flags and defaults (1.33).
#[derive(Debug, Clone)]
pub struct Config {
    /// `--node-monitor-period`.
    pub monitor_period: Duration,
    /// `--node-monitor-grace-period`.
    pub grace_period: Duration,
    /// `--node-startup-grace-period`.
    pub startup_grace_period: Duration,
    /// `--node-eviction-rate` (nodes per second).
    pub eviction_rate: f64,
    /// `--secondary-node-eviction-rate`.
    pub secondary_eviction_rate: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            monitor_period: Duration::from_secs(5),
            grace_period: Duration::from_secs(50),
            startup_grace_period: Duration::from_secs(60),
            eviction_rate: 0.1,
            secondary_eviction_rate: 0.01,
        }
    }
}

/// Parses a Go duration as upstream's flags take it: `50s`, `1m0s`, `500ms`, `1.5h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    berth_api::duration::parse_go_duration(s)
        .ok_or_else(|| format!("invalid duration {s:?} (expected e.g. 50s, 1m0s, 500ms)"))
}

/// A pod's pending eviction (upstream's TimedWorker).
struct Scheduled {
    uid: String,
    created: Instant,
    pod: ObjectReference,
}

struct Controller {
    cfg: Config,
    client: kube::Client,
    nodes_api: Api<Node>,
    pods_api: Api<Pod>,
    nodes: Store<Node>,
    leases: Store<Lease>,
    node_events: Recorder,
    taint_events: Recorder,
    observed: HashMap<String, (Observed, String)>,
    limiter: ZoneLimiter,
    scheduled: HashMap<String, Scheduled>,
    last_bulk: Option<Instant>,
    /// The resourceVersion each node had at the last NoSchedule pass.
    no_schedule_seen: HashMap<String, String>,
}

/// Runs both controllers until the task is dropped.
pub async fn run(client: kube::Client, cfg: Config) {
    let (nodes, node_writer) = reflector::store::<Node>();
    let (leases, lease_writer) = reflector::store::<Lease>();
    let node_stream = reflector::reflector(
        node_writer,
        watcher(
            Api::<Node>::all(client.clone()),
            berth_runtime::reflect::informer_config(),
        )
        .default_backoff()
        .modify(slim),
    );
    let lease_stream = reflector::reflector(
        lease_writer,
        watcher(
            Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE),
            berth_runtime::reflect::informer_config(),
        )
        .default_backoff()
        .modify(|l: &mut Lease| l.metadata.managed_fields = None),
    );
    let mut ctl = Controller {
        cfg,
        client: client.clone(),
        nodes_api: Api::all(client.clone()),
        pods_api: Api::all(client.clone()),
        nodes,
        leases,
        node_events: Recorder::new(client.clone(), EventSource::new("node-controller", "")),
        taint_events: Recorder::new(client, EventSource::new("taint-eviction-controller", "")),
        observed: HashMap::new(),
        limiter: ZoneLimiter::default(),
        scheduled: HashMap::new(),
        last_bulk: None,
        no_schedule_seen: HashMap::new(),
    };
    tokio::join!(drain(node_stream), drain(lease_stream), ctl.run());
}

/// Keeps only what the controller reads of a node (identity, labels, taints,
/// unschedulable, conditions): images, addresses, capacity and managedFields
/// would make 5,000 cached nodes cost tens of MB.
fn slim(n: &mut Node) {
    n.metadata.managed_fields = None;
    n.metadata.annotations = None;
    if let Some(spec) = n.spec.take() {
        n.spec = Some(NodeSpec {
            taints: spec.taints,
            unschedulable: spec.unschedulable,
            ..Default::default()
        });
    }
    if let Some(status) = n.status.take() {
        n.status = Some(NodeStatus {
            conditions: status.conditions,
            ..Default::default()
        });
    }
}

async fn drain<S: Stream<Item = Result<T, watcher::Error>>, T>(stream: S) {
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        if let Err(e) = ev {
            warn!(error = %e, "node lifecycle watch failed");
        }
    }
}

fn pod_key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or_default(),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl Controller {
    async fn run(&mut self) {
        if self.nodes.wait_until_ready().await.is_err()
            || self.leases.wait_until_ready().await.is_err()
        {
            warn!("node lifecycle controller: informers never synced");
            return;
        }
        info!("node lifecycle controller started");
        let mut tick = tokio::time::interval(EVICTION_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_monitor: Option<Instant> = None;
        loop {
            tick.tick().await;
            if last_monitor.is_none_or(|t| t.elapsed() >= self.cfg.monitor_period) {
                last_monitor = Some(Instant::now());
                self.monitor_node_health().await;
            }
            self.no_schedule_pass().await;
            self.evict_tainted_pods().await;
        }
    }

    fn lease_renew(&self, node: &str) -> Option<Timestamp> {
        let lease = self
            .leases
            .get(&ObjectRef::new(node).within(LEASE_NAMESPACE))?;
        lease.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
    }

    /// Upstream's monitorNodeHealth: conditions, NodeNotReady, pods not ready, taints.
    async fn monitor_node_health(&mut self) {
        let now = Instant::now();
        let wall = Timestamp::now();
        let nodes = self.nodes.state();
        self.observed.retain(|name, _| {
            nodes
                .iter()
                .any(|n| n.metadata.name.as_deref() == Some(name.as_str()))
        });
        let mut current: Vec<Arc<Node>> = Vec::with_capacity(nodes.len());
        for node in nodes {
            let Some(name) = node.metadata.name.clone() else {
                continue;
            };
            let renew = self.lease_renew(&name);
            let hb = health::heartbeat(&node);
            let (obs, last_ready) = self.observed.entry(name.clone()).or_insert_with(|| {
                (
                    Observed::new(now, hb, renew),
                    health::ready_status(&node).to_string(),
                )
            });
            obs.observe(now, hb, renew);
            let grace =
                health::grace_period(&node, self.cfg.startup_grace_period, self.cfg.grace_period);
            let silent = obs.silent_for(now) > grace;
            let was_ready = last_ready == "True";
            // Shared with the informer's cache; replaced only by our own update's result.
            let mut node = node;
            if silent {
                let conditions = health::unknown_conditions(&node, wall);
                if !conditions.is_empty() {
                    let patch = json!({"status": {"conditions": conditions}});
                    match self
                        .nodes_api
                        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                        .await
                    {
                        Ok(updated) => {
                            info!(node = %name, "node stopped posting status; conditions set to Unknown");
                            node = Arc::new(updated);
                        }
                        Err(e) => warn!(node = %name, error = %e, "updating node health"),
                    }
                }
            }
            let ready = health::ready_status(&node).to_string();
            if let Some((_, last)) = self.observed.get_mut(&name) {
                *last = ready.clone();
            }
            if was_ready && ready != "True" {
                self.node_events.event(
                    node.as_ref(),
                    EventType::Normal,
                    "NodeNotReady",
                    format!("Node {name} status is now: NodeNotReady"),
                );
                self.mark_pods_not_ready(&name).await;
            }
            current.push(node);
        }
        self.update_taints(&current, now, wall).await;
    }

    /// Upstream's MarkPodsNotReady: the node's pods are no longer Ready.
    async fn mark_pods_not_ready(&self, node: &str) {
        for pod in self.pods_on(node).await {
            if !pod_ready(&pod) || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let (Some(ns), Some(name)) = (
                pod.metadata.namespace.as_deref(),
                pod.metadata.name.as_deref(),
            ) else {
                continue;
            };
            let patch = json!({"status": {"conditions": [{
                "type": "Ready", "status": "False", "lastTransitionTime": Timestamp::now()
            }]}});
            let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
            if let Err(e) = api
                .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                warn!(pod = %pod_key(&pod), error = %e, "marking pod not ready");
            }
        }
    }

    async fn pods_on(&self, node: &str) -> Vec<Pod> {
        let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
        match self.pods_api.list(&lp).await {
            Ok(list) => list.items,
            Err(e) => {
                warn!(node, error = %e, "listing the node's pods");
                Vec::new()
            }
        }
    }

    /// NoSchedule taints at once; NoExecute taints added at the zone's rate,
    /// removed at once.
    async fn update_taints(&mut self, nodes: &[Arc<Node>], now: Instant, wall: Timestamp) {
        // Zone health from the Ready status of every node.
        let mut zones: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for n in nodes {
            let z = zones.entry(eviction::zone_key(n)).or_default();
            if health::ready_status(n) == "True" {
                z.0 += 1;
            } else {
                z.1 += 1;
            }
        }
        let all_down = !zones.is_empty()
            && zones
                .values()
                .all(|&(r, nr)| eviction::zone_state(r, nr) == eviction::ZoneState::FullDisruption);
        for node in nodes {
            let Some(name) = node.metadata.name.as_deref() else {
                continue;
            };
            let mut no_execute = health::no_execute_key(node);
            if let Some(key) = no_execute
                && !health::has_no_execute(node, key)
            {
                let zone = eviction::zone_key(node);
                let (r, nr) = zones.get(&zone).copied().unwrap_or_default();
                let rate = eviction::zone_rate(
                    eviction::zone_state(r, nr),
                    all_down,
                    r + nr,
                    self.cfg.eviction_rate,
                    self.cfg.secondary_eviction_rate,
                );
                if !self.limiter.try_take(&zone, rate, now) {
                    // Not this node's turn: keep whatever NoExecute taint it has.
                    no_execute = [health::TAINT_UNREACHABLE, health::TAINT_NOT_READY]
                        .into_iter()
                        .find(|k| health::has_no_execute(node, k));
                }
            }
            let Some(taints) =
                health::reconcile_taints(node, health::no_schedule_taints(node), no_execute, wall)
            else {
                continue;
            };
            self.patch_taints(name, node, &taints).await;
        }
    }

    /// Upstream's doNoScheduleTaintingPass, run for every node that changed
    /// since the last tick rather than once per monitor period: a node that
    /// turns Ready (or comes under pressure) has its NoSchedule taints
    /// (`not-ready`, which TaintNodesByCondition puts on every new Node,
    /// `memory-pressure`, …) in step within a second. NoExecute taints stay
    /// with the rate-limited monitor pass.
    async fn no_schedule_pass(&mut self) {
        let nodes = self.nodes.state();
        self.no_schedule_seen.retain(|name, _| {
            nodes
                .iter()
                .any(|n| n.metadata.name.as_deref() == Some(name.as_str()))
        });
        for node in nodes {
            let (Some(name), Some(rv)) = (
                node.metadata.name.as_deref(),
                node.metadata.resource_version.as_deref(),
            ) else {
                continue;
            };
            if self.no_schedule_seen.get(name).map(String::as_str) == Some(rv) {
                continue;
            }
            self.no_schedule_seen
                .insert(name.to_string(), rv.to_string());
            let no_execute = [health::TAINT_UNREACHABLE, health::TAINT_NOT_READY]
                .into_iter()
                .find(|k| health::has_no_execute(&node, k));
            if let Some(taints) = health::reconcile_taints(
                &node,
                health::no_schedule_taints(&node),
                no_execute,
                Timestamp::now(),
            ) {
                self.patch_taints(name, &node, &taints).await;
            }
        }
    }

    async fn patch_taints(&self, name: &str, node: &Node, taints: &[Taint]) {
        // Guarded by resourceVersion: a concurrent change makes us retry next pass.
        let patch = json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": taints},
        });
        match self
            .nodes_api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                let keys: Vec<String> = taints
                    .iter()
                    .map(|t| format!("{}:{}", t.key, t.effect))
                    .collect();
                info!(node = name, taints = ?keys, "node taints updated");
            }
            Err(e) => warn!(node = name, error = %e, "updating node taints"),
        }
    }

    /// The taint eviction controller's pass over pods on NoExecute-tainted nodes.
    async fn evict_tainted_pods(&mut self) {
        let now = Instant::now();
        let tainted: Vec<(String, Vec<Taint>)> = self
            .nodes
            .state()
            .iter()
            .filter_map(|n| {
                let taints: Vec<Taint> = n
                    .spec
                    .as_ref()?
                    .taints
                    .iter()
                    .flatten()
                    .filter(|t| t.effect == "NoExecute")
                    .cloned()
                    .collect();
                (!taints.is_empty()).then(|| (n.metadata.name.clone().unwrap_or_default(), taints))
            })
            .collect();
        if tainted.is_empty() && self.scheduled.is_empty() {
            return;
        }
        // A few tainted nodes: list their pods by field selector every tick. Many
        // (a zone down): one cluster-wide list, at most every BULK_EVERY.
        let mut by_node: HashMap<String, Vec<Pod>> = HashMap::new();
        if tainted.len() <= PER_NODE_LISTS {
            for (node, _) in &tainted {
                by_node.insert(node.clone(), self.pods_on(node).await);
            }
        } else {
            if self
                .last_bulk
                .is_some_and(|t| now.duration_since(t) < BULK_EVERY)
            {
                return;
            }
            self.last_bulk = Some(now);
            match self.pods_api.list(&ListParams::default()).await {
                Ok(list) => {
                    for p in list.items {
                        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
                            by_node.entry(n).or_default().push(p);
                        }
                    }
                }
                Err(e) => {
                    warn!(error = %e, "listing pods for taint eviction");
                    return;
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        for (node, taints) in tainted {
            for pod in by_node.remove(&node).unwrap_or_default() {
                if pod.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let key = pod_key(&pod);
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                let tolerations = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.tolerations.clone())
                    .unwrap_or_default();
                match eviction::eviction(&taints, &tolerations) {
                    Eviction::Never => {}
                    Eviction::Now => {
                        self.scheduled.remove(&key);
                        self.evict(&pod).await;
                    }
                    Eviction::After(d) => {
                        seen.insert(key.clone());
                        let entry =
                            self.scheduled
                                .entry(key.clone())
                                .or_insert_with(|| Scheduled {
                                    uid: uid.clone(),
                                    created: now,
                                    pod: pod.object_reference(),
                                });
                        if entry.uid != uid {
                            // A new pod under the same name: its own timer.
                            *entry = Scheduled {
                                uid,
                                created: now,
                                pod: pod.object_reference(),
                            };
                        }
                        if entry.created + d <= now {
                            self.scheduled.remove(&key);
                            self.evict(&pod).await;
                        }
                    }
                }
            }
        }
        // Evictions no longer due (taint removed, pod tolerates now or is gone).
        let cancelled: Vec<String> = self
            .scheduled
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for key in cancelled {
            if let Some(s) = self.scheduled.remove(&key) {
                self.taint_events.event(
                    &s.pod,
                    EventType::Normal,
                    "TaintManagerEviction",
                    format!("Cancelling deletion of Pod {key}"),
                );
            }
        }
    }

    /// Upstream's addConditionAndDeletePod, after the `Marking for deletion` event.
    async fn evict(&self, pod: &Pod) {
        let key = pod_key(pod);
        let (Some(ns), Some(name)) = (
            pod.metadata.namespace.as_deref(),
            pod.metadata.name.as_deref(),
        ) else {
            return;
        };
        self.taint_events.event(
            pod,
            EventType::Normal,
            "TaintManagerEviction",
            format!("Marking for deletion Pod {key}"),
        );
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let patch = json!({"status": {"conditions": [{
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint",
            "lastTransitionTime": Timestamp::now(),
        }]}});
        if let Err(e) = api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            warn!(pod = %key, error = %e, "adding the DisruptionTarget condition");
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => info!(pod = %key, "evicted pod from a NoExecute-tainted node"),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => warn!(pod = %key, error = %e, "evicting pod"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_nodes_keep_what_the_controller_reads() {
        let mut n: Node = serde_json::from_value(json!({
            "metadata": {"name": "n", "uid": "u", "resourceVersion": "7",
                "labels": {"topology.kubernetes.io/zone": "a"},
                "annotations": {"big": "x"},
                "managedFields": [{"manager": "kubelet"}]},
            "spec": {"podCIDR": "10.0.0.0/24", "unschedulable": true,
                "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "4"}, "images": [{"names": ["nginx"]}],
                "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        slim(&mut n);
        let v = serde_json::to_value(&n).unwrap();
        assert_eq!(
            v,
            json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "n", "uid": "u", "resourceVersion": "7",
                    "labels": {"topology.kubernetes.io/zone": "a"}},
                "spec": {"unschedulable": true, "taints": [{"key": "k", "effect": "NoSchedule"}]},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}
            })
        );
    }

    #[test]
    fn go_durations() {
        for (text, want) in [
            ("50s", Some(Duration::from_secs(50))),
            ("1m0s", Some(Duration::from_secs(60))),
            ("500ms", Some(Duration::from_millis(500))),
            ("1.5h", Some(Duration::from_secs(5400))),
            ("0", Some(Duration::ZERO)),
            ("10", None),
            ("", None),
            ("5x", None),
            ("s", None),
        ] {
            assert_eq!(parse_duration(text).ok(), want, "{text}");
        }
    }
}
