//! One HPA sync against fakes: upstream's horizontal_test.go scenarios
//! (scale up/down, stabilization, invalid metrics, scale targets without
//! a scale subresource, scaling disabled) with their conditions and events.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, ExternalMetricSource, HPAScalingPolicy, HPAScalingRules,
    HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerSpec, MetricIdentifier, MetricSpec,
    MetricTarget, ObjectMetricSource, PodsMetricSource, ResourceMetricSource,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::{
    Container, PodCondition, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector as MetaSelector, ObjectMeta};

use berth_runtime::FakeClock;

use super::*;
use crate::podautoscaler::fake::{FakeCluster, FakeEvents, RecordedEvent};
use crate::podautoscaler::metrics::fake::sample;
use crate::podautoscaler::metrics::{FakeMetricsClient, RawContainerMetrics, RawPodMetrics};

const NS: &str = "test-namespace";
const KEY: &str = "test-namespace/test-hpa";

struct World {
    controller: HorizontalController<FakeMetricsClient, FakeCluster, FakeEvents>,
    metrics: FakeMetricsClient,
    cluster: FakeCluster,
    events: FakeEvents,
    clock: Arc<FakeClock>,
}

fn world() -> World {
    let metrics = FakeMetricsClient::new();
    let cluster = FakeCluster::new();
    let events = FakeEvents::default();
    let clock = Arc::new(FakeClock::default());
    let controller = HorizontalController::new(
        metrics.clone(),
        cluster.clone(),
        events.clone(),
        Config::default(),
        clock.clone(),
    );
    controller.register(KEY);
    World {
        controller,
        metrics,
        cluster,
        events,
        clock,
    }
}

fn cpu(utilization: i32) -> MetricSpec {
    MetricSpec {
        type_: "Resource".into(),
        resource: Some(ResourceMetricSource {
            name: "cpu".into(),
            target: MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(utilization),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

fn hpa(min: i32, max: i32, metrics: Vec<MetricSpec>) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            name: Some("test-hpa".into()),
            namespace: Some(NS.into()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: "web".into(),
            },
            min_replicas: Some(min),
            max_replicas: max,
            metrics: Some(metrics),
            behavior: None,
        }),
        status: None,
    }
}

/// `n` running, ready pods `web-<i>` requesting 1 CPU, started long ago.
fn pods(n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| Pod {
            metadata: ObjectMeta {
                name: Some(format!("web-{i}")),
                namespace: Some(NS.into()),
                labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "cpu".to_string(),
                            K8sQuantity("1".into()),
                        )])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                start_time: Some(Time(Timestamp::UNIX_EPOCH)),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(Timestamp::UNIX_EPOCH)),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        })
        .collect()
}

impl World {
    /// A Deployment `web` at `replicas` with as many pods using `usage`
    /// milli-CPU each.
    fn deployment(&self, replicas: i32, usage: &[i64]) {
        self.cluster
            .set_scale("Deployment", "web", replicas, replicas, "app=web");
        self.cluster.set_pods(pods(usage.len()));
        self.metrics.set_pod_metrics(
            usage
                .iter()
                .enumerate()
                .map(|(i, v)| RawPodMetrics {
                    name: format!("web-{i}"),
                    timestamp: self.clock.now(),
                    window: Duration::from_secs(60),
                    containers: vec![RawContainerMetrics {
                        name: "app".into(),
                        usage: BTreeMap::from([("cpu".to_string(), *v)]),
                    }],
                })
                .collect(),
        );
    }

    async fn sync(&mut self, hpa: &HorizontalPodAutoscaler) -> Result<(), String> {
        self.controller.reconcile_autoscaler(hpa).await
    }

    fn last_status(&self) -> HorizontalPodAutoscalerStatus {
        self.cluster
            .status_writes()
            .last()
            .and_then(|h| h.status.clone())
            .unwrap_or_default()
    }

    /// The last written HPA, as the next sync would read it.
    fn written(&self) -> HorizontalPodAutoscaler {
        self.cluster
            .status_writes()
            .last()
            .cloned()
            .unwrap_or_default()
    }
}

/// (type, status, reason, message) of each condition.
fn conditions(status: &HorizontalPodAutoscalerStatus) -> Vec<(String, String, String, String)> {
    status
        .conditions
        .iter()
        .flatten()
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn cond(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> (String, String, String, String) {
    (type_.into(), status.into(), reason.into(), message.into())
}

fn normal(reason: &str, message: &str) -> RecordedEvent {
    RecordedEvent {
        type_: EventType::Normal,
        reason: reason.into(),
        message: message.into(),
    }
}

fn warning(reason: &str, message: &str) -> RecordedEvent {
    RecordedEvent {
        type_: EventType::Warning,
        reason: reason.into(),
        message: message.into(),
    }
}

#[tokio::test]
async fn scales_up_on_cpu_utilization() {
    let mut w = world();
    w.deployment(3, &[300, 500, 700]);
    w.sync(&hpa(1, 10, vec![cpu(30)])).await.ok();
    assert_eq!(w.cluster.scale_writes(), vec![5]);
    assert_eq!(
        w.events.take(),
        vec![normal(
            "SuccessfulRescale",
            "New size: 5; reason: cpu resource utilization (percentage of request) above target"
        )]
    );
    let status = w.last_status();
    assert_eq!(
        (status.current_replicas, status.desired_replicas),
        (Some(3), 5)
    );
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(status.last_scale_time, Some(Time(w.clock.now())));
    let current = status.current_metrics.unwrap_or_default();
    let resource = current
        .first()
        .and_then(|m| m.resource.clone())
        .unwrap_or_default();
    assert_eq!(resource.name, "cpu");
    assert_eq!(resource.current.average_utilization, Some(50));
    assert_eq!(
        resource.current.average_value,
        Some(K8sQuantity("500m".into()))
    );
    assert_eq!(
        conditions(&w.last_status()),
        vec![
            cond(
                "AbleToScale",
                "True",
                "SucceededRescale",
                "the HPA controller was able to update the target scale to 5"
            ),
            cond(
                "ScalingActive",
                "True",
                "ValidMetricFound",
                "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"
            ),
            cond(
                "ScalingLimited",
                "False",
                "DesiredWithinRange",
                "the desired count is within the acceptable range"
            ),
        ]
    );
}

#[tokio::test]
async fn scale_up_is_limited_to_twice_the_replicas() {
    let mut w = world();
    w.deployment(2, &[1000, 1000]);
    w.sync(&hpa(1, 20, vec![cpu(10)])).await.ok();
    assert_eq!(w.cluster.scale_writes(), vec![4]);
    assert!(conditions(&w.last_status()).contains(&cond(
        "ScalingLimited",
        "True",
        "ScaleUpLimit",
        "the desired replica count is increasing faster than the maximum scale rate"
    )));
}

#[tokio::test]
async fn metrics_backend_down_keeps_replicas() {
    let mut w = world();
    w.deployment(3, &[300, 500, 700]);
    let missing = crate::podautoscaler::metrics::MetricsError::Fetch {
        api: crate::podautoscaler::metrics::MetricsApi::Resource,
        message: "the server could not find the requested resource (get pods.metrics.k8s.io)"
            .into(),
    };
    w.metrics.set_resource_error(missing);
    let err = w
        .sync(&hpa(1, 10, vec![cpu(30)]))
        .await
        .err()
        .unwrap_or_default();
    let inner = "failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)";
    assert!(err.contains("failed to compute desired number of replicas based on listed metrics for Deployment/test-namespace/web"), "{err}");
    assert!(w.cluster.scale_writes().is_empty());
    assert_eq!(
        w.events.take(),
        vec![
            warning("FailedGetResourceMetric", inner),
            warning(
                "FailedComputeMetricsReplicas",
                &format!(
                    "invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: {inner}"
                )
            ),
        ]
    );
    let status = w.last_status();
    assert_eq!(status.current_replicas, Some(3));
    assert_eq!(
        conditions(&status),
        vec![
            cond(
                "AbleToScale",
                "True",
                "SucceededGetScale",
                "the HPA controller was able to get the target's current scale"
            ),
            cond(
                "ScalingActive",
                "False",
                "FailedGetResourceMetric",
                &format!("the HPA was unable to compute the replica count: {inner}")
            ),
        ]
    );
}

#[tokio::test]
async fn scaling_is_disabled_at_zero_replicas() {
    let mut w = world();
    w.deployment(0, &[]);
    w.sync(&hpa(1, 10, vec![cpu(30)])).await.ok();
    assert!(w.cluster.scale_writes().is_empty());
    assert!(w.metrics.queries().is_empty());
    let status = w.last_status();
    assert_eq!(
        (status.current_replicas, status.desired_replicas),
        (Some(0), 0)
    );
    assert!(conditions(&status).contains(&cond(
        "ScalingActive",
        "False",
        "ScalingDisabled",
        "scaling is disabled since the replica count of the target is zero"
    )));
}

#[tokio::test]
async fn failed_get_scale() {
    // (api version, kind, error)
    let cases = [
        (
            "v1",
            "ConfigMap",
            "the server could not find the requested resource",
        ),
        (
            "example.com/v1",
            "Widget",
            "no matches for kind \"Widget\" in group \"example.com\"",
        ),
        (
            "a/b/c",
            "Deployment",
            "unexpected GroupVersion string: a/b/c",
        ),
        (
            "apps/v1",
            "StatefulSet",
            "statefulsets.apps \"web\" not found",
        ),
    ];
    for (api_version, kind, err) in cases {
        let mut w = world();
        w.deployment(3, &[300, 500, 700]);
        let mut h = hpa(1, 10, vec![cpu(30)]);
        if let Some(spec) = h.spec.as_mut() {
            spec.scale_target_ref.api_version = Some(api_version.into());
            spec.scale_target_ref.kind = kind.into();
        }
        assert!(w.sync(&h).await.is_err(), "{kind}");
        assert_eq!(
            w.events.take(),
            vec![warning("FailedGetScale", err)],
            "{kind}"
        );
        assert_eq!(
            conditions(&w.last_status()),
            vec![cond(
                "AbleToScale",
                "False",
                "FailedGetScale",
                &format!("the HPA controller was unable to get the target's current scale: {err}")
            )],
            "{kind}"
        );
    }
}

#[tokio::test]
async fn scales_custom_resources_with_a_scale_subresource() {
    let mut w = world();
    w.deployment(3, &[300, 500, 700]);
    w.cluster
        .serve("example.com", "v1", "Widget", "widgets", true);
    w.cluster.set_scale("Widget", "web", 3, 3, "app=web");
    let mut h = hpa(1, 10, vec![cpu(30)]);
    if let Some(spec) = h.spec.as_mut() {
        spec.scale_target_ref.api_version = Some("example.com/v1".into());
        spec.scale_target_ref.kind = "Widget".into();
    }
    w.sync(&h).await.ok();
    assert_eq!(w.cluster.replicas("Widget", "web"), Some(5));
}

#[tokio::test]
async fn replicas_outside_min_max_are_clamped_without_metrics() {
    // (current, min, max, new size, reason)
    let cases = [
        (
            10,
            1,
            6,
            6,
            "Current number of replicas above Spec.MaxReplicas",
        ),
        (
            1,
            3,
            6,
            3,
            "Current number of replicas below Spec.MinReplicas",
        ),
    ];
    for (current, min, max, want, reason) in cases {
        let mut w = world();
        w.deployment(current, &[100; 1]);
        w.sync(&hpa(min, max, vec![cpu(30)])).await.ok();
        assert_eq!(w.cluster.scale_writes(), vec![want]);
        assert!(w.metrics.queries().is_empty());
        assert_eq!(
            w.events.take(),
            vec![normal(
                "SuccessfulRescale",
                &format!("New size: {want}; reason: {reason}")
            )]
        );
        assert_eq!(w.last_status().current_metrics, None);
    }
}

#[tokio::test]
async fn scale_down_waits_for_the_stabilization_window() {
    let mut w = world();
    w.deployment(5, &[100, 100, 100, 100, 100]);
    let h = hpa(1, 10, vec![cpu(50)]);
    w.sync(&h).await.ok();
    assert!(w.cluster.scale_writes().is_empty());
    assert!(conditions(&w.last_status()).contains(&cond(
        "AbleToScale",
        "True",
        "ScaleDownStabilized",
        "recent recommendations were higher than current one, applying the highest recent recommendation"
    )));
    w.clock.step(Duration::from_secs(6 * 60));
    w.deployment(5, &[100, 100, 100, 100, 100]);
    w.sync(&w.written()).await.ok();
    assert_eq!(w.cluster.scale_writes(), vec![1]);
    assert!(w.events.take().contains(&normal(
        "SuccessfulRescale",
        "New size: 1; reason: All metrics below target"
    )));
}

#[tokio::test]
async fn unchanged_status_is_not_rewritten() {
    let mut w = world();
    // 52% against a 50% target: within the tolerance.
    w.deployment(3, &[520, 520, 520]);
    w.sync(&hpa(1, 10, vec![cpu(50)])).await.ok();
    assert_eq!(w.cluster.status_writes().len(), 1);
    w.clock.step(Duration::from_secs(15));
    w.sync(&w.written()).await.ok();
    assert_eq!(w.cluster.status_writes().len(), 1);
    assert!(w.cluster.scale_writes().is_empty());
}

#[tokio::test]
async fn selector_problems_stop_scaling() {
    // Missing selector.
    let mut w = world();
    w.deployment(3, &[300, 500, 700]);
    w.cluster.set_scale("Deployment", "web", 3, 3, "");
    assert!(w.sync(&hpa(1, 10, vec![cpu(30)])).await.is_err());
    assert_eq!(
        w.events.take(),
        vec![
            warning("SelectorRequired", "selector is required"),
            warning("FailedComputeMetricsReplicas", "selector is required"),
        ]
    );
    assert!(conditions(&w.last_status()).contains(&cond(
        "ScalingActive",
        "False",
        "InvalidSelector",
        "the HPA target's scale is missing a selector"
    )));

    // Pods selected by two HPAs.
    let mut w = world();
    w.deployment(3, &[300, 500, 700]);
    w.controller.register("test-namespace/other");
    w.controller.selectors.lock().unwrap().insert(
        "test-namespace/other".into(),
        LabelSelector::parse("app=web").unwrap_or_default(),
    );
    assert!(w.sync(&hpa(1, 10, vec![cpu(30)])).await.is_err());
    let msg = "pods by selector app=web are controlled by multiple HPAs: [test-namespace/other test-namespace/test-hpa]";
    assert!(w.events.take().contains(&warning("AmbiguousSelector", msg)));
    assert!(conditions(&w.last_status()).contains(&cond(
        "ScalingActive",
        "False",
        "AmbiguousSelector",
        msg
    )));
    assert!(w.cluster.scale_writes().is_empty());
}

fn external(name: &str, average: &str) -> MetricSpec {
    MetricSpec {
        type_: "External".into(),
        external: Some(ExternalMetricSource {
            metric: MetricIdentifier {
                name: name.into(),
                selector: Some(MetaSelector {
                    match_labels: Some(BTreeMap::from([(
                        "queue".to_string(),
                        "worker".to_string(),
                    )])),
                    match_expressions: None,
                }),
            },
            target: MetricTarget {
                type_: "AverageValue".into(),
                average_value: Some(K8sQuantity(average.into())),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn external_metric_names_its_selector_as_upstream() {
    let mut w = world();
    w.deployment(3, &[300, 500, 700]);
    w.metrics
        .set_external_metric("qps", Ok((vec![120_000], w.clock.now())));
    w.sync(&hpa(1, 10, vec![external("qps", "30")])).await.ok();
    assert_eq!(w.cluster.scale_writes(), vec![4]);
    assert_eq!(
        w.events.take(),
        vec![normal(
            "SuccessfulRescale",
            "New size: 4; reason: external metric qps(&LabelSelector{MatchLabels:map[string]string{queue: worker,},MatchExpressions:[]LabelSelectorRequirement{},}) above target"
        )]
    );
    let ext = w.last_status().current_metrics.unwrap_or_default();
    let current = ext
        .first()
        .and_then(|m| m.external.as_ref())
        .map(|e| e.current.clone());
    assert_eq!(
        current.and_then(|c| c.average_value),
        Some(K8sQuantity("40".into()))
    );
    assert_eq!(
        w.metrics.queries(),
        vec!["external/test-namespace/qps?queue=worker".to_string()]
    );
}

#[tokio::test]
async fn one_invalid_metric_still_allows_scaling_up() {
    let mut w = world();
    w.deployment(3, &[300, 500, 700]);
    // The external metric is not served.
    let err = w
        .sync(&hpa(1, 10, vec![cpu(30), external("qps", "30")]))
        .await
        .err()
        .unwrap_or_default();
    assert!(err.starts_with("invalid metrics (1 invalid out of 2), first error is: failed to get qps external metric value"), "{err}");
    assert_eq!(w.cluster.scale_writes(), vec![5]);
    assert!(w.events.reasons().contains("FailedGetExternalMetric"));
    assert!(conditions(&w.last_status()).contains(&cond(
        "ScalingActive",
        "True",
        "ValidMetricFound",
        "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"
    )));
}

#[tokio::test]
async fn one_invalid_metric_prevents_scaling_down() {
    let mut w = world();
    w.deployment(5, &[100, 300, 500, 250, 250]);
    let bogus = MetricSpec {
        type_: "CheddarCheese".into(),
        ..Default::default()
    };
    assert!(w.sync(&hpa(2, 6, vec![cpu(50), bogus])).await.is_err());
    assert!(w.cluster.scale_writes().is_empty());
    let events = w.events.take();
    assert!(events.contains(&warning(
        "InvalidMetricSourceType",
        "unknown metric source type \"CheddarCheese\""
    )));
    assert!(conditions(&w.last_status()).contains(&cond(
        "ScalingActive",
        "False",
        "InvalidMetricSourceType",
        "the HPA was unable to compute the replica count: unknown metric source type \"CheddarCheese\""
    )));
}

#[tokio::test]
async fn failed_rescale_is_reported() {
    let mut w = world();
    w.deployment(3, &[300, 500, 700]);
    w.cluster.fail_update_scale(Some("conflict"));
    let err = w
        .sync(&hpa(1, 10, vec![cpu(30)]))
        .await
        .err()
        .unwrap_or_default();
    assert_eq!(
        err,
        "failed to rescale Deployment/test-namespace/web: conflict"
    );
    assert_eq!(
        w.events.take(),
        vec![warning(
            "FailedRescale",
            "New size: 5; reason: cpu resource utilization (percentage of request) above target; error: conflict"
        )]
    );
    let status = w.last_status();
    assert_eq!(
        (status.current_replicas, status.last_scale_time.clone()),
        (Some(3), None)
    );
    assert!(conditions(&status).contains(&cond(
        "AbleToScale",
        "False",
        "FailedUpdateScale",
        "the HPA controller was unable to update the target scale: conflict"
    )));
}

#[tokio::test]
async fn behavior_policies_limit_the_rate() {
    let mut w = world();
    w.deployment(3, &[1000, 1000, 1000]);
    let mut h = hpa(1, 20, vec![cpu(10)]);
    if let Some(spec) = h.spec.as_mut() {
        spec.behavior = Some(HorizontalPodAutoscalerBehavior {
            scale_up: Some(HPAScalingRules {
                policies: Some(vec![HPAScalingPolicy {
                    type_: "Pods".into(),
                    value: 1,
                    period_seconds: 60,
                }]),
                ..Default::default()
            }),
            scale_down: None,
        });
    }
    w.sync(&h).await.ok();
    assert_eq!(w.cluster.scale_writes(), vec![4]);
    assert!(conditions(&w.last_status()).contains(&cond(
        "ScalingLimited",
        "True",
        "ScaleUpLimit",
        "the desired replica count is increasing faster than the maximum scale rate"
    )));
    // Within the policy's minute the added pod counts: no further scale up.
    w.clock.step(Duration::from_secs(15));
    w.sync(&w.written()).await.ok();
    assert_eq!(w.cluster.scale_writes(), vec![4]);
    // After it, one more.
    w.clock.step(Duration::from_secs(60));
    w.sync(&w.written()).await.ok();
    assert_eq!(w.cluster.scale_writes(), vec![4, 5]);
    // The first event, older than the longest period, was reused.
    let history = w.controller.history(KEY).unwrap_or_default();
    let events: Vec<(i32, Timestamp)> = history
        .scale_up_events
        .iter()
        .map(|e| (e.replica_change, e.timestamp))
        .collect();
    assert_eq!(events, vec![(1, w.clock.now())]);
}

#[tokio::test]
async fn behavior_tolerance_overrides_the_flag() {
    let mut w = world();
    // 55% against 50%: outside 1% but within the default 10%.
    w.deployment(3, &[550, 550, 550]);
    let mut h = hpa(1, 20, vec![cpu(50)]);
    w.sync(&h).await.ok();
    assert!(w.cluster.scale_writes().is_empty());
    if let Some(spec) = h.spec.as_mut() {
        spec.behavior = Some(HorizontalPodAutoscalerBehavior {
            scale_up: Some(HPAScalingRules {
                tolerance: Some(K8sQuantity("0.01".into())),
                ..Default::default()
            }),
            scale_down: None,
        });
    }
    w.sync(&h).await.ok();
    assert_eq!(w.cluster.scale_writes(), vec![4]);
}

#[tokio::test]
async fn pods_and_object_metrics() {
    let mut w = world();
    w.deployment(3, &[300, 500, 700]);
    let samples: crate::podautoscaler::metrics::PodMetricsInfo = (0..3)
        .map(|i| (format!("web-{i}"), sample(w.clock.now(), 20_000)))
        .collect();
    w.metrics
        .set_raw_metric("qps", Ok((samples, w.clock.now())));
    w.metrics
        .set_object_metric("requests", Ok((30_000, w.clock.now())));
    let pods_metric = MetricSpec {
        type_: "Pods".into(),
        pods: Some(PodsMetricSource {
            metric: MetricIdentifier {
                name: "qps".into(),
                selector: None,
            },
            target: MetricTarget {
                type_: "AverageValue".into(),
                average_value: Some(K8sQuantity("10".into())),
                ..Default::default()
            },
        }),
        ..Default::default()
    };
    let object_metric = MetricSpec {
        type_: "Object".into(),
        object: Some(ObjectMetricSource {
            described_object: CrossVersionObjectReference {
                api_version: Some("networking.k8s.io/v1".into()),
                kind: "Ingress".into(),
                name: "main".into(),
            },
            metric: MetricIdentifier {
                name: "requests".into(),
                selector: None,
            },
            target: MetricTarget {
                type_: "Value".into(),
                value: Some(K8sQuantity("10".into())),
                ..Default::default()
            },
        }),
        ..Default::default()
    };
    // Pods: 20 per pod against 10 → 6; Object: 30 against 10 → 9.
    w.sync(&hpa(1, 20, vec![pods_metric, object_metric]))
        .await
        .ok();
    assert_eq!(w.cluster.scale_writes(), vec![6]);
    let status = w.last_status();
    let metrics = status.current_metrics.unwrap_or_default();
    assert_eq!(
        metrics
            .first()
            .and_then(|m| m.pods.as_ref())
            .and_then(|p| p.current.average_value.clone()),
        Some(K8sQuantity("20".into()))
    );
    assert_eq!(
        metrics
            .get(1)
            .and_then(|m| m.object.as_ref())
            .and_then(|o| o.current.value.clone()),
        Some(K8sQuantity("30".into()))
    );
    // 9 is the proposal, 6 the default rate limit (2 × 3).
    assert!(w.events.take().contains(&normal(
        "SuccessfulRescale",
        "New size: 6; reason: Ingress metric requests above target"
    )));
}

#[tokio::test]
async fn failed_status_write_is_an_event() {
    let mut w = world();
    w.deployment(3, &[520, 520, 520]);
    w.cluster.fail_update_status(Some("etcd is down"));
    let err = w
        .sync(&hpa(1, 10, vec![cpu(50)]))
        .await
        .err()
        .unwrap_or_default();
    assert_eq!(err, "failed to update status for test-hpa: etcd is down");
    assert_eq!(
        w.events.take(),
        vec![warning("FailedUpdateStatus", "etcd is down")]
    );
}

#[test]
fn group_versions_parse_as_upstream() {
    let cases = [
        ("", Ok(("", ""))),
        ("v1", Ok(("", "v1"))),
        ("apps/v1", Ok(("apps", "v1"))),
        (
            "a/b/c",
            Err("unexpected GroupVersion string: a/b/c".to_string()),
        ),
    ];
    for (input, want) in cases {
        assert_eq!(parse_group_version(input), want, "{input}");
    }
}
