//! The etcd backend: Berth's [`Store`] over a real etcd v3 cluster.
//!
//! Every Berth key is stored under a configurable root prefix (default empty), so
//! several clusters or test runs can share one etcd. Revisions, compaction and watch
//! semantics are etcd's own: the revision is etcd's cluster-wide revision (shared by
//! everything in that etcd, not only this prefix).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, KvClient, PutOptions,
    Txn, TxnOp, TxnOpResponse, WatchClient, WatchOptions,
};
use futures::StreamExt;

use crate::{
    Event, KeyValue, RangeRequest, RangeResponse, Result, Revision, Store, StoreError, WatchStream,
    prefix_end, range_start,
};

/// Options for [`EtcdStore::connect_with`].
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// Prepended to every key in etcd (e.g. `/berth`); empty by default.
    pub prefix: String,
    /// Timeout for establishing the connection.
    pub connect_timeout: Duration,
    /// Timeout for each request (watches excepted).
    pub request_timeout: Duration,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            prefix: String::new(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// A [`Store`] backed by etcd. Cheap to clone.
#[derive(Clone)]
pub struct EtcdStore {
    kv: KvClient,
    watch: WatchClient,
    root: Arc<Vec<u8>>,
    /// Highest compacted revision seen so far (a lower bound for the search).
    compacted: Arc<AtomicI64>,
}

fn backend(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("etcd: {what}: {e}"))
}

fn is_compacted(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s) if s.message().contains("required revision has been compacted"))
}

fn is_future(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s) if s.message().contains("required revision is a future revision"))
}

fn header_revision(h: Option<&etcd_client::ResponseHeader>) -> Result<Revision> {
    h.map(|h| h.revision())
        .ok_or_else(|| StoreError::Backend("etcd: response without header".into()))
}

impl EtcdStore {
    /// Connects to etcd at `endpoints` (e.g. `http://127.0.0.1:2379`), storing keys
    /// under `prefix` (none when `None`).
    pub async fn connect(endpoints: &[String], prefix: Option<&str>) -> Result<Self> {
        let options = EtcdOptions {
            prefix: prefix.unwrap_or_default().to_owned(),
            ..EtcdOptions::default()
        };
        Self::connect_with(endpoints, options).await
    }

    pub async fn connect_with(endpoints: &[String], options: EtcdOptions) -> Result<Self> {
        let connect = ConnectOptions::new()
            .with_connect_timeout(options.connect_timeout)
            .with_timeout(options.request_timeout)
            .with_keep_alive(Duration::from_secs(30), Duration::from_secs(10));
        let client = Client::connect(endpoints, Some(connect))
            .await
            .map_err(|e| backend(&format!("connect to {endpoints:?}"), e))?;
        let store = EtcdStore {
            kv: client.kv_client(),
            watch: client.watch_client(),
            root: Arc::new(options.prefix.into_bytes()),
            compacted: Arc::new(AtomicI64::new(0)),
        };
        // Fail now, not at first use, if nothing answers.
        store.current_revision().await?;
        Ok(store)
    }

    fn full_key(&self, key: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.root.len() + key.len());
        k.extend_from_slice(&self.root);
        k.extend_from_slice(key.as_bytes());
        k
    }

    /// The etcd key range `[start, end)` for a Berth prefix (etcd's "\0" means "from
    /// the first key" / "to the last key").
    fn key_range(&self, prefix: &str, start_after: Option<&str>) -> (Vec<u8>, Vec<u8>) {
        let full_prefix = self.full_key(prefix);
        let mut start = range_start(
            &full_prefix,
            start_after.map(|a| self.full_key(a)).as_deref(),
        );
        if start.is_empty() {
            start = vec![0];
        }
        let end = prefix_end(&full_prefix).unwrap_or_else(|| vec![0]);
        (start, end)
    }

    fn to_kv(&self, kv: &etcd_client::KeyValue) -> Result<KeyValue> {
        let key = kv
            .key()
            .strip_prefix(self.root.as_slice())
            .ok_or_else(|| StoreError::Backend("etcd: key outside the store prefix".into()))?;
        Ok(KeyValue {
            key: String::from_utf8(key.to_vec()).map_err(|e| backend("non-UTF-8 key", e))?,
            value: Bytes::copy_from_slice(kv.value()),
            create_revision: kv.create_revision(),
            mod_revision: kv.mod_revision(),
            version: kv.version(),
        })
    }

    async fn compacted_error(&self, requested: Revision) -> StoreError {
        match self.compacted_revision().await {
            Ok(compacted) => StoreError::Compacted {
                requested,
                compacted,
            },
            Err(e) => e,
        }
    }

    /// Runs a guarded write: `when` all hold → `then`, else read the key to tell why.
    async fn guarded(
        &self,
        key: &[u8],
        when: Vec<Compare>,
        then: TxnOp,
    ) -> Result<(etcd_client::TxnResponse, bool)> {
        let txn = Txn::new()
            .when(when)
            .and_then(vec![then])
            .or_else(vec![TxnOp::get(key.to_vec(), None)]);
        let resp = self
            .kv
            .clone()
            .txn(txn)
            .await
            .map_err(|e| backend("txn", e))?;
        let ok = resp.succeeded();
        Ok((resp, ok))
    }

    /// The key's current value from a failed txn's `or_else` get.
    fn current_from(&self, resp: &etcd_client::TxnResponse) -> Result<Option<KeyValue>> {
        for op in resp.op_responses() {
            if let TxnOpResponse::Get(get) = op {
                return get.kvs().first().map(|kv| self.to_kv(kv)).transpose();
            }
        }
        Err(StoreError::Backend("etcd: txn response without get".into()))
    }
}

#[async_trait::async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let resp = self
            .kv
            .clone()
            .get(self.full_key(key), None)
            .await
            .map_err(|e| backend("get", e))?;
        resp.kvs().first().map(|kv| self.to_kv(kv)).transpose()
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse> {
        let (start, end) = self.key_range(&req.prefix, req.start_after.as_deref());
        let mut opts = GetOptions::new()
            .with_range(end.clone())
            .with_revision(req.revision);
        if req.limit > 0 {
            opts = opts.with_limit(i64::try_from(req.limit).unwrap_or(i64::MAX));
        }
        // A start_after beyond the prefix: an empty range (etcd rejects start >= end),
        // but still check the revision.
        let empty = end != [0] && start >= end;
        if empty {
            opts = GetOptions::new()
                .with_range(end)
                .with_revision(req.revision)
                .with_count_only();
        }
        let key = if empty {
            self.full_key(&req.prefix)
        } else {
            start
        };
        let resp = match self.kv.clone().get(key, Some(opts)).await {
            Ok(r) => r,
            Err(e) if is_compacted(&e) => return Err(self.compacted_error(req.revision).await),
            Err(e) if is_future(&e) => return Err(StoreError::FutureRevision(req.revision)),
            Err(e) => return Err(backend("range", e)),
        };
        if empty {
            let revision = if req.revision > 0 {
                req.revision
            } else {
                header_revision(resp.header())?
            };
            return Ok(RangeResponse {
                kvs: Vec::new(),
                revision,
                more: false,
                count: 0,
            });
        }
        let kvs = resp
            .kvs()
            .iter()
            .map(|kv| self.to_kv(kv))
            .collect::<Result<Vec<_>>>()?;
        Ok(RangeResponse {
            revision: if req.revision > 0 {
                req.revision
            } else {
                header_revision(resp.header())?
            },
            more: resp.more(),
            count: usize::try_from(resp.count()).unwrap_or(0),
            kvs,
        })
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        let k = self.full_key(key);
        let when = vec![Compare::create_revision(k.clone(), CompareOp::Equal, 0)];
        let (resp, ok) = self
            .guarded(&k, when, TxnOp::put(k.clone(), value.to_vec(), None))
            .await?;
        if !ok {
            return Err(StoreError::AlreadyExists(key.to_owned()));
        }
        let rev = header_revision(resp.header())?;
        Ok(KeyValue {
            key: key.to_owned(),
            value,
            create_revision: rev,
            mod_revision: rev,
            version: 1,
        })
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: Revision,
    ) -> Result<KeyValue> {
        let k = self.full_key(key);
        // An absent key has mod_revision 0: also require that it exists.
        let when = vec![
            Compare::version(k.clone(), CompareOp::Greater, 0),
            Compare::mod_revision(k.clone(), CompareOp::Equal, expected_mod_revision),
        ];
        let put = TxnOp::put(
            k.clone(),
            value.to_vec(),
            Some(PutOptions::new().with_prev_key()),
        );
        let (resp, ok) = self.guarded(&k, when, put).await?;
        if !ok {
            return match self.current_from(&resp)? {
                None => Err(StoreError::NotFound(key.to_owned())),
                Some(cur) => Err(StoreError::Conflict {
                    key: key.to_owned(),
                    expected: expected_mod_revision,
                    actual: cur.mod_revision,
                }),
            };
        }
        let rev = header_revision(resp.header())?;
        let prev = resp.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Put(p) => p.prev_key().cloned(),
            _ => None,
        });
        let prev =
            prev.ok_or_else(|| StoreError::Backend("etcd: update without previous value".into()))?;
        Ok(KeyValue {
            key: key.to_owned(),
            value,
            create_revision: prev.create_revision(),
            mod_revision: rev,
            version: prev.version() + 1,
        })
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<(KeyValue, Revision)> {
        let k = self.full_key(key);
        let mut when = vec![Compare::version(k.clone(), CompareOp::Greater, 0)];
        if let Some(expected) = expected_mod_revision {
            when.push(Compare::mod_revision(k.clone(), CompareOp::Equal, expected));
        }
        let del = TxnOp::delete(k.clone(), Some(DeleteOptions::new().with_prev_key()));
        let (resp, ok) = self.guarded(&k, when, del).await?;
        if !ok {
            return match self.current_from(&resp)? {
                None => Err(StoreError::NotFound(key.to_owned())),
                Some(cur) => Err(StoreError::Conflict {
                    key: key.to_owned(),
                    expected: expected_mod_revision.unwrap_or_default(),
                    actual: cur.mod_revision,
                }),
            };
        }
        let rev = header_revision(resp.header())?;
        let prev = resp.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Delete(d) => d.prev_kvs().first().cloned(),
            _ => None,
        });
        let prev =
            prev.ok_or_else(|| StoreError::Backend("etcd: delete without previous value".into()))?;
        Ok((self.to_kv(&prev)?, rev))
    }

    async fn current_revision(&self) -> Result<Revision> {
        let key = if self.root.is_empty() {
            vec![0]
        } else {
            self.root.to_vec()
        };
        let resp = self
            .kv
            .clone()
            .get(key, Some(GetOptions::new().with_count_only()))
            .await
            .map_err(|e| backend("current revision", e))?;
        header_revision(resp.header())
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        let (start, end) = self.key_range(prefix, None);
        // Start at `after` itself (events at `after` are dropped below) so that etcd
        // reports Compacted exactly when `after` is below the compacted revision, as the
        // SQLite backend does; an update right after it then always has its prev_kv.
        // (start_revision 0 would mean "from now" to etcd.)
        let start_revision = after.max(1);
        let opts = WatchOptions::new()
            .with_range(end)
            .with_start_revision(start_revision)
            .with_prev_key();
        let (watcher, stream) = self
            .watch
            .clone()
            .watch(start, Some(opts))
            .await
            .map_err(|e| backend("watch", e))?;
        let state = EtcdWatch {
            store: self.clone(),
            _watcher: watcher,
            stream,
            buf: VecDeque::new(),
            done: false,
            after,
        };
        Ok(futures::stream::unfold(state, |mut st| async move {
            let item = st.next().await?;
            Some((item, st))
        })
        .boxed())
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        match self.kv.clone().compact(revision, None).await {
            Ok(_) => {
                self.compacted.fetch_max(revision, Ordering::AcqRel);
                Ok(())
            }
            Err(e) if is_compacted(&e) => Err(self.compacted_error(revision).await),
            Err(e) if is_future(&e) => Err(StoreError::FutureRevision(revision)),
            Err(e) => Err(backend("compact", e)),
        }
    }

    /// etcd has no call that returns the compacted revision; a range at revision `r`
    /// fails exactly when `r` is below it, so binary-search the smallest revision that
    /// can still be read (~log2(revision) cheap count-only requests).
    async fn compacted_revision(&self) -> Result<Revision> {
        let current = self.current_revision().await?;
        let key = if self.root.is_empty() {
            vec![0]
        } else {
            self.root.to_vec()
        };
        let (mut lo, mut hi) = (self.compacted.load(Ordering::Acquire).max(1), current);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let opts = GetOptions::new().with_revision(mid).with_count_only();
            match self.kv.clone().get(key.clone(), Some(opts)).await {
                Ok(_) => hi = mid,
                Err(e) if is_compacted(&e) => lo = mid + 1,
                Err(e) => return Err(backend("compacted revision", e)),
            }
        }
        // Readable from revision 1: never compacted (compacting at 1 forgets nothing).
        let compacted = if lo <= 1 { 0 } else { lo };
        self.compacted.fetch_max(compacted, Ordering::AcqRel);
        Ok(compacted)
    }
}

struct EtcdWatch {
    store: EtcdStore,
    /// Keeps the watch's request stream open: dropping it ends the watch on the server.
    _watcher: etcd_client::Watcher,
    stream: etcd_client::WatchStream,
    buf: VecDeque<Event>,
    done: bool,
    after: Revision,
}

impl EtcdWatch {
    async fn next(&mut self) -> Option<Result<Event>> {
        loop {
            if let Some(ev) = self.buf.pop_front() {
                return Some(Ok(ev));
            }
            if self.done {
                return None;
            }
            let resp = match self.stream.message().await {
                Ok(Some(resp)) => resp,
                Ok(None) => {
                    self.done = true;
                    return Some(Err(StoreError::Backend("etcd: watch stream closed".into())));
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(backend("watch", e)));
                }
            };
            if resp.compact_revision() > 0 {
                self.done = true;
                return Some(Err(StoreError::Compacted {
                    requested: self.after,
                    compacted: resp.compact_revision(),
                }));
            }
            if resp.canceled() {
                self.done = true;
                return Some(Err(StoreError::Backend(format!(
                    "etcd: watch canceled: {}",
                    resp.cancel_reason()
                ))));
            }
            for ev in resp
                .events()
                .iter()
                .filter(|e| e.kv().is_some_and(|kv| kv.mod_revision() > self.after))
            {
                match self.convert(ev) {
                    Ok(ev) => self.buf.push_back(ev),
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
            }
        }
    }

    fn convert(&self, ev: &etcd_client::Event) -> Result<Event> {
        let kv = ev
            .kv()
            .ok_or_else(|| StoreError::Backend("etcd: watch event without kv".into()))?;
        let prev = ev.prev_kv().map(|p| self.store.to_kv(p)).transpose()?;
        match ev.event_type() {
            etcd_client::EventType::Put => {
                let kv = self.store.to_kv(kv)?;
                // etcd omits prev_kv when it cannot read it (compacted); an update
                // without its previous value would look like a create.
                if kv.version > 1 && prev.is_none() {
                    return Err(StoreError::Backend(format!(
                        "etcd: update of {} at {} arrived without its previous value",
                        kv.key, kv.mod_revision
                    )));
                }
                Ok(Event::Put { kv, prev })
            }
            etcd_client::EventType::Delete => {
                let prev = prev.ok_or_else(|| {
                    StoreError::Backend(format!(
                        "etcd: delete at {} arrived without its previous value",
                        kv.mod_revision()
                    ))
                })?;
                Ok(Event::Delete {
                    prev,
                    revision: kv.mod_revision(),
                })
            }
        }
    }
}
