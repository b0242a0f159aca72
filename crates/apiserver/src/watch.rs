//! Watch: a chunked stream of `{"type": …, "object": …}` lines, one per change,
//! filtered by selectors with upstream's transitions (an object that stops
//! matching is DELETED for this watcher, one that starts matching is ADDED).

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use berth_api::registry::ResourceType;
use berth_store::{Event, RangeRequest, StoreError};

use crate::negotiate::{self, Include, Shape};
use crate::objects;
use crate::request::{Query, ResourcePath};
use crate::rest::{Rest, Selectors};
use crate::status::{ApiError, ApiResult};

/// Upstream's bookmark interval is about a minute.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
/// Upstream's --min-request-timeout: a watch without timeoutSeconds ends after 30–60 min.
const MIN_REQUEST_TIMEOUT: u64 = 1800;

pub struct WatchParams {
    pub shape: Shape,
    pub include: Include,
}

struct Emitter {
    rt: &'static ResourceType,
    shape: Shape,
    include: Include,
    tx: mpsc::Sender<Bytes>,
    sent_columns: bool,
}

impl Emitter {
    async fn send(&mut self, kind: &str, obj: Value) -> bool {
        let object = if kind == "ERROR" || kind == "BOOKMARK" {
            obj
        } else {
            let with_columns = !self.sent_columns;
            self.sent_columns = true;
            negotiate::shape_object(self.rt, obj, self.shape, self.include, with_columns)
        };
        let mut line =
            serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
        line.push(b'\n');
        self.tx.send(Bytes::from(line)).await.is_ok()
    }
}

/// Starts a watch; the returned receiver yields the response body's chunks.
pub async fn start(
    rest: &Rest,
    rp: &ResourcePath,
    q: &Query,
    params: WatchParams,
) -> ApiResult<mpsc::Receiver<Bytes>> {
    let rt = rp.rt;
    let sel = Selectors::from_query(rt, q)?;
    let prefix = objects::list_prefix(
        rt,
        if rt.namespaced {
            rp.namespace.as_deref()
        } else {
            None
        },
    );
    let name_filter = rp.name.clone();
    let bookmarks = q.flag("allowWatchBookmarks");
    let send_initial = q.get("sendInitialEvents") == Some("true");
    let timeout = match q.int("timeoutSeconds")? {
        Some(t) if t > 0 => Duration::from_secs(t as u64),
        _ => Duration::from_secs(MIN_REQUEST_TIMEOUT + rand::random::<u64>() % MIN_REQUEST_TIMEOUT),
    };
    let rv = q.get("resourceVersion").map(String::from);
    let from: Option<i64> = match rv.as_deref() {
        None | Some("0") => None,
        Some(s) => Some(
            s.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))?,
        ),
    };
    let store = rest.store.clone();
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let mut em = Emitter {
        rt,
        shape: params.shape,
        include: params.include,
        tx,
        sent_columns: false,
    };
    let matches = move |obj: &Value| -> bool {
        if let Some(n) = &name_filter
            && objects::name(obj) != Some(n.as_str())
        {
            return false;
        }
        sel.matches(obj)
    };
    let to_version = move |obj: Value| -> Value {
        if rt.is_storage_version() {
            obj
        } else {
            berth_api::conversion::convert(obj, rt.group, rt.version)
        }
    };
    let storage_prefix = if rt.is_storage_version() {
        prefix
    } else {
        berth_api::registry::lookup(rt.group, rt.storage_version, rt.plural)
            .map(|s| {
                objects::list_prefix(
                    s,
                    if rt.namespaced {
                        rp.namespace.as_deref()
                    } else {
                        None
                    },
                )
            })
            .unwrap_or(prefix)
    };
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        // Initial state: unset or "0" means "start with what exists now".
        let start_rev = match from {
            Some(r) if !send_initial => r,
            _ => {
                let mut start_after = None;
                let mut at = 0;
                loop {
                    let resp = match store
                        .range(RangeRequest {
                            prefix: storage_prefix.clone(),
                            start_after: start_after.clone(),
                            limit: 500,
                            revision: at,
                        })
                        .await
                    {
                        Ok(r) => r,
                        Err(e) => {
                            let _ = em.send("ERROR", ApiError::from(e).to_status()).await;
                            return;
                        }
                    };
                    at = resp.revision;
                    for kv in &resp.kvs {
                        if let Ok(obj) = objects::decode(kv)
                            && matches(&obj)
                            && !em.send("ADDED", to_version(obj)).await
                        {
                            return;
                        }
                    }
                    start_after = resp.kvs.last().map(|kv| kv.key.clone());
                    if !resp.more {
                        break;
                    }
                }
                if send_initial && bookmarks {
                    let bm = json!({"kind": rt.kind, "apiVersion": rt.api_version(),
                        "metadata": {"resourceVersion": at.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}}});
                    if !em.send("BOOKMARK", bm).await {
                        return;
                    }
                }
                at
            }
        };
        let mut stream = match store.watch(&storage_prefix, start_rev).await {
            Ok(s) => s,
            Err(e) => {
                let _ = em.send("ERROR", watch_error(e)).await;
                return;
            }
        };
        let mut last_rev = start_rev;
        let mut bookmark =
            tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return,
                _ = em.tx.closed() => return,
                _ = bookmark.tick(), if bookmarks => {
                    let bm = json!({"kind": rt.kind, "apiVersion": rt.api_version(), "metadata": {"resourceVersion": last_rev.to_string()}});
                    if !em.send("BOOKMARK", bm).await { return; }
                }
                ev = stream.next() => {
                    let ev = match ev {
                        None => return,
                        Some(Err(e)) => { let _ = em.send("ERROR", watch_error(e)).await; return; }
                        Some(Ok(ev)) => ev,
                    };
                    last_rev = ev.revision();
                    let out = match ev {
                        Event::Put { kv, prev } => {
                            let Ok(new) = objects::decode(&kv) else { continue };
                            let old_match = prev.as_ref().and_then(|p| objects::decode(p).ok()).is_some_and(|o| matches(&o));
                            let new_match = matches(&new);
                            match (old_match, new_match) {
                                (false, true) => Some(("ADDED", new)),
                                (true, true) => Some(("MODIFIED", new)),
                                (true, false) => Some(("DELETED", new)),
                                (false, false) => None,
                            }
                        }
                        Event::Delete { prev, revision } => {
                            match objects::decode_at(&prev.value, revision) {
                                Ok(old) if matches(&old) => Some(("DELETED", old)),
                                _ => None,
                            }
                        }
                    };
                    if let Some((kind, obj)) = out
                        && !em.send(kind, to_version(obj)).await { return; }
                }
            }
        }
    });
    Ok(rx)
}

fn watch_error(e: StoreError) -> Value {
    match e {
        StoreError::Compacted {
            requested,
            compacted,
        } => ApiError::gone(format!(
            "too old resource version: {requested} ({compacted})"
        ))
        .to_status(),
        other => ApiError::from(other).to_status(),
    }
}
