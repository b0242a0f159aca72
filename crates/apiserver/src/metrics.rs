//! `/metrics`: upstream's request counters and latency histograms.

use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub verb: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    pub verb: String,
    pub resource: String,
}

/// `request_kind`: upstream's `readOnly` or `mutating` in-flight pool.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub request_kind: &'static str,
}

pub struct Metrics {
    registry: Mutex<Registry>,
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram>,
    inflight: Family<KindLabels, Gauge>,
    dropped: Family<KindLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        // Upstream's apiserver_request_duration_seconds buckets.
        let latency = Family::<LatencyLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0,
                6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
            ])
        });
        let mut registry = Registry::default();
        registry.register(
            "apiserver_request",
            "Counter of apiserver requests broken out by verb, resource and HTTP code",
            requests.clone(),
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb and resource",
            latency.clone(),
        );
        let inflight = Family::<KindLabels, Gauge>::default();
        registry.register(
            "apiserver_current_inflight_requests",
            "Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
            inflight.clone(),
        );
        let dropped = Family::<KindLabels, Counter>::default();
        registry.register(
            "apiserver_dropped_requests",
            "Number of requests dropped with 'Try again later' response",
            dropped.clone(),
        );
        Metrics {
            registry: Mutex::new(registry),
            requests,
            latency,
            inflight,
            dropped,
        }
    }
}

impl Metrics {
    pub fn observe(&self, labels: RequestLabels, seconds: f64) {
        self.latency
            .get_or_create(&LatencyLabels {
                verb: labels.verb.clone(),
                resource: labels.resource.clone(),
            })
            .observe(seconds);
        self.requests.get_or_create(&labels).inc();
    }

    /// A request refused by the in-flight limit of `request_kind`'s pool.
    pub fn dropped(&self, request_kind: &'static str) {
        self.dropped
            .get_or_create(&KindLabels { request_kind })
            .inc();
    }

    /// The requests being served now, (read-only, mutating).
    pub fn set_inflight(&self, (read_only, mutating): (usize, usize)) {
        for (request_kind, n) in [("readOnly", read_only), ("mutating", mutating)] {
            self.inflight
                .get_or_create(&KindLabels { request_kind })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Ok(reg) = self.registry.lock() {
            let _ = prometheus_client::encoding::text::encode(&mut out, &reg);
        }
        out
    }
}
