//! Upstream's ReplicaCalculator (`replica_calculator.go`) as pure functions:
//! given the pods the scale target selects and the samples fetched for
//! them, how many replicas bring each metric to its target.
//!
//! The rules are upstream's: usage within the tolerance keeps the current
//! count; for CPU, pods still starting (or never ready) are "unready";
//! pending pods are unready, deleted and failed ones ignored; pods without
//! a sample are "missing". With missing or unready pods the ratio is
//! recomputed conservatively (missing pods at 100% of their request, or the
//! target, when scaling down and at 0 when scaling up; unready pods at 0
//! when scaling up), and the count stays put when that would reverse the
//! direction.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use berth_api::quantity::Quantity;

use super::metrics::utilization::{metric_usage_ratio, resource_utilization_ratio};
use super::metrics::{PodMetric, PodMetricsInfo};

/// Upstream's `Tolerances`: how far below and above 1.0 the usage ratio
/// may be before the replica count changes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    pub scale_down: f64,
    pub scale_up: f64,
}

impl Tolerances {
    pub fn symmetric(t: f64) -> Self {
        Tolerances {
            scale_down: t,
            scale_up: t,
        }
    }

    /// Whether `ratio` is close enough to 1.0 to leave the count alone.
    pub fn is_within(&self, ratio: f64) -> bool {
        (1.0 - self.scale_down) <= ratio && ratio <= (1.0 + self.scale_up)
    }
}

impl fmt::Display for Tolerances {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[down:{:.1}%, up:{:.1}%]",
            self.scale_down * 100.0,
            self.scale_up * 100.0
        )
    }
}

/// Why no replica count could be computed, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalcError {
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    #[error("did not receive metrics for targeted pods (pods might be unready)")]
    NoTargetedMetrics,
    #[error("no metrics returned matched known pods")]
    NoMatchingMetrics,
    #[error("missing request for {resource} in container {container} of Pod {pod}")]
    MissingRequest {
        resource: String,
        container: String,
        pod: String,
    },
    #[error("container {container} not found in Pod {pod}")]
    ContainerNotFound { container: String, pod: String },
    #[error("unable to calculate ready pods: {0}")]
    ReadyPods(Box<CalcError>),
}

/// Pods sorted as upstream's groupPods sorts them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodGroups {
    pub ready: usize,
    pub unready: BTreeSet<String>,
    pub missing: BTreeSet<String>,
    pub ignored: BTreeSet<String>,
}

/// The result of a Utilization target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceReplicas {
    pub replicas: i32,
    /// Percent of the requests.
    pub utilization: i32,
    /// Mean usage per pod (milli-units).
    pub raw_utilization: i64,
}

/// The result of a value target: the count and the observed usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageReplicas {
    pub replicas: i32,
    pub usage: i64,
}

/// The two readiness delays of upstream's ReplicaCalculator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaCalculator {
    /// `--horizontal-pod-autoscaler-cpu-initialization-period`.
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay`.
    pub delay_of_initial_readiness_status: Duration,
}

/// `ratio × count`, rounded up, saturating at the int32 range.
fn ceil_replicas(x: f64) -> i32 {
    // `as` saturates (and maps NaN to 0), as upstream's newer clamps do.
    x.ceil() as i32
}

fn plus(t: Timestamp, d: Duration) -> Timestamp {
    let d = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
    t.saturating_add(d).unwrap_or(Timestamp::MAX)
}

fn pod_name(p: &Pod) -> &str {
    p.metadata.name.as_deref().unwrap_or_default()
}

fn pod_phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

impl ReplicaCalculator {
    /// Upstream's groupPods at `now`.
    pub fn group_pods(
        &self,
        now: Timestamp,
        pods: &[Pod],
        metrics: &PodMetricsInfo,
        resource: &str,
    ) -> PodGroups {
        let mut g = PodGroups::default();
        for pod in pods {
            let name = pod_name(pod).to_string();
            if pod.metadata.deletion_timestamp.is_some() || pod_phase(pod) == "Failed" {
                g.ignored.insert(name);
                continue;
            }
            if pod_phase(pod) == "Pending" {
                g.unready.insert(name);
                continue;
            }
            let Some(metric) = metrics.get(&name) else {
                g.missing.insert(name);
                continue;
            };
            if resource == "cpu" && self.cpu_sample_unready(now, pod, metric) {
                g.unready.insert(name);
                continue;
            }
            g.ready += 1;
        }
        g
    }

    /// Whether a pod's CPU sample is not to be trusted yet: during the
    /// initialization period, unless the pod is ready and the sample covers
    /// a whole window since it became so; after it, only if the pod has
    /// never been ready (its readiness last changed within the initial
    /// readiness delay of its start).
    fn cpu_sample_unready(&self, now: Timestamp, pod: &Pod, metric: &PodMetric) -> bool {
        let status = pod.status.as_ref();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
        let start = status.and_then(|s| s.start_time.as_ref()).map(|t| t.0);
        let (Some(ready), Some(start)) = (ready, start) else {
            return true;
        };
        // Go's zero time when unset: earlier than any real instant.
        let transition = ready
            .last_transition_time
            .as_ref()
            .map_or(Timestamp::MIN, |t| t.0);
        if plus(start, self.cpu_initialization_period) > now {
            ready.status == "False" || metric.timestamp < plus(transition, metric.window)
        } else {
            ready.status == "False"
                && plus(start, self.delay_of_initial_readiness_status) > transition
        }
    }

    /// Upstream's GetResourceReplicas once the samples are fetched: a
    /// Utilization target, in percent of the pods' requests.
    #[allow(clippy::too_many_arguments)]
    pub fn resource_replicas(
        &self,
        now: Timestamp,
        current_replicas: i32,
        target_utilization: i32,
        resource: &str,
        tolerances: Tolerances,
        pods: &[Pod],
        mut metrics: PodMetricsInfo,
        container: &str,
    ) -> Result<ResourceReplicas, CalcError> {
        if pods.is_empty() {
            return Err(CalcError::NoPods);
        }
        let groups = self.group_pods(now, pods, &metrics, resource);
        remove_metrics(&mut metrics, &groups.ignored);
        remove_metrics(&mut metrics, &groups.unready);
        if metrics.is_empty() {
            return Err(CalcError::NoTargetedMetrics);
        }
        let requests = calculate_requests(pods, container, resource)?;
        let first = resource_utilization_ratio(&metrics, &requests, target_utilization)
            .ok_or(CalcError::NoMatchingMetrics)?;
        let usage_ratio = first.ratio;
        let result = |replicas| ResourceReplicas {
            replicas,
            utilization: first.utilization,
            raw_utilization: first.raw_average,
        };

        let scale_up_with_unready = !groups.unready.is_empty() && usage_ratio > 1.0;
        if !scale_up_with_unready && groups.missing.is_empty() {
            if tolerances.is_within(usage_ratio) {
                return Ok(result(current_replicas));
            }
            return Ok(result(ceil_replicas(usage_ratio * groups.ready as f64)));
        }

        if !groups.missing.is_empty() {
            if usage_ratio < 1.0 {
                // Scaling down: a missing pod counts as using all its
                // request, or the target when that is above 100%.
                let fallback = i64::from(target_utilization.max(100));
                for pod in &groups.missing {
                    let request = requests.get(pod).copied().unwrap_or(0);
                    metrics.insert(pod.clone(), zero(request.saturating_mul(fallback) / 100));
                }
            } else if usage_ratio > 1.0 {
                for pod in &groups.missing {
                    metrics.insert(pod.clone(), zero(0));
                }
            }
        }
        if scale_up_with_unready {
            for pod in &groups.unready {
                metrics.insert(pod.clone(), zero(0));
            }
        }

        let new_ratio = resource_utilization_ratio(&metrics, &requests, target_utilization)
            .ok_or(CalcError::NoMatchingMetrics)?
            .ratio;
        if tolerances.is_within(new_ratio) || reverses(usage_ratio, new_ratio) {
            return Ok(result(current_replicas));
        }
        let new_replicas = ceil_replicas(new_ratio * metrics.len() as f64);
        if (new_ratio < 1.0 && new_replicas > current_replicas)
            || (new_ratio > 1.0 && new_replicas < current_replicas)
        {
            // Counting the extra pods would move the other way.
            return Ok(result(current_replicas));
        }
        Ok(result(new_replicas))
    }

    /// Upstream's calcPlainMetricReplicas: an AverageValue target for a
    /// resource (`resource` set) or a Pods metric (`resource` empty).
    #[allow(clippy::too_many_arguments)]
    pub fn plain_metric_replicas(
        &self,
        now: Timestamp,
        mut metrics: PodMetricsInfo,
        current_replicas: i32,
        target_usage: i64,
        tolerances: Tolerances,
        pods: &[Pod],
        resource: &str,
    ) -> Result<UsageReplicas, CalcError> {
        if pods.is_empty() {
            return Err(CalcError::NoPods);
        }
        let groups = self.group_pods(now, pods, &metrics, resource);
        remove_metrics(&mut metrics, &groups.ignored);
        remove_metrics(&mut metrics, &groups.unready);
        if metrics.is_empty() {
            return Err(CalcError::NoTargetedMetrics);
        }
        let (usage_ratio, usage) = metric_usage_ratio(&metrics, target_usage);
        let result = |replicas| UsageReplicas { replicas, usage };

        let scale_up_with_unready = !groups.unready.is_empty() && usage_ratio > 1.0;
        if !scale_up_with_unready && groups.missing.is_empty() {
            if tolerances.is_within(usage_ratio) {
                return Ok(result(current_replicas));
            }
            return Ok(result(ceil_replicas(usage_ratio * groups.ready as f64)));
        }

        if !groups.missing.is_empty() {
            if usage_ratio < 1.0 {
                // Scaling down: a missing pod counts as exactly on target.
                for pod in &groups.missing {
                    metrics.insert(pod.clone(), zero(target_usage));
                }
            } else if usage_ratio > 1.0 {
                for pod in &groups.missing {
                    metrics.insert(pod.clone(), zero(0));
                }
            }
        }
        if scale_up_with_unready {
            for pod in &groups.unready {
                metrics.insert(pod.clone(), zero(0));
            }
        }

        let (new_ratio, _) = metric_usage_ratio(&metrics, target_usage);
        if tolerances.is_within(new_ratio) || reverses(usage_ratio, new_ratio) {
            return Ok(result(current_replicas));
        }
        let new_replicas = ceil_replicas(new_ratio * metrics.len() as f64);
        if (new_ratio < 1.0 && new_replicas > current_replicas)
            || (new_ratio > 1.0 && new_replicas < current_replicas)
        {
            return Ok(result(current_replicas));
        }
        Ok(result(new_replicas))
    }
}

/// A recomputation that flips the direction of scaling.
fn reverses(before: f64, after: f64) -> bool {
    (before < 1.0 && after > 1.0) || (before > 1.0 && after < 1.0)
}

/// A made-up sample (only its value is read again).
fn zero(value: i64) -> PodMetric {
    PodMetric {
        timestamp: Timestamp::MIN,
        window: Duration::ZERO,
        value,
    }
}

fn remove_metrics(metrics: &mut PodMetricsInfo, pods: &BTreeSet<String>) {
    for p in pods {
        metrics.remove(p);
    }
}

/// Upstream's GetObjectMetricReplicas once the value is fetched: one
/// value for the whole target.
pub fn object_metric_replicas(
    current_replicas: i32,
    usage: i64,
    target_usage: i64,
    tolerances: Tolerances,
    pods: &[Pod],
) -> Result<UsageReplicas, CalcError> {
    let ratio = usage as f64 / target_usage as f64;
    let replicas = usage_ratio_replica_count(current_replicas, ratio, tolerances, pods)?;
    Ok(UsageReplicas { replicas, usage })
}

/// Upstream's GetObjectPerPodMetricReplicas: the object's value divided
/// over the target's current replicas (`status.replicas`).
pub fn object_per_pod_metric_replicas(
    status_replicas: i32,
    usage: i64,
    target_average_usage: i64,
    tolerances: Tolerances,
) -> UsageReplicas {
    per_pod_replicas(status_replicas, usage, target_average_usage, tolerances)
}

/// Upstream's GetExternalMetricReplicas: the sum of the metric's values
/// against a Value target.
pub fn external_metric_replicas(
    current_replicas: i32,
    values: &[i64],
    target_usage: i64,
    tolerances: Tolerances,
    pods: &[Pod],
) -> Result<UsageReplicas, CalcError> {
    let usage = saturating_sum(values);
    let ratio = usage as f64 / target_usage as f64;
    let replicas = usage_ratio_replica_count(current_replicas, ratio, tolerances, pods)?;
    Ok(UsageReplicas { replicas, usage })
}

/// Upstream's GetExternalPerPodMetricReplicas: the sum against an
/// AverageValue target.
pub fn external_per_pod_metric_replicas(
    status_replicas: i32,
    values: &[i64],
    target_usage_per_pod: i64,
    tolerances: Tolerances,
) -> UsageReplicas {
    per_pod_replicas(
        status_replicas,
        saturating_sum(values),
        target_usage_per_pod,
        tolerances,
    )
}

fn saturating_sum(values: &[i64]) -> i64 {
    values.iter().fold(0i64, |sum, v| sum.saturating_add(*v))
}

fn per_pod_replicas(
    status_replicas: i32,
    usage: i64,
    target_per_pod: i64,
    tolerances: Tolerances,
) -> UsageReplicas {
    let mut replicas = status_replicas;
    let ratio = usage as f64 / (target_per_pod as f64 * f64::from(status_replicas));
    if !tolerances.is_within(ratio) {
        replicas = ceil_replicas(usage as f64 / target_per_pod as f64);
    }
    // A sum that saturated stays the largest value rather than averaging.
    let average = if usage as f64 >= i64::MAX as f64 {
        i64::MAX
    } else {
        (usage as f64 / f64::from(status_replicas)).ceil() as i64
    };
    UsageReplicas {
        replicas,
        usage: average,
    }
}

/// Upstream's getUsageRatioReplicaCount: from zero replicas the ratio alone
/// decides (scale to zero and back); otherwise the tolerance applies and
/// the ratio multiplies the ready pods.
fn usage_ratio_replica_count(
    current_replicas: i32,
    ratio: f64,
    tolerances: Tolerances,
    pods: &[Pod],
) -> Result<i32, CalcError> {
    if current_replicas == 0 {
        return Ok(ceil_replicas(ratio));
    }
    if tolerances.is_within(ratio) {
        return Ok(current_replicas);
    }
    let ready = ready_pods_count(pods).map_err(|e| CalcError::ReadyPods(Box::new(e)))?;
    Ok(ceil_replicas(ratio * ready as f64))
}

/// Running pods whose Ready condition is True (upstream's getReadyPodsCount).
pub fn ready_pods_count(pods: &[Pod]) -> Result<i64, CalcError> {
    if pods.is_empty() {
        return Err(CalcError::NoPods);
    }
    Ok(pods
        .iter()
        .filter(|p| crate::podutil::is_running_ready(p))
        .count() as i64)
}

/// Upstream's calculateRequests: each pod's request for `resource` in
/// milli-units. For a named container, that container's; otherwise the
/// pod-level request when the pod sets one, else the sum over its
/// containers and restartable (sidecar) init containers, every one of
/// which must request it.
pub fn calculate_requests(
    pods: &[Pod],
    container: &str,
    resource: &str,
) -> Result<BTreeMap<String, i64>, CalcError> {
    let mut requests = BTreeMap::new();
    for pod in pods {
        let request = match pod_level_request(pod, resource) {
            Some(r) if container.is_empty() => r,
            _ => container_requests(pod, container, resource)?,
        };
        requests.insert(pod_name(pod).to_string(), request);
    }
    Ok(requests)
}

/// `spec.resources.requests[resource]` (KEP-2837 pod-level resources).
fn pod_level_request(pod: &Pod, resource: &str) -> Option<i64> {
    let q = pod
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get(resource)?;
    Some(milli(&q.0))
}

fn milli(q: &str) -> i64 {
    Quantity::parse(q).map_or(0, |q| q.milli_value())
}

fn container_requests(pod: &Pod, container: &str, resource: &str) -> Result<i64, CalcError> {
    let spec = pod.spec.as_ref();
    let sidecars = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let containers: Vec<&Container> = spec
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .chain(sidecars)
        .collect();
    let mut request = 0i64;
    for c in containers {
        if container.is_empty() || container == c.name {
            let q = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get(resource))
                .ok_or_else(|| CalcError::MissingRequest {
                    resource: resource.to_string(),
                    container: c.name.clone(),
                    pod: pod_name(pod).to_string(),
                })?;
            request = request.saturating_add(milli(&q.0));
        }
        // Container names are unique within a pod.
        if container == c.name {
            return Ok(request);
        }
    }
    if !container.is_empty() {
        return Err(CalcError::ContainerNotFound {
            container: container.to_string(),
            pod: pod_name(pod).to_string(),
        });
    }
    Ok(request)
}

#[cfg(test)]
#[path = "replica_calculator_tests.rs"]
mod tests;
