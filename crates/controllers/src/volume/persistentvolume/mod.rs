//! The PersistentVolume controller (upstream's
//! `pkg/controller/volume/persistentvolume`, `persistent-volume-binder` in
//! kube-controller-manager): binds claims to volumes (the smallest matching
//! Available volume, a claim's `spec.volumeName`, a volume's pre-bound
//! `claimRef`), keeps both objects' phases (claims Pending/Bound/Lost,
//! volumes Available/Bound/Released/Failed), gives class-less claims the
//! default StorageClass (RetroactiveDefaultStorageClass), hands dynamic
//! provisioning to the external provisioner the claim's class names
//! (annotations and `ExternalProvisioning`), waits for the scheduler's
//! selected node under `WaitForFirstConsumer`, and runs a released volume's
//! reclaim policy.
//!
//! Decisions are in `binder.rs` and `reclaim.rs` (tables in `tests.rs`);
//! this file is the loop: informer caches of volumes, claims, classes and
//! pods, a volume queue and a claim queue (upstream's two workers) fed by
//! their watches, and a full resync every 15 s (upstream's
//! `--pvclaimbinder-sync-period`), which is also how a failed sync is
//! retried, as upstream's.

pub mod binder;
pub mod reclaim;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use berth_runtime::events::{EventSource, Recorder};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::endpoints::driver::Queue;
use binder::{ClaimWorld, Classes, On, Plan};

/// Upstream's `--pvclaimbinder-sync-period` default.
pub const SYNC_PERIOD: Duration = Duration::from_secs(15);

const CONTROLLER: &str = "persistentvolume";

/// A claim is (namespace, name); a volume is ("", name) in its own queue.
type Key = (String, String);

enum Work {
    Claim(Key),
    Volume(String),
    /// A StorageClass changed: unbound claims may now get the default class
    /// or a provisioner (upstream waits for the resync).
    Classes,
}

struct Caches {
    volumes: Store<PersistentVolume>,
    claims: Store<PersistentVolumeClaim>,
    classes: Store<StorageClass>,
    pods: Store<Pod>,
}

fn claim_key(c: &PersistentVolumeClaim) -> Key {
    (
        c.metadata.namespace.clone().unwrap_or_default(),
        c.metadata.name.clone().unwrap_or_default(),
    )
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
            Err(e) => warn!(controller = CONTROLLER, error = %e, "watch failed"),
        }
    }
}

pub async fn run(client: kube::Client) {
    let (volumes, pv_w) = reflector::store::<PersistentVolume>();
    let (claims, pvc_w) = reflector::store::<PersistentVolumeClaim>();
    let (classes, sc_w) = reflector::store::<StorageClass>();
    let (pods, pod_w) = reflector::store::<Pod>();
    let caches = Arc::new(Caches {
        volumes: volumes.clone(),
        claims: claims.clone(),
        classes: classes.clone(),
        pods: pods.clone(),
    });
    let (tx, mut rx) = mpsc::unbounded_channel::<Work>();
    let mut tasks = Vec::new();
    let t = tx.clone();
    tasks.push(tokio::spawn(drain(
        reflector::reflector(pv_w, watch(Api::<PersistentVolume>::all(client.clone()))),
        move |ev| match ev {
            Event::Apply(v) | Event::InitApply(v) => {
                let _ = t.send(Work::Volume(v.metadata.name.clone().unwrap_or_default()));
            }
            // Upstream's deleteVolume: the claim is synced so that it turns Lost.
            Event::Delete(v) => {
                if let Some(r) = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) {
                    let _ = t.send(Work::Claim((
                        r.namespace.clone().unwrap_or_default(),
                        r.name.clone().unwrap_or_default(),
                    )));
                }
            }
            Event::Init | Event::InitDone => {}
        },
    )));
    let t = tx.clone();
    tasks.push(tokio::spawn(drain(
        reflector::reflector(
            pvc_w,
            watch(Api::<PersistentVolumeClaim>::all(client.clone())),
        ),
        move |ev| match ev {
            Event::Apply(c) | Event::InitApply(c) => {
                let _ = t.send(Work::Claim(claim_key(&c)));
            }
            // Upstream's deleteClaim: the volume is synced so that it is released.
            Event::Delete(c) => {
                if let Some(v) = c
                    .spec
                    .as_ref()
                    .and_then(|s| s.volume_name.clone())
                    .filter(|v| !v.is_empty())
                {
                    let _ = t.send(Work::Volume(v));
                }
            }
            Event::Init | Event::InitDone => {}
        },
    )));
    let t = tx.clone();
    tasks.push(tokio::spawn(drain(
        reflector::reflector(sc_w, watch(Api::<StorageClass>::all(client.clone()))),
        move |ev| {
            if let Event::Apply(_) = ev {
                let _ = t.send(Work::Classes);
            }
        },
    )));
    tasks.push(tokio::spawn(drain(
        reflector::reflector(pod_w, watch(Api::<Pod>::all(client.clone()))),
        |_| {},
    )));
    // Upstream's WaitForNamedCacheSync: a partial cache would bind the
    // wrong volume or release a bound one.
    let ready = volumes.wait_until_ready().await.is_ok()
        && claims.wait_until_ready().await.is_ok()
        && classes.wait_until_ready().await.is_ok()
        && pods.wait_until_ready().await.is_ok();
    if !ready {
        warn!(controller = CONTROLLER, "informers never synced");
        return;
    }
    let events = Recorder::new(
        client.clone(),
        EventSource::new("persistentvolume-controller", ""),
    );
    let mut volume_queue = Queue::default();
    let mut claim_queue = Queue::default();
    let mut resync = tokio::time::interval(SYNC_PERIOD);
    let push = |w: Work, vq: &mut Queue, cq: &mut Queue| match w {
        Work::Claim(k) => cq.push(k),
        Work::Volume(n) => vq.push((String::new(), n)),
        Work::Classes => {
            for c in claims.state() {
                cq.push(claim_key(&c));
            }
        }
    };
    loop {
        while let Ok(w) = rx.try_recv() {
            push(w, &mut volume_queue, &mut claim_queue);
        }
        let mut worked = false;
        if let Some((_, name)) = volume_queue.pop() {
            worked = true;
            if let Some(k) = sync_volume(&client, &caches, &events, &name).await {
                claim_queue.push(k);
            }
        }
        if let Some(k) = claim_queue.pop() {
            worked = true;
            sync_claim(&client, &caches, &events, &k).await;
        }
        if worked {
            continue;
        }
        tokio::select! {
            w = rx.recv() => match w {
                Some(w) => push(w, &mut volume_queue, &mut claim_queue),
                None => break,
            },
            _ = resync.tick() => {
                for v in volumes.state() {
                    volume_queue.push((String::new(), v.metadata.name.clone().unwrap_or_default()));
                }
                for c in claims.state() {
                    claim_queue.push(claim_key(&c));
                }
            }
        }
    }
    for t in tasks {
        t.abort();
    }
}

/// Names of the claim's pods that still wait for a node (upstream's
/// `findNonScheduledPodsByPVC`), sorted.
fn unscheduled_pods(pods: &Store<Pod>, claim: &PersistentVolumeClaim) -> Vec<String> {
    let ns = claim.metadata.namespace.as_deref();
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let mut out: Vec<String> = pods
        .state()
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == ns)
        .filter(|p| !super::pod_is_terminated(p))
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_none_or(str::is_empty)
        })
        .filter(|p| super::pod_claims(p).iter().any(|(c, _)| c == name))
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    out.sort();
    out
}

async fn sync_claim(client: &kube::Client, caches: &Caches, events: &Recorder, key: &Key) {
    let Some(claim) = caches.claims.get(&ObjectRef::new(&key.1).within(&key.0)) else {
        return;
    };
    let volumes = caches.volumes.state();
    let volume_refs: Vec<&PersistentVolume> = volumes.iter().map(|v| v.as_ref()).collect();
    let classes = caches.classes.state();
    let class_refs: Vec<&StorageClass> = classes.iter().map(|c| c.as_ref()).collect();
    let pods = unscheduled_pods(&caches.pods, &claim);
    let world = ClaimWorld {
        volumes: &volume_refs,
        classes: Classes { all: &class_refs },
        unscheduled_pods: &pods,
    };
    let plan = binder::sync_claim(&claim, &world);
    let volume = plan.volume.as_ref().and_then(|v| {
        volume_refs
            .iter()
            .find(|o| o.metadata.name == v.metadata.name)
            .copied()
    });
    apply(client, events, plan, volume, Some(&claim)).await;
}

/// Syncs one volume; returns its claim when that should be synced next.
async fn sync_volume(
    client: &kube::Client,
    caches: &Caches,
    events: &Recorder,
    name: &str,
) -> Option<Key> {
    let volume = caches.volumes.get(&ObjectRef::new(name))?;
    let r = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    let key = r.map(|r| {
        (
            r.namespace.clone().unwrap_or_default(),
            r.name.clone().unwrap_or_default(),
        )
    });
    let uid = r.and_then(|r| r.uid.clone()).unwrap_or_default();
    let mut claim = key
        .as_ref()
        .and_then(|k| caches.claims.get(&ObjectRef::new(&k.1).within(&k.0)))
        .map(|c| (*c).clone());
    // A provisioner's or the scheduler's binding can reach us before the
    // claim does: ask the API server before releasing the volume (upstream's
    // double check), and when the cached claim has another uid.
    let phase = binder::volume_phase(&volume);
    let missing = claim.is_none() && !matches!(phase, "Released" | "Failed");
    let other_uid = claim
        .as_ref()
        .is_some_and(|c| c.metadata.uid.as_deref() != Some(uid.as_str()));
    if !uid.is_empty()
        && (missing || other_uid)
        && let Some((ns, n)) = &key
    {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
        match api.get_opt(n).await {
            Ok(c) => claim = c,
            Err(e) => {
                warn!(controller = CONTROLLER, volume = %name, error = %e, "reading the volume's claim");
                return None;
            }
        }
    }
    let plan = binder::sync_volume(&volume, claim.as_ref());
    let enqueue = plan.enqueue_claim;
    apply(client, events, plan, Some(&volume), claim.as_ref()).await;
    if enqueue { key } else { None }
}

/// Writes what the plan changed — the volume (metadata and spec, then
/// status), then the claim likewise — and emits its events once that worked.
async fn apply(
    client: &kube::Client,
    events: &Recorder,
    plan: Plan,
    volume: Option<&PersistentVolume>,
    claim: Option<&PersistentVolumeClaim>,
) {
    let Plan {
        volume: new_volume,
        claim: new_claim,
        events: evs,
        error,
        ..
    } = plan;
    let mut volume = volume.cloned();
    let mut claim = claim.cloned();
    let written = async {
        if let (Some(old), Some(new)) = (volume.as_ref(), new_volume) {
            volume = Some(write_volume(client, old, new).await?);
        }
        if let (Some(old), Some(new)) = (claim.as_ref(), new_claim) {
            claim = Some(write_claim(client, old, new).await?);
        }
        Ok::<(), kube::Error>(())
    }
    .await;
    if let Err(e) = written {
        // A conflict means a newer object is on its way through the watch.
        if matches!(&e, kube::Error::Api(s) if s.code == 409) {
            debug!(controller = CONTROLLER, error = %e, "write conflict; the next sync retries");
        } else {
            warn!(controller = CONTROLLER, error = %e, "sync failed; the next sync retries");
        }
        return;
    }
    for e in evs {
        match (e.on, volume.as_ref(), claim.as_ref()) {
            (On::Volume, Some(v), _) => events.event(v, e.type_, e.reason, e.message),
            (On::Claim, _, Some(c)) => events.event(c, e.type_, e.reason, e.message),
            _ => {}
        }
    }
    if let Some(e) = error {
        warn!(controller = CONTROLLER, error = %e, "sync failed; the next sync retries");
    }
}

async fn write_volume(
    client: &kube::Client,
    old: &PersistentVolume,
    new: PersistentVolume,
) -> Result<PersistentVolume, kube::Error> {
    let api: Api<PersistentVolume> = Api::all(client.clone());
    let name = old.metadata.name.clone().unwrap_or_default();
    let mut cur = old.clone();
    if old.metadata != new.metadata || old.spec != new.spec {
        let mut body = new.clone();
        body.status = old.status.clone();
        body.metadata.managed_fields = None;
        cur = api.replace(&name, &PostParams::default(), &body).await?;
    }
    if old.status != new.status {
        cur.status = new.status;
        cur.metadata.managed_fields = None;
        cur = api
            .replace_status(&name, &PostParams::default(), &cur)
            .await?;
        let phase = binder::volume_phase(&cur);
        debug!(controller = CONTROLLER, volume = %name, %phase, "volume entered phase");
    }
    Ok(cur)
}

async fn write_claim(
    client: &kube::Client,
    old: &PersistentVolumeClaim,
    new: PersistentVolumeClaim,
) -> Result<PersistentVolumeClaim, kube::Error> {
    let (ns, name) = claim_key(old);
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let mut cur = old.clone();
    if old.metadata != new.metadata || old.spec != new.spec {
        let mut body = new.clone();
        body.status = old.status.clone();
        body.metadata.managed_fields = None;
        cur = api.replace(&name, &PostParams::default(), &body).await?;
    }
    if old.status != new.status {
        cur.status = new.status;
        cur.metadata.managed_fields = None;
        cur = api
            .replace_status(&name, &PostParams::default(), &cur)
            .await?;
        debug!(controller = CONTROLLER, claim = %format!("{ns}/{name}"), "claim status updated");
    }
    Ok(cur)
}
