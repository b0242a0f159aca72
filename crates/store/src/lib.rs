//! Berth's storage layer: one trait with etcd v3 semantics and two backends.
//!
//! - a cluster-wide, strictly increasing revision bumped by every write;
//! - per key `create_revision`, `mod_revision` and `version` (writes since creation);
//! - ranges over a prefix, paged, at the latest or at a past revision;
//! - writes guarded by the key's `mod_revision` (optimistic concurrency);
//! - watches from a revision: ordered, gap-free; a slow watcher never blocks
//!   writers and never silently loses events (it catches up from history, or
//!   gets [`StoreError::Compacted`]);
//! - compaction of history older than a revision.
//!
//! Keys are `/`-separated strings (the API server uses `/registry/<resource>/<ns>/<name>`).
//!
//! Backends: [`SqliteStore`] (embedded, the default) and [`EtcdStore`] (a real etcd
//! cluster). Both pass the same suite, `berth_store::conformance` (feature
//! `conformance`).
//!
//! Semantic choices shared by both backends (they follow etcd):
//! - a fresh store is at revision 1; the first write gets revision 2;
//! - each successful write bumps the revision by exactly one; failed writes don't;
//! - `compact(r)` keeps every key's state at `r` readable (`range` at `r` works,
//!   `range` below `r` is `Compacted`), and every event after `r` with its `prev`;
//!   so `watch(prefix, after)` is `Compacted` exactly when `after < r` (the error's
//!   `requested` is `after`);
//! - `compact(r)` with `r` at or below the compacted revision is `Compacted`, above the
//!   current revision `FutureRevision`;
//! - `watch` from a revision not reached yet delivers only the events after it;
//! - a write whose caller stops waiting (future dropped) may still be applied.

use std::pin::Pin;

use bytes::Bytes;
use futures::Stream;

pub mod backup;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod etcd;
pub mod etcd_process;
pub mod snapshot;
pub mod sqlite;

pub use etcd::{EtcdOptions, EtcdStore};
pub use sqlite::{SqliteOptions, SqliteStats, SqliteStore};

pub type Revision = i64;

/// One key at one revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Bytes,
    /// Revision of the write that created the key (since its last deletion).
    pub create_revision: Revision,
    /// Revision of the last write to the key.
    pub mod_revision: Revision,
    /// Number of writes since creation (1 after create).
    pub version: i64,
}

/// A change seen by a watcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The key was created (`prev == None`) or updated.
    Put {
        kv: KeyValue,
        prev: Option<KeyValue>,
    },
    /// The key was deleted at `revision`; `prev` is its last value.
    Delete { prev: KeyValue, revision: Revision },
}

impl Event {
    pub fn revision(&self) -> Revision {
        match self {
            Event::Put { kv, .. } => kv.mod_revision,
            Event::Delete { revision, .. } => *revision,
        }
    }
    pub fn key(&self) -> &str {
        match self {
            Event::Put { kv, .. } => &kv.key,
            Event::Delete { prev, .. } => &prev.key,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct RangeRequest {
    /// Every key starting with this prefix.
    pub prefix: String,
    /// Only keys strictly greater than this one (paging: the last key of the previous page).
    pub start_after: Option<String>,
    /// At most this many keys; 0 = no limit.
    pub limit: usize,
    /// Read at this revision; 0 = latest. Older than the compacted revision → `Compacted`.
    pub revision: Revision,
}

#[derive(Debug, Clone)]
pub struct RangeResponse {
    /// Sorted by key.
    pub kvs: Vec<KeyValue>,
    /// The revision the range was read at (the store's current revision when `revision == 0`).
    pub revision: Revision,
    /// True when more keys match beyond `limit`.
    pub more: bool,
    /// How many keys matched in all after `start_after` (including those returned).
    pub count: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("key {0} already exists")]
    AlreadyExists(String),
    #[error("key {0} not found")]
    NotFound(String),
    /// The key's mod revision differs from the expected one.
    #[error("conflict on key {key}: expected mod revision {expected}, found {actual}")]
    Conflict {
        key: String,
        expected: Revision,
        actual: Revision,
    },
    /// The requested revision has been compacted away.
    #[error("required revision {requested} has been compacted (compacted revision {compacted})")]
    Compacted {
        requested: Revision,
        compacted: Revision,
    },
    /// The requested revision is in the future.
    #[error("required revision {0} is a future revision")]
    FutureRevision(Revision),
    #[error("storage backend: {0}")]
    Backend(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

pub type WatchStream = Pin<Box<dyn Stream<Item = Result<Event>> + Send>>;

#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// The latest value of one key.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse>;

    /// Creates `key`; `AlreadyExists` if present. Durable when it returns.
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue>;

    /// Replaces `key` if its mod revision is `expected_mod_revision`
    /// (`NotFound` if absent, `Conflict` if it changed). Durable when it returns.
    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: Revision,
    ) -> Result<KeyValue>;

    /// Deletes `key` (guarded by its mod revision when `Some`). Returns the deleted
    /// value and the revision of the deletion.
    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<(KeyValue, Revision)>;

    /// The store's current revision.
    async fn current_revision(&self) -> Result<Revision>;

    /// Events for keys under `prefix` with revision strictly greater than `after`,
    /// in revision order, without gaps. `after` older than the compacted revision →
    /// the stream's first item is `Err(Compacted)`.
    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream>;

    /// Forgets history older than `revision` (the latest value of each key stays).
    async fn compact(&self, revision: Revision) -> Result<()>;

    /// The revision history was last compacted at (0 if never).
    async fn compacted_revision(&self) -> Result<Revision>;

    /// Whether `key`'s value is stored otherwise than a write would store it now
    /// (encryption at rest: under an older key or provider). The API server then
    /// writes an unchanged object anyway, as upstream does with a transformer's
    /// `stale`, so rewriting every object re-encrypts it. Plain stores: never.
    async fn is_stale(&self, _key: &str) -> Result<bool> {
        Ok(false)
    }
}

/// The smallest byte string greater than every string starting with `prefix`, or
/// `None` when there is none (empty prefix, or only 0xff bytes).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Where a range starts: the prefix itself, or just after `start_after` when that is
/// further on.
pub(crate) fn range_start(prefix: &[u8], start_after: Option<&[u8]>) -> Vec<u8> {
    match start_after {
        Some(after) if after >= prefix => {
            // The smallest key strictly greater than `after`.
            let mut k = after.to_vec();
            k.push(0);
            k
        }
        _ => prefix.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_last_byte() {
        assert_eq!(prefix_end(b"/a/"), Some(b"/a0".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b""), None);
        assert_eq!(prefix_end(b"\xff\xff"), None);
    }

    #[test]
    fn range_start_skips_past_start_after() {
        assert_eq!(range_start(b"/a/", None), b"/a/".to_vec());
        assert_eq!(range_start(b"/a/", Some(b"/a/x")), b"/a/x\0".to_vec());
        // A start_after before the prefix does not widen the range.
        assert_eq!(range_start(b"/b/", Some(b"/a/x")), b"/b/".to_vec());
    }
}
