//! The embedded backend: SQLite (WAL, `synchronous=FULL`) with MVCC history.
//!
//! Layout:
//! - `history(rev PK, key, value, create_rev, version, prev_rev, deleted)`: one row per
//!   write (every write bumps the revision by one, so the revision is the row id). A
//!   delete is a tombstone row (`deleted = 1`, no value). `prev_rev` points at the
//!   key's previous row, which gives watch events their `prev`.
//! - `kv(key PK, rev)`: the live keys and the history row holding their latest value
//!   (values are stored once, in `history`).
//! - `meta`: the current revision, the compacted revision, and how far the physical
//!   deletion of compacted history has got.
//!
//! One writer thread owns the only write connection and does group commit: it takes
//! every write pending at that moment into one transaction (each op checked on its
//! own), commits with fsync, then publishes the events to watchers and answers the
//! callers. Reads use a pool of separate connections: in WAL mode they read a
//! consistent snapshot and never wait for the writer.
//!
//! Watchers get events through a bounded broadcast channel. A watcher that lags (its
//! buffer overflowed) re-reads what it missed from `history`, so it never blocks the
//! writer and never loses an event silently; if that history has been compacted it
//! gets [`StoreError::Compacted`].

use std::collections::VecDeque;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use rusqlite::{
    Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior, params,
};
use tokio::sync::{broadcast, oneshot};

use crate::{
    Event, KeyValue, RangeRequest, RangeResponse, Result, Revision, Store, StoreError, WatchStream,
    prefix_end, range_start,
};

/// Tuning for [`SqliteStore::open_with`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// How often the writer checks whether history can be compacted; `None` disables
    /// periodic compaction (explicit [`Store::compact`] still works).
    pub compaction_interval: Option<Duration>,
    /// Periodic compaction keeps at least this much recent history (by wall time,
    /// sampled at each compaction check, like the kube-apiserver's compactor).
    pub retention: Duration,
    /// Periodic compaction also keeps at least this many most recent revisions.
    pub min_retained_revisions: i64,
    /// Most writes committed in one transaction.
    pub max_batch: usize,
    /// Committed batches buffered per watcher before it lags and catches up from
    /// history.
    pub watch_buffer: usize,
    /// Idle read connections kept open.
    pub max_idle_readers: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            compaction_interval: Some(Duration::from_secs(60)),
            retention: Duration::from_secs(300),
            min_retained_revisions: 1000,
            max_batch: 1024,
            watch_buffer: 1024,
            max_idle_readers: 8,
        }
    }
}

/// The embedded [`Store`]: one SQLite database file. Cheap to clone (shared handle).
///
/// Dropping the last handle stops the writer thread after it finished its current
/// batch; open watch streams then end.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    cmds: Option<mpsc::Sender<Cmd>>,
    writer: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
    events: broadcast::Sender<Arc<Batch>>,
    /// Exclusive lock on `<path>.lock`, released when the writer has stopped.
    _lock: std::fs::File,
}

/// State shared by the writer, the readers and the watch streams.
struct Shared {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    max_idle: usize,
    current: AtomicI64,
    compacted: AtomicI64,
    commits: AtomicU64,
    writes: AtomicU64,
}

/// Counters since the store was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqliteStats {
    /// Write transactions committed that contained at least one successful write.
    pub commits: u64,
    /// Successful writes (each one revision); `writes / commits` is the mean group size.
    pub writes: u64,
}

/// The events of one committed transaction: revisions `first..=last`, all of them.
struct Batch {
    first: Revision,
    last: Revision,
    events: Vec<Event>,
}

enum Op {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        value: Bytes,
        expected: Revision,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
    },
}

enum Cmd {
    Write(Op, oneshot::Sender<Result<Event>>),
    Compact(Revision, oneshot::Sender<Result<()>>),
}

/// Physical deletion of compacted history proceeds in chunks of this many revisions,
/// each its own transaction, so that writes are never held up for long.
const COMPACT_CHUNK: i64 = 10_000;
/// History rows read per round trip when a watcher catches up.
const CATCH_UP_PAGE: i64 = 1000;
/// The key range upper bound for "everything": valid UTF-8 never contains 0xff.
const KEY_MAX: &[u8] = &[0xff];

trait Context<T> {
    fn ctx(self, what: &str) -> Result<T>;
}

impl<T, E: Display> Context<T> for std::result::Result<T, E> {
    fn ctx(self, what: &str) -> Result<T> {
        self.map_err(|e| StoreError::Backend(format!("sqlite: {what}: {e}")))
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    current_rev INTEGER NOT NULL,
    compacted_rev INTEGER NOT NULL,
    compact_progress INTEGER NOT NULL
);
INSERT OR IGNORE INTO meta (id, current_rev, compacted_rev, compact_progress) VALUES (0, 1, 0, 0);
CREATE TABLE IF NOT EXISTS history (
    rev INTEGER PRIMARY KEY,
    key BLOB NOT NULL,
    value BLOB,
    create_rev INTEGER NOT NULL,
    version INTEGER NOT NULL,
    prev_rev INTEGER,
    deleted INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS history_key_rev ON history (key, rev);
CREATE TABLE IF NOT EXISTS kv (
    key BLOB PRIMARY KEY,
    rev INTEGER NOT NULL
) WITHOUT ROWID;
";

fn open_connection(path: &Path, reader: bool) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).ctx(&format!("open {}", path.display()))?;
    // Readers may briefly meet a lock during WAL recovery or checkpoint; wait rather than fail.
    conn.busy_timeout(Duration::from_secs(10))
        .ctx("busy_timeout")?;
    if reader {
        // Read-write open (a read-only one cannot recover the WAL index), but never writes.
        conn.execute_batch("PRAGMA query_only=ON;")
            .ctx("query_only")?;
    } else {
        // WAL: readers don't block the writer or each other. FULL: the WAL is fsynced at
        // every commit, so an acknowledged write survives a crash or power loss.
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .ctx("journal_mode")?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Backend(format!(
                "sqlite: WAL mode refused (got {mode})"
            )));
        }
        conn.execute_batch("PRAGMA synchronous=FULL;")
            .ctx("pragmas")?;
    }
    Ok(conn)
}

fn read_meta(conn: &Connection) -> Result<(Revision, Revision, Revision)> {
    conn.prepare_cached(
        "SELECT current_rev, compacted_rev, compact_progress FROM meta WHERE id = 0",
    )
    .and_then(|mut st| st.query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))))
    .ctx("read meta")
}

fn key_string(bytes: Vec<u8>) -> rusqlite::Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Blob, Box::new(e))
    })
}

/// Reads `key, value, create_rev, rev, version` at columns `at..at+5`.
fn row_kv(row: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<KeyValue> {
    Ok(KeyValue {
        key: key_string(row.get(at)?)?,
        value: Bytes::from(row.get::<_, Option<Vec<u8>>>(at + 1)?.unwrap_or_default()),
        create_revision: row.get(at + 2)?,
        mod_revision: row.get(at + 3)?,
        version: row.get(at + 4)?,
    })
}

fn latest(conn: &Connection, key: &str) -> Result<Option<KeyValue>> {
    conn.prepare_cached(
        "SELECT h.key, h.value, h.create_rev, h.rev, h.version
         FROM kv JOIN history h ON h.rev = kv.rev WHERE kv.key = ?1",
    )
    .and_then(|mut st| {
        st.query_row(params![key.as_bytes()], |r| row_kv(r, 0))
            .optional()
    })
    .ctx("get")
}

impl SqliteStore {
    /// Opens (creating it and its parent directories if needed) the database at `path`
    /// with default options.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens the database at `path` with `options`. Starts the writer thread; needs no
    /// tokio runtime, but the [`Store`] methods must run inside one.
    pub fn open_with(path: &Path, options: SqliteOptions) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).ctx(&format!("create {}", dir.display()))?;
        }
        // The writer keeps the revision in memory and publishes events in-process, so
        // a second writer on the same file (another process, or a second open here)
        // must be refused rather than interleave.
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        let lock = std::fs::File::create(&lock_path).ctx("create lock file")?;
        lock.try_lock().map_err(|e| {
            StoreError::Backend(format!(
                "sqlite: {} is in use by another store ({e})",
                path.display()
            ))
        })?;
        let conn = open_connection(path, false)?;
        conn.execute_batch(SCHEMA).ctx("create schema")?;
        let (current, compacted, progress) = read_meta(&conn)?;
        let shared = Arc::new(Shared {
            path: path.to_path_buf(),
            idle: Mutex::new(Vec::new()),
            max_idle: options.max_idle_readers,
            current: AtomicI64::new(current),
            compacted: AtomicI64::new(compacted),
            commits: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        });
        let (events, _) = broadcast::channel(options.watch_buffer.max(1));
        let (cmds, rx) = mpsc::channel();
        let mut writer = Writer {
            conn,
            shared: shared.clone(),
            events: events.clone(),
            options,
            samples: VecDeque::new(),
            next_tick: None,
            progress,
        };
        let handle = std::thread::Builder::new()
            .name("berth-store-writer".into())
            .spawn(move || writer.run(rx))
            .ctx("spawn writer thread")?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                cmds: Some(cmds),
                writer: Some(handle),
                shared,
                events,
                _lock: lock,
            }),
        })
    }

    /// Group-commit counters.
    pub fn stats(&self) -> SqliteStats {
        let shared = &self.inner.shared;
        SqliteStats {
            commits: shared.commits.load(Ordering::Relaxed),
            writes: shared.writes.load(Ordering::Relaxed),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.shared.path
    }

    async fn write(&self, op: Op) -> Result<Event> {
        let (tx, rx) = oneshot::channel();
        self.send(Cmd::Write(op, tx))?;
        rx.await
            .map_err(|_| StoreError::Backend("sqlite: writer thread stopped".into()))?
    }

    fn send(&self, cmd: Cmd) -> Result<()> {
        self.inner
            .cmds
            .as_ref()
            .and_then(|c| c.send(cmd).ok())
            .ok_or_else(|| StoreError::Backend("sqlite: writer thread stopped".into()))
    }

    async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        self.inner.shared.clone().read(f).await
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the channel stops the writer after its current batch; joining makes
        // sure the database is closed when the last handle is gone.
        self.cmds.take();
        if let Some(handle) = self.writer.take()
            && handle.join().is_err()
        {
            tracing::error!("sqlite store writer thread panicked");
        }
    }
}

impl Shared {
    /// Runs `f` on a pooled read connection on tokio's blocking pool.
    async fn read<T, F>(self: Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        tokio::task::spawn_blocking(move || {
            let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let mut conn = match pooled {
                Some(c) => c,
                None => open_connection(&self.path, true)?,
            };
            let out = f(&mut conn);
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            if idle.len() < self.max_idle {
                idle.push(conn);
            }
            out
        })
        .await
        .ctx("read task")?
    }
}

/// A read-only snapshot transaction (deferred: the snapshot is taken at the first read).
fn snapshot(conn: &mut Connection) -> Result<Transaction<'_>> {
    conn.transaction_with_behavior(TransactionBehavior::Deferred)
        .ctx("begin read")
}

fn range_at(conn: &mut Connection, req: &RangeRequest) -> Result<RangeResponse> {
    let tx = snapshot(conn)?;
    let (current, compacted, _) = read_meta(&tx)?;
    if req.revision > current {
        return Err(StoreError::FutureRevision(req.revision));
    }
    if req.revision > 0 && req.revision < compacted {
        return Err(StoreError::Compacted {
            requested: req.revision,
            compacted,
        });
    }
    let start = range_start(
        req.prefix.as_bytes(),
        req.start_after.as_deref().map(str::as_bytes),
    );
    let end = prefix_end(req.prefix.as_bytes()).unwrap_or_else(|| KEY_MAX.to_vec());
    let limit: i64 = if req.limit == 0 {
        -1
    } else {
        i64::try_from(req.limit).unwrap_or(i64::MAX)
    };
    let (kvs, count) = if req.revision == 0 || req.revision == current {
        let kvs = tx
            .prepare_cached(
                "SELECT h.key, h.value, h.create_rev, h.rev, h.version
                 FROM kv JOIN history h ON h.rev = kv.rev
                 WHERE kv.key >= ?1 AND kv.key < ?2 ORDER BY kv.key LIMIT ?3",
            )
            .and_then(|mut st| {
                st.query_map(params![start, end, limit], |r| row_kv(r, 0))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .ctx("range")?;
        let count: i64 = tx
            .prepare_cached("SELECT COUNT(*) FROM kv WHERE key >= ?1 AND key < ?2")
            .and_then(|mut st| st.query_row(params![start, end], |r| r.get(0)))
            .ctx("range count")?;
        (kvs, count)
    } else {
        // The state at a past revision: per key, the newest history row at or below
        // it, unless that row is a tombstone. (SQLite takes the bare columns from the
        // row holding MAX(rev).)
        const AT: &str = "SELECT key, value, create_rev, rev, version FROM (
                SELECT key, value, create_rev, MAX(rev) AS rev, version, deleted FROM history
                WHERE key >= ?1 AND key < ?2 AND rev <= ?3 GROUP BY key
            ) WHERE deleted = 0";
        let kvs = tx
            .prepare_cached(&format!("{AT} ORDER BY key LIMIT ?4"))
            .and_then(|mut st| {
                st.query_map(params![start, end, req.revision, limit], |r| row_kv(r, 0))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .ctx("range at revision")?;
        let count: i64 = tx
            .prepare_cached(&format!("SELECT COUNT(*) FROM ({AT})"))
            .and_then(|mut st| st.query_row(params![start, end, req.revision], |r| r.get(0)))
            .ctx("range count at revision")?;
        (kvs, count)
    };
    let count = usize::try_from(count).unwrap_or(0);
    Ok(RangeResponse {
        more: count > kvs.len(),
        count,
        kvs,
        revision: if req.revision == 0 {
            current
        } else {
            req.revision
        },
    })
}

/// One page of history for a watcher: events under `[start, end)` with revision
/// above `seen`. Returns the events, the revision the watcher has now seen through,
/// and whether it reached the current revision.
fn history_page(
    conn: &mut Connection,
    start: &[u8],
    end: &[u8],
    seen: Revision,
) -> Result<(Vec<Event>, Revision, bool)> {
    let tx = snapshot(conn)?;
    let (current, compacted, _) = read_meta(&tx)?;
    if seen < compacted {
        return Err(StoreError::Compacted {
            requested: seen,
            compacted,
        });
    }
    let events = tx
        .prepare_cached(
            "SELECT h.key, h.value, h.create_rev, h.rev, h.version, h.deleted,
                    p.key, p.value, p.create_rev, p.rev, p.version
             FROM history h LEFT JOIN history p ON p.rev = h.prev_rev
             WHERE h.rev > ?1 AND h.rev <= ?2 AND h.key >= ?3 AND h.key < ?4
             ORDER BY h.rev LIMIT ?5",
        )
        .and_then(|mut st| {
            st.query_map(params![seen, current, start, end, CATCH_UP_PAGE], |r| {
                let kv = row_kv(r, 0)?;
                let deleted: bool = r.get(5)?;
                let prev = match r.get::<_, Option<i64>>(9)? {
                    Some(_) => Some(row_kv(r, 6)?),
                    None => None,
                };
                Ok((kv, deleted, prev))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .ctx("read history")?;
    let full = events.len() as i64 == CATCH_UP_PAGE;
    let mut out = Vec::with_capacity(events.len());
    let mut last = seen;
    for (kv, deleted, prev) in events {
        last = kv.mod_revision;
        if deleted {
            let prev = prev.ok_or_else(|| {
                StoreError::Backend(format!(
                    "sqlite: tombstone {} lost its previous value",
                    kv.mod_revision
                ))
            })?;
            out.push(Event::Delete {
                prev,
                revision: kv.mod_revision,
            });
        } else {
            out.push(Event::Put { kv, prev });
        }
    }
    if full {
        Ok((out, last, false))
    } else {
        // `seen` may be ahead of `current` (a watch from a future revision).
        Ok((out, current.max(seen), true))
    }
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let key = key.to_owned();
        self.read(move |conn| latest(conn, &key)).await
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse> {
        self.read(move |conn| range_at(conn, &req)).await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        match self
            .write(Op::Create {
                key: key.to_owned(),
                value,
            })
            .await?
        {
            Event::Put { kv, .. } => Ok(kv),
            Event::Delete { .. } => Err(StoreError::Backend(
                "sqlite: create produced a delete".into(),
            )),
        }
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: Revision,
    ) -> Result<KeyValue> {
        let op = Op::Update {
            key: key.to_owned(),
            value,
            expected: expected_mod_revision,
        };
        match self.write(op).await? {
            Event::Put { kv, .. } => Ok(kv),
            Event::Delete { .. } => Err(StoreError::Backend(
                "sqlite: update produced a delete".into(),
            )),
        }
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<(KeyValue, Revision)> {
        let op = Op::Delete {
            key: key.to_owned(),
            expected: expected_mod_revision,
        };
        match self.write(op).await? {
            Event::Delete { prev, revision } => Ok((prev, revision)),
            Event::Put { .. } => Err(StoreError::Backend("sqlite: delete produced a put".into())),
        }
    }

    async fn current_revision(&self) -> Result<Revision> {
        Ok(self.inner.shared.current.load(Ordering::Acquire))
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        // Subscribe before reading history so that nothing committed in between is missed
        // (duplicates are dropped by revision).
        let state = WatchState {
            shared: self.inner.shared.clone(),
            rx: self.inner.events.subscribe(),
            prefix: prefix.to_owned(),
            start: prefix.as_bytes().to_vec(),
            end: prefix_end(prefix.as_bytes()).unwrap_or_else(|| KEY_MAX.to_vec()),
            seen: after.max(0),
            buf: VecDeque::new(),
            catching_up: true,
            done: false,
        };
        Ok(futures::stream::unfold(state, |mut st| async move {
            let item = st.next().await?;
            Some((item, st))
        })
        .boxed())
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.send(Cmd::Compact(revision, tx))?;
        rx.await
            .map_err(|_| StoreError::Backend("sqlite: writer thread stopped".into()))?
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        Ok(self.inner.shared.compacted.load(Ordering::Acquire))
    }
}

struct WatchState {
    shared: Arc<Shared>,
    rx: broadcast::Receiver<Arc<Batch>>,
    prefix: String,
    start: Vec<u8>,
    end: Vec<u8>,
    /// Every event up to this revision has been delivered or filtered out.
    seen: Revision,
    buf: VecDeque<Event>,
    /// Read history before taking events from the broadcast again.
    catching_up: bool,
    done: bool,
}

impl WatchState {
    async fn next(&mut self) -> Option<Result<Event>> {
        loop {
            if let Some(ev) = self.buf.pop_front() {
                return Some(Ok(ev));
            }
            if self.done {
                return None;
            }
            if self.catching_up {
                let (start, end, seen) = (self.start.clone(), self.end.clone(), self.seen);
                let page = self
                    .shared
                    .clone()
                    .read(move |conn| history_page(conn, &start, &end, seen))
                    .await;
                match page {
                    Ok((events, seen, complete)) => {
                        self.buf.extend(events);
                        self.seen = seen;
                        self.catching_up = !complete;
                    }
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
                continue;
            }
            match self.rx.recv().await {
                Ok(batch) => {
                    if batch.last <= self.seen {
                        continue; // already read from history
                    }
                    if batch.first > self.seen + 1 {
                        self.catching_up = true; // a gap: fill it from history
                        continue;
                    }
                    let seen = self.seen;
                    self.buf.extend(
                        batch
                            .events
                            .iter()
                            .filter(|e| e.revision() > seen && e.key().starts_with(&self.prefix))
                            .cloned(),
                    );
                    self.seen = batch.last;
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::debug!(skipped = n, prefix = %self.prefix, "watcher lagged; catching up from history");
                    self.catching_up = true;
                }
                Err(broadcast::error::RecvError::Closed) => {
                    // The store was closed: deliver what is committed, then end.
                    self.done = true;
                }
            }
        }
    }
}

struct Writer {
    conn: Connection,
    shared: Arc<Shared>,
    events: broadcast::Sender<Arc<Batch>>,
    options: SqliteOptions,
    /// (time, revision) samples for time-based retention.
    samples: VecDeque<(Instant, Revision)>,
    next_tick: Option<Instant>,
    /// History below this revision has been physically compacted.
    progress: Revision,
}

impl Writer {
    fn run(&mut self, rx: mpsc::Receiver<Cmd>) {
        self.next_tick = self.options.compaction_interval.map(|i| Instant::now() + i);
        loop {
            let pending_compaction = self.compaction_pending();
            let first = match (pending_compaction, self.next_tick) {
                (true, _) => rx.try_recv().map_err(|e| match e {
                    mpsc::TryRecvError::Empty => mpsc::RecvTimeoutError::Timeout,
                    mpsc::TryRecvError::Disconnected => mpsc::RecvTimeoutError::Disconnected,
                }),
                (false, Some(at)) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
                (false, None) => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            };
            match first {
                Ok(cmd) => {
                    // Group commit: everything queued while the previous commit was
                    // syncing goes into this transaction.
                    let mut cmds = vec![cmd];
                    while cmds.len() < self.options.max_batch {
                        match rx.try_recv() {
                            Ok(c) => cmds.push(c),
                            Err(_) => break,
                        }
                    }
                    self.process(cmds);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if self.next_tick.is_some_and(|t| Instant::now() >= t) {
                self.periodic_compaction();
            }
            if self.compaction_pending()
                && let Err(e) = self.compact_chunk()
            {
                tracing::warn!(error = %e, "sqlite store: compaction chunk failed");
            }
        }
    }

    fn compaction_pending(&self) -> bool {
        self.progress < self.shared.compacted.load(Ordering::Acquire)
    }

    fn process(&mut self, cmds: Vec<Cmd>) {
        let start_rev = self.shared.current.load(Ordering::Acquire);
        let start_compacted = self.shared.compacted.load(Ordering::Acquire);
        let mut rev = start_rev;
        let mut compacted = start_compacted;
        let mut results: Vec<Result<Option<Event>>> = Vec::with_capacity(cmds.len());
        let outcome = (|| -> Result<()> {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .ctx("begin write")?;
            for cmd in &cmds {
                let res = match cmd {
                    Cmd::Write(op, _) => apply(&tx, op, rev + 1).map(Some),
                    Cmd::Compact(target, _) => {
                        if *target > rev {
                            Err(StoreError::FutureRevision(*target))
                        } else if *target <= compacted {
                            Err(StoreError::Compacted {
                                requested: *target,
                                compacted,
                            })
                        } else {
                            compacted = *target;
                            Ok(None)
                        }
                    }
                };
                match res {
                    Ok(Some(ev)) => {
                        rev += 1;
                        results.push(Ok(Some(ev)));
                    }
                    Ok(None) => results.push(Ok(None)),
                    // A storage failure fails the whole batch; a failed check only this op.
                    Err(e @ StoreError::Backend(_)) => return Err(e),
                    Err(e) => results.push(Err(e)),
                }
            }
            if rev != start_rev || compacted != start_compacted {
                tx.prepare_cached(
                    "UPDATE meta SET current_rev = ?1, compacted_rev = ?2 WHERE id = 0",
                )
                .and_then(|mut st| st.execute(params![rev, compacted]))
                .ctx("update meta")?;
            }
            tx.commit().ctx("commit")
        })();
        if let Err(e) = outcome {
            tracing::error!(error = %e, "sqlite store: write batch failed");
            for cmd in cmds {
                let err = StoreError::Backend(e.to_string());
                match cmd {
                    Cmd::Write(_, reply) => drop(reply.send(Err(err))),
                    Cmd::Compact(_, reply) => drop(reply.send(Err(err))),
                }
            }
            return;
        }
        self.shared.current.store(rev, Ordering::Release);
        self.shared.compacted.store(compacted, Ordering::Release);
        let events: Vec<Event> = results
            .iter()
            .filter_map(|r| r.as_ref().ok().cloned().flatten())
            .collect();
        if !events.is_empty() {
            self.shared.commits.fetch_add(1, Ordering::Relaxed);
            self.shared
                .writes
                .fetch_add(events.len() as u64, Ordering::Relaxed);
            // No receivers is fine; a full buffer makes slow receivers lag, never blocks.
            let _ = self.events.send(Arc::new(Batch {
                first: start_rev + 1,
                last: rev,
                events,
            }));
        }
        for (cmd, res) in cmds.into_iter().zip(results) {
            // A caller that stopped waiting is not an error.
            match cmd {
                Cmd::Write(_, reply) => {
                    let res = res.and_then(|ev| {
                        ev.ok_or_else(|| {
                            StoreError::Backend("sqlite: write produced no event".into())
                        })
                    });
                    let _ = reply.send(res);
                }
                Cmd::Compact(_, reply) => {
                    let _ = reply.send(res.map(|_| ()));
                }
            }
        }
    }

    /// Moves the compacted revision forward to what the retention options allow.
    fn periodic_compaction(&mut self) {
        let Some(interval) = self.options.compaction_interval else {
            return;
        };
        let now = Instant::now();
        self.next_tick = Some(now + interval);
        let current = self.shared.current.load(Ordering::Acquire);
        self.samples.push_back((now, current));
        // The newest sample at least `retention` old; drop the ones before it.
        let Some(cutoff) = now.checked_sub(self.options.retention) else {
            return;
        };
        while self.samples.len() > 1 && self.samples[1].0 <= cutoff {
            self.samples.pop_front();
        }
        let Some(&(at, by_time)) = self.samples.front() else {
            return;
        };
        if at > cutoff {
            return; // nothing old enough yet
        }
        let target = by_time.min(current - self.options.min_retained_revisions);
        if target <= self.shared.compacted.load(Ordering::Acquire) {
            return;
        }
        let (tx, _rx) = oneshot::channel();
        self.process(vec![Cmd::Compact(target, tx)]);
        tracing::debug!(revision = target, "sqlite store: compacted");
    }

    /// Physically deletes the history made useless by compaction, one chunk of
    /// revisions `q` at a time: for each row `q` below the compacted revision, the row
    /// it superseded (`prev_rev`) goes, and so does `q` itself if it is a tombstone.
    /// What remains below the compacted revision is each live key's value at it.
    fn compact_chunk(&mut self) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .ctx("begin compaction")?;
        let lo = self.progress;
        let compacted = self.shared.compacted.load(Ordering::Acquire);
        let hi = compacted.min(lo.saturating_add(COMPACT_CHUNK));
        // Each statement's subquery is evaluated before it deletes anything.
        tx.execute(
            "DELETE FROM history WHERE rev IN
                 (SELECT prev_rev FROM history WHERE rev >= ?1 AND rev < ?2 AND prev_rev IS NOT NULL)",
            params![lo, hi],
        )
        .ctx("compact superseded rows")?;
        tx.execute(
            "DELETE FROM history WHERE rev >= ?1 AND rev < ?2 AND deleted = 1",
            params![lo, hi],
        )
        .ctx("compact tombstones")?;
        tx.execute(
            "UPDATE meta SET compact_progress = ?1 WHERE id = 0",
            params![hi],
        )
        .ctx("compaction progress")?;
        tx.commit().ctx("commit compaction")?;
        self.progress = hi;
        Ok(())
    }
}

/// Checks and applies one write at revision `rev`, returning its event.
fn apply(tx: &Transaction<'_>, op: &Op, rev: Revision) -> Result<Event> {
    match op {
        Op::Create { key, value } => {
            if latest(tx, key)?.is_some() {
                return Err(StoreError::AlreadyExists(key.clone()));
            }
            insert_history(tx, rev, key, Some(value), rev, 1, None)?;
            tx.prepare_cached("INSERT INTO kv (key, rev) VALUES (?1, ?2)")
                .and_then(|mut st| st.execute(params![key.as_bytes(), rev]))
                .ctx("insert kv")?;
            let kv = KeyValue {
                key: key.clone(),
                value: value.clone(),
                create_revision: rev,
                mod_revision: rev,
                version: 1,
            };
            Ok(Event::Put { kv, prev: None })
        }
        Op::Update {
            key,
            value,
            expected,
        } => {
            let prev = latest(tx, key)?.ok_or_else(|| StoreError::NotFound(key.clone()))?;
            if prev.mod_revision != *expected {
                return Err(StoreError::Conflict {
                    key: key.clone(),
                    expected: *expected,
                    actual: prev.mod_revision,
                });
            }
            let version = prev.version + 1;
            insert_history(
                tx,
                rev,
                key,
                Some(value),
                prev.create_revision,
                version,
                Some(prev.mod_revision),
            )?;
            tx.prepare_cached("UPDATE kv SET rev = ?2 WHERE key = ?1")
                .and_then(|mut st| st.execute(params![key.as_bytes(), rev]))
                .ctx("update kv")?;
            let kv = KeyValue {
                key: key.clone(),
                value: value.clone(),
                create_revision: prev.create_revision,
                mod_revision: rev,
                version,
            };
            Ok(Event::Put {
                kv,
                prev: Some(prev),
            })
        }
        Op::Delete { key, expected } => {
            let prev = latest(tx, key)?.ok_or_else(|| StoreError::NotFound(key.clone()))?;
            if let Some(expected) = expected
                && prev.mod_revision != *expected
            {
                return Err(StoreError::Conflict {
                    key: key.clone(),
                    expected: *expected,
                    actual: prev.mod_revision,
                });
            }
            insert_history(
                tx,
                rev,
                key,
                None,
                prev.create_revision,
                0,
                Some(prev.mod_revision),
            )?;
            tx.prepare_cached("DELETE FROM kv WHERE key = ?1")
                .and_then(|mut st| st.execute(params![key.as_bytes()]))
                .ctx("delete kv")?;
            Ok(Event::Delete {
                prev,
                revision: rev,
            })
        }
    }
}

fn insert_history(
    tx: &Transaction<'_>,
    rev: Revision,
    key: &str,
    value: Option<&Bytes>,
    create_rev: Revision,
    version: i64,
    prev_rev: Option<Revision>,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO history (rev, key, value, create_rev, version, prev_rev, deleted)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut st| {
        st.execute(params![
            rev,
            key.as_bytes(),
            value.map(|v| &v[..]),
            create_rev,
            version,
            prev_rev,
            value.is_none()
        ])
    })
    .ctx("insert history")?;
    Ok(())
}
