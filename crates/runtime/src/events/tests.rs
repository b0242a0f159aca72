//! The recorder's I/O layer against a fake sink that behaves like the API
//! server's events endpoint (create → 409 on a taken name, patch → 404 on a
//! missing one), with scripted failures.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::*;
use crate::clock::FakeClock;

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Create { name: String, count: i32 },
    Patch { name: String, body: Value },
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    stored: HashMap<(String, String), Event>,
    failures: VecDeque<Error>,
    next_rv: u64,
}

#[derive(Clone, Default)]
struct FakeSink(Arc<Mutex<State>>);

impl FakeSink {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }
    fn stored(&self) -> Vec<Event> {
        let mut v: Vec<Event> = self.state().stored.values().cloned().collect();
        v.sort_by_key(|e| e.metadata.name.clone());
        v
    }
    fn fail_next(&self, e: Error) {
        self.state().failures.push_back(e);
    }
}

fn key(e: &Event) -> (String, String) {
    (
        e.metadata.namespace.clone().unwrap_or_default(),
        e.metadata.name.clone().unwrap_or_default(),
    )
}

fn status(code: u16, reason: &str) -> Error {
    Error::Status {
        code,
        reason: reason.into(),
        message: String::new(),
        causes: vec![],
    }
}

fn transport() -> Error {
    Error::Transport(Box::new(kube::Error::ReadEvents(std::io::Error::other(
        "connection refused",
    ))))
}

impl EventSink for FakeSink {
    async fn create(&self, event: &Event) -> Result<Event, Error> {
        let mut st = self.state();
        st.calls.push(Call::Create {
            name: event.metadata.name.clone().unwrap_or_default(),
            count: event.count.unwrap_or(0),
        });
        if let Some(e) = st.failures.pop_front() {
            return Err(e);
        }
        if st.stored.contains_key(&key(event)) {
            return Err(status(409, "AlreadyExists"));
        }
        st.next_rv += 1;
        let mut stored = event.clone();
        stored.metadata.resource_version = Some(st.next_rv.to_string());
        st.stored.insert(key(event), stored.clone());
        Ok(stored)
    }

    async fn patch(&self, event: &Event, patch: &Value) -> Result<Event, Error> {
        let mut st = self.state();
        st.calls.push(Call::Patch {
            name: event.metadata.name.clone().unwrap_or_default(),
            body: patch.clone(),
        });
        if let Some(e) = st.failures.pop_front() {
            return Err(e);
        }
        st.next_rv += 1;
        let rv = st.next_rv.to_string();
        let Some(stored) = st.stored.get_mut(&key(event)) else {
            return Err(status(404, "NotFound"));
        };
        let mut v = serde_json::to_value(&*stored).map_err(|_| status(500, "Internal"))?;
        if let (Some(obj), Some(p)) = (v.as_object_mut(), patch.as_object()) {
            for (k, val) in p {
                obj.insert(k.clone(), val.clone());
            }
        }
        *stored = serde_json::from_value(v).map_err(|_| status(500, "Internal"))?;
        stored.metadata.resource_version = Some(rv);
        Ok(stored.clone())
    }
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns1", "uid": format!("uid-{name}"), "resourceVersion": "42"}
    }))
    .unwrap_or_default()
}

fn recorder(sink: &FakeSink, clock: &Arc<FakeClock>) -> Recorder {
    Recorder::with_sink(
        sink.clone(),
        EventSource::new("kubelet", "node-1"),
        RecorderOptions {
            clock: clock.clone(),
            retry_interval: Duration::from_millis(1),
            ..Default::default()
        },
    )
}

fn start() -> Timestamp {
    Timestamp::from_second(1_767_225_600).unwrap_or(Timestamp::UNIX_EPOCH)
}

#[test]
fn make_event_sets_what_kubectl_shows() {
    let e = make_event(
        pod("web").object_reference(),
        &EventSource::new("kubelet", "node-1"),
        start(),
        EventType::Warning,
        "BackOff",
        "Back-off restarting failed container".into(),
        None,
    );
    let v = serde_json::to_value(&e).unwrap_or_default();
    assert_eq!(
        v,
        json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "web.18867251edfa0000", "namespace": "ns1"},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "web", "namespace": "ns1",
                               "uid": "uid-web", "resourceVersion": "42"},
            "reason": "BackOff",
            "message": "Back-off restarting failed container",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:00:00Z",
            "count": 1,
            "type": "Warning",
            "reportingComponent": "kubelet",
            "reportingInstance": "node-1",
        })
    );
}

#[test]
fn cluster_scoped_objects_report_into_default() {
    let node: Node =
        serde_json::from_value(json!({"metadata": {"name": "node-1"}})).unwrap_or_default();
    let e = make_event(
        node.object_reference(),
        &EventSource::new("berth-controller", ""),
        start(),
        EventType::Normal,
        "RegisteredNode",
        "Node node-1 event: Registered Node node-1 in Controller".into(),
        None,
    );
    assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(e.involved_object.namespace, None);
    assert_eq!(e.involved_object.kind.as_deref(), Some("Node"));
    // An empty host is omitted rather than sent as "".
    assert_eq!(e.reporting_instance, None);
    assert_eq!(e.source.and_then(|s| s.host), None);
}

#[tokio::test]
async fn repeats_patch_count_and_last_timestamp() {
    let sink = FakeSink::default();
    let clock = Arc::new(FakeClock::new(start()));
    let r = recorder(&sink, &clock);
    let p = pod("web");
    for _ in 0..3 {
        r.event(
            &p,
            EventType::Normal,
            "Pulled",
            "Container image already present",
        );
        clock.step(Duration::from_secs(2));
    }
    r.flush().await;

    let calls = sink.calls();
    let name = "web.18867251edfa0000".to_string();
    assert_eq!(
        calls,
        vec![
            Call::Create {
                name: name.clone(),
                count: 1
            },
            Call::Patch {
                name: name.clone(),
                body: json!({"count": 2, "lastTimestamp": "2026-01-01T00:00:02Z",
                             "message": "Container image already present"})
            },
            Call::Patch {
                name: name.clone(),
                body: json!({"count": 3, "lastTimestamp": "2026-01-01T00:00:04Z",
                             "message": "Container image already present"})
            },
        ]
    );
    let stored = sink.stored();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].count, Some(3));
    assert_eq!(stored[0].first_timestamp, Some(Time(start())));
    assert_eq!(r.dropped_events(), 0);
}

#[tokio::test]
async fn patch_of_a_deleted_event_recreates_it() {
    let sink = FakeSink::default();
    let clock = Arc::new(FakeClock::new(start()));
    let r = recorder(&sink, &clock);
    let p = pod("web");
    r.event(&p, EventType::Normal, "Started", "Started container app");
    r.flush().await;
    sink.state().stored.clear();
    clock.step(Duration::from_secs(1));
    r.event(&p, EventType::Normal, "Started", "Started container app");
    r.flush().await;

    let calls = sink.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(matches!(&calls[1], Call::Patch { .. }));
    // Upstream re-creates under the remembered name with the running count.
    assert_eq!(
        calls[2],
        Call::Create {
            name: "web.18867251edfa0000".into(),
            count: 2
        }
    );
    assert_eq!(sink.stored()[0].count, Some(2));
}

#[tokio::test]
async fn transport_errors_are_retried_status_errors_are_not() {
    let sink = FakeSink::default();
    let clock = Arc::new(FakeClock::new(start()));
    let r = recorder(&sink, &clock);

    // (injected failures, expected attempts, stored afterwards)
    let cases: Vec<(Vec<Error>, usize, bool)> = vec![
        (vec![transport(), transport()], 3, true),
        (vec![status(422, "Invalid")], 1, false),
        (vec![status(403, "Forbidden")], 1, false),
        ((0..12).map(|_| transport()).collect(), 12, false),
    ];
    for (i, (failures, attempts, stored)) in cases.into_iter().enumerate() {
        {
            let mut st = sink.state();
            st.calls.clear();
            st.stored.clear();
        }
        for f in failures {
            sink.fail_next(f);
        }
        // A different object per case so earlier cases do not correlate.
        r.event(&pod(&format!("p{i}")), EventType::Warning, "Failed", "boom");
        r.flush().await;
        assert_eq!(sink.calls().len(), attempts, "case {i}");
        assert_eq!(!sink.stored().is_empty(), stored, "case {i}");
        sink.state().failures.clear();
    }
}

#[tokio::test]
async fn full_queue_drops_and_counts() {
    let sink = FakeSink::default();
    let clock = Arc::new(FakeClock::new(start()));
    let r = Recorder::with_sink(
        sink.clone(),
        EventSource::new("kubelet", "node-1"),
        RecorderOptions {
            clock: clock.clone(),
            queue_capacity: 2,
            ..Default::default()
        },
    );
    // The writer cannot run between these calls (current-thread runtime, no
    // await), so exactly two fit.
    for i in 0..5 {
        r.event(&pod("web"), EventType::Normal, "R", format!("m{i}"));
        // Distinct names: events named in the same nanosecond would collide.
        clock.step(Duration::from_millis(1));
    }
    assert_eq!(r.dropped_events(), 3);
    r.flush().await;
    assert_eq!(sink.stored().len(), 2);
}

#[tokio::test]
async fn similar_events_aggregate_through_the_writer() {
    let sink = FakeSink::default();
    let clock = Arc::new(FakeClock::new(start()));
    let r = recorder(&sink, &clock);
    let p = pod("web");
    for i in 0..12 {
        r.eventf(
            &p,
            EventType::Warning,
            "FailedMount",
            format_args!("volume v{i} not found"),
        );
        clock.step(Duration::from_secs(1));
    }
    r.flush().await;

    let stored = sink.stored();
    let (aggregated, single): (Vec<_>, Vec<_>) = stored.iter().partition(|e| {
        e.message
            .as_deref()
            .unwrap_or_default()
            .starts_with(AGGREGATE_MESSAGE_PREFIX)
    });
    assert_eq!(single.len(), 9);
    assert_eq!(aggregated.len(), 1);
    let agg = aggregated[0];
    assert_eq!(agg.count, Some(3));
    assert_eq!(
        agg.message.as_deref(),
        Some("(combined from similar events): volume v11 not found")
    );
    assert_eq!(agg.reason.as_deref(), Some("FailedMount"));
    assert_eq!(agg.type_.as_deref(), Some("Warning"));
    assert_eq!(agg.metadata.namespace.as_deref(), Some("ns1"));
    let creates = sink
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::Create { .. }))
        .count();
    assert_eq!(creates, 10);
}

#[tokio::test]
async fn object_references_and_annotations() {
    let sink = FakeSink::default();
    let clock = Arc::new(FakeClock::new(start()));
    let r = recorder(&sink, &clock);
    let reference = ObjectReference {
        kind: Some("Pod".into()),
        api_version: Some("v1".into()),
        name: Some("web".into()),
        namespace: Some("ns1".into()),
        field_path: Some("spec.containers{app}".into()),
        ..Default::default()
    };
    let annotations = BTreeMap::from([("berth.dev/trace".to_string(), "abc".to_string())]);
    r.annotated_event(
        &reference,
        annotations.clone(),
        EventType::Normal,
        "Created",
        "Created container app",
    );
    r.flush().await;
    let stored = sink.stored();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].involved_object, reference);
    assert_eq!(stored[0].metadata.annotations.as_ref(), Some(&annotations));
}

#[tokio::test]
async fn writer_stops_when_recorders_are_dropped() {
    let sink = FakeSink::default();
    let clock = Arc::new(FakeClock::new(start()));
    let r = recorder(&sink, &clock);
    let weak = Arc::downgrade(&sink.0);
    drop(sink);
    r.event(&pod("web"), EventType::Normal, "R", "m");
    drop(r);
    // The writer drains the queue, then drops its sink.
    for _ in 0..100 {
        if weak.upgrade().is_none() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the writer task kept running after every recorder was dropped");
}
