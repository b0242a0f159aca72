//! The scheduling loop (upstream `scheduler.go`, `schedule_one.go`).
//!
//! Informers feed the cache (nodes, bound pods) and the queue (pending pods).
//! One thread runs scheduling cycles against an incrementally refreshed
//! snapshot; a chosen pod is assumed in the cache at once and bound by its
//! own task, so the next cycle never waits for the API. A failed binding
//! forgets the assumption and requeues the pod with backoff.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use berth_runtime::events::{EventSource, EventType, Recorder, RecorderOptions};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{
    Binding, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::runtime::Handle;
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

use crate::Error;
use crate::cache::{Cache, is_terminal, node_name};
use crate::config::SchedulerConfig;
use crate::framework::affinity::NamespaceLabels;
use crate::framework::storage::{StorageSnapshot, claim_key};
use crate::framework::types::pod_key;
use crate::framework::{
    CycleState, Framework, Nomination, PodInfo, ScheduleError, SearchState, SharedStorage,
    Snapshot, explain,
};
use crate::plugins::defaultpreemption::{
    REASON_PREEMPTION_BY_SCHEDULER, disruption_message, preempted_message,
};
use crate::plugins::volumebinding::api::KubeVolumeApi;
use crate::plugins::{Handle as PluginHandle, new_framework_with};
use crate::queue::{Outcome, SchedulingQueue};

pub const COMPONENT: &str = "default-scheduler";
/// Beyond upstream: the top candidates and their per-plugin scores, set on
/// the pod through the Binding's annotations (copied by the binding REST).
pub const CANDIDATES_ANNOTATION: &str = "scheduler.berth.dev/candidates";
/// Bindings in flight at once; more wait for a slot (the cache already holds them).
const MAX_CONCURRENT_BINDINGS: usize = 256;
/// Events waiting to be written before new ones are dropped.
const EVENT_QUEUE_CAPACITY: usize = 100_000;
/// kube-scheduler writes events through a client limited to its
/// clientConnection defaults (50 QPS, burst 100); Berth paces only the
/// events that way, so a burst of bindings is not slowed by its own events.
const EVENT_QPS: f64 = 50.0;
const EVENT_BURST: f64 = 100.0;

type PendingEvent = (Arc<Pod>, EventType, &'static str, String);

/// Hands events to the recorder at most `EVENT_QPS` a second (token bucket).
#[derive(Clone)]
struct PacedEvents {
    tx: tokio::sync::mpsc::Sender<PendingEvent>,
}

impl PacedEvents {
    fn new(recorder: Recorder) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<PendingEvent>(EVENT_QUEUE_CAPACITY);
        tokio::spawn(async move {
            let mut tokens = EVENT_BURST;
            let mut last = Instant::now();
            while let Some((pod, type_, reason, message)) = rx.recv().await {
                loop {
                    let now = Instant::now();
                    tokens = (tokens + now.duration_since(last).as_secs_f64() * EVENT_QPS)
                        .min(EVENT_BURST);
                    last = now;
                    if tokens >= 1.0 {
                        tokens -= 1.0;
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs_f64((1.0 - tokens) / EVENT_QPS)).await;
                }
                recorder.event(&*pod, type_, reason, message);
            }
        });
        Self { tx }
    }

    /// Never blocks; beyond the backlog an event is dropped (as upstream's broadcaster does).
    fn event(&self, pod: &Arc<Pod>, type_: EventType, reason: &'static str, message: String) {
        if self
            .tx
            .try_send((pod.clone(), type_, reason, message))
            .is_err()
        {
            debug!(reason, "event dropped: too many queued");
        }
    }
}

/// A Service's namespace and selector.
type ServiceSelector = (String, BTreeMap<String, String>);

struct Shared {
    queue: Mutex<SchedulingQueue>,
    wake: Condvar,
    cache: Mutex<Cache>,
    /// Unbound pods this scheduler is responsible for, by key (shared with
    /// VolumeBinding's PreBind, which gives up on a deleted pod).
    pending: Arc<Mutex<HashMap<String, Arc<Pod>>>>,
    /// Claims, volumes, classes and CSINodes for the volume plugins.
    storage: Arc<SharedStorage>,
    namespaces: RwLock<Arc<NamespaceLabels>>,
    pdbs: RwLock<HashMap<String, PodDisruptionBudget>>,
    nominator: Mutex<Nominator>,
    /// Service selectors by `namespace/name`, and whether they changed.
    services: Mutex<(HashMap<String, ServiceSelector>, bool)>,
    profiles: HashMap<String, Arc<Framework>>,
    stop: AtomicBool,
}

/// Pending pods nominated to nodes by preemption (upstream's nominator):
/// other pods of lower priority must leave room for them there.
#[derive(Default)]
struct Nominator {
    by_pod: HashMap<String, (String, Arc<PodInfo>)>,
    changed: bool,
}

impl Nominator {
    fn add(&mut self, key: &str, node: &str, pi: Arc<PodInfo>) {
        self.by_pod.insert(key.to_string(), (node.to_string(), pi));
        self.changed = true;
    }

    fn remove(&mut self, key: &str) {
        self.changed |= self.by_pod.remove(key).is_some();
    }

    /// The nominations by node, when they changed since the last call.
    fn take_changes(&mut self) -> Option<HashMap<String, Vec<Arc<PodInfo>>>> {
        if !std::mem::take(&mut self.changed) {
            return None;
        }
        let mut by_node: HashMap<String, Vec<Arc<PodInfo>>> = HashMap::new();
        for (node, pi) in self.by_pod.values() {
            by_node.entry(node.clone()).or_default().push(pi.clone());
        }
        Some(by_node)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn with_queue<T>(&self, f: impl FnOnce(&mut SchedulingQueue) -> T) -> T {
        let out = f(&mut lock(&self.queue));
        self.wake.notify_one();
        out
    }

    fn cache(&self) -> MutexGuard<'_, Cache> {
        lock(&self.cache)
    }
}

fn scheduler_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or(crate::config::DEFAULT_SCHEDULER_NAME)
}

/// Applies watch events to `apply`/`delete`, calling `relisted` with every
/// key seen after a (re)list so vanished objects can be dropped.
async fn drive<K, S>(
    stream: S,
    what: &str,
    mut apply: impl FnMut(K),
    mut delete: impl FnMut(K),
    mut relisted: impl FnMut(HashSet<String>),
    ready: tokio::sync::oneshot::Sender<()>,
) where
    K: kube::Resource + Clone,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut ready = Some(ready);
    let mut seen: HashSet<String> = HashSet::new();
    while let Some(ev) = stream.next().await {
        // As upstream's scheduler (TransformStripManagedFields): nothing here reads
        // managedFields, and they are most of a cached pod's memory.
        let ev = ev.map(|ev| {
            ev.modify(|o| {
                o.meta_mut().managed_fields = None;
            })
        });
        match ev {
            Ok(watcher::Event::Apply(o)) => apply(o),
            Ok(watcher::Event::Delete(o)) => delete(o),
            Ok(watcher::Event::Init) => seen.clear(),
            Ok(watcher::Event::InitApply(o)) => {
                seen.insert(format!(
                    "{}/{}",
                    o.meta().namespace.as_deref().unwrap_or_default(),
                    o.meta().name.as_deref().unwrap_or_default()
                ));
                apply(o);
            }
            Ok(watcher::Event::InitDone) => {
                relisted(std::mem::take(&mut seen));
                if let Some(tx) = ready.take() {
                    let _ = tx.send(());
                }
            }
            Err(e) => warn!(error = %e, "{what} watch failed"),
        }
    }
}

fn watch<K>(
    client: &kube::Client,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + use<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    watcher(
        Api::<K>::all(client.clone()),
        berth_runtime::reflect::informer_config(),
    )
    .default_backoff()
}

/// Runs the scheduler until the watches end (they retry forever).
pub async fn run(client: kube::Client, config: SchedulerConfig) -> Result<(), Error> {
    let pending: Arc<Mutex<HashMap<String, Arc<Pod>>>> = Arc::default();
    let storage = Arc::new(SharedStorage::default());
    let waiting = pending.clone();
    let handle = PluginHandle {
        volumes: Arc::new(KubeVolumeApi {
            client: client.clone(),
            storage: storage.clone(),
            pod_exists: Arc::new(move |key: &str| lock(&waiting).contains_key(key)),
        }),
    };
    let mut profiles = HashMap::new();
    for p in config.effective_profiles() {
        let fw = new_framework_with(&p, &handle)?;
        profiles.insert(fw.scheduler_name.clone(), Arc::new(fw));
    }
    let shared = Arc::new(Shared {
        queue: Mutex::new(SchedulingQueue::default()),
        wake: Condvar::new(),
        cache: Mutex::new(Cache::default()),
        pending,
        storage,
        namespaces: RwLock::new(Arc::default()),
        pdbs: RwLock::new(HashMap::new()),
        nominator: Mutex::new(Nominator::default()),
        services: Mutex::new((HashMap::new(), false)),
        profiles,
        stop: AtomicBool::new(false),
    });

    let mut readies = Vec::new();
    let mut tasks = Vec::new();

    let (tx, rx) = tokio::sync::oneshot::channel();
    readies.push(rx);
    let (s1, s2, s3) = (shared.clone(), shared.clone(), shared.clone());
    tasks.push(tokio::spawn(drive(
        watch::<Node>(&client),
        "node",
        move |n: Node| {
            s1.cache().add_or_update_node(Arc::new(n));
            // Any node change may make parked pods schedulable.
            s1.with_queue(|q| q.move_all_to_active_or_backoff());
        },
        move |n: Node| {
            if let Some(name) = n.metadata.name.as_deref() {
                s2.cache().remove_node(name);
            }
        },
        move |seen| {
            // Nodes deleted while the watch was down.
            let mut cache = s3.cache();
            for name in cache.node_names() {
                if !seen.contains(&format!("/{name}")) {
                    cache.remove_node(&name);
                }
            }
            drop(cache);
            s3.with_queue(|q| q.move_all_to_active_or_backoff());
        },
        tx,
    )));

    let (tx, rx) = tokio::sync::oneshot::channel();
    readies.push(rx);
    let (s1, s2, s3) = (shared.clone(), shared.clone(), shared.clone());
    tasks.push(tokio::spawn(drive(
        watch::<Pod>(&client),
        "pod",
        move |p: Pod| on_pod(&s1, p),
        move |p: Pod| on_pod_deleted(&s2, &pod_key(&p)),
        move |seen| {
            // Pods deleted while the watch was down.
            let gone: Vec<String> = lock(&s3.pending)
                .keys()
                .filter(|k| !seen.contains(*k))
                .cloned()
                .collect();
            let gone_bound: Vec<String> = s3
                .cache()
                .pod_keys()
                .into_iter()
                .filter(|k| !seen.contains(k))
                .collect();
            for k in gone.into_iter().chain(gone_bound) {
                on_pod_deleted(&s3, &k);
            }
        },
        tx,
    )));

    let (tx, rx) = tokio::sync::oneshot::channel();
    readies.push(rx);
    let (s1, s2) = (shared.clone(), shared.clone());
    tasks.push(tokio::spawn(drive(
        watch::<Namespace>(&client),
        "namespace",
        move |ns: Namespace| {
            let mut w = s1.namespaces.write().unwrap_or_else(|e| e.into_inner());
            let mut map = (**w).clone();
            if let Some(n) = ns.metadata.name {
                map.insert(n, ns.metadata.labels.unwrap_or_default());
            }
            *w = Arc::new(map);
        },
        move |ns: Namespace| {
            let mut w = s2.namespaces.write().unwrap_or_else(|e| e.into_inner());
            let mut map = (**w).clone();
            if let Some(n) = ns.metadata.name.as_deref() {
                map.remove(n);
            }
            *w = Arc::new(map);
        },
        |_| {},
        tx,
    )));

    let (tx, _svc_ready) = tokio::sync::oneshot::channel();
    let (s1, s2) = (shared.clone(), shared.clone());
    tasks.push(tokio::spawn(drive(
        watch::<Service>(&client),
        "service",
        move |svc: Service| {
            let key = format!(
                "{}/{}",
                svc.metadata.namespace.as_deref().unwrap_or_default(),
                svc.metadata.name.as_deref().unwrap_or_default()
            );
            let ns = svc.metadata.namespace.unwrap_or_default();
            let sel = svc.spec.and_then(|s| s.selector).unwrap_or_default();
            let mut g = lock(&s1.services);
            if g.0.get(&key) != Some(&(ns.clone(), sel.clone())) {
                g.0.insert(key, (ns, sel));
                g.1 = true;
            }
        },
        move |svc: Service| {
            let key = format!(
                "{}/{}",
                svc.metadata.namespace.as_deref().unwrap_or_default(),
                svc.metadata.name.as_deref().unwrap_or_default()
            );
            let mut g = lock(&s2.services);
            if g.0.remove(&key).is_some() {
                g.1 = true;
            }
        },
        |_| {},
        tx,
    )));

    let (tx, _pdb_ready) = tokio::sync::oneshot::channel();
    let (s1, s2) = (shared.clone(), shared.clone());
    tasks.push(tokio::spawn(drive(
        watch::<PodDisruptionBudget>(&client),
        "poddisruptionbudget",
        move |p: PodDisruptionBudget| {
            s1.pdbs
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(pdb_key(&p), p);
        },
        move |p: PodDisruptionBudget| {
            s2.pdbs
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&pdb_key(&p));
        },
        |_| {},
        tx,
    )));

    // The volume plugins' objects. As upstream's EventsToRegister (PVC, PV,
    // StorageClass and CSINode adds and updates), a change may make parked
    // pods schedulable; the first lists gate the start like the nodes'.
    readies.push(watch_storage::<PersistentVolumeClaim>(
        &client,
        &shared,
        &mut tasks,
        "persistentvolumeclaim",
        |s, c| {
            s.claims.insert(claim_key(&c), Arc::new(c));
        },
        |s, c| {
            s.claims.remove(&claim_key(c));
        },
        |s, seen| s.claims.retain(|k, _| seen.contains(k)),
    ));
    readies.push(watch_storage::<PersistentVolume>(
        &client,
        &shared,
        &mut tasks,
        "persistentvolume",
        |s, v| {
            s.volumes
                .insert(v.metadata.name.clone().unwrap_or_default(), Arc::new(v));
        },
        |s, v| {
            s.volumes
                .remove(v.metadata.name.as_deref().unwrap_or_default());
        },
        |s, seen| s.volumes.retain(|k, _| seen.contains(&format!("/{k}"))),
    ));
    readies.push(watch_storage::<StorageClass>(
        &client,
        &shared,
        &mut tasks,
        "storageclass",
        |s, c| {
            s.classes
                .insert(c.metadata.name.clone().unwrap_or_default(), Arc::new(c));
        },
        |s, c| {
            s.classes
                .remove(c.metadata.name.as_deref().unwrap_or_default());
        },
        |s, seen| s.classes.retain(|k, _| seen.contains(&format!("/{k}"))),
    ));
    readies.push(watch_storage::<CSINode>(
        &client,
        &shared,
        &mut tasks,
        "csinode",
        |s, n| {
            s.csi_nodes
                .insert(n.metadata.name.clone().unwrap_or_default(), Arc::new(n));
        },
        |s, n| {
            s.csi_nodes
                .remove(n.metadata.name.as_deref().unwrap_or_default());
        },
        |s, seen| s.csi_nodes.retain(|k, _| seen.contains(&format!("/{k}"))),
    ));

    let stop = StopOnDrop(
        shared.clone(),
        tasks.iter().map(|t| t.abort_handle()).collect(),
    );
    for r in readies {
        if r.await.is_err() {
            return Err(Error::Config(
                "an informer stopped before its first list".into(),
            ));
        }
    }
    info!(profiles = shared.profiles.len(), "scheduler started");

    // Bursts of thousands of pods a second must not drop their Scheduled
    // events: queue them (writing stays in the recorder's own task).
    let recorder = Recorder::with_options(
        client.clone(),
        EventSource::new(COMPONENT, ""),
        RecorderOptions {
            queue_capacity: EVENT_QUEUE_CAPACITY,
            ..Default::default()
        },
    );
    let looper = Looper {
        client: client.clone(),
        recorder: PacedEvents::new(recorder),
        shared: shared.clone(),
        handle: Handle::current(),
        bindings: Arc::new(Semaphore::new(MAX_CONCURRENT_BINDINGS)),
        search: SearchState {
            percentage_of_nodes_to_score: config.percentage_of_nodes_to_score,
            parallelism: config.effective_parallelism(),
            ..Default::default()
        },
        snapshot: Snapshot::default(),
    };
    let thread = std::thread::Builder::new()
        .name("scheduler".into())
        .spawn(move || looper.run())
        .map_err(|e| Error::Config(format!("starting the scheduling thread: {e}")))?;

    // The watches retry forever; if one ends, stop the loop too. The loop
    // also stops when this future is dropped (leadership lost, shutdown).
    let (_done, _, _) = futures::future::select_all(tasks).await;
    drop(stop);
    let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    Ok(())
}

type StorageApply<K> = fn(&mut StorageSnapshot, K);
type StorageDelete<K> = fn(&mut StorageSnapshot, &K);
type StorageRelist = fn(&mut StorageSnapshot, &HashSet<String>);

/// Watches one kind of storage object into `shared.storage`; adds and
/// updates move parked pods (deletes cannot make a pod fit).
fn watch_storage<K>(
    client: &kube::Client,
    shared: &Arc<Shared>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
    what: &'static str,
    apply: StorageApply<K>,
    delete: StorageDelete<K>,
    relisted: StorageRelist,
) -> tokio::sync::oneshot::Receiver<()>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (s1, s2, s3) = (shared.clone(), shared.clone(), shared.clone());
    tasks.push(tokio::spawn(drive(
        watch::<K>(client),
        what,
        move |o: K| {
            s1.storage.update(|s| apply(s, o));
            s1.with_queue(|q| q.move_all_to_active_or_backoff());
        },
        move |o: K| s2.storage.update(|s| delete(s, &o)),
        move |seen| s3.storage.update(|s| relisted(s, &seen)),
        tx,
    )));
    rx
}

/// Stops the scheduling thread and the informers when `run` ends or is dropped.
struct StopOnDrop(Arc<Shared>, Vec<tokio::task::AbortHandle>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::Relaxed);
        self.0.wake.notify_all();
        for t in &self.1 {
            t.abort();
        }
    }
}

fn pdb_key(p: &PodDisruptionBudget) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or_default(),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

fn on_pod(s: &Shared, pod: Pod) {
    let key = pod_key(&pod);
    let pod = Arc::new(pod);
    if node_name(&pod).is_some() || is_terminal(&pod) {
        let assigned = node_name(&pod).is_some();
        let had = lock(&s.pending).remove(&key).is_some();
        lock(&s.nominator).remove(&key);
        if had {
            s.with_queue(|q| q.delete(&key));
        }
        if assigned {
            let mut cache = s.cache();
            let new = !cache.contains_pod(&key);
            cache.add_or_update_pod(pod);
            drop(cache);
            // A pod bound elsewhere may satisfy parked pods' pod affinity or spreading.
            if new {
                s.with_queue(|q| q.move_all_to_active_or_backoff());
            }
        }
        return;
    }
    if pod.metadata.deletion_timestamp.is_some() {
        lock(&s.pending).remove(&key);
        lock(&s.nominator).remove(&key);
        s.with_queue(|q| q.delete(&key));
        return;
    }
    // SchedulingGates (PreEnqueue): a gated pod waits outside the queue
    // until its gates are removed.
    let gated = pod
        .spec
        .as_ref()
        .and_then(|sp| sp.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty());
    if gated {
        lock(&s.pending).remove(&key);
        s.with_queue(|q| q.delete(&key));
        return;
    }
    if s.profiles.contains_key(scheduler_name(&pod)) {
        let prio = pod.spec.as_ref().and_then(|sp| sp.priority).unwrap_or(0);
        if let Some(n) = pod
            .status
            .as_ref()
            .and_then(|st| st.nominated_node_name.as_deref())
            .filter(|n| !n.is_empty())
        {
            lock(&s.nominator).add(&key, n, Arc::new(PodInfo::from_arc(pod.clone())));
        }
        lock(&s.pending).insert(key.clone(), pod);
        s.with_queue(|q| q.add(&key, prio));
    }
}

fn on_pod_deleted(s: &Shared, key: &str) {
    lock(&s.pending).remove(key);
    lock(&s.nominator).remove(key);
    let was_bound = {
        let mut c = s.cache();
        let had = c.contains_pod(key) && !c.is_assumed(key);
        if had {
            c.remove_pod(key);
        }
        had
    };
    s.with_queue(|q| {
        q.delete(key);
        // Freed room may let parked pods fit.
        if was_bound {
            q.move_all_to_active_or_backoff();
        }
    });
}

/// The scheduling thread's state.
struct Looper {
    client: kube::Client,
    recorder: PacedEvents,
    shared: Arc<Shared>,
    handle: Handle,
    bindings: Arc<Semaphore>,
    search: SearchState,
    snapshot: Snapshot,
}

impl Looper {
    fn run(mut self) {
        loop {
            let Some(key) = self.next() else {
                return;
            };
            let outcome = self.schedule_one(&key);
            self.shared.with_queue(|q| q.done(&key, outcome));
        }
    }

    /// Blocks until a pod is ready to try, or the scheduler stops.
    fn next(&self) -> Option<String> {
        let mut q = lock(&self.shared.queue);
        loop {
            if self.shared.stop.load(Ordering::Relaxed) {
                return None;
            }
            let now = Instant::now();
            if let Some(k) = q.pop(now) {
                return Some(k);
            }
            let wait = q
                .next_ready()
                .map(|t| t.saturating_duration_since(now))
                .unwrap_or(Duration::from_secs(1))
                .clamp(Duration::from_millis(1), Duration::from_secs(1));
            q = self
                .shared
                .wake
                .wait_timeout(q, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    fn schedule_one(&mut self, key: &str) -> Outcome {
        let Some(pod) = lock(&self.shared.pending).get(key).cloned() else {
            return Outcome::Scheduled;
        };
        let Some(fw) = self.shared.profiles.get(scheduler_name(&pod)).cloned() else {
            return Outcome::Scheduled;
        };
        {
            let mut cache = self.shared.cache();
            if cache.contains_pod(key) {
                // Already assumed; its binding is in flight.
                return Outcome::Scheduled;
            }
            cache.update_snapshot(&mut self.snapshot);
        }
        self.snapshot.namespaces = self
            .shared
            .namespaces
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let pdbs = self.shared.pdbs.read().unwrap_or_else(|e| e.into_inner());
        if pdbs.len() != self.snapshot.pdbs.len() || !pdbs.is_empty() {
            self.snapshot.pdbs = Arc::new(pdbs.values().cloned().collect());
        }
        drop(pdbs);
        {
            let mut svc = lock(&self.shared.services);
            if std::mem::take(&mut svc.1) {
                self.snapshot.service_selectors = Arc::new(
                    svc.0
                        .values()
                        .filter(|(_, sel)| !sel.is_empty())
                        .cloned()
                        .collect(),
                );
            }
        }
        if let Some(by_node) = lock(&self.shared.nominator).take_changes() {
            self.snapshot.nominated = Arc::new(by_node);
        }
        if let Some(storage) = self.shared.storage.take_changes() {
            self.snapshot.storage = storage;
        }
        let pod_info = Arc::new(PodInfo::from_arc(pod.clone()));
        match fw.schedule_pod(&pod_info, &self.snapshot, &mut self.search) {
            Ok(mut res) => {
                let host = res.suggested_host.clone();
                let mut state = std::mem::take(&mut res.state);
                let s = fw.run_reserve(&mut state, &pod_info, &host);
                if !s.is_success() {
                    warn!(pod = key, node = %host, status = %s, "reserve rejected the pod");
                    return Outcome::Error;
                }
                let s = fw.run_permit(&state, &pod_info, &host);
                if !s.is_success() {
                    warn!(pod = key, node = %host, status = %s, "permit rejected the pod");
                    fw.run_unreserve(&mut state, &pod_info, &host);
                    return Outcome::Error;
                }
                let mut binding = match fw.run_bind(&pod_info, &host) {
                    Ok(b) => b,
                    Err(st) => {
                        warn!(pod = key, status = %st, "no binding");
                        fw.run_unreserve(&mut state, &pod_info, &host);
                        return Outcome::Error;
                    }
                };
                let why = explain(&res.scores, 3);
                binding
                    .metadata
                    .annotations
                    .get_or_insert_default()
                    .insert(CANDIDATES_ANNOTATION.to_string(), why.clone());
                if let Err(e) = self.shared.cache().assume_pod(pod_info.clone(), &host) {
                    warn!(pod = key, error = %e, "assume failed");
                    fw.run_unreserve(&mut state, &pod_info, &host);
                    return Outcome::Error;
                }
                debug!(pod = key, node = %host, feasible = res.feasible_nodes, candidates = %why, "assumed");
                self.spawn_bind(fw, pod_info, state, binding, host);
                Outcome::Scheduled
            }
            Err(ScheduleError::Internal(st)) => {
                warn!(pod = key, status = %st, "scheduling error");
                Outcome::Error
            }
            Err(err) => {
                let nomination = match &err {
                    ScheduleError::Fit(fe) => fe.nomination.clone(),
                    _ => None,
                };
                let message = err.to_string();
                debug!(pod = key, %message, "unschedulable");
                self.recorder.event(
                    &pod,
                    EventType::Warning,
                    "FailedScheduling",
                    message.clone(),
                );
                let nominated = nomination.as_ref().map(|n| n.node.clone());
                if let Some(n) = nomination {
                    lock(&self.shared.nominator).add(key, &n.node, pod_info.clone());
                    self.spawn_preemption(pod.clone(), n, fw.scheduler_name.clone());
                }
                let api: Api<Pod> = Api::namespaced(
                    self.client.clone(),
                    pod.metadata.namespace.as_deref().unwrap_or("default"),
                );
                self.handle.spawn(async move {
                    if let Err(e) =
                        set_unschedulable(&api, &pod, &message, nominated.as_deref()).await
                    {
                        debug!(error = %e, "updating PodScheduled condition failed");
                    }
                });
                Outcome::Unschedulable
            }
        }
    }

    /// PreBind then Bind in the background (upstream's binding cycle); the
    /// cache already counts the pod on `host`. A failure unreserves, forgets
    /// the pod and retries it after its backoff.
    fn spawn_bind(
        &self,
        fw: Arc<Framework>,
        pod_info: Arc<PodInfo>,
        mut state: CycleState,
        binding: Binding,
        host: String,
    ) {
        let pod = pod_info.pod.clone();
        let shared = self.shared.clone();
        let recorder = self.recorder.clone();
        let slots = self.bindings.clone();
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        self.handle.spawn(async move {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let key = pod_key(&pod);
            // PreBind may wait minutes for volumes: outside the binding slots.
            let pre_bind = fw.run_pre_bind(&state, &pod_info, &host).await;
            let res = if pre_bind.is_success() {
                let _slot = slots.acquire_owned().await;
                // The server answers with a Status, not a Binding.
                api.create_subresource::<_, serde_json::Value>(
                    "binding",
                    &name,
                    &PostParams::default(),
                    &binding,
                )
                .await
                .map_err(|e| e.to_string())
            } else {
                Err(format!(
                    "running PreBind plugin {:?}: {}",
                    pre_bind.plugin(),
                    pre_bind.message()
                ))
            };
            match res {
                Ok(_) => recorder.event(
                    &pod,
                    EventType::Normal,
                    "Scheduled",
                    format!("Successfully assigned {ns}/{name} to {host}"),
                ),
                Err(e) => {
                    warn!(pod = %key, node = %host, error = %e, "binding failed");
                    if !pre_bind.is_success() {
                        // As upstream's failure handler: the pod says why it waits.
                        recorder.event(&pod, EventType::Warning, "FailedScheduling", e.clone());
                    }
                    fw.run_unreserve(&mut state, &pod_info, &host);
                    shared.cache().forget_pod(&key);
                    let still_pending = lock(&shared.pending).contains_key(&key);
                    if still_pending {
                        let prio = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
                        shared.with_queue(|q| q.requeue_after_error(&key, prio));
                    }
                }
            }
        });
    }

    /// Evicts the victims as upstream's `prepareCandidate`: a DisruptionTarget
    /// condition, a graceful delete and a `Preempted` event on each.
    fn spawn_preemption(&self, preemptor: Arc<Pod>, n: Nomination, scheduler_name: String) {
        let client = self.client.clone();
        let recorder = self.recorder.clone();
        self.handle.spawn(async move {
            let uid = preemptor.metadata.uid.clone().unwrap_or_default();
            for v in n.victims {
                let ns = v.namespace().to_string();
                let name = v.pod.metadata.name.clone().unwrap_or_default();
                let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
                let patch = json!({"status": {"conditions": [{
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": REASON_PREEMPTION_BY_SCHEDULER,
                    "message": disruption_message(&scheduler_name),
                    "lastProbeTime": null,
                    "lastTransitionTime": now(),
                }]}});
                if let Err(e) = api
                    .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                    .await
                {
                    debug!(pod = %name, error = %e, "marking preemption victim failed");
                }
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {
                        info!(victim = %format!("{ns}/{name}"), node = %n.node, "preempted");
                        recorder.event(
                            &v.pod,
                            EventType::Normal,
                            "Preempted",
                            preempted_message(&uid, &n.node),
                        );
                    }
                    Err(e) => warn!(pod = %name, error = %e, "deleting preemption victim failed"),
                }
            }
        });
    }
}

fn now() -> Time {
    Time(Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now()))
}

/// PodScheduled=False/Unschedulable with the FitError message (and the
/// nominated node after preemption), written only when something changes.
async fn set_unschedulable(
    api: &Api<Pod>,
    pod: &Pod,
    message: &str,
    nominated: Option<&str>,
) -> Result<(), kube::Error> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let status = pod.status.as_ref();
    let current = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
    let current_nominated = status.and_then(|s| s.nominated_node_name.as_deref());
    let same_condition = current.is_some_and(|c| {
        c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
            && c.message.as_deref() == Some(message)
    });
    if same_condition && (nominated.is_none() || nominated == current_nominated) {
        return Ok(());
    }
    let transition = match current {
        Some(c) if c.status == "False" => c.last_transition_time.clone(),
        _ => None,
    }
    .unwrap_or_else(now);
    let mut status = json!({"conditions": [{
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastProbeTime": null,
        "lastTransitionTime": transition,
    }]});
    if let Some(n) = nominated {
        status["nominatedNodeName"] = json!(n);
    }
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Strategic(&json!({"status": status})),
    )
    .await?;
    Ok(())
}
