//! The event loop both endpoint controllers share: informer caches of
//! Services, Pods and Nodes, and a de-duplicated queue of Service keys fed by
//! Service events, pod events (for the Services selecting the pod before and
//! after the change), changes to the objects the controller writes, retries
//! and a periodic resync. One key is synced at a time, after the caches
//! have their first full list.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;
use tracing::warn;

use super::pods::selector_matches;
use crate::Error;

/// A Service: (namespace, name).
pub type Key = (String, String);

/// Re-syncs every Service this often, as upstream's informer resync does.
const RESYNC: Duration = Duration::from_secs(300);
/// Wait before retrying a failed sync.
const RETRY: Duration = Duration::from_secs(1);

/// The informer caches a sync reads.
pub struct Caches {
    pub services: Store<Service>,
    pub pods: Store<Pod>,
    pub nodes: Store<Node>,
}

impl Caches {
    pub fn service(&self, key: &Key) -> Option<Arc<Service>> {
        self.services
            .get(&reflector::ObjectRef::new(&key.1).within(&key.0))
    }

    /// Every cached pod in `namespace`.
    pub fn pods_in(&self, namespace: &str) -> Vec<Pod> {
        self.pods
            .state()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
            .map(|p| (*p).clone())
            .collect()
    }
}

fn key_of(meta: &kube::api::ObjectMeta) -> Key {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// Forwards the Service keys of changes to objects the controller owns.
pub async fn watch_owned<K>(api: Api<K>, key: fn(&K) -> Option<Key>, tx: mpsc::UnboundedSender<Key>)
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + 'static,
{
    let stream = watcher(api).default_backoff().touched_objects();
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        if let Ok(obj) = ev
            && let Some(k) = key(&obj)
            && tx.send(k).is_err()
        {
            return;
        }
    }
}

/// Like [`watch_owned`] but for deletions only: upstream's endpoints
/// controller re-creates a deleted Endpoints object, yet never reacts to one
/// being written (a user may write Endpoints before their Service).
pub async fn watch_deleted<K>(
    api: Api<K>,
    key: fn(&K) -> Option<Key>,
    tx: mpsc::UnboundedSender<Key>,
) where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + 'static,
{
    let stream = watcher(api).default_backoff();
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        if let Ok(Event::Delete(obj)) = ev
            && let Some(k) = key(&obj)
            && tx.send(k).is_err()
        {
            return;
        }
    }
}

fn watcher<K>(api: Api<K>) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + 'static,
{
    watcher::watcher(api, berth_runtime::reflect::informer_config())
}

/// A FIFO of keys, each at most once.
#[derive(Default)]
pub struct Queue {
    order: VecDeque<Key>,
    queued: HashSet<Key>,
}

impl Queue {
    pub fn push(&mut self, k: Key) {
        if self.queued.insert(k.clone()) {
            self.order.push_back(k);
        }
    }
    pub fn pop(&mut self) -> Option<Key> {
        let k = self.order.pop_front()?;
        self.queued.remove(&k);
        Some(k)
    }
}

/// Services in `ns` whose selector matches `labels`.
fn selecting(services: &Store<Service>, ns: &str, labels: &BTreeMap<String, String>) -> Vec<Key> {
    services
        .state()
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(ns))
        .filter(|s| {
            s.spec
                .as_ref()
                .and_then(|sp| sp.selector.as_ref())
                .is_some_and(|sel| selector_matches(sel, Some(labels)))
        })
        .map(|s| key_of(&s.metadata))
        .collect()
}

/// Keeps a reflector's stream drained (so the store stays current and the
/// watch never backs up while a sync runs) and reports what changed.
async fn drain<K, S>(controller: &'static str, stream: S, mut on_event: impl FnMut(Event<K>))
where
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(ev) => on_event(ev),
            Err(e) => warn!(controller, error = %e, "watch failed"),
        }
    }
}

/// Runs the loop; `sync` reconciles one Service. `keys` receives Service keys
/// from [`watch_owned`] tasks and retries; `keys_tx` is its sender.
pub async fn run<F, Fut>(
    client: kube::Client,
    controller: &'static str,
    keys: mpsc::UnboundedReceiver<Key>,
    keys_tx: mpsc::UnboundedSender<Key>,
    sync: F,
) where
    F: Fn(Arc<Caches>, Key) -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    let (services, svc_writer) = reflector::store::<Service>();
    let (pods, pod_writer) = reflector::store::<Pod>();
    let (nodes, node_writer) = reflector::store::<Node>();
    let caches = Arc::new(Caches {
        services: services.clone(),
        pods: pods.clone(),
        nodes,
    });
    let svc_events = reflector::reflector(
        svc_writer,
        watcher(Api::<Service>::all(client.clone())).default_backoff(),
    );
    let pod_events = reflector::reflector(
        pod_writer,
        watcher(Api::<Pod>::all(client.clone())).default_backoff(),
    );
    let node_events = reflector::reflector(
        node_writer,
        watcher(Api::<Node>::all(client)).default_backoff(),
    );
    let tx = keys_tx.clone();
    let svc_task = tokio::spawn(drain(controller, svc_events, move |ev| {
        if let Event::Apply(s) | Event::Delete(s) | Event::InitApply(s) = ev {
            let _ = tx.send(key_of(&s.metadata));
        }
    }));
    let tx = keys_tx.clone();
    let svc_store = services.clone();
    // Pod labels as last seen, to find the Services a pod stopped matching.
    let mut pod_labels: HashMap<Key, BTreeMap<String, String>> = HashMap::new();
    let pod_task = tokio::spawn(drain(controller, pod_events, move |ev| match ev {
        Event::Apply(p) | Event::InitApply(p) => {
            let k = key_of(&p.metadata);
            let labels = p.metadata.labels.clone().unwrap_or_default();
            let old = pod_labels.insert(k.clone(), labels.clone());
            for s in selecting(&svc_store, &k.0, &labels) {
                let _ = tx.send(s);
            }
            if let Some(old) = old.filter(|o| o != &labels) {
                for s in selecting(&svc_store, &k.0, &old) {
                    let _ = tx.send(s);
                }
            }
        }
        Event::Delete(p) => {
            let k = key_of(&p.metadata);
            let labels = pod_labels.remove(&k).unwrap_or_default();
            for s in selecting(&svc_store, &k.0, &labels) {
                let _ = tx.send(s);
            }
        }
        // A relist replaced the cache: pods gone meanwhile sent no Delete.
        Event::InitDone => {
            for s in svc_store.state() {
                let _ = tx.send(key_of(&s.metadata));
            }
        }
        Event::Init => {}
    }));
    let node_task = tokio::spawn(drain(controller, node_events, |_| {}));
    // Sync nothing before the first full lists: an empty cache would empty endpoints.
    if services.wait_until_ready().await.is_err() || pods.wait_until_ready().await.is_err() {
        warn!(controller, "informers never synced");
        return;
    }
    let mut keys = keys;
    let mut queue = Queue {
        order: VecDeque::new(),
        queued: HashSet::new(),
    };
    let mut resync = tokio::time::interval(RESYNC);
    loop {
        while let Ok(k) = keys.try_recv() {
            queue.push(k);
        }
        if let Some(k) = queue.pop() {
            if let Err(e) = sync(caches.clone(), k.clone()).await {
                warn!(controller, service = %format!("{}/{}", k.0, k.1), error = %e, "sync failed; retrying");
                let tx = keys_tx.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(RETRY).await;
                    let _ = tx.send(k);
                });
            }
            continue;
        }
        tokio::select! {
            k = keys.recv() => match k {
                Some(k) => queue.push(k),
                None => break,
            },
            _ = resync.tick() => {
                for s in services.state() {
                    queue.push(key_of(&s.metadata));
                }
            }
        }
    }
    svc_task.abort();
    pod_task.abort();
    node_task.abort();
}
