//! The watch cache: every object under `/registry/` held as its stored bytes
//! (not decoded: upstream's decoded cache costs about 5× the object size), fed
//! by ONE store watch, with a bounded window of recent events. Watches are
//! served from it, so N watchers cost one store watch, and a watch from a
//! recent resourceVersion replays from memory.
//!
//! Because the single store watch sees every write, the cache's revision is
//! the store's revision as of the last event applied: a client that listed at
//! revision R can watch from R as soon as the cache has caught up to R.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use berth_store::{Event, RangeRequest, Store, StoreError};
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::{Notify, broadcast};
use tracing::warn;

/// The whole keyspace the API server writes.
const ROOT: &str = "/registry/";
/// How long a watch from a revision the cache has not reached yet waits (upstream: 3 s).
const CATCH_UP_WAIT: Duration = Duration::from_secs(3);

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
    Store(StoreError),
}

struct Inner {
    objects: BTreeMap<String, Arc<Stored>>,
    /// Revision of the last applied event (or of the initial list).
    revision: i64,
    history: VecDeque<Arc<CachedEvent>>,
    /// Events up to this revision may be missing from `history`.
    oldest: i64,
    events: broadcast::Sender<Arc<CachedEvent>>,
}

pub struct WatchCache {
    inner: RwLock<Inner>,
    progressed: Notify,
    capacity: usize,
}

/// A watch's starting point: the events to replay, then the live feed.
pub struct Subscription {
    pub replay: Vec<Arc<CachedEvent>>,
    pub live: broadcast::Receiver<Arc<CachedEvent>>,
    /// The revision `replay` brings the watcher to.
    pub revision: i64,
}

impl WatchCache {
    /// Loads every object and starts following the store.
    pub async fn start(store: Arc<dyn Store>, capacity: usize) -> Result<Arc<Self>, StoreError> {
        let (objects, revision) = load(store.as_ref()).await?;
        let (events, _) = broadcast::channel(capacity.max(16));
        let cache = Arc::new(WatchCache {
            inner: RwLock::new(Inner {
                objects,
                revision,
                history: VecDeque::new(),
                oldest: revision,
                events,
            }),
            progressed: Notify::new(),
            capacity,
        });
        let feeder = cache.clone();
        tokio::spawn(async move { feeder.follow(store).await });
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
            // watch so its client relists, as upstream does when its cache resets.
            match load(store.as_ref()).await {
                Ok((objects, revision)) => {
                    let mut inner = self.write();
                    let (events, _) = broadcast::channel(self.capacity.max(16));
                    *inner = Inner {
                        objects,
                        revision,
                        history: VecDeque::new(),
                        oldest: revision,
                        events,
                    };
                }
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
        let cached = match ev {
            Event::Put { kv, .. } => CachedEvent {
                revision: kv.mod_revision,
                key: kv.key.clone(),
                object: Some(Arc::new(Stored {
                    bytes: kv.value,
                    mod_revision: kv.mod_revision,
                })),
                prev: None,
            },
            Event::Delete { prev, revision } => CachedEvent {
                revision,
                key: prev.key.clone(),
                object: None,
                prev: None,
            },
        };
        let mut inner = self.write();
        let mut cached = cached;
        cached.prev = match &cached.object {
            Some(obj) => inner.objects.insert(cached.key.clone(), obj.clone()),
            None => inner.objects.remove(&cached.key),
        };
        let cached = Arc::new(cached);
        inner.revision = cached.revision;
        inner.history.push_back(cached.clone());
        while inner.history.len() > self.capacity {
            if let Some(old) = inner.history.pop_front() {
                inner.oldest = old.revision;
            }
        }
        // Sent under the lock: a subscriber taken under the read lock sees
        // exactly the events after its snapshot.
        let _ = inner.events.send(cached);
        drop(inner);
        self.progressed.notify_waiters();
    }

    /// The cache's revision.
    pub fn revision(&self) -> i64 {
        self.read().revision
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

    /// Starts a watch on `prefix`: from the current state (`after == None`,
    /// replayed as creations) or from the events after `after`.
    pub async fn subscribe(
        &self,
        prefix: &str,
        after: Option<i64>,
    ) -> Result<Subscription, CacheError> {
        if let Some(rv) = after {
            self.wait_for(rv).await?;
        }
        let inner = self.read();
        let live = inner.events.subscribe();
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
                    })
                })
                .collect(),
            Some(rv) => {
                if rv < inner.oldest {
                    return Err(CacheError::TooOld {
                        requested: rv,
                        oldest: inner.oldest,
                    });
                }
                inner
                    .history
                    .iter()
                    .filter(|e| e.revision > rv && e.key.starts_with(prefix))
                    .cloned()
                    .collect()
            }
        };
        Ok(Subscription {
            replay,
            live,
            revision: inner.revision,
        })
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

    #[tokio::test]
    async fn replays_history_and_follows_live_writes() {
        let (store, dir) = store().await;
        store
            .create("/registry/pods/a/p1", Bytes::from_static(b"{}"))
            .await
            .unwrap();
        let cache = WatchCache::start(store.clone(), 100).await.unwrap();
        let (snap, _) = cache.snapshot("/registry/pods/");
        assert_eq!(snap.len(), 1);
        let kv = store
            .create("/registry/pods/a/p2", Bytes::from_static(b"{}"))
            .await
            .unwrap();
        store
            .create("/registry/configmaps/a/c", Bytes::from_static(b"{}"))
            .await
            .unwrap();
        let (_, rev) = store.delete("/registry/pods/a/p1", None).await.unwrap();
        cache.wait_for(rev).await.unwrap();
        // From before p2: p2 created, p1 deleted (with its last version); configmaps filtered out.
        let sub = cache
            .subscribe("/registry/pods/", Some(kv.mod_revision - 1))
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
        // Live: a watcher subscribed now sees the next write.
        let mut live = cache.subscribe("/registry/pods/", None).await.unwrap();
        assert_eq!(live.replay.len(), 1);
        store
            .create("/registry/pods/b/p3", Bytes::from_static(b"{}"))
            .await
            .unwrap();
        let ev = tokio::time::timeout(Duration::from_secs(5), live.live.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ev.key, "/registry/pods/b/p3");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn too_old_and_not_yet_reached_revisions() {
        let (store, dir) = store().await;
        let cache = WatchCache::start(store.clone(), 2).await.unwrap();
        let mut last = 0;
        for i in 0..5 {
            last = store
                .create(&format!("/registry/pods/a/p{i}"), Bytes::from_static(b"{}"))
                .await
                .unwrap()
                .mod_revision;
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
}
