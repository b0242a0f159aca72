//! Where the HPA's numbers come from (upstream `pkg/controller/podautoscaler/metrics`):
//! the [`MetricsClient`] boundary, its implementation over the aggregated
//! metrics APIs ([`client::KubeMetricsClient`]), a fake for tests
//! ([`fake::FakeMetricsClient`]) and the utilization ratios
//! ([`utilization`]).
//!
//! Every value is a milli-value, as upstream's `MilliValue()`: CPU in
//! milli-cores, memory in milli-bytes, custom metrics in thousandths.

pub mod client;
pub mod fake;
pub mod utilization;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use k8s_openapi::jiff::Timestamp;

use berth_api::selector::LabelSelector;

pub use client::KubeMetricsClient;
pub use fake::FakeMetricsClient;

/// One pod's sample (upstream's `PodMetric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodMetric {
    pub timestamp: Timestamp,
    pub window: Duration,
    pub value: i64,
}

/// Samples by pod name (upstream's `PodMetricsInfo`).
pub type PodMetricsInfo = BTreeMap<String, PodMetric>;

/// The three metrics APIs, named as upstream's messages name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsApi {
    Resource,
    Custom,
    External,
}

impl fmt::Display for MetricsApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MetricsApi::Resource => "resource metrics API",
            MetricsApi::Custom => "custom metrics API",
            MetricsApi::External => "external metrics API",
        })
    }
}

/// A failed metrics query, worded as upstream's metrics client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricsError {
    /// The request failed (group not served, backend down, bad answer).
    #[error("unable to fetch metrics from {api}: {message}")]
    Fetch { api: MetricsApi, message: String },
    /// The API answered with an empty list.
    #[error("no metrics returned from {api}")]
    NoMetrics { api: MetricsApi },
}

/// The metrics the HPA reads (upstream's `MetricsClient` interface).
///
/// Selectors are label selectors; an empty one selects everything.
/// `container` is empty for whole-pod resource metrics.
pub trait MetricsClient: Send + Sync {
    /// Resource usage of the pods matching `selector` from
    /// `metrics.k8s.io`, and the timestamp of the first sample.
    fn get_resource_metric(
        &self,
        resource: &str,
        namespace: &str,
        selector: &LabelSelector,
        container: &str,
    ) -> impl Future<Output = Result<(PodMetricsInfo, Timestamp), MetricsError>> + Send;

    /// A custom metric of every pod matching `selector` (Pods metrics).
    fn get_raw_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        selector: &LabelSelector,
        metric_selector: &LabelSelector,
    ) -> impl Future<Output = Result<(PodMetricsInfo, Timestamp), MetricsError>> + Send;

    /// A custom metric describing one object (Object metrics).
    fn get_object_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        object: &CrossVersionObjectReference,
        metric_selector: &LabelSelector,
    ) -> impl Future<Output = Result<(i64, Timestamp), MetricsError>> + Send;

    /// Every value of an external metric matching `selector`.
    fn get_external_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        selector: &LabelSelector,
    ) -> impl Future<Output = Result<(Vec<i64>, Timestamp), MetricsError>> + Send;
}

/// One PodMetrics item as `metrics.k8s.io` returns it: per container, the
/// usage of each resource in milli-units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawPodMetrics {
    pub name: String,
    pub timestamp: Timestamp,
    pub window: Duration,
    pub containers: Vec<RawContainerMetrics>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawContainerMetrics {
    pub name: String,
    pub usage: BTreeMap<String, i64>,
}

/// Upstream's getPodMetrics / getContainerMetrics: a pod's value is the sum
/// over its containers (a pod with no containers, or one lacking the
/// resource, has none), or, for `container`, that container's usage.
pub fn pod_metrics_info(
    items: &[RawPodMetrics],
    resource: &str,
    container: &str,
) -> PodMetricsInfo {
    let mut res = PodMetricsInfo::new();
    for m in items {
        let value = if container.is_empty() {
            if m.containers.is_empty() {
                None
            } else {
                m.containers.iter().try_fold(0i64, |sum, c| {
                    c.usage.get(resource).map(|v| sum.saturating_add(*v))
                })
            }
        } else {
            m.containers
                .iter()
                .find(|c| c.name == container)
                .and_then(|c| c.usage.get(resource).copied())
        };
        if let Some(value) = value {
            res.insert(
                m.name.clone(),
                PodMetric {
                    timestamp: m.timestamp,
                    window: m.window,
                    value,
                },
            );
        } else {
            tracing::debug!(pod = %m.name, resource, container, "missing resource metric");
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, containers: &[(&str, &[(&str, i64)])]) -> RawPodMetrics {
        RawPodMetrics {
            name: name.into(),
            timestamp: Timestamp::UNIX_EPOCH,
            window: Duration::from_secs(60),
            containers: containers
                .iter()
                .map(|(n, usage)| RawContainerMetrics {
                    name: (*n).into(),
                    usage: usage.iter().map(|(r, v)| ((*r).to_string(), *v)).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn pod_metrics_are_summed_or_picked_per_container() {
        let items = vec![
            pod("a", &[("c1", &[("cpu", 100)]), ("c2", &[("cpu", 50)])]),
            // One container lacks cpu: the pod has no cpu sample.
            pod("b", &[("c1", &[("cpu", 100)]), ("c2", &[("memory", 5)])]),
            // No containers: no sample.
            pod("c", &[]),
        ];
        // (resource, container, samples)
        type Case = (&'static str, &'static str, &'static [(&'static str, i64)]);
        let cases: &[Case] = &[
            ("cpu", "", &[("a", 150)]),
            ("cpu", "c1", &[("a", 100), ("b", 100)]),
            ("cpu", "c2", &[("a", 50)]),
            ("memory", "c2", &[("b", 5)]),
            ("cpu", "missing", &[]),
        ];
        for (resource, container, want) in cases {
            let got: Vec<(String, i64)> = pod_metrics_info(&items, resource, container)
                .into_iter()
                .map(|(k, v)| (k, v.value))
                .collect();
            let want: Vec<(String, i64)> = want.iter().map(|(k, v)| ((*k).into(), *v)).collect();
            assert_eq!(got, want, "{resource}/{container}");
        }
    }

    #[test]
    fn errors_use_upstreams_wording() {
        let cases = [
            (
                MetricsError::Fetch {
                    api: MetricsApi::Resource,
                    message: "boom".into(),
                },
                "unable to fetch metrics from resource metrics API: boom",
            ),
            (
                MetricsError::NoMetrics {
                    api: MetricsApi::Custom,
                },
                "no metrics returned from custom metrics API",
            ),
            (
                MetricsError::NoMetrics {
                    api: MetricsApi::External,
                },
                "no metrics returned from external metrics API",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(err.to_string(), want);
        }
    }
}
