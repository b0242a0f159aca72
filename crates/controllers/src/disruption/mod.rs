//! The disruption controller (upstream's `pkg/controller/disruption`, named
//! `disruption` in kube-controller-manager): keeps every PodDisruptionBudget's
//! status — expectedPods (the selected pods' controllers' scale, or the pod
//! count for an integer minAvailable), currentHealthy (Ready pods not being
//! deleted nor just let go by the eviction API), desiredHealthy,
//! disruptionsAllowed, the `disruptedPods` the eviction subresource recorded
//! (dropped once their pod is deleting or gone, or after 2 minutes),
//! observedGeneration and the `DisruptionAllowed` condition; and a pod's
//! `DisruptionTarget` condition left True for 2 minutes without the pod being
//! deleted is reset to False (upstream's stale pod disruption worker). The eviction
//! subresource of the API server reads and spends what this writes.
//!
//! Decisions are in `compute.rs`; this file is the loop: informer caches of
//! PDBs, Pods, ReplicaSets, Deployments, StatefulSets and
//! ReplicationControllers, a de-duplicated queue of PDB keys fed by their
//! events and their pods' events, rechecks when a disrupted pod's entry
//! expires, retries and a periodic resync.

pub mod compute;

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use berth_runtime::events::{EventSource, EventType, Recorder};
use futures::{Stream, StreamExt};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use compute::ControllerScale;

/// A PodDisruptionBudget: (namespace, name).
pub type Key = (String, String);

/// Every budget is synced again this often (the informers' resync).
const RESYNC: Duration = Duration::from_secs(30);
/// Wait before retrying a failed sync.
const RETRY: Duration = Duration::from_secs(1);

struct Caches {
    pdbs: Store<PodDisruptionBudget>,
    pods: Store<Pod>,
    rcs: Store<ReplicationController>,
    rss: Store<ReplicaSet>,
    deployments: Store<Deployment>,
    statefulsets: Store<StatefulSet>,
}

fn key_of(meta: &kube::api::ObjectMeta) -> Key {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

fn selector_of(pdb: &PodDisruptionBudget) -> berth_api::selector::LabelSelector {
    let sel = pdb
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(serde_json::Value::Null);
    // An invalid selector selects nothing.
    berth_api::selector::LabelSelector::from_meta(&sel)
        .unwrap_or_else(|_| berth_api::selector::LabelSelector::nothing())
}

/// Whether `pdb` selects `pod` (policy/v1: an empty selector selects every
/// pod of the namespace, a missing one none).
pub fn selects(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    pdb.metadata.namespace == pod.metadata.namespace
        && selector_of(pdb).matches(&pod.metadata.labels.clone().unwrap_or_default())
}

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

fn is_kind(r: &OwnerReference, kind: &str, groups: &[&str]) -> bool {
    r.kind == kind && groups.contains(&group_of(&r.api_version))
}

impl Caches {
    fn get<K>(store: &Store<K>, ns: &str, name: &str) -> Option<Arc<K>>
    where
        K: kube::Resource<DynamicType = ()> + Clone,
    {
        store.get(&ObjectRef::new(name).within(ns))
    }

    /// Upstream's lister-backed finders (ReplicationController, Deployment
    /// through its ReplicaSet, ReplicaSet, StatefulSet), in their order.
    fn find_with_listers(&self, r: &OwnerReference, ns: &str) -> Option<ControllerScale> {
        let uid_ok = |uid: &Option<String>| uid.as_deref() == Some(r.uid.as_str());
        if is_kind(r, "ReplicationController", &[""]) {
            let rc = Self::get(&self.rcs, ns, &r.name).filter(|rc| uid_ok(&rc.metadata.uid))?;
            return Some(ControllerScale {
                uid: r.uid.clone(),
                scale: rc.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            });
        }
        if is_kind(r, "ReplicaSet", &["apps", "extensions"]) {
            let rs = Self::get(&self.rss, ns, &r.name).filter(|rs| uid_ok(&rs.metadata.uid))?;
            let owner = rs
                .metadata
                .owner_references
                .as_ref()
                .and_then(|os| os.iter().find(|o| o.controller == Some(true)));
            if let Some(d_ref) = owner
                && d_ref.kind == "Deployment"
            {
                if !is_kind(d_ref, "Deployment", &["apps", "extensions"]) {
                    return None;
                }
                let d = Self::get(&self.deployments, ns, &d_ref.name)
                    .filter(|d| d.metadata.uid.as_deref() == Some(d_ref.uid.as_str()))?;
                return Some(ControllerScale {
                    uid: d_ref.uid.clone(),
                    scale: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                });
            }
            return Some(ControllerScale {
                uid: r.uid.clone(),
                scale: rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            });
        }
        if is_kind(r, "StatefulSet", &["apps"]) {
            let ss =
                Self::get(&self.statefulsets, ns, &r.name).filter(|ss| uid_ok(&ss.metadata.uid))?;
            return Some(ControllerScale {
                uid: r.uid.clone(),
                scale: ss.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            });
        }
        None
    }
}

/// Upstream's `getScaleController`: any other controller through its
/// `scale` subresource, found by discovery.
async fn find_with_scale(
    client: &kube::Client,
    r: &OwnerReference,
    ns: &str,
) -> Result<Option<ControllerScale>, String> {
    let (group, version) = match r.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", r.api_version.as_str()),
    };
    let gvk = kube::api::GroupVersionKind::gvk(group, version, &r.kind);
    let (ar, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("unable to map {}/{}: {e}", r.api_version, r.kind))?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    match api.get_scale(&r.name).await {
        Ok(scale) if scale.metadata.uid.as_deref() == Some(r.uid.as_str()) => {
            Ok(Some(ControllerScale {
                uid: r.uid.clone(),
                scale: scale.spec.and_then(|s| s.replicas).unwrap_or(0),
            }))
        }
        Ok(_) => Ok(None),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// A FIFO of keys, each at most once.
#[derive(Default)]
struct Queue {
    order: VecDeque<Key>,
    queued: HashSet<Key>,
}

impl Queue {
    fn push(&mut self, k: Key) {
        if self.queued.insert(k.clone()) {
            self.order.push_back(k);
        }
    }
    fn pop(&mut self) -> Option<Key> {
        let k = self.order.pop_front()?;
        self.queued.remove(&k);
        Some(k)
    }
}

fn watch<K>(api: Api<K>) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + 'static,
{
    watcher::watcher(api, berth_runtime::reflect::informer_config()).default_backoff()
}

async fn drain<K, S>(stream: S, mut on_event: impl FnMut(Event<K>))
where
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(ev) => on_event(ev),
            Err(e) => warn!(controller = "disruption", error = %e, "watch failed"),
        }
    }
}

/// The PDBs in the pod's namespace that select it.
fn pdbs_for_pod(pdbs: &Store<PodDisruptionBudget>, pod: &Pod) -> Vec<Key> {
    if pod.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
        return Vec::new();
    }
    pdbs.state()
        .iter()
        .filter(|b| selects(b, pod))
        .map(|b| key_of(&b.metadata))
        .collect()
}

pub async fn run(client: kube::Client) {
    let (pdbs, pdb_w) = reflector::store::<PodDisruptionBudget>();
    let (pods, pod_w) = reflector::store::<Pod>();
    let (rcs, rc_w) = reflector::store::<ReplicationController>();
    let (rss, rs_w) = reflector::store::<ReplicaSet>();
    let (deployments, d_w) = reflector::store::<Deployment>();
    let (statefulsets, ss_w) = reflector::store::<StatefulSet>();
    let caches = Arc::new(Caches {
        pdbs: pdbs.clone(),
        pods: pods.clone(),
        rcs: rcs.clone(),
        rss: rss.clone(),
        deployments: deployments.clone(),
        statefulsets: statefulsets.clone(),
    });
    let (tx, mut rx) = mpsc::unbounded_channel::<Key>();
    let mut tasks = Vec::new();
    let t = tx.clone();
    tasks.push(tokio::spawn(drain(
        reflector::reflector(
            pdb_w,
            watch(Api::<PodDisruptionBudget>::all(client.clone())),
        ),
        move |ev| {
            if let Event::Apply(b) | Event::Delete(b) | Event::InitApply(b) = ev {
                let _ = t.send(key_of(&b.metadata));
            }
        },
    )));
    let t = tx.clone();
    let pdb_store = pdbs.clone();
    let (stale_tx, stale_rx) = mpsc::unbounded_channel::<Key>();
    let stale = stale_tx.clone();
    tasks.push(tokio::spawn(drain(
        reflector::reflector(pod_w, watch(Api::<Pod>::all(client.clone()))),
        move |ev| {
            if let Event::Apply(p) | Event::Delete(p) | Event::InitApply(p) = ev {
                for k in pdbs_for_pod(&pdb_store, &p) {
                    let _ = t.send(k);
                }
                if let Some(wait) = compute::stale_disruption_wait(&p, Timestamp::now()) {
                    later(&stale, key_of(&p.metadata), wait);
                }
            }
        },
    )));
    tasks.push(tokio::spawn(reset_stale_disruptions(
        client.clone(),
        pods.clone(),
        stale_tx,
        stale_rx,
    )));
    tasks.push(tokio::spawn(drain(
        reflector::reflector(
            rc_w,
            watch(Api::<ReplicationController>::all(client.clone())),
        ),
        |_| {},
    )));
    tasks.push(tokio::spawn(drain(
        reflector::reflector(rs_w, watch(Api::<ReplicaSet>::all(client.clone()))),
        |_| {},
    )));
    tasks.push(tokio::spawn(drain(
        reflector::reflector(d_w, watch(Api::<Deployment>::all(client.clone()))),
        |_| {},
    )));
    tasks.push(tokio::spawn(drain(
        reflector::reflector(ss_w, watch(Api::<StatefulSet>::all(client.clone()))),
        |_| {},
    )));
    // Upstream's WaitForNamedCacheSync: nothing is computed from partial caches.
    let ready = pdbs.wait_until_ready().await.is_ok()
        && pods.wait_until_ready().await.is_ok()
        && rcs.wait_until_ready().await.is_ok()
        && rss.wait_until_ready().await.is_ok()
        && deployments.wait_until_ready().await.is_ok()
        && statefulsets.wait_until_ready().await.is_ok();
    if !ready {
        warn!(controller = "disruption", "informers never synced");
        return;
    }
    let events = Recorder::new(client.clone(), EventSource::new("controllermanager", ""));
    let mut queue = Queue::default();
    let mut resync = tokio::time::interval(RESYNC);
    loop {
        while let Ok(k) = rx.try_recv() {
            queue.push(k);
        }
        if let Some(k) = queue.pop() {
            match sync(&client, &caches, &events, &k).await {
                Ok(Some(after)) => later(&tx, k, after),
                Ok(None) => {}
                Err(e) => {
                    let pdb = format!("{}/{}", k.0, k.1);
                    // A write from a cache behind the eviction API's: expected, retried.
                    if matches!(&e, kube::Error::Api(s) if s.code == 409) {
                        debug!(controller = "disruption", %pdb, "status conflict; retrying");
                    } else {
                        warn!(controller = "disruption", %pdb, error = %e, "sync failed; retrying");
                    }
                    later(&tx, k, RETRY);
                }
            }
            continue;
        }
        tokio::select! {
            k = rx.recv() => match k {
                Some(k) => queue.push(k),
                None => break,
            },
            _ = resync.tick() => {
                for b in pdbs.state() {
                    queue.push(key_of(&b.metadata));
                }
            }
        }
    }
    for t in tasks {
        t.abort();
    }
}

/// Upstream's stale pod disruption worker: a pod whose `DisruptionTarget`
/// condition stayed True for 2 minutes without it being deleted gets the
/// condition back to False.
async fn reset_stale_disruptions(
    client: kube::Client,
    pods: Store<Pod>,
    tx: mpsc::UnboundedSender<Key>,
    mut rx: mpsc::UnboundedReceiver<Key>,
) {
    while let Some((ns, name)) = rx.recv().await {
        let Some(pod) = Caches::get(&pods, &ns, &name) else {
            continue;
        };
        let now = Timestamp::now();
        match compute::stale_disruption_wait(&pod, now) {
            None => continue,
            Some(wait) if !wait.is_zero() => {
                later(&tx, (ns, name), wait);
                continue;
            }
            Some(_) => {}
        }
        let patch = compute::reset_disruption_target_patch(now);
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => {
                debug!(controller = "disruption", pod = %format!("{ns}/{name}"), "reset stale DisruptionTarget condition to False")
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                warn!(controller = "disruption", pod = %format!("{ns}/{name}"), error = %e, "resetting a stale DisruptionTarget condition");
                later(&tx, (ns, name), RETRY);
            }
        }
    }
}

/// Queues `k` again after `after` (upstream's recheck queue and rate limiter).
fn later(tx: &mpsc::UnboundedSender<Key>, k: Key, after: Duration) {
    let tx = tx.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let _ = tx.send(k);
    });
}

/// One PDB: its status computed and written when it changed. Returns when to
/// look again (a disrupted pod's entry expiring).
async fn sync(
    client: &kube::Client,
    caches: &Caches,
    events: &Recorder,
    key: &Key,
) -> Result<Option<Duration>, kube::Error> {
    let (ns, name) = key;
    let Some(pdb) = Caches::get(&caches.pdbs, ns, name) else {
        return Ok(None);
    };
    let api: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let owned: Vec<Pod> = caches
        .pods
        .state()
        .iter()
        .filter(|p| selects(&pdb, p))
        .map(|p| (**p).clone())
        .collect();
    let pods: Vec<&Pod> = owned.iter().collect();
    if pods.is_empty() {
        events.event(
            pdb.as_ref(),
            EventType::Normal,
            "NoPods",
            "No matching pods found",
        );
    }
    // Controllers the listers do not know are asked for their scale first.
    let mut scales = std::collections::HashMap::new();
    for p in &pods {
        if let Some(r) = compute::controller_of(p)
            && !scales.contains_key(&r.uid)
            && caches.find_with_listers(r, ns).is_none()
        {
            scales.insert(r.uid.clone(), find_with_scale(client, r, ns).await);
        }
    }
    let expected =
        compute::expected_pod_count(&pdb, &pods, |r, ns| match caches.find_with_listers(r, ns) {
            Some(cs) => Ok(Some(cs)),
            None => scales.get(&r.uid).cloned().unwrap_or(Ok(None)),
        });
    let now = Timestamp::now();
    let expected = match expected {
        Ok(e) => e,
        Err(err) => {
            events.event(
                pdb.as_ref(),
                EventType::Warning,
                "CalculateExpectedPodCountFailed",
                format!("Failed to calculate the number of expected pods: {err}"),
            );
            return write_status(&api, &pdb, compute::fail_safe(&pdb, &err, now))
                .await
                .map(|_| None);
        }
    };
    if !expected.unmanaged.is_empty() {
        events.event(
            pdb.as_ref(),
            EventType::Warning,
            "UnmanagedPods",
            format!(
                "Pods selected by this PodDisruptionBudget (selector: {}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.",
                compute::go_selector(pdb.spec.as_ref().and_then(|s| s.selector.as_ref()))
            ),
        );
    }
    let (disrupted, recheck, not_deleted) = compute::build_disrupted_pod_map(&pods, &pdb, now);
    for p in pods
        .iter()
        .filter(|p| not_deleted.contains(&crate::podutil::name(p)))
    {
        // Upstream's text names the PDB's namespace twice.
        events.event(
            *p,
            EventType::Warning,
            "NotDeleted",
            format!("Pod was expected by PDB {ns}/{ns} to be deleted but it wasn't"),
        );
    }
    let healthy = compute::count_healthy(&pods, &disrupted, now);
    if let Some(status) = compute::desired_status(&pdb, healthy, &expected, disrupted, now) {
        match write_status(&api, &pdb, status).await {
            Ok(()) => {}
            // A conflict is retried without the fail-safe, as upstream.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                return Err(kube::Error::Api(e));
            }
            Err(e) => {
                let err = e.to_string();
                write_status(&api, &pdb, compute::fail_safe(&pdb, &err, now)).await?;
                return Err(e);
            }
        }
    }
    Ok(recheck.map(|t| {
        let left = t.duration_since(now);
        Duration::try_from(left).unwrap_or(Duration::ZERO) + Duration::from_millis(10)
    }))
}

async fn write_status(
    api: &Api<PodDisruptionBudget>,
    pdb: &PodDisruptionBudget,
    status: k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus,
) -> Result<(), kube::Error> {
    let mut new = pdb.clone();
    new.status = Some(status);
    new.metadata.managed_fields = None;
    let name = pdb.metadata.name.clone().unwrap_or_default();
    api.replace_status(&name, &PostParams::default(), &new)
        .await?;
    debug!(controller = "disruption", pdb = %name, "updated status");
    Ok(())
}
