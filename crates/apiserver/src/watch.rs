//! Watch: a chunked stream of `{"type": …, "object": …}` lines, one per change,
//! filtered by selectors with upstream's transitions (an object that stops
//! matching is DELETED for this watcher, one that starts matching is ADDED).
//! In protobuf (`application/vnd.kubernetes.protobuf;stream=watch`) each event is
//! a 4-byte big-endian length and a raw meta/v1 `WatchEvent` whose object is the
//! object's `k8s\0` envelope, as upstream's length-delimited raw stream serializer.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tracing::warn;

use crate::watchcache::{CacheError, CachedEvent, Stored};
use berth_api::registry::ResourceType;

use crate::negotiate::{self, Format, Include, Shape};
use crate::objects;
use crate::request::{Query, ResourcePath};
use crate::rest::{Rest, Selectors};
use crate::status::{ApiError, ApiResult};

/// Upstream's bookmark interval is about a minute.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
/// The longest `timeoutSeconds` a watch keeps (ten years).
const MAX_WATCH_TIMEOUT: i64 = 10 * 365 * 24 * 3600;
/// Upstream's --min-request-timeout: a watch without timeoutSeconds ends after 30–60 min.
const MIN_REQUEST_TIMEOUT: u64 = 1800;

pub struct WatchParams {
    pub shape: Shape,
    pub include: Include,
    pub format: Format,
}

struct Emitter {
    rt: &'static ResourceType,
    shape: Shape,
    include: Include,
    format: Format,
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
        let chunk = match self.format {
            Format::Json => {
                let mut line = serde_json::to_vec(&json!({"type": kind, "object": object}))
                    .unwrap_or_default();
                line.push(b'\n');
                line
            }
            Format::Protobuf => match berth_api::protobuf::encode_watch_frame(kind, &object) {
                Ok(frame) => frame,
                Err(e) => {
                    // End the watch: the client relists rather than missing an event.
                    warn!(error = %e, kind, "protobuf encoding of a watch event failed");
                    return false;
                }
            },
        };
        self.tx.send(Bytes::from(chunk)).await.is_ok()
    }

    /// Whether an event can be written from the stored bytes as they are:
    /// a JSON watch of whole objects in their storage version.
    fn raw_ok(&self) -> bool {
        self.format == Format::Json && self.shape == Shape::Object && self.rt.is_storage_version()
    }

    /// Writes `{"type":…,"object":…}` around stored bytes with their
    /// resourceVersion spliced in, without decoding them; `None` when the bytes
    /// are not an object with metadata (the caller decodes instead).
    async fn send_raw(&mut self, kind: &str, stored: &Stored, revision: i64) -> Option<bool> {
        let object = objects::with_resource_version(&stored.bytes, revision)?;
        let mut line = Vec::with_capacity(object.len() + 32);
        line.extend_from_slice(b"{\"type\":\"");
        line.extend_from_slice(kind.as_bytes());
        line.extend_from_slice(b"\",\"object\":");
        line.extend_from_slice(&object);
        line.extend_from_slice(b"}\n");
        Some(self.tx.send(Bytes::from(line)).await.is_ok())
    }

    /// Sends one cache event as this watcher sees it (selector transitions).
    async fn send_event(&mut self, ev: &CachedEvent, filter: &Filter, prefix: &str) -> bool {
        if !ev.key.starts_with(prefix) {
            return true;
        }
        if self.raw_ok()
            && let Some(change) = filter.transition(ev)
        {
            let Some((kind, stored, revision)) = change else {
                return true; // not selected, before or after
            };
            if let Some(sent) = self.send_raw(kind, stored, revision).await {
                return sent;
            }
        }
        match translate(ev, prefix, &|o: &Value| filter.matches(o)) {
            Some((kind, obj)) => {
                let obj = berth_api::conversion::to_version(self.rt, obj);
                self.send(kind, obj).await
            }
            None => true,
        }
    }
}

/// What a watcher selects: a name (watch of one object), label and field selectors.
struct Filter {
    name: Option<String>,
    sel: Selectors,
}

impl Filter {
    fn is_everything(&self) -> bool {
        self.name.is_none() && self.sel.is_empty()
    }

    fn matches(&self, obj: &Value) -> bool {
        if let Some(n) = &self.name
            && objects::name(obj) != Some(n.as_str())
        {
            return false;
        }
        self.sel.matches(obj)
    }

    /// Whether stored bytes match, looking only at what selectors can see.
    fn matches_stored(&self, s: &Stored) -> Option<bool> {
        if self.is_everything() {
            return Some(true);
        }
        if self.sel.needs_whole_object() {
            return Some(self.matches(&objects::decode_at(&s.bytes, s.mod_revision).ok()?));
        }
        Some(self.matches(&objects::selectable(&s.bytes)?))
    }

    /// [`translate`] without decoding the objects: the event type, the
    /// version to send and its resourceVersion, or `Some(None)` when nothing
    /// is sent; `None` when the bytes need decoding.
    #[allow(clippy::type_complexity)]
    fn transition<'e>(
        &self,
        ev: &'e CachedEvent,
    ) -> Option<Option<(&'static str, &'e Stored, i64)>> {
        match &ev.object {
            Some(new) => {
                let old_match = match ev.prev.as_deref() {
                    Some(p) => self.matches_stored(p).unwrap_or(false),
                    None => false,
                };
                let kind = match (old_match, self.matches_stored(new)?) {
                    (false, true) => "ADDED",
                    (true, true) => "MODIFIED",
                    (true, false) => "DELETED",
                    (false, false) => return Some(None),
                };
                Some(Some((kind, new, new.mod_revision)))
            }
            None => {
                let Some(prev) = ev.prev.as_deref() else {
                    return Some(None);
                };
                Some(
                    self.matches_stored(prev)?
                        .then_some(("DELETED", prev, ev.revision)),
                )
            }
        }
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
        // Capped so the deadline stays representable (`Instant + Duration`
        // panics on overflow): ten years is "until the client goes".
        Some(t) if t > 0 => Duration::from_secs(t.min(MAX_WATCH_TIMEOUT) as u64),
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
    // Every version of a resource shares one storage prefix (group/plural).
    let storage_prefix = prefix;
    let sub = match rest
        .cache
        .subscribe(&storage_prefix, if send_initial { None } else { from })
        .await
    {
        Ok(sub) => sub,
        Err(e) => return watch_error_stream(params, rt, cache_error(e)),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let mut em = Emitter {
        rt,
        shape: params.shape,
        include: params.include,
        format: params.format,
        tx,
        sent_columns: false,
    };
    let filter = Filter {
        name: name_filter,
        sel,
    };
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last_rev = sub.revision;
        let initial = from.is_none() || send_initial;
        let mut feed = sub.feed;
        for ev in sub.replay {
            if !em.send_event(&ev, &filter, &storage_prefix).await {
                return;
            }
        }
        if initial && send_initial && bookmarks {
            let bm = json!({"kind": rt.kind, "apiVersion": rt.api_version(),
                "metadata": {"resourceVersion": last_rev.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}}});
            if !em.send("BOOKMARK", bm).await {
                return;
            }
        }
        let mut bookmark =
            tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return,
                _ = em.tx.closed() => return,
                _ = bookmark.tick(), if bookmarks => {
                    if let Some(rv) = feed.progress(last_rev) {
                        last_rev = rv;
                    }
                    let bm = json!({"kind": rt.kind, "apiVersion": rt.api_version(), "metadata": {"resourceVersion": last_rev.to_string()}});
                    if !em.send("BOOKMARK", bm).await { return; }
                }
                batch = feed.next(last_rev) => {
                    let (events, up_to) = match batch {
                        Ok(b) => b,
                        // Fell behind this resource's window, or the cache reset: end
                        // the watch; the client resumes from its last resourceVersion
                        // (and relists on 410), as upstream ends a too-slow watcher.
                        Err(_) => return,
                    };
                    for ev in events {
                        if ev.revision <= last_rev {
                            continue;
                        }
                        if !em.send_event(&ev, &filter, &storage_prefix).await { return; }
                    }
                    last_rev = last_rev.max(up_to);
                }
            }
        }
    });
    Ok(rx)
}

/// A cached event as this watcher sees it: selector transitions turn updates
/// into ADDED or DELETED, as upstream's watch filtering does.
fn translate(
    ev: &CachedEvent,
    prefix: &str,
    matches: &impl Fn(&Value) -> bool,
) -> Option<(&'static str, Value)> {
    if !ev.key.starts_with(prefix) {
        return None;
    }
    let decode = |s: &Stored| objects::decode_at(&s.bytes, s.mod_revision).ok();
    match &ev.object {
        Some(new) => {
            let new = decode(new)?;
            let old_match = ev
                .prev
                .as_deref()
                .and_then(decode)
                .is_some_and(|o| matches(&o));
            match (old_match, matches(&new)) {
                (false, true) => Some(("ADDED", new)),
                (true, true) => Some(("MODIFIED", new)),
                (true, false) => Some(("DELETED", new)),
                (false, false) => None,
            }
        }
        None => {
            let prev = ev.prev.as_deref()?;
            let old = objects::decode_at(&prev.bytes, ev.revision).ok()?;
            matches(&old).then_some(("DELETED", old))
        }
    }
}

/// A watch that answers with one ERROR event (upstream's way to report a
/// too-old resourceVersion on a watch).
fn watch_error_stream(
    params: WatchParams,
    rt: &'static ResourceType,
    status: Value,
) -> ApiResult<mpsc::Receiver<Bytes>> {
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let mut em = Emitter {
        rt,
        shape: params.shape,
        include: params.include,
        format: params.format,
        tx,
        sent_columns: false,
    };
    tokio::spawn(async move {
        let _ = em.send("ERROR", status).await;
    });
    Ok(rx)
}

fn cache_error(e: CacheError) -> Value {
    match e {
        CacheError::TooOld { requested, oldest } => {
            ApiError::gone(format!("too old resource version: {requested} ({oldest})")).to_status()
        }
        CacheError::NotReady(rv) => {
            ApiError::timeout(format!("Too large resource version: {rv}")).to_status()
        }
        CacheError::Reset => ApiError::gone("the watch cache was reset; relist").to_status(),
        CacheError::Store(e) => ApiError::from(e).to_status(),
    }
}

#[cfg(test)]
mod tests {
    use berth_api::protobuf::{
        self, MAGIC, ProtobufError, decode_watch_event, encode_watch_event, encode_watch_frame,
        split_watch_frames,
    };
    use serde_json::json;

    #[test]
    fn protobuf_watch_frames_hold_raw_events_around_envelopes() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "default", "resourceVersion": "7"},
            "data": {"a": "b"}});
        let event = encode_watch_event("ADDED", &cm).unwrap();
        // A raw WatchEvent (no magic): field 1 the type, field 2 a RawExtension whose
        // bytes are the object's whole envelope.
        assert!(!event.starts_with(MAGIC));
        assert_eq!(&event[..7], b"\x0a\x05ADDED");
        let envelope = protobuf::encode(&cm).unwrap();
        assert!(
            event
                .windows(envelope.len())
                .any(|w| w == envelope.as_slice())
        );
        let (kind, obj) = decode_watch_event(&event).unwrap();
        assert_eq!(kind, "ADDED");
        assert_eq!(obj, cm);

        let frame = encode_watch_frame("DELETED", &cm).unwrap();
        assert_eq!(
            u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize,
            frame.len() - 4
        );
        let mut body = frame.clone();
        body.extend_from_slice(&encode_watch_frame("MODIFIED", &cm).unwrap());
        let frames = split_watch_frames(&body).unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0], &frame[4..]);
        assert_eq!(decode_watch_event(frames[1]).unwrap().0, "MODIFIED");
        assert_eq!(
            split_watch_frames(&body[..body.len() - 1]).unwrap_err(),
            ProtobufError::Truncated
        );
    }

    /// The undecoded path picks the same event type and object as decoding
    /// every version would, for each selector transition.
    #[test]
    fn raw_transitions_agree_with_decoded_ones() {
        use super::{Filter, translate};
        use crate::objects;
        use crate::request::Query;
        use crate::rest::Selectors;
        use crate::watchcache::{CachedEvent, Stored};
        use std::sync::Arc;
        let rt = berth_api::registry::lookup("", "v1", "pods").unwrap();
        let pod = |node: &str, app: &str, rv: i64| {
            let obj = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "default", "labels": {"app": app}},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}});
            Arc::new(Stored {
                bytes: objects::encode(&obj).unwrap(),
                mod_revision: rv,
            })
        };
        let ev = |prev: Option<Arc<Stored>>, object: Option<Arc<Stored>>| CachedEvent {
            revision: 9,
            key: "/registry/pods/default/p".into(),
            object,
            prev,
            at: std::time::Instant::now(),
        };
        let events = [
            ev(None, Some(pod("", "a", 5))),
            ev(None, Some(pod("n1", "a", 5))),
            ev(Some(pod("", "a", 5)), Some(pod("n1", "a", 9))),
            ev(Some(pod("n1", "a", 5)), Some(pod("n1", "b", 9))),
            ev(Some(pod("n1", "b", 5)), Some(pod("n1", "a", 9))),
            ev(Some(pod("n1", "a", 5)), None),
            ev(Some(pod("", "a", 5)), None),
        ];
        for query in [
            "",
            "fieldSelector=spec.nodeName!%3D",
            "labelSelector=app%3Da",
            "fieldSelector=spec.nodeName%3Dn1&labelSelector=app%21%3Db",
        ] {
            let q = Query::parse(Some(query));
            let filter = Filter {
                name: None,
                sel: Selectors::from_query(rt, &q).unwrap(),
            };
            for (i, e) in events.iter().enumerate() {
                let decoded = translate(e, "/registry/pods/", &|o: &serde_json::Value| {
                    filter.matches(o)
                });
                let raw = filter
                    .transition(e)
                    .expect("pods need no decoding")
                    .map(|(kind, s, rv)| (kind, objects::decode_at(&s.bytes, rv).unwrap()));
                assert_eq!(raw, decoded, "{query:?} event {i}");
            }
        }
    }

    #[test]
    fn status_and_list_kinds_encode() {
        let status = json!({"apiVersion": "v1", "kind": "Status", "metadata": {},
            "status": "Failure", "message": "deployments.apps \"x\" not found",
            "reason": "NotFound",
            "details": {"name": "x", "group": "apps", "kind": "deployments"},
            "code": 404});
        let back = protobuf::decode(&protobuf::encode(&status).unwrap()).unwrap();
        assert_eq!(back, status);
        let list = json!({"apiVersion": "apps/v1", "kind": "DeploymentList",
            "metadata": {"resourceVersion": "12"},
            "items": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}}]});
        let back = protobuf::decode(&protobuf::encode(&list).unwrap()).unwrap();
        assert_eq!(back["metadata"]["resourceVersion"], "12");
        assert_eq!(back["items"][0]["metadata"]["name"], "a");
        let pom = json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
            "metadata": {"resourceVersion": "3"},
            "items": [{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                "metadata": {"name": "a", "labels": {"x": "y"}}}]});
        let back = protobuf::decode(&protobuf::encode(&pom).unwrap()).unwrap();
        assert_eq!(back["items"][0]["metadata"]["labels"]["x"], "y");
    }
}
