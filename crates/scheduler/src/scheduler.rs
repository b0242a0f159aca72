//! The scheduling loop (upstream `scheduler.go`, `schedule_one.go`): informers
//! feed the queue; each pod is filtered, scored, assumed and bound.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_runtime::events::{EventSource, EventType, Recorder};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::Error;
use crate::config::SchedulerConfig;
use crate::framework::types::pod_key;
use crate::framework::{CycleState, Framework, NodeInfo, PodInfo, ScheduleError, explain};
use crate::plugins::new_framework;
use crate::queue::{Outcome, SchedulingQueue};

pub const COMPONENT: &str = "default-scheduler";
/// Beyond upstream: the top candidates and their per-plugin scores.
pub const CANDIDATES_ANNOTATION: &str = "scheduler.berth.dev/candidates";

/// Pods this scheduler has bound but the informer has not yet seen bound,
/// so their resources count against the node (upstream's assumed pods).
type Assumed = Arc<Mutex<HashMap<String, (String, Pod)>>>;

struct Shared {
    queue: Mutex<SchedulingQueue>,
    wake: Notify,
    assumed: Assumed,
    profiles: HashMap<String, Arc<Framework>>,
}

impl Shared {
    fn with_queue<T>(&self, f: impl FnOnce(&mut SchedulingQueue) -> T) -> T {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let out = f(&mut q);
        drop(q);
        self.wake.notify_one();
        out
    }

    fn assumed(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Pod)>> {
        self.assumed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn scheduler_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or(crate::config::DEFAULT_SCHEDULER_NAME)
}

/// Runs the scheduler until the watches end (they retry forever).
pub async fn run(client: kube::Client, config: SchedulerConfig) -> Result<(), Error> {
    let mut profiles = HashMap::new();
    for p in config.effective_profiles() {
        let fw = new_framework(&p)?;
        profiles.insert(fw.scheduler_name.clone(), Arc::new(fw));
    }
    let shared = Arc::new(Shared {
        queue: Mutex::new(SchedulingQueue::default()),
        wake: Notify::new(),
        assumed: Arc::default(),
        profiles,
    });

    let (nodes, node_writer) = reflector::store::<Node>();
    let (pods, pod_writer) = reflector::store::<Pod>();
    let node_stream = reflector::reflector(
        node_writer,
        watcher(Api::<Node>::all(client.clone()), watcher::Config::default()).default_backoff(),
    );
    let pod_stream = reflector::reflector(
        pod_writer,
        watcher(Api::<Pod>::all(client.clone()), watcher::Config::default()).default_backoff(),
    );

    let s = shared.clone();
    let node_task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(node_stream);
        while let Some(ev) = stream.next().await {
            match ev {
                // Any node change may make parked pods schedulable.
                Ok(
                    watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone,
                ) => {
                    s.with_queue(|q| q.move_all_to_active_or_backoff());
                }
                Ok(_) => {}
                Err(e) => warn!(error = %e, "node watch failed"),
            }
        }
    });
    let s = shared.clone();
    let pod_task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(pod_stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                    on_pod(&s, &pod, false)
                }
                Ok(watcher::Event::Delete(pod)) => on_pod(&s, &pod, true),
                Ok(_) => {}
                Err(e) => warn!(error = %e, "pod watch failed"),
            }
        }
    });

    nodes
        .wait_until_ready()
        .await
        .map_err(|e| Error::Config(e.to_string()))?;
    pods.wait_until_ready()
        .await
        .map_err(|e| Error::Config(e.to_string()))?;
    info!(profiles = shared.profiles.len(), "scheduler started");

    let recorder = Recorder::new(client.clone(), EventSource::new(COMPONENT, ""));
    loop {
        if node_task.is_finished() || pod_task.is_finished() {
            return Ok(());
        }
        let next = shared.with_queue(|q| q.pop(Instant::now()));
        let Some(key) = next else {
            let wait = shared
                .with_queue(|q| q.next_ready())
                .map(|t| t.saturating_duration_since(Instant::now()))
                .unwrap_or(Duration::from_secs(1))
                .min(Duration::from_secs(1));
            // with_queue notified; consume that permit so we actually wait.
            let _ = tokio::time::timeout(Duration::ZERO, shared.wake.notified()).await;
            let _ = tokio::time::timeout(wait, shared.wake.notified()).await;
            continue;
        };
        let outcome = schedule_one(&client, &recorder, &shared, &nodes, &pods, &key).await;
        shared.with_queue(|q| q.done(&key, outcome));
    }
}

fn on_pod(s: &Shared, pod: &Pod, deleted: bool) {
    let key = pod_key(pod);
    let assigned = node_name(pod).is_some();
    if deleted || assigned || is_terminal(pod) || pod.metadata.deletion_timestamp.is_some() {
        s.with_queue(|q| q.delete(&key));
        if deleted || assigned {
            // The informer now reflects the truth; the assumption is done.
            s.assumed().remove(&key);
        }
        if deleted {
            s.with_queue(|q| q.move_all_to_active_or_backoff());
        }
        return;
    }
    if s.profiles.contains_key(scheduler_name(pod)) {
        let prio = pod.spec.as_ref().and_then(|sp| sp.priority).unwrap_or(0);
        s.with_queue(|q| q.add(&key, prio));
    }
}

/// NodeInfos from the caches: bound, non-terminal pods plus assumed ones.
pub fn snapshot(
    nodes: &[Arc<Node>],
    pods: &[Arc<Pod>],
    assumed: &HashMap<String, (String, Pod)>,
) -> Vec<NodeInfo> {
    let mut infos: Vec<NodeInfo> = nodes.iter().map(|n| NodeInfo::new((**n).clone())).collect();
    infos.sort_by(|a, b| a.name().cmp(b.name()));
    let index: HashMap<String, usize> = infos
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name().to_string(), i))
        .collect();
    let mut seen = std::collections::HashSet::new();
    for p in pods {
        let Some(n) = node_name(p) else { continue };
        if is_terminal(p) {
            continue;
        }
        seen.insert(pod_key(p));
        if let Some(&i) = index.get(n) {
            infos[i].add_pod(PodInfo::new((**p).clone()));
        }
    }
    for (key, (node, pod)) in assumed {
        if seen.contains(key) {
            continue;
        }
        if let Some(&i) = index.get(node) {
            infos[i].add_pod(PodInfo::new(pod.clone()));
        }
    }
    infos
}

async fn schedule_one(
    client: &kube::Client,
    recorder: &Recorder,
    shared: &Shared,
    nodes: &Store<Node>,
    pods: &Store<Pod>,
    key: &str,
) -> Outcome {
    let Some((ns, name)) = key.split_once('/') else {
        return Outcome::Scheduled;
    };
    let Some(pod) = pods.get(&ObjectRef::new(name).within(ns)) else {
        return Outcome::Scheduled;
    };
    if node_name(&pod).is_some() || pod.metadata.deletion_timestamp.is_some() {
        return Outcome::Scheduled;
    }
    let Some(fw) = shared.profiles.get(scheduler_name(&pod)).cloned() else {
        return Outcome::Scheduled;
    };
    let pod_info = PodInfo::new((*pod).clone());
    let infos = snapshot(&nodes.state(), &pods.state(), &shared.assumed());
    let result = fw.schedule_pod(&pod_info, &infos);
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    match result {
        Ok(res) => {
            let host = res.suggested_host.clone();
            shared
                .assumed()
                .insert(key.to_string(), (host.clone(), (*pod).clone()));
            let mut state = CycleState::default();
            let s = fw.run_reserve(&mut state, &pod_info, &host);
            let s = if s.is_success() {
                fw.run_permit(&state, &pod_info, &host)
            } else {
                s
            };
            let bound = match (s.is_success(), fw.run_bind(&pod_info, &host)) {
                (true, Ok(binding)) => bind(&api, name, &binding).await,
                (true, Err(st)) => Err(st.message()),
                (false, _) => Err(s.message()),
            };
            if let Err(e) = bound {
                warn!(pod = key, node = %host, error = %e, "binding failed");
                shared.assumed().remove(key);
                return Outcome::Error;
            }
            let why = explain(&res.scores, 3);
            info!(pod = key, node = %host, feasible = res.feasible_nodes, candidates = %why, "scheduled");
            recorder.event(
                &*pod,
                EventType::Normal,
                "Scheduled",
                format!("Successfully assigned {ns}/{name} to {host}"),
            );
            let patch = json!({"metadata": {"annotations": {CANDIDATES_ANNOTATION: why}}});
            if let Err(e) = api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                debug!(pod = key, error = %e, "recording candidates failed");
            }
            Outcome::Scheduled
        }
        Err(ScheduleError::Internal(st)) => {
            warn!(pod = key, status = %st, "scheduling error");
            Outcome::Error
        }
        Err(err @ (ScheduleError::Fit(_) | ScheduleError::NoNodes)) => {
            let message = err.to_string();
            debug!(pod = key, %message, "unschedulable");
            recorder.event(
                &*pod,
                EventType::Warning,
                "FailedScheduling",
                message.clone(),
            );
            if let Err(e) = set_unschedulable(&api, &pod, name, &message).await {
                warn!(pod = key, error = %e, "updating PodScheduled condition failed");
            }
            Outcome::Unschedulable
        }
    }
}

async fn bind(
    api: &Api<Pod>,
    name: &str,
    binding: &k8s_openapi::api::core::v1::Binding,
) -> Result<(), String> {
    // The server answers with a Status, not a Binding.
    api.create_subresource::<_, serde_json::Value>("binding", name, &PostParams::default(), binding)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// PodScheduled=False/Unschedulable with the FitError message, written only when it changes.
async fn set_unschedulable(
    api: &Api<Pod>,
    pod: &Pod,
    name: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let current = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
    if let Some(c) = current
        && c.status == "False"
        && c.reason.as_deref() == Some("Unschedulable")
        && c.message.as_deref() == Some(message)
    {
        return Ok(());
    }
    let transition = match current {
        Some(c) if c.status == "False" => c.last_transition_time.clone(),
        _ => None,
    }
    .unwrap_or(Time(
        Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now()),
    ));
    let patch = json!({"status": {"conditions": [{
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastProbeTime": null,
        "lastTransitionTime": transition,
    }]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    Ok(())
}
