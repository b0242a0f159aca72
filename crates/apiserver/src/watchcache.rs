//! The watch cache: every object under `/registry/` held as its stored bytes
//! (not decoded: upstream's decoded cache costs about 5× the object size), fed
//! by ONE store watch, with a window of recent events PER RESOURCE (as
//! upstream's one cacher per resource). Watches are served from it, so N
//! watchers cost one store watch, and a watch from a recent resourceVersion
//! replays from memory.
//!
//! Because the single store watch sees every write, the cache's revision is
//! the store's revision as of the last event applied: a client that listed at
//! revision R can watch from R as soon as the cache has caught up to R.
//!
//! History bounds ([`HistoryLimits`]): each resource keeps its events for at
//! least [`EVENT_FRESH`] (upstream's eventFreshDuration, 75 s) and at least its
//! last [`MIN_KEEP`] events however old; all resources together keep at most
//! `--watch-cache-events` events. When over that cap, the resource holding the
//! MOST events gives up its oldest one, so a busy resource (5,000 node Leases
//! renewing every 10 s) cannot push a quiet one (Nodes, Pods) out of its
//! window: each resource's window grows with its own load and the total memory
//! stays bounded.
//!
//! Watchers pull: each resource has a `watch` channel carrying its latest
//! revision; a watcher woken by it reads the events after its own last
//! revision from the history. A slow watcher therefore never "lags" a
//! broadcast; it only ends when it falls behind its resource's window (and
//! then resumes from its last resourceVersion, or relists on 410).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use berth_store::{Event, RangeRequest, Store, StoreError};
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::{Notify, watch};
use tracing::warn;

/// The whole keyspace the API server writes.
const ROOT: &str = "/registry/";
/// How long a watch from a revision the cache has not reached yet waits (upstream: 3 s).
const CATCH_UP_WAIT: Duration = Duration::from_secs(3);
/// Upstream's eventFreshDuration: how long an event stays replayable at least
/// (within the total cap).
pub const EVENT_FRESH: Duration = Duration::from_secs(75);
/// Events a resource keeps however old they are (upstream's smallest cacher is 100).
pub const MIN_KEEP: usize = 100;
/// How often idle resources drop events older than the fresh window.
const TRIM_EVERY: Duration = Duration::from_secs(10);

/// How much history the cache keeps.
#[derive(Debug, Clone, Copy)]
pub struct HistoryLimits {
    /// Most events kept over all resources (`--watch-cache-events`).
    pub total_events: usize,
    /// Events younger than this are kept (within `total_events`).
    pub fresh: Duration,
    /// Events each resource keeps however old.
    pub min_keep: usize,
}

impl HistoryLimits {
    pub fn new(total_events: usize) -> Self {
        HistoryLimits {
            total_events: total_events.max(1),
            fresh: EVENT_FRESH,
            min_keep: MIN_KEEP,
        }
    }
}

/// One object version: the stored bytes and the revision that wrote them.
#[derive(Debug, Clone)]
pub struct Stored {
    pub bytes: Bytes,
    pub mod_revision: i64,
}

#[derive(Debug, Clone)]
pub struct CachedEvent {
    pub revision: i64,
    pub key: String,
    /// The new version; `None` for a deletion.
    pub object: Option<Arc<Stored>>,
    /// The version before this event; `None` for a creation.
    pub prev: Option<Arc<Stored>>,
    /// When the cache applied it (for the fresh window).
    pub at: Instant,
}

#[derive(Debug)]
pub enum CacheError {
    /// The requested revision is older than the window (HTTP 410).
    TooOld {
        requested: i64,
        oldest: i64,
    },
    /// The cache did not reach the requested revision in time (HTTP 504).
    NotReady(i64),
    /// The cache reloaded from the store: watchers end and their clients resume.
    Reset,
    Store(StoreError),
}

/// One resource's (`/registry/<resource>/…`) history.
struct History {
    events: VecDeque<Arc<CachedEvent>>,
    /// Events of this resource up to this revision may be missing from `events`.
    oldest: i64,
    /// The revision of this resource's last event, for its watchers.
    progress: watch::Sender<i64>,
}

impl History {
    fn new(oldest: i64) -> Self {
        History {
            events: VecDeque::new(),
            oldest,
            progress: watch::Sender::new(oldest),
        }
    }

    fn pop_oldest(&mut self) {
        if let Some(old) = self.events.pop_front() {
            self.oldest = old.revision;
        }
    }

    /// Drops events older than the fresh window beyond the `min_keep` newest;
    /// returns how many it dropped.
    fn trim_stale(&mut self, limits: &HistoryLimits, now: Instant) -> usize {
        let mut dropped = 0;
        while self.events.len() > limits.min_keep
            && self
                .events
                .front()
                .is_some_and(|e| now.duration_since(e.at) > limits.fresh)
        {
            self.pop_oldest();
            dropped += 1;
        }
        // Give memory back after a burst.
        if self.events.capacity() > 4 * self.events.len().max(limits.min_keep) {
            self.events.shrink_to(2 * self.events.len());
        }
        dropped
    }
}

struct Inner {
    objects: BTreeMap<String, Arc<Stored>>,
    /// Revision of the last applied event (or of the initial list).
    revision: i64,
    /// Revision of the initial list: a resource without history yet has every
    /// event after it.
    base: i64,
    histories: HashMap<String, History>,
    /// Events held over all histories.
    total: usize,
}

impl Inner {
    fn new(objects: BTreeMap<String, Arc<Stored>>, revision: i64) -> Self {
        Inner {
            objects,
            revision,
            base: revision,
            histories: HashMap::new(),
            total: 0,
        }
    }

    fn history(&mut self, resource: &str) -> &mut History {
        let base = self.base;
        self.histories
            .entry(resource.to_string())
            .or_insert_with(|| History::new(base))
    }

    /// Enforces the total cap: the resource with the most events gives up its oldest.
    fn enforce_total(&mut self, limits: &HistoryLimits) {
        while self.total > limits.total_events {
            let Some(biggest) = self.histories.values_mut().max_by_key(|h| h.events.len()) else {
                return;
            };
            if biggest.events.is_empty() {
                return;
            }
            biggest.pop_oldest();
            self.total -= 1;
        }
    }

    fn trim_stale(&mut self, limits: &HistoryLimits, now: Instant) {
        let mut dropped = 0;
        for h in self.histories.values_mut() {
            dropped += h.trim_stale(limits, now);
        }
        self.total -= dropped;
    }
}

/// The resource a key or a watch prefix belongs to: `/registry/pods/ns/name` →
/// `pods`, `/registry/deployments.apps/` → `deployments.apps`.
pub fn resource_of(key: &str) -> &str {
    let rest = key.strip_prefix(ROOT).unwrap_or(key);
    rest.split('/').next().unwrap_or(rest)
}

pub struct WatchCache {
    inner: RwLock<Inner>,
    progressed: Notify,
    limits: HistoryLimits,
}

/// A watch's starting point: the events to replay, then the live feed.
pub struct Subscription {
    pub replay: Vec<Arc<CachedEvent>>,
    /// The revision `replay` brings the watcher to.
    pub revision: i64,
    pub feed: Feed,
}

/// The events of one resource under one prefix after a watcher's last revision.
pub struct Feed {
    cache: Arc<WatchCache>,
    resource: String,
    prefix: String,
    progress: watch::Receiver<i64>,
}

impl Feed {
    /// Waits for this resource's next events after `after` (a watcher's last
    /// revision) and returns them in order, only those under the prefix (so
    /// possibly none). `TooOld` when the watcher fell behind the window,
    /// `Reset` when the cache reloaded.
    /// Also returns the resource's latest revision, which the watcher has now
    /// seen everything up to.
    pub async fn next(&mut self, after: i64) -> Result<(Vec<Arc<CachedEvent>>, i64), CacheError> {
        if self.progress.changed().await.is_err() {
            return Err(CacheError::Reset);
        }
        self.cache.events_after(&self.resource, &self.prefix, after)
    }
}

impl Feed {
    /// The revision a bookmark may carry for a watcher at `after`: the cache's
    /// revision when this resource has no event after `after` (the watcher has
    /// everything up to it), as upstream's bookmarks carry the cacher's progress.
    /// Without it a quiet resource's watchers would resume from their last event's
    /// revision, which falls out of the window while other resources churn.
    pub fn progress(&self, after: i64) -> Option<i64> {
        self.cache.progress(&self.resource, after)
    }
}

impl WatchCache {
    fn progress(&self, resource: &str, after: i64) -> Option<i64> {
        let inner = self.read();
        let caught_up = inner
            .histories
            .get(resource)
            .is_none_or(|h| h.events.back().is_none_or(|e| e.revision <= after));
        caught_up.then_some(inner.revision.max(after))
    }

    /// Loads every object and starts following the store.
    pub async fn start(
        store: Arc<dyn Store>,
        limits: HistoryLimits,
    ) -> Result<Arc<Self>, StoreError> {
        let (objects, revision) = load(store.as_ref()).await?;
        let cache = Arc::new(WatchCache {
            inner: RwLock::new(Inner::new(objects, revision)),
            progressed: Notify::new(),
            limits,
        });
        let feeder = cache.clone();
        tokio::spawn(async move { feeder.follow(store).await });
        tokio::spawn(trim_loop(Arc::downgrade(&cache)));
        Ok(cache)
    }

    async fn follow(self: Arc<Self>, store: Arc<dyn Store>) {
        loop {
            let from = self.read().revision;
            let mut stream = match store.watch(ROOT, from).await {
                Ok(s) => s,
                Err(e) => {
                    warn!(error = %e, "watch cache: store watch failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(ev) => self.apply(ev),
                    Err(e) => {
                        warn!(error = %e, "watch cache: store watch broke; reloading");
                        break;
                    }
                }
            }
            // The feed broke (e.g. compacted past us): reload, and end every live
            // watch (dropping the histories closes their feeds) so its client
            // relists, as upstream does when its cache resets.
            match load(store.as_ref()).await {
                Ok((objects, revision)) => *self.write() = Inner::new(objects, revision),
                Err(e) => {
                    warn!(error = %e, "watch cache: reload failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    fn apply(&self, ev: Event) {
        let (revision, key, object) = match ev {
            Event::Put { kv, .. } => (
                kv.mod_revision,
                kv.key,
                Some(Arc::new(Stored {
                    bytes: kv.value,
                    mod_revision: kv.mod_revision,
                })),
            ),
            Event::Delete { prev, revision } => (revision, prev.key, None),
        };
        let mut inner = self.write();
        let prev = match &object {
            Some(obj) => inner.objects.insert(key.clone(), obj.clone()),
            None => inner.objects.remove(&key),
        };
        let now = Instant::now();
        let cached = Arc::new(CachedEvent {
            revision,
            key,
            object,
            prev,
            at: now,
        });
        inner.revision = revision;
        let limits = self.limits;
        let history = inner.history(resource_of(&cached.key));
        history.events.push_back(cached);
        let dropped = history.trim_stale(&limits, now);
        // Under the lock: a watcher that subscribed under the read lock has
        // every event up to its snapshot, and is told about every one after.
        history.progress.send_replace(revision);
        inner.total = inner.total + 1 - dropped;
        inner.enforce_total(&limits);
        drop(inner);
        self.progressed.notify_waiters();
    }

    /// The cache's revision.
    pub fn revision(&self) -> i64 {
        self.read().revision
    }

    /// Events held over all resources, and per resource (for tests and metrics).
    pub fn history_sizes(&self) -> (usize, BTreeMap<String, usize>) {
        let inner = self.read();
        let per = inner
            .histories
            .iter()
            .map(|(r, h)| (r.clone(), h.events.len()))
            .collect();
        (inner.total, per)
    }

    /// Waits until the cache has applied everything up to `revision`.
    pub async fn wait_for(&self, revision: i64) -> Result<(), CacheError> {
        let deadline = tokio::time::Instant::now() + CATCH_UP_WAIT;
        loop {
            let notified = self.progressed.notified();
            if self.revision() >= revision {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return if self.revision() >= revision {
                    Ok(())
                } else {
                    Err(CacheError::NotReady(revision))
                };
            }
        }
    }

    /// The revision of `resource`'s latest event (`pods`,
    /// `roles.rbac.authorization.k8s.io`), 0 before its first: it moves
    /// whenever one of its objects changes, so a view derived from them
    /// (the RBAC index) knows when to be rebuilt.
    pub fn resource_revision(&self, resource: &str) -> i64 {
        let inner = self.read();
        inner
            .histories
            .get(resource)
            .map_or(0, |h| h.events.back().map_or(h.oldest, |e| e.revision))
    }

    /// One object as the cache has it (possibly a little behind the store:
    /// writes based on it are guarded by its mod revision).
    pub fn get(&self, key: &str) -> Option<Arc<Stored>> {
        self.read().objects.get(key).cloned()
    }

    /// Every object under `prefix` now, and the revision they are at.
    pub fn snapshot(&self, prefix: &str) -> (Vec<(String, Arc<Stored>)>, i64) {
        let inner = self.read();
        let items = inner
            .objects
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (items, inner.revision)
    }

    /// The events of `resource` under `prefix` after revision `after`.
    fn events_after(
        &self,
        resource: &str,
        prefix: &str,
        after: i64,
    ) -> Result<(Vec<Arc<CachedEvent>>, i64), CacheError> {
        let inner = self.read();
        let Some(history) = inner.histories.get(resource) else {
            // Histories only disappear when the cache resets.
            return Err(CacheError::Reset);
        };
        if after < history.oldest {
            return Err(CacheError::TooOld {
                requested: after,
                oldest: history.oldest,
            });
        }
        let start = history.events.partition_point(|e| e.revision <= after);
        let events = history
            .events
            .range(start..)
            .filter(|e| e.key.starts_with(prefix))
            .cloned()
            .collect();
        let latest = history
            .events
            .back()
            .map_or(after, |e| e.revision.max(after));
        Ok((events, latest))
    }

    /// Starts a watch on `prefix` (one resource's, possibly one namespace's):
    /// from the current state (`after == None`, replayed as creations) or from
    /// the events after `after`.
    pub async fn subscribe(
        self: &Arc<Self>,
        prefix: &str,
        after: Option<i64>,
    ) -> Result<Subscription, CacheError> {
        if let Some(rv) = after {
            self.wait_for(rv).await?;
        }
        let resource = resource_of(prefix).to_string();
        let mut inner = self.write();
        let revision = inner.revision;
        let progress = inner.history(&resource).progress.subscribe();
        let replay = match after {
            None => inner
                .objects
                .range(prefix.to_string()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| {
                    Arc::new(CachedEvent {
                        revision: v.mod_revision,
                        key: k.clone(),
                        object: Some(v.clone()),
                        prev: None,
                        at: Instant::now(),
                    })
                })
                .collect(),
            Some(rv) => {
                let history = inner.history(&resource);
                if rv < history.oldest {
                    return Err(CacheError::TooOld {
                        requested: rv,
                        oldest: history.oldest,
                    });
                }
                let start = history.events.partition_point(|e| e.revision <= rv);
                history
                    .events
                    .range(start..)
                    .filter(|e| e.key.starts_with(prefix))
                    .cloned()
                    .collect()
            }
        };
        Ok(Subscription {
            replay,
            revision,
            feed: Feed {
                cache: self.clone(),
                resource,
                prefix: prefix.to_string(),
                progress,
            },
        })
    }
}

/// Drops stale events of resources that stopped changing (a resource trims
/// itself on each of its own events).
async fn trim_loop(cache: Weak<WatchCache>) {
    let mut tick = tokio::time::interval(TRIM_EVERY);
    loop {
        tick.tick().await;
        let Some(cache) = cache.upgrade() else {
            return;
        };
        let limits = cache.limits;
        cache.write().trim_stale(&limits, Instant::now());
    }
}

async fn load(store: &dyn Store) -> Result<(BTreeMap<String, Arc<Stored>>, i64), StoreError> {
    let mut objects = BTreeMap::new();
    let mut start_after = None;
    let mut at = 0;
    loop {
        let resp = store
            .range(RangeRequest {
                prefix: ROOT.into(),
                start_after: start_after.clone(),
                limit: 1000,
                revision: at,
            })
            .await?;
        at = resp.revision;
        for kv in &resp.kvs {
            objects.insert(
                kv.key.clone(),
                Arc::new(Stored {
                    bytes: kv.value.clone(),
                    mod_revision: kv.mod_revision,
                }),
            );
        }
        start_after = resp.kvs.last().map(|kv| kv.key.clone());
        if !resp.more {
            break;
        }
    }
    Ok((objects, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> (Arc<dyn Store>, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("berth-wc-{}", uuid::Uuid::new_v4()));
        let s = berth_store::sqlite::SqliteStore::open(&dir.join("db")).unwrap();
        (Arc::new(s), dir)
    }

    /// Creates or updates `key`; returns the revision of the write.
    async fn put(store: &Arc<dyn Store>, key: &str) -> i64 {
        let value = Bytes::from_static(b"{}");
        let kv = match store.get(key).await.unwrap() {
            Some(old) => store.update(key, value, old.mod_revision).await,
            None => store.create(key, value).await,
        };
        kv.unwrap().mod_revision
    }

    fn limits(total_events: usize, min_keep: usize, fresh: Duration) -> HistoryLimits {
        HistoryLimits {
            total_events,
            fresh,
            min_keep,
        }
    }

    #[test]
    fn keys_and_prefixes_map_to_their_resource() {
        for (key, resource) in [
            ("/registry/pods/ns/p", "pods"),
            ("/registry/pods/", "pods"),
            ("/registry/pods/ns/", "pods"),
            ("/registry/minions/n1", "minions"),
            ("/registry/deployments.apps/ns/d", "deployments.apps"),
            (
                "/registry/leases.coordination.k8s.io/kube-node-lease/n",
                "leases.coordination.k8s.io",
            ),
        ] {
            assert_eq!(resource_of(key), resource, "{key}");
        }
    }

    #[tokio::test]
    async fn replays_history_and_follows_live_writes() {
        let (store, dir) = store().await;
        put(&store, "/registry/pods/a/p1").await;
        let cache = WatchCache::start(store.clone(), HistoryLimits::new(100))
            .await
            .unwrap();
        let (snap, _) = cache.snapshot("/registry/pods/");
        assert_eq!(snap.len(), 1);
        let p2 = put(&store, "/registry/pods/a/p2").await;
        put(&store, "/registry/configmaps/a/c").await;
        let (_, rev) = store.delete("/registry/pods/a/p1", None).await.unwrap();
        cache.wait_for(rev).await.unwrap();
        // From before p2: p2 created, p1 deleted (with its last version); configmaps filtered out.
        let sub = cache
            .subscribe("/registry/pods/", Some(p2 - 1))
            .await
            .unwrap();
        let got: Vec<(&str, bool)> = sub
            .replay
            .iter()
            .map(|e| (e.key.as_str(), e.object.is_some()))
            .collect();
        assert_eq!(
            got,
            [
                ("/registry/pods/a/p2", true),
                ("/registry/pods/a/p1", false)
            ]
        );
        assert!(sub.replay[1].prev.is_some());
        // Live: a watcher subscribed now (namespace b) sees the next write there only.
        let mut live = cache.subscribe("/registry/pods/b/", None).await.unwrap();
        assert!(live.replay.is_empty());
        put(&store, "/registry/pods/a/p4").await;
        let p3 = put(&store, "/registry/pods/b/p3").await;
        let mut seen = Vec::new();
        let mut last = live.revision;
        while last < p3 {
            let (events, up_to) =
                tokio::time::timeout(Duration::from_secs(5), live.feed.next(last))
                    .await
                    .unwrap()
                    .unwrap();
            seen.extend(events.iter().map(|e| e.key.clone()));
            last = up_to;
        }
        assert_eq!(seen, ["/registry/pods/b/p3"]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn too_old_and_not_yet_reached_revisions() {
        let (store, dir) = store().await;
        let cache = WatchCache::start(store.clone(), limits(2, 0, EVENT_FRESH))
            .await
            .unwrap();
        let mut last = 0;
        for i in 0..5 {
            last = put(&store, &format!("/registry/pods/a/p{i}")).await;
        }
        cache.wait_for(last).await.unwrap();
        assert!(matches!(
            cache.subscribe("/registry/pods/", Some(1)).await,
            Err(CacheError::TooOld { .. })
        ));
        assert_eq!(
            cache
                .subscribe("/registry/pods/", Some(last - 1))
                .await
                .unwrap()
                .replay
                .len(),
            1
        );
        assert!(matches!(
            cache.wait_for(last + 100).await,
            Err(CacheError::NotReady(_))
        ));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_busy_resource_does_not_evict_a_quiet_one() {
        let (store, dir) = store().await;
        let cache = WatchCache::start(store.clone(), limits(50, 0, EVENT_FRESH))
            .await
            .unwrap();
        let before = put(&store, "/registry/configmaps/a/start").await;
        put(&store, "/registry/minions/n1").await;
        put(&store, "/registry/pods/a/p1").await;
        let mut last = 0;
        for i in 0..300 {
            let key = format!(
                "/registry/leases.coordination.k8s.io/kube-node-lease/n{}",
                i % 7
            );
            last = put(&store, &key).await;
        }
        cache.wait_for(last).await.unwrap();
        let (total, per) = cache.history_sizes();
        assert_eq!(total, 50);
        assert_eq!(per["minions"], 1);
        assert_eq!(per["pods"], 1);
        // Nodes and pods still replay from before the lease storm; leases do not.
        for (prefix, key) in [
            ("/registry/minions/", "/registry/minions/n1"),
            ("/registry/pods/", "/registry/pods/a/p1"),
        ] {
            let sub = cache.subscribe(prefix, Some(before)).await.unwrap();
            let keys: Vec<&str> = sub.replay.iter().map(|e| e.key.as_str()).collect();
            assert_eq!(keys, [key]);
        }
        assert!(matches!(
            cache
                .subscribe("/registry/leases.coordination.k8s.io/", Some(before))
                .await,
            Err(CacheError::TooOld { .. })
        ));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn stale_events_beyond_the_minimum_are_dropped() {
        let (store, dir) = store().await;
        let cache = WatchCache::start(store.clone(), limits(1000, 3, Duration::ZERO))
            .await
            .unwrap();
        let mut revs = Vec::new();
        for i in 0..10 {
            revs.push(put(&store, &format!("/registry/pods/a/p{i}")).await);
        }
        cache.wait_for(revs[9]).await.unwrap();
        assert_eq!(cache.history_sizes().0, 3);
        assert!(matches!(
            cache.subscribe("/registry/pods/", Some(revs[5])).await,
            Err(CacheError::TooOld { .. })
        ));
        let sub = cache
            .subscribe("/registry/pods/", Some(revs[6]))
            .await
            .unwrap();
        assert_eq!(sub.replay.len(), 3);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn bookmarks_carry_the_cache_revision_once_caught_up() {
        let (store, dir) = store().await;
        let cache = WatchCache::start(store.clone(), HistoryLimits::new(100))
            .await
            .unwrap();
        let mut sub = cache.subscribe("/registry/minions/", None).await.unwrap();
        let node = put(&store, "/registry/minions/n1").await;
        let mut last = 0;
        for i in 0..10 {
            last = put(&store, &format!("/registry/leases/kube-node-lease/l{i}")).await;
        }
        cache.wait_for(last).await.unwrap();
        // Behind on its own resource: no progress to report.
        assert_eq!(sub.feed.progress(sub.revision), None);
        let (events, up_to) = sub.feed.next(sub.revision).await.unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(up_to, node);
        // Caught up: the bookmark may move to the cache's revision, past the leases.
        assert_eq!(sub.feed.progress(up_to), Some(last));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_watcher_behind_the_window_is_told_too_old() {
        let (store, dir) = store().await;
        let cache = WatchCache::start(store.clone(), limits(5, 0, EVENT_FRESH))
            .await
            .unwrap();
        let mut sub = cache.subscribe("/registry/pods/", None).await.unwrap();
        let mut last = 0;
        for i in 0..20 {
            last = put(&store, &format!("/registry/pods/a/p{i}")).await;
        }
        cache.wait_for(last).await.unwrap();
        assert!(matches!(
            sub.feed.next(sub.revision).await,
            Err(CacheError::TooOld { .. })
        ));
        let _ = std::fs::remove_dir_all(dir);
    }
}
