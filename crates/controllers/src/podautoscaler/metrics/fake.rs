//! An in-memory [`MetricsClient`] for tests: each metric is set as what the
//! API would answer (samples or an error); unset metrics answer as an
//! unserved API does.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use k8s_openapi::jiff::Timestamp;

use berth_api::selector::LabelSelector;

use super::{
    MetricsApi, MetricsClient, MetricsError, PodMetric, PodMetricsInfo, RawPodMetrics,
    pod_metrics_info,
};

/// The answer to one query: samples and their timestamp, or an error.
pub type Answer<T> = Result<(T, Timestamp), MetricsError>;

#[derive(Default)]
struct State {
    resource: Option<Result<Vec<RawPodMetrics>, MetricsError>>,
    raw: BTreeMap<String, Answer<PodMetricsInfo>>,
    object: BTreeMap<String, Answer<i64>>,
    external: BTreeMap<String, Answer<Vec<i64>>>,
    /// Every query, as `<api>/<namespace>/<what>?<selector>`.
    queries: Vec<String>,
}

/// Cheap to clone; clones share their answers.
#[derive(Clone, Default)]
pub struct FakeMetricsClient {
    state: Arc<Mutex<State>>,
}

impl FakeMetricsClient {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Test state only; a panicking test cannot leave it half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `metrics.k8s.io` lists (every pod, whatever the selector).
    pub fn set_pod_metrics(&self, items: Vec<RawPodMetrics>) {
        self.lock().resource = Some(Ok(items));
    }

    /// Makes `metrics.k8s.io` fail.
    pub fn set_resource_error(&self, err: MetricsError) {
        self.lock().resource = Some(Err(err));
    }

    /// The answer for a Pods custom metric.
    pub fn set_raw_metric(&self, name: &str, answer: Answer<PodMetricsInfo>) {
        self.lock().raw.insert(name.into(), answer);
    }

    /// The answer for an Object custom metric.
    pub fn set_object_metric(&self, name: &str, answer: Answer<i64>) {
        self.lock().object.insert(name.into(), answer);
    }

    /// The answer for an external metric.
    pub fn set_external_metric(&self, name: &str, answer: Answer<Vec<i64>>) {
        self.lock().external.insert(name.into(), answer);
    }

    /// The queries made so far.
    pub fn queries(&self) -> Vec<String> {
        self.lock().queries.clone()
    }
}

/// What an API that is not served answers, as upstream's client words it.
fn not_served(api: MetricsApi, resource: &str) -> MetricsError {
    MetricsError::Fetch {
        api,
        message: format!("the server could not find the requested resource (get {resource})"),
    }
}

impl MetricsClient for FakeMetricsClient {
    async fn get_resource_metric(
        &self,
        resource: &str,
        namespace: &str,
        selector: &LabelSelector,
        container: &str,
    ) -> Result<(PodMetricsInfo, Timestamp), MetricsError> {
        let mut state = self.lock();
        state.queries.push(format!(
            "resource/{namespace}/{resource}/{container}?{selector}"
        ));
        let items = match &state.resource {
            None => return Err(not_served(MetricsApi::Resource, "pods.metrics.k8s.io")),
            Some(Err(e)) => return Err(e.clone()),
            Some(Ok(items)) => items,
        };
        let Some(first) = items.first() else {
            return Err(MetricsError::NoMetrics {
                api: MetricsApi::Resource,
            });
        };
        Ok((
            pod_metrics_info(items, resource, container),
            first.timestamp,
        ))
    }

    async fn get_raw_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        selector: &LabelSelector,
        metric_selector: &LabelSelector,
    ) -> Result<(PodMetricsInfo, Timestamp), MetricsError> {
        let mut state = self.lock();
        state.queries.push(format!(
            "pods/{namespace}/{metric_name}?{selector}&{metric_selector}"
        ));
        state.raw.get(metric_name).cloned().unwrap_or_else(|| {
            Err(not_served(
                MetricsApi::Custom,
                "pods.custom.metrics.k8s.io *",
            ))
        })
    }

    async fn get_object_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        object: &CrossVersionObjectReference,
        metric_selector: &LabelSelector,
    ) -> Result<(i64, Timestamp), MetricsError> {
        let mut state = self.lock();
        state.queries.push(format!(
            "object/{namespace}/{}/{}/{metric_name}?{metric_selector}",
            object.kind, object.name
        ));
        state
            .object
            .get(metric_name)
            .cloned()
            .unwrap_or_else(|| Err(not_served(MetricsApi::Custom, "custom.metrics.k8s.io")))
    }

    async fn get_external_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<(Vec<i64>, Timestamp), MetricsError> {
        let mut state = self.lock();
        state
            .queries
            .push(format!("external/{namespace}/{metric_name}?{selector}"));
        state.external.get(metric_name).cloned().unwrap_or_else(|| {
            Err(not_served(
                MetricsApi::External,
                &format!("{metric_name}.external.metrics.k8s.io"),
            ))
        })
    }
}

/// A sample of `value` at `timestamp`, with upstream's 1-minute window.
pub fn sample(timestamp: Timestamp, value: i64) -> PodMetric {
    PodMetric {
        timestamp,
        window: std::time::Duration::from_secs(60),
        value,
    }
}
