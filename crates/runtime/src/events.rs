//! Recording core/v1 Events with upstream's semantics (client-go `tools/record`).
//!
//! ```no_run
//! # async fn demo(client: kube::Client, pod: k8s_openapi::api::core::v1::Pod) {
//! use berth_runtime::events::{EventSource, EventType, Recorder};
//! let recorder = Recorder::new(client, EventSource::new("berth-scheduler", ""));
//! recorder.event(&pod, EventType::Normal, "Scheduled", "Successfully assigned default/web to node-1");
//! recorder.eventf(&pod, EventType::Warning, "FailedScheduling", format_args!("0/{} nodes are available", 3));
//! # }
//! ```
//!
//! [`Recorder::event`] only builds the Event and queues it (bounded; a full
//! queue drops and counts the event), so it never blocks or fails. One
//! background task per recorder runs every event through the [`Correlator`]
//! (aggregation, repeat counting, spam filter) and writes it: a new Event is
//! created, a repeat PATCHes `count`/`lastTimestamp` of the existing one
//! (re-created when the patch finds it gone), and transport failures are
//! retried up to 12 times, 10 s apart (the first wait randomised).

mod correlator;
mod sink;

pub use correlator::{
    AGGREGATE_MESSAGE_PREFIX, Aggregator, Correlated, Correlator, CorrelatorOptions,
    DEFAULT_AGGREGATE_INTERVAL, DEFAULT_AGGREGATE_MAX_EVENTS, DEFAULT_LRU_CACHE_SIZE,
    DEFAULT_SPAM_BURST, DEFAULT_SPAM_QPS, EventLogger, Observation, SpamFilter, TokenBucket,
    aggregate_key, aggregate_message, event_key, generate_event_name, increment_patch,
    is_dns1123_subdomain, spam_key,
};
pub use sink::{EventSink, KubeSink};

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, error};

use crate::clock::{Clock, RealClock};
use crate::error::Error;

/// Events queued but not yet written before new ones are dropped (upstream's `maxQueuedEvents`).
pub const DEFAULT_QUEUE_CAPACITY: usize = 1000;
/// Attempts to write one event (upstream's `maxTriesPerEvent`).
pub const DEFAULT_MAX_TRIES: u32 = 12;
/// Wait between attempts (upstream's `defaultSleepDuration`).
pub const DEFAULT_RETRY_INTERVAL: Duration = Duration::from_secs(10);

/// The two event types the API accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who reports: the component (e.g. `kubelet`, `default-scheduler`) and the
/// host it runs on (may be empty). Also written as reportingComponent/Instance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventSource {
    pub component: String,
    pub host: String,
}

impl EventSource {
    pub fn new(component: impl Into<String>, host: impl Into<String>) -> Self {
        EventSource {
            component: component.into(),
            host: host.into(),
        }
    }
}

/// Markers that let one [`Regarding`] bound accept both API objects and
/// plain references (the two blanket impls could otherwise overlap).
pub mod regarding {
    /// Any kube-rs resource with a static type.
    pub enum Resource {}
    /// An [`ObjectReference`](k8s_openapi::api::core::v1::ObjectReference).
    pub enum Reference {}
}

/// What an event is about: a typed API object or an [`ObjectReference`].
/// `M` is inferred; callers never name it.
pub trait Regarding<M> {
    fn object_reference(&self) -> ObjectReference;
}

impl<K: kube::Resource<DynamicType = ()>> Regarding<regarding::Resource> for K {
    /// Upstream's `GetReference`: kind, apiVersion, name, namespace, uid, resourceVersion.
    fn object_reference(&self) -> ObjectReference {
        let meta = self.meta();
        ObjectReference {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(K::kind(&()).into_owned()),
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            field_path: None,
        }
    }
}

impl Regarding<regarding::Reference> for ObjectReference {
    fn object_reference(&self) -> ObjectReference {
        self.clone()
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// Builds the Event for one occurrence (upstream's `makeEvent` plus source
/// and reporting fields): named `<object>.<unix nanos, hex>`, in the object's
/// namespace or `default` for cluster-scoped objects.
pub fn make_event(
    involved: ObjectReference,
    source: &EventSource,
    now: Timestamp,
    type_: EventType,
    reason: &str,
    message: String,
    annotations: Option<BTreeMap<String, String>>,
) -> Event {
    let namespace = involved
        .namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_string());
    let name = generate_event_name(involved.name.as_deref().unwrap_or_default(), now);
    Event {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace),
            annotations,
            ..Default::default()
        },
        involved_object: involved,
        reason: Some(reason.to_string()),
        message: Some(message),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        type_: Some(type_.as_str().to_string()),
        source: Some(k8s_openapi::api::core::v1::EventSource {
            component: non_empty(&source.component),
            host: non_empty(&source.host),
        }),
        reporting_component: non_empty(&source.component),
        reporting_instance: non_empty(&source.host),
        ..Default::default()
    }
}

/// Settings of a [`Recorder`]; `Default` is upstream's.
#[derive(Clone)]
pub struct RecorderOptions {
    pub clock: Arc<dyn Clock>,
    pub correlator: CorrelatorOptions,
    pub queue_capacity: usize,
    pub max_tries: u32,
    pub retry_interval: Duration,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        RecorderOptions {
            clock: Arc::new(RealClock),
            correlator: CorrelatorOptions::default(),
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            max_tries: DEFAULT_MAX_TRIES,
            retry_interval: DEFAULT_RETRY_INTERVAL,
        }
    }
}

enum Item {
    Event(Box<Event>),
    Flush(oneshot::Sender<()>),
}

struct Shared {
    tx: mpsc::Sender<Item>,
    source: EventSource,
    clock: Arc<dyn Clock>,
    dropped: AtomicU64,
}

/// Records Events about objects; cheap to clone, clones share one queue.
/// The background writer stops once every clone is dropped and the queue is drained.
#[derive(Clone)]
pub struct Recorder {
    shared: Arc<Shared>,
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("source", &self.shared.source)
            .field("dropped", &self.dropped_events())
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder writing through `client` with upstream's defaults.
    ///
    /// Must be called within a Tokio runtime (it spawns the writer task).
    pub fn new(client: kube::Client, source: EventSource) -> Self {
        Self::with_options(client, source, RecorderOptions::default())
    }

    pub fn with_options(
        client: kube::Client,
        source: EventSource,
        options: RecorderOptions,
    ) -> Self {
        Self::with_sink(KubeSink::new(client), source, options)
    }

    /// A recorder writing to any [`EventSink`] (tests use a fake).
    pub fn with_sink<S: EventSink>(sink: S, source: EventSource, options: RecorderOptions) -> Self {
        let (tx, rx) = mpsc::channel(options.queue_capacity.max(1));
        let correlator = Correlator::new(options.clock.clone(), &options.correlator);
        let retry = Retry {
            max_tries: options.max_tries.max(1),
            interval: options.retry_interval,
        };
        tokio::spawn(run_writer(sink, rx, correlator, retry));
        Recorder {
            shared: Arc::new(Shared {
                tx,
                source,
                clock: options.clock,
                dropped: AtomicU64::new(0),
            }),
        }
    }

    pub fn source(&self) -> &EventSource {
        &self.shared.source
    }

    /// Records an event about `regarding`. Never blocks, never fails.
    pub fn event<M, R: Regarding<M>>(
        &self,
        regarding: &R,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.generate(
            regarding.object_reference(),
            None,
            type_,
            reason,
            message.into(),
        );
    }

    /// [`Recorder::event`] with a message from `format_args!`.
    pub fn eventf<M, R: Regarding<M>>(
        &self,
        regarding: &R,
        type_: EventType,
        reason: &str,
        message: fmt::Arguments<'_>,
    ) {
        self.event(regarding, type_, reason, message.to_string());
    }

    /// [`Recorder::event`] with annotations on the Event object.
    pub fn annotated_event<M, R: Regarding<M>>(
        &self,
        regarding: &R,
        annotations: BTreeMap<String, String>,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.generate(
            regarding.object_reference(),
            Some(annotations),
            type_,
            reason,
            message.into(),
        );
    }

    /// Events dropped because the queue was full (or the writer had stopped).
    pub fn dropped_events(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Waits until every event queued before this call has been written (or
    /// given up on). For tests and orderly shutdown.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.shared.tx.send(Item::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    fn generate(
        &self,
        involved: ObjectReference,
        annotations: Option<BTreeMap<String, String>>,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        let event = make_event(
            involved,
            &self.shared.source,
            self.shared.clock.now(),
            type_,
            reason,
            message,
            annotations,
        );
        let o = &event.involved_object;
        // Upstream's structured event log.
        debug!(
            object = %format_args!("{}/{}", o.namespace.as_deref().unwrap_or_default(), o.name.as_deref().unwrap_or_default()),
            kind = o.kind.as_deref().unwrap_or_default(),
            field_path = o.field_path.as_deref().unwrap_or_default(),
            r#type = %type_,
            reason,
            message = event.message.as_deref().unwrap_or_default(),
            "Event occurred"
        );
        match self.shared.tx.try_send(Item::Event(Box::new(event))) {
            Ok(()) => {}
            Err(e) => {
                let dropped = self.shared.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                let why = match e {
                    mpsc::error::TrySendError::Full(_) => "too many queued events",
                    mpsc::error::TrySendError::Closed(_) => "event writer has stopped",
                };
                error!(
                    reason,
                    dropped, "Unable to record event: {why}, dropped event"
                );
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Retry {
    max_tries: u32,
    interval: Duration,
}

async fn run_writer<S: EventSink>(
    sink: S,
    mut rx: mpsc::Receiver<Item>,
    mut correlator: Correlator,
    retry: Retry,
) {
    while let Some(item) = rx.recv().await {
        match item {
            Item::Event(event) => record_to_sink(&sink, &mut correlator, *event, retry).await,
            Item::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
    debug!("event writer stopped: every recorder was dropped");
}

/// Correlates one event and writes it, retrying transport failures
/// (upstream's `recordToSink`).
async fn record_to_sink<S: EventSink>(
    sink: &S,
    correlator: &mut Correlator,
    event: Event,
    retry: Retry,
) {
    let Some(mut c) = correlator.correlate(event) else {
        debug!("event dropped by the spam filter");
        return;
    };
    let mut tries = 0;
    loop {
        if record_event(sink, correlator, &mut c).await {
            return;
        }
        tries += 1;
        if tries >= retry.max_tries {
            error!(
                name = c.event.metadata.name.as_deref().unwrap_or_default(),
                reason = c.event.reason.as_deref().unwrap_or_default(),
                "Unable to write event (retry limit exceeded!)"
            );
            return;
        }
        // Randomise the first wait so clients do not retry in lockstep after
        // an API server outage.
        let delay = if tries == 1 {
            retry.interval.mul_f64(rand::random::<f64>())
        } else {
            retry.interval
        };
        tokio::time::sleep(delay).await;
    }
}

/// One attempt; true when the event is written or not worth retrying
/// (upstream's `recordEvent`).
async fn record_event<S: EventSink>(
    sink: &S,
    correlator: &mut Correlator,
    c: &mut Correlated,
) -> bool {
    let result = match &c.patch {
        Some(patch) => match sink.patch(&c.event, patch).await {
            // The Event to patch has gone (deleted or expired): create it again.
            Err(e) if e.is_not_found() => create(sink, &mut c.event).await,
            other => other,
        },
        None => create(sink, &mut c.event).await,
    };
    let name = c.event.metadata.name.as_deref().unwrap_or_default();
    match result {
        Ok(stored) => {
            correlator.update_state(&c.key, &stored);
            true
        }
        Err(e) if e.is_retryable() => {
            error!(name, error = %e, "Unable to write event (may retry after sleeping)");
            false
        }
        Err(e) => {
            let expected = matches!(&e, Error::Status { code: 409, .. })
                || matches!(&e, Error::Status { causes, .. } if causes.iter().any(|c| c == "NamespaceTerminating"));
            if expected {
                debug!(name, error = %e, "Server rejected event (will not retry!)");
            } else {
                error!(name, error = %e, "Server rejected event (will not retry!)");
            }
            true
        }
    }
}

async fn create<S: EventSink>(sink: &S, event: &mut Event) -> Result<Event, Error> {
    event.metadata.resource_version = None;
    sink.create(event).await
}

#[cfg(test)]
mod tests;
