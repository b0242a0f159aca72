//! The pure half of the recorder: upstream's `EventCorrelator`
//! (client-go `tools/record/events_cache.go`), with no I/O.
//!
//! For every event, in order:
//! 1. [`Aggregator`]: more than `max_events - 1` distinct messages for the same
//!    source/object/type/reason, each within `max_interval` of the previous
//!    one, turn into one event whose message is prefixed
//!    `(combined from similar events): `.
//! 2. [`EventLogger`]: an event (or aggregate) seen before becomes an increment
//!    of the existing Event: same name, `count + 1`, a new `lastTimestamp`, and
//!    a patch for the server.
//! 3. [`SpamFilter`]: a token bucket per source+object drops the excess.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value};

use crate::clock::Clock;
use crate::lru::Lru;

/// Upstream's defaults (`events_cache.go`).
pub const DEFAULT_LRU_CACHE_SIZE: usize = 4096;
pub const DEFAULT_AGGREGATE_MAX_EVENTS: usize = 10;
pub const DEFAULT_AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
pub const DEFAULT_SPAM_BURST: u32 = 25;
/// One new event every five minutes per source+object once the burst is spent.
pub const DEFAULT_SPAM_QPS: f64 = 1.0 / 300.0;

/// The prefix of an aggregated event's message.
pub const AGGREGATE_MESSAGE_PREFIX: &str = "(combined from similar events): ";

/// Tunables of the correlator (upstream's `CorrelatorOptions`).
#[derive(Debug, Clone, PartialEq)]
pub struct CorrelatorOptions {
    /// Entries in each of the three caches.
    pub lru_cache_size: usize,
    /// Tokens per source+object bucket.
    pub spam_burst: u32,
    /// Bucket refill rate, tokens per second.
    pub spam_qps: f64,
    /// Distinct messages of similar events before they are aggregated.
    pub aggregate_max_events: usize,
    /// A similar event later than this after the previous one starts afresh.
    pub aggregate_interval: Duration,
}

impl Default for CorrelatorOptions {
    fn default() -> Self {
        CorrelatorOptions {
            lru_cache_size: DEFAULT_LRU_CACHE_SIZE,
            spam_burst: DEFAULT_SPAM_BURST,
            spam_qps: DEFAULT_SPAM_QPS,
            aggregate_max_events: DEFAULT_AGGREGATE_MAX_EVENTS,
            aggregate_interval: DEFAULT_AGGREGATE_INTERVAL,
        }
    }
}

fn s(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("")
}

fn source_fields(e: &Event) -> (&str, &str) {
    match &e.source {
        Some(src) => (s(&src.component), s(&src.host)),
        None => ("", ""),
    }
}

// Upstream joins key fields with no separator; NUL keeps distinct field
// splits ("ab"+"c" vs "a"+"bc") from colliding.
fn join(parts: &[&str]) -> String {
    parts.join("\0")
}

/// Identity of an exact repeat: source, involved object (with field path),
/// type, reason and message (upstream's `getEventKey`).
pub fn event_key(e: &Event) -> String {
    let (component, host) = source_fields(e);
    let o = &e.involved_object;
    join(&[
        component,
        host,
        s(&o.kind),
        s(&o.namespace),
        s(&o.name),
        s(&o.field_path),
        s(&o.uid),
        s(&o.api_version),
        s(&e.type_),
        s(&e.reason),
        s(&e.message),
    ])
}

/// Spam-filter bucket: source and involved object (and type), regardless of
/// reason or message (upstream's `getSpamKey`).
pub fn spam_key(e: &Event) -> String {
    let (component, host) = source_fields(e);
    let o = &e.involved_object;
    join(&[
        component,
        host,
        s(&o.kind),
        s(&o.namespace),
        s(&o.name),
        s(&o.uid),
        s(&o.api_version),
        s(&e.type_),
    ])
}

/// `(aggregate key, local key)`: similar events share the aggregate key and
/// differ by message (upstream's `EventAggregatorByReasonFunc`). The field
/// path is not part of it, but it is part of [`event_key`].
pub fn aggregate_key(e: &Event) -> (String, String) {
    let (component, host) = source_fields(e);
    let o = &e.involved_object;
    let key = join(&[
        component,
        host,
        s(&o.kind),
        s(&o.namespace),
        s(&o.name),
        s(&o.uid),
        s(&o.api_version),
        s(&e.type_),
        s(&e.reason),
        s(&e.reporting_component),
        s(&e.reporting_instance),
    ]);
    (key, s(&e.message).to_string())
}

/// The message of an aggregate event (upstream's `EventAggregatorByReasonMessageFunc`).
pub fn aggregate_message(e: &Event) -> String {
    format!("{AGGREGATE_MESSAGE_PREFIX}{}", s(&e.message))
}

/// `<name>.<unix nanos in hex>`, or a random UUID when that is not a valid
/// object name (upstream's `GenerateEventName`, kubernetes#127594).
pub fn generate_event_name(ref_name: &str, at: Timestamp) -> String {
    let name = format!("{ref_name}.{:x}", at.as_nanosecond());
    if is_dns1123_subdomain(&name) {
        name
    } else {
        uuid::Uuid::new_v4().to_string()
    }
}

/// RFC 1123 subdomain: at most 253 characters, dot-separated labels of
/// lowercase alphanumerics and '-', each starting and ending alphanumeric.
pub fn is_dns1123_subdomain(name: &str) -> bool {
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            let b = label.as_bytes();
            match (b.first(), b.last()) {
                (Some(&f), Some(&l)) => {
                    alnum(f) && alnum(l) && b.iter().all(|&c| alnum(c) || c == b'-')
                }
                _ => false,
            }
        })
}

/// A token bucket driven by passed-in time (golang.org/x/time/rate as used by
/// upstream's passive rate limiter): starts full, refills continuously.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    tokens: f64,
    last: Timestamp,
    burst: f64,
    qps: f64,
}

impl TokenBucket {
    pub fn new(burst: u32, qps: f64, now: Timestamp) -> Self {
        TokenBucket {
            tokens: f64::from(burst),
            last: now,
            burst: f64::from(burst),
            qps,
        }
    }

    /// Takes a token if one is available at `now`.
    pub fn try_accept(&mut self, now: Timestamp) -> bool {
        // A clock that stepped backwards refills nothing (as x/time/rate).
        let elapsed = now.duration_since(self.last).as_secs_f64().max(0.0);
        let available = (self.tokens + elapsed * self.qps).min(self.burst);
        if available >= 1.0 {
            self.tokens = available - 1.0;
            self.last = now;
            true
        } else {
            false
        }
    }
}

/// Limits how many events one source may emit about one object.
#[derive(Debug)]
pub struct SpamFilter {
    cache: Lru<String, TokenBucket>,
    burst: u32,
    qps: f64,
}

impl SpamFilter {
    pub fn new(cache_size: usize, burst: u32, qps: f64) -> Self {
        SpamFilter {
            cache: Lru::new(cache_size),
            burst,
            qps,
        }
    }

    /// True when the event must be dropped.
    pub fn filter(&mut self, e: &Event, now: Timestamp) -> bool {
        let (burst, qps) = (self.burst, self.qps);
        let bucket = self
            .cache
            .get_or_insert_with(&spam_key(e), || TokenBucket::new(burst, qps, now));
        !bucket.try_accept(now)
    }
}

#[derive(Debug)]
struct AggregateRecord {
    /// Distinct messages seen, oldest first. Upstream pops "any" member when
    /// full; popping the oldest makes the choice deterministic.
    local_keys: VecDeque<String>,
    last: Timestamp,
}

/// Collapses bursts of similar events into one aggregate event.
#[derive(Debug)]
pub struct Aggregator {
    cache: Lru<String, AggregateRecord>,
    max_events: usize,
    max_interval: Duration,
}

impl Aggregator {
    pub fn new(cache_size: usize, max_events: usize, max_interval: Duration) -> Self {
        Aggregator {
            cache: Lru::new(cache_size),
            max_events,
            max_interval,
        }
    }

    /// The event to record and its correlation key: the event itself keyed by
    /// [`event_key`], or a fresh aggregate event keyed by the aggregate key so
    /// later ones count into it.
    pub fn aggregate(&mut self, e: Event, now: Timestamp) -> (Event, String) {
        let (agg_key, local_key) = aggregate_key(&e);
        let max_interval = self.max_interval;
        let record = self.cache.get_or_insert_with(&agg_key, || AggregateRecord {
            local_keys: VecDeque::new(),
            last: now,
        });
        // A gap longer than the interval since the last similar event starts afresh.
        let gap = now.duration_since(record.last);
        if gap.is_positive() && gap.unsigned_abs() > max_interval {
            record.local_keys.clear();
        }
        if !record.local_keys.contains(&local_key) {
            record.local_keys.push_back(local_key);
        }
        record.last = now;

        if record.local_keys.len() < self.max_events {
            let key = event_key(&e);
            return (e, key);
        }
        // Keep the set below the threshold so every further new message aggregates too.
        record.local_keys.pop_front();

        let ns = e.metadata.namespace.clone();
        let at = Some(Time(now));
        let aggregate = Event {
            metadata: ObjectMeta {
                name: Some(generate_event_name(s(&e.involved_object.name), now)),
                namespace: ns,
                ..Default::default()
            },
            count: Some(1),
            first_timestamp: at.clone(),
            last_timestamp: at,
            message: Some(aggregate_message(&e)),
            // Upstream leaves the reporting fields off aggregates; they are
            // kept here so every Event from a recorder names its reporter.
            reporting_component: e.reporting_component.clone(),
            reporting_instance: e.reporting_instance.clone(),
            involved_object: e.involved_object,
            type_: e.type_,
            reason: e.reason,
            source: e.source,
            ..Default::default()
        };
        (aggregate, agg_key)
    }
}

/// What is remembered about an Event already sent (upstream's `eventLog`).
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub count: i32,
    pub first_timestamp: Option<Time>,
    pub name: Option<String>,
    pub resource_version: Option<String>,
}

impl Observation {
    fn of(e: &Event) -> Self {
        Observation {
            count: e.count.unwrap_or(0),
            first_timestamp: e.first_timestamp.clone(),
            name: e.metadata.name.clone(),
            resource_version: e.metadata.resource_version.clone(),
        }
    }
}

/// Counts repeats of identical events (upstream's `eventLogger`).
#[derive(Debug)]
pub struct EventLogger {
    cache: Lru<String, Observation>,
}

impl EventLogger {
    pub fn new(cache_size: usize) -> Self {
        EventLogger {
            cache: Lru::new(cache_size),
        }
    }

    /// Turns a repeat into an increment of the Event first recorded under
    /// `key`, returning the patch that applies it on the server.
    pub fn observe(&mut self, mut e: Event, key: &str) -> (Event, Option<Value>) {
        let key = key.to_string();
        let mut patch = None;
        if let Some(last) = self.cache.get_mut(&key).filter(|o| o.count > 0) {
            e.metadata.name = last.name.clone();
            e.metadata.resource_version = last.resource_version.clone();
            e.first_timestamp = last.first_timestamp.clone();
            e.count = Some(last.count.saturating_add(1));
            patch = Some(increment_patch(&e));
        }
        self.cache.insert(key, Observation::of(&e));
        (e, patch)
    }

    /// Remembers the server's copy (its name and resourceVersion) under `key`.
    pub fn update_state(&mut self, key: &str, e: &Event) {
        self.cache.insert(key.to_string(), Observation::of(e));
    }

    pub fn observation(&mut self, key: &str) -> Option<Observation> {
        self.cache.get_mut(&key.to_string()).cloned()
    }
}

/// The patch upstream computes as the two-way strategic merge patch between
/// the event and a copy without count, lastTimestamp and message: exactly
/// those three fields (empty ones are omitted, as `omitempty` drops them).
pub fn increment_patch(e: &Event) -> Value {
    let mut patch = Map::new();
    if let Some(count) = e.count.filter(|&c| c != 0) {
        patch.insert("count".into(), count.into());
    }
    if let Some(last) = e
        .last_timestamp
        .as_ref()
        .filter(|t| t.0 != Timestamp::UNIX_EPOCH)
    {
        // Serialising a Time cannot fail; it is RFC 3339 at second precision.
        if let Ok(v) = serde_json::to_value(last) {
            patch.insert("lastTimestamp".into(), v);
        }
    }
    if let Some(m) = e.message.as_ref().filter(|m| !m.is_empty()) {
        patch.insert("message".into(), m.clone().into());
    }
    Value::Object(patch)
}

/// An event after correlation, ready for the server.
#[derive(Debug, Clone, PartialEq)]
pub struct Correlated {
    pub event: Event,
    /// Present when the event increments an existing one: PATCH it by name.
    pub patch: Option<Value>,
    /// Where the server's answer is remembered ([`Correlator::update_state`]).
    pub key: String,
}

/// Filters, aggregates and counts events before they reach the server.
pub struct Correlator {
    clock: Arc<dyn Clock>,
    aggregator: Aggregator,
    logger: EventLogger,
    spam: SpamFilter,
}

impl Correlator {
    pub fn new(clock: Arc<dyn Clock>, o: &CorrelatorOptions) -> Self {
        Correlator {
            clock,
            aggregator: Aggregator::new(
                o.lru_cache_size,
                o.aggregate_max_events,
                o.aggregate_interval,
            ),
            logger: EventLogger::new(o.lru_cache_size),
            spam: SpamFilter::new(o.lru_cache_size, o.spam_burst, o.spam_qps),
        }
    }

    /// `None` when the spam filter drops the event. As upstream, the event is
    /// counted and aggregated before filtering, so a dropped repeat still
    /// raises the count the next accepted one reports.
    pub fn correlate(&mut self, e: Event) -> Option<Correlated> {
        let now = self.clock.now();
        let (e, key) = self.aggregator.aggregate(e, now);
        let (event, patch) = self.logger.observe(e, &key);
        if self.spam.filter(&event, now) {
            return None;
        }
        Some(Correlated { event, patch, key })
    }

    /// Records the server's copy of an event written for `key`.
    pub fn update_state(&mut self, key: &str, server_copy: &Event) {
        self.logger.update_state(key, server_copy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};
    use serde_json::json;

    fn event(reason: &str, message: &str, object: &str) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{object}.original")),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                api_version: Some("v1".into()),
                name: Some(object.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{object}")),
                ..Default::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some("Normal".into()),
            count: Some(1),
            source: Some(EventSource {
                component: Some("kubelet".into()),
                host: Some("node-1".into()),
            }),
            reporting_component: Some("kubelet".into()),
            reporting_instance: Some("node-1".into()),
            ..Default::default()
        }
    }

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn keys_separate_what_upstream_separates() {
        let base = event("Pulled", "image pulled", "p");
        let mut other_msg = base.clone();
        other_msg.message = Some("other".into());
        let mut other_path = base.clone();
        other_path.involved_object.field_path = Some("spec.containers{c2}".into());
        let mut other_reason = base.clone();
        other_reason.reason = Some("Created".into());
        let mut other_type = base.clone();
        other_type.type_ = Some("Warning".into());
        let mut other_host = base.clone();
        other_host.source = Some(EventSource {
            component: Some("kubelet".into()),
            host: Some("node-2".into()),
        });

        // (variant, same event key, same aggregate key, same spam key)
        let cases = [
            ("message", &other_msg, false, true, true),
            ("field path", &other_path, false, true, true),
            ("reason", &other_reason, false, false, true),
            ("type", &other_type, false, false, false),
            ("host", &other_host, false, false, false),
        ];
        for (name, e, ev, agg, spam) in cases {
            assert_eq!(event_key(&base) == event_key(e), ev, "{name}: event key");
            assert_eq!(
                aggregate_key(&base).0 == aggregate_key(e).0,
                agg,
                "{name}: aggregate key"
            );
            assert_eq!(spam_key(&base) == spam_key(e), spam, "{name}: spam key");
        }
        assert_eq!(aggregate_key(&base).1, "image pulled");
        // Field boundaries matter: "ab"+"c" is not "a"+"bc".
        let mut a = event("ab", "c", "p");
        let mut b = event("a", "bc", "p");
        a.reporting_component = None;
        b.reporting_component = None;
        assert_ne!(event_key(&a), event_key(&b));
    }

    #[test]
    fn event_names() {
        let t = Timestamp::from_nanosecond(1_767_225_600_123_456_789).unwrap_or(Timestamp::MAX);
        // (referenced name, expected: Some(exact) or None for a UUID)
        let cases = [
            ("nginx-1", Some("nginx-1.18867251f555cd15")),
            (
                "node.example.com",
                Some("node.example.com.18867251f555cd15"),
            ),
            ("UpperCase", None),
            ("", None),
            ("under_score", None),
        ];
        for (name, want) in cases {
            let got = generate_event_name(name, t);
            match want {
                Some(w) => assert_eq!(got, w, "{name}"),
                None => assert!(uuid::Uuid::parse_str(&got).is_ok(), "{name}: {got}"),
            }
        }
        let long = "a".repeat(240);
        assert!(uuid::Uuid::parse_str(&generate_event_name(&long, t)).is_ok());
        assert!(is_dns1123_subdomain("a-b.c"));
        assert!(!is_dns1123_subdomain("a-.c"));
        assert!(!is_dns1123_subdomain("a..c"));
    }

    #[test]
    fn token_bucket() {
        // (seconds since start, expected outcome), burst 2, one token per 10 s.
        let steps = [
            (0, true),
            (0, true),
            (0, false),
            (5, false),
            (10, true),
            (10, false),
            (100, true),
            (100, true),
            (100, false),
            // A clock stepping backwards refills nothing.
            (50, false),
        ];
        let mut b = TokenBucket::new(2, 0.1, ts(0));
        for (i, (at, want)) in steps.into_iter().enumerate() {
            assert_eq!(b.try_accept(ts(at)), want, "step {i} at {at}s");
        }
    }

    #[test]
    fn spam_filter_is_per_source_and_object() {
        let mut f = SpamFilter::new(16, DEFAULT_SPAM_BURST, DEFAULT_SPAM_QPS);
        let a = event("R", "m", "a");
        let b = event("R", "m", "b");
        for i in 0..25 {
            let mut e = a.clone();
            // Reason and message do not matter to the bucket.
            e.message = Some(format!("m{i}"));
            assert!(!f.filter(&e, ts(i)), "event {i} within the burst");
        }
        assert!(f.filter(&a, ts(25)), "26th within 5 min is dropped");
        assert!(!f.filter(&b, ts(25)), "another object has its own bucket");
        // 25 s of refill at 1/300 per s is not a token yet; 300 s is.
        assert!(f.filter(&a, ts(200)));
        assert!(!f.filter(&a, ts(325)));
        assert!(f.filter(&a, ts(326)));
    }

    #[test]
    fn aggregator_threshold_and_window() {
        // (seconds, message, expected outcome: None = passed through, Some = aggregated)
        let steps: Vec<(i64, String, Option<&str>)> = (0..9)
            .map(|i| (i, format!("m{i}"), None))
            .chain([
                // The 10th distinct message within the window aggregates...
                (9, "m9".into(), Some("m9")),
                // ...and so does every further new one.
                (10, "m10".into(), Some("m10")),
                // A message still in the set passes through unchanged.
                (11, "m5".into(), None),
                // More than 10 minutes after the last similar event: afresh.
                (11 + 601, "m11".into(), None),
                (11 + 602, "m12".into(), None),
            ])
            .collect();
        let mut a = Aggregator::new(16, 10, Duration::from_secs(600));
        let mut agg_key_seen = None;
        for (at, msg, want) in steps {
            let e = event("BackOff", &msg, "p");
            let expected_key = event_key(&e);
            let (out, key) = a.aggregate(e, ts(at));
            match want {
                None => {
                    assert_eq!(out.message.as_deref(), Some(msg.as_str()), "{msg}");
                    assert_eq!(out.metadata.name.as_deref(), Some("p.original"));
                    assert_eq!(key, expected_key, "{msg}");
                }
                Some(m) => {
                    let want_msg = format!("(combined from similar events): {m}");
                    assert_eq!(out.message.as_deref(), Some(want_msg.as_str()));
                    assert_eq!(out.count, Some(1));
                    assert_eq!(out.first_timestamp, Some(Time(ts(at))));
                    assert_eq!(out.reason.as_deref(), Some("BackOff"));
                    assert_eq!(out.metadata.namespace.as_deref(), Some("ns"));
                    let name = out.metadata.name.unwrap_or_default();
                    assert!(name.starts_with("p.") && name != "p.original", "{name}");
                    assert_eq!(key, aggregate_key(&event("BackOff", "", "p")).0);
                    // Every aggregate of the group shares one key.
                    assert_eq!(agg_key_seen.get_or_insert(key.clone()), &key);
                }
            }
        }
    }

    #[test]
    fn aggregator_exactly_at_interval_still_aggregates() {
        let mut a = Aggregator::new(16, 3, Duration::from_secs(600));
        a.aggregate(event("R", "a", "p"), ts(0));
        a.aggregate(event("R", "b", "p"), ts(600));
        let (out, _) = a.aggregate(event("R", "c", "p"), ts(1200));
        assert!(
            out.message
                .unwrap_or_default()
                .starts_with(AGGREGATE_MESSAGE_PREFIX)
        );
    }

    /// Replays `(seconds, reason, message)` through a correlator and reports,
    /// per event: skipped, or (count, name, patch).
    fn replay(
        steps: &[(u64, &str, &str)],
        opts: CorrelatorOptions,
    ) -> Vec<Option<(i32, String, Option<Value>)>> {
        let clock = Arc::new(FakeClock::new(ts(0)));
        let mut c = Correlator::new(clock.clone(), &opts);
        let mut last = 0;
        let mut out = Vec::new();
        for (i, (at, reason, msg)) in steps.iter().enumerate() {
            clock.step(Duration::from_secs(at - last));
            last = *at;
            let mut e = event(reason, msg, "p");
            e.metadata.name = Some(format!("p.{i}"));
            e.first_timestamp = Some(Time(clock.now()));
            e.last_timestamp = Some(Time(clock.now()));
            match c.correlate(e) {
                None => out.push(None),
                Some(r) => {
                    // Pretend the server stored it and gave it a resourceVersion.
                    let mut stored = r.event.clone();
                    stored.metadata.resource_version = Some(format!("{}", i + 100));
                    c.update_state(&r.key, &stored);
                    out.push(Some((
                        r.event.count.unwrap_or(0),
                        r.event.metadata.name.unwrap_or_default(),
                        r.patch,
                    )))
                }
            }
        }
        out
    }

    #[test]
    fn correlator_counts_identical_events() {
        let got = replay(
            &[(0, "Pulled", "x"), (1, "Pulled", "x"), (5, "Pulled", "x")],
            CorrelatorOptions::default(),
        );
        assert_eq!(
            got,
            vec![
                Some((1, "p.0".into(), None)),
                Some((
                    2,
                    "p.0".into(),
                    Some(
                        json!({"count": 2, "lastTimestamp": "2026-01-01T00:00:01Z", "message": "x"})
                    )
                )),
                Some((
                    3,
                    "p.0".into(),
                    Some(
                        json!({"count": 3, "lastTimestamp": "2026-01-01T00:00:05Z", "message": "x"})
                    )
                )),
            ]
        );
    }

    #[test]
    fn correlator_keeps_first_timestamp_and_resource_version() {
        let clock = Arc::new(FakeClock::new(ts(0)));
        let mut c = Correlator::new(clock.clone(), &CorrelatorOptions::default());
        let mut e = event("R", "m", "p");
        e.first_timestamp = Some(Time(ts(0)));
        let first = c.correlate(e.clone()).map(|r| r.event);
        let mut stored = first.unwrap_or_default();
        stored.metadata.resource_version = Some("7".into());
        c.update_state(&event_key(&e), &stored);
        clock.step(Duration::from_secs(30));
        let mut again = e;
        again.first_timestamp = Some(Time(ts(30)));
        again.last_timestamp = Some(Time(ts(30)));
        let r = c.correlate(again);
        let ev = r.map(|r| r.event).unwrap_or_default();
        assert_eq!(ev.first_timestamp, Some(Time(ts(0))));
        assert_eq!(ev.last_timestamp, Some(Time(ts(30))));
        assert_eq!(ev.metadata.resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn correlator_scenarios() {
        // Upstream's TestEventCorrelator scenarios: (name, steps, expected
        // outcome of the last event: skipped, or (count, aggregated?)).
        type Steps = Vec<(u64, &'static str, String)>;
        let same = |n: u64, every: u64| -> Steps {
            (0..n).map(|i| (i * every, "R", "same".into())).collect()
        };
        let similar = |n: u64, every: u64| -> Steps {
            (0..n)
                .map(|i| (i * every, "R", format!("msg {i}")))
                .collect()
        };
        type Case = (&'static str, Steps, Option<(i32, bool)>);
        let cases: Vec<Case> = vec![
            (
                "single event",
                vec![(0, "R", "one".into())],
                Some((1, false)),
            ),
            (
                "the same event just counts, even past the aggregate threshold",
                same(11, 30),
                Some((11, false)),
            ),
            ("the same event too often is spam", same(27, 1), None),
            (
                "ten similar events aggregate",
                similar(10, 5),
                Some((1, true)),
            ),
            (
                "eleven similar events count into the aggregate",
                similar(11, 5),
                Some((2, true)),
            ),
            (
                "similar events further apart than the interval do not aggregate",
                similar(10, 601),
                Some((1, false)),
            ),
            (
                "different reasons do not aggregate",
                (0..12u64)
                    .map(|i| (i, if i % 2 == 0 { "A" } else { "B" }, format!("m{i}")))
                    .collect(),
                Some((1, false)),
            ),
        ];
        for (name, steps, want) in cases {
            let steps: Vec<(u64, &str, &str)> =
                steps.iter().map(|(a, r, m)| (*a, *r, m.as_str())).collect();
            let got = replay(&steps, CorrelatorOptions::default());
            let last = got.last().cloned().flatten();
            match want {
                None => assert!(last.is_none(), "{name}: expected skip, got {last:?}"),
                Some((count, aggregated)) => {
                    let (c, ev_name, _) = last.unwrap_or_else(|| panic!("{name}: skipped"));
                    assert_eq!(c, count, "{name}");
                    let is_original = ev_name.starts_with("p.") && ev_name.len() <= 4;
                    assert_eq!(!is_original, aggregated, "{name}: {ev_name}");
                }
            }
        }
    }

    #[test]
    fn spam_filter_applies_after_counting() {
        let steps: Vec<(u64, &str, &str)> = (0..27).map(|_| (0, "R", "m")).collect();
        let got = replay(&steps, CorrelatorOptions::default());
        assert!(got[..25].iter().all(Option::is_some));
        assert!(got[25..].iter().all(Option::is_none));
        // Five minutes later one more passes, carrying the dropped repeats in its count.
        let mut steps = steps;
        steps.push((300, "R", "m"));
        let got = replay(&steps, CorrelatorOptions::default());
        assert_eq!(got[27].as_ref().map(|g| g.0), Some(28));
    }

    #[test]
    fn increment_patch_fields() {
        let mut e = event("R", "", "p");
        e.count = Some(3);
        e.last_timestamp = Some(Time(ts(2)));
        assert_eq!(
            increment_patch(&e),
            json!({"count": 3, "lastTimestamp": "2026-01-01T00:00:02Z"})
        );
        e.message = Some("hello".into());
        e.last_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        assert_eq!(increment_patch(&e), json!({"count": 3, "message": "hello"}));
    }
}
