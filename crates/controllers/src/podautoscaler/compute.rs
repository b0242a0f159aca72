//! Upstream's computeReplicasForMetrics and the per-source computations
//! (`computeStatusFor*Metric`): each metric of the HPA proposes a replica
//! count and a status; the largest valid proposal wins. Failures become a
//! Warning event and a ScalingActive=False condition worded as upstream.

use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, ExternalMetricSource, ExternalMetricStatus,
    HorizontalPodAutoscaler, MetricIdentifier, MetricSpec, MetricStatus, MetricTarget,
    MetricValueStatus, ObjectMetricSource, ObjectMetricStatus, PodsMetricSource, PodsMetricStatus,
    ResourceMetricStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::jiff::Timestamp;

use berth_api::quantity::{Format, Quantity};
use berth_api::selector::LabelSelector;
use berth_runtime::events::EventType;

use super::HorizontalController;
use super::cluster::{Cluster, EventRecorder};
use super::conditions::SCALING_ACTIVE;
use super::labelselector::{as_selector, go_string};
use super::metrics::MetricsClient;
use super::replica_calculator::{
    Tolerances, external_metric_replicas, external_per_pod_metric_replicas, object_metric_replicas,
    object_per_pod_metric_replicas,
};

/// What computeReplicasForMetrics returns.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsOutcome {
    /// The largest proposal, or -1 when nothing may be done.
    pub replicas: i32,
    /// Describes the metric that proposed it ("cpu resource utilization
    /// (percentage of request)").
    pub metric: String,
    /// One per metric spec (empty for those that failed), or none when the
    /// selector failed.
    pub statuses: Option<Vec<MetricStatus>>,
    pub timestamp: Option<Timestamp>,
    /// The first invalid metric's error, also when the others still scale.
    pub error: Option<String>,
}

/// A ScalingActive=False condition for a metric that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unable {
    pub reason: String,
    pub message: String,
}

/// One metric's proposal.
struct Proposal {
    replicas: i32,
    metric: String,
    timestamp: Option<Timestamp>,
    status: MetricStatus,
}

type Failure = (Unable, String);

/// A Quantity's milli-value (upstream's `MilliValue()`).
pub fn milli(q: &K8sQuantity) -> i64 {
    Quantity::parse(&q.0).map_or(0, |q| q.milli_value())
}

/// Upstream's `resource.NewMilliQuantity(v, DecimalSI)`.
pub fn milli_quantity(v: i64) -> K8sQuantity {
    K8sQuantity(Quantity::from_milli(v, Format::DecimalSI).canonical())
}

fn identifier(m: &MetricIdentifier) -> MetricIdentifier {
    MetricIdentifier {
        name: m.name.clone(),
        selector: m.selector.clone(),
    }
}

fn namespace(hpa: &HorizontalPodAutoscaler) -> String {
    hpa.metadata.namespace.clone().unwrap_or_default()
}

impl<M: MetricsClient, C: Cluster, E: EventRecorder> HorizontalController<M, C, E> {
    /// Upstream's getUnableComputeReplicaCountCondition: a Warning event
    /// with `reason`, and the condition to set if no metric works.
    fn unable(&self, hpa: &HorizontalPodAutoscaler, reason: &str, err: &str) -> Unable {
        self.events
            .event(hpa, EventType::Warning, reason, err.to_string());
        Unable {
            reason: reason.to_string(),
            message: format!("the HPA was unable to compute the replica count: {err}"),
        }
    }

    fn fail(&self, hpa: &HorizontalPodAutoscaler, reason: &str, err: String) -> Failure {
        (self.unable(hpa, reason, &err), err)
    }

    /// Upstream's computeReplicasForMetrics.
    pub(super) async fn compute_replicas_for_metrics(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        scale: &Scale,
        specs: &[MetricSpec],
        tolerances: Tolerances,
        now: Timestamp,
    ) -> MetricsOutcome {
        let raw_selector = scale.status.as_ref().and_then(|s| s.selector.as_deref());
        let (selector, pods) = match self
            .validate_and_parse_selector(hpa, raw_selector.unwrap_or_default(), now)
            .await
        {
            Ok(found) => found,
            Err(e) => {
                return MetricsOutcome {
                    replicas: -1,
                    metric: String::new(),
                    statuses: None,
                    timestamp: None,
                    error: Some(e),
                };
            }
        };
        let spec_replicas = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let status_replicas = scale.status.as_ref().map_or(0, |s| s.replicas);
        let mut statuses = vec![MetricStatus::default(); specs.len()];
        let mut replicas = 0;
        let mut metric = String::new();
        let mut timestamp = None;
        let mut invalid = 0usize;
        let mut first_invalid: Option<Failure> = None;
        for (i, spec) in specs.iter().enumerate() {
            let args = MetricArgs {
                spec_replicas,
                status_replicas,
                selector: &selector,
                pods: &pods,
                tolerances,
                now,
            };
            match self.compute_replicas_for_metric(hpa, spec, &args).await {
                Err(failure) => {
                    first_invalid.get_or_insert(failure);
                    invalid += 1;
                }
                Ok(p) => {
                    if replicas == 0 || p.replicas > replicas {
                        timestamp = p.timestamp;
                        replicas = p.replicas;
                        metric = p.metric;
                    }
                    if let Some(slot) = statuses.get_mut(i) {
                        *slot = p.status;
                    }
                }
            }
        }
        let error = first_invalid.as_ref().map(|(_, e)| {
            format!(
                "invalid metrics ({invalid} invalid out of {}), first error is: {e}",
                specs.len()
            )
        });
        // All invalid, or some invalid while the others would scale down:
        // do nothing (a metric that cannot be read may be the one that
        // needs more replicas).
        if invalid >= specs.len() || (invalid > 0 && replicas < spec_replicas) {
            if let Some((unable, _)) = &first_invalid {
                self.set_condition(
                    hpa,
                    SCALING_ACTIVE,
                    false,
                    &unable.reason,
                    unable.message.clone(),
                    now,
                );
            }
            return MetricsOutcome {
                replicas: -1,
                metric: String::new(),
                statuses: Some(statuses),
                timestamp: None,
                error,
            };
        }
        self.set_condition(
            hpa,
            SCALING_ACTIVE,
            true,
            "ValidMetricFound",
            format!("the HPA was able to successfully calculate a replica count from {metric}"),
            now,
        );
        MetricsOutcome {
            replicas,
            metric,
            statuses: Some(statuses),
            timestamp,
            error,
        }
    }

    /// Upstream's validateAndParseSelector: the target's selector must be
    /// set and valid, and its pods must not be selected by another HPA.
    /// Returns the selector and the pods it selects.
    async fn validate_and_parse_selector(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        raw: &str,
        now: Timestamp,
    ) -> Result<(LabelSelector, Vec<Pod>), String> {
        if raw.is_empty() {
            let msg = "selector is required".to_string();
            self.events
                .event(hpa, EventType::Warning, "SelectorRequired", msg.clone());
            self.set_condition(
                hpa,
                SCALING_ACTIVE,
                false,
                "InvalidSelector",
                "the HPA target's scale is missing a selector",
                now,
            );
            return Err(msg);
        }
        let parsed = match LabelSelector::parse(raw) {
            Ok(s) => s,
            Err(e) => {
                let msg = format!(
                    "couldn't convert selector into a corresponding internal selector object: {e}"
                );
                self.events
                    .event(hpa, EventType::Warning, "InvalidSelector", msg.clone());
                self.set_condition(
                    hpa,
                    SCALING_ACTIVE,
                    false,
                    "InvalidSelector",
                    msg.clone(),
                    now,
                );
                return Err(msg);
            }
        };
        let key = super::key_of(hpa);
        // Only HPAs the controller knows of (not deleted meanwhile) count.
        if let Some(slot) = super::horizontal::lock(&self.selectors).get_mut(&key) {
            *slot = parsed.clone();
        }
        let ns = namespace(hpa);
        let pods = self.cluster.list_pods(&ns, &parsed).await?;
        let controlling = self.hpas_controlling(&ns, &pods);
        if controlling.len() > 1 {
            let msg = format!(
                "pods by selector {raw} are controlled by multiple HPAs: [{}]",
                controlling.join(" ")
            );
            self.events
                .event(hpa, EventType::Warning, "AmbiguousSelector", msg.clone());
            self.set_condition(
                hpa,
                SCALING_ACTIVE,
                false,
                "AmbiguousSelector",
                msg.clone(),
                now,
            );
            return Err(msg);
        }
        Ok((parsed, pods))
    }

    /// Upstream's hpasControllingPodsUnderSelector: the HPAs (`ns/name`,
    /// sorted) whose last known selector matches one of `pods`.
    fn hpas_controlling(&self, namespace: &str, pods: &[Pod]) -> Vec<String> {
        let empty = std::collections::BTreeMap::new();
        let selectors = super::horizontal::lock(&self.selectors);
        let mut found: Vec<String> = selectors
            .iter()
            .filter(|(key, _)| key.split_once('/').is_some_and(|(ns, _)| ns == namespace))
            .filter(|(_, sel)| {
                pods.iter()
                    .any(|p| sel.matches(p.metadata.labels.as_ref().unwrap_or(&empty)))
            })
            .map(|(key, _)| key.clone())
            .collect();
        found.sort();
        found
    }

    /// Upstream's computeReplicasForMetric.
    async fn compute_replicas_for_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        spec: &MetricSpec,
        args: &MetricArgs<'_>,
    ) -> Result<Proposal, Failure> {
        match (spec.type_.as_str(), spec) {
            (
                "Object",
                MetricSpec {
                    object: Some(src), ..
                },
            ) => {
                let metric_selector = as_selector(src.metric.selector.as_ref()).map_err(|e| {
                    let (u, e) = self.fail(hpa, "FailedGetObjectMetric", e.to_string());
                    (u, format!("failed to get object metric value: {e}"))
                })?;
                self.object_metric(hpa, src, &metric_selector, args)
                    .await
                    .map_err(|(u, e)| (u, format!("failed to get object metric value: {e}")))
            }
            (
                "Pods",
                MetricSpec {
                    pods: Some(src), ..
                },
            ) => {
                let metric_selector = as_selector(src.metric.selector.as_ref()).map_err(|e| {
                    let (u, e) = self.fail(hpa, "FailedGetPodsMetric", e.to_string());
                    (u, format!("failed to get pods metric value: {e}"))
                })?;
                self.pods_metric(hpa, src, &metric_selector, args)
                    .await
                    .map_err(|(u, e)| (u, format!("failed to get pods metric value: {e}")))
            }
            (
                "Resource",
                MetricSpec {
                    resource: Some(src),
                    ..
                },
            ) => {
                match self
                    .resource_metric(&src.target, &src.name, &namespace(hpa), "", args)
                    .await
                {
                    Ok((replicas, current, timestamp, metric)) => Ok(Proposal {
                        replicas,
                        metric,
                        timestamp,
                        status: MetricStatus {
                            type_: "Resource".into(),
                            resource: Some(ResourceMetricStatus {
                                name: src.name.clone(),
                                current,
                            }),
                            ..Default::default()
                        },
                    }),
                    Err(e) => {
                        let (u, e) = self.fail(hpa, "FailedGetResourceMetric", e);
                        Err((
                            u,
                            format!("failed to get {} resource metric value: {e}", src.name),
                        ))
                    }
                }
            }
            (
                "ContainerResource",
                MetricSpec {
                    container_resource: Some(src),
                    ..
                },
            ) => {
                match self
                    .resource_metric(
                        &src.target,
                        &src.name,
                        &namespace(hpa),
                        &src.container,
                        args,
                    )
                    .await
                {
                    Ok((replicas, current, timestamp, metric)) => Ok(Proposal {
                        replicas,
                        metric,
                        timestamp,
                        status: MetricStatus {
                            type_: "ContainerResource".into(),
                            container_resource: Some(ContainerResourceMetricStatus {
                                name: src.name.clone(),
                                container: src.container.clone(),
                                current,
                            }),
                            ..Default::default()
                        },
                    }),
                    Err(e) => {
                        let (u, e) = self.fail(hpa, "FailedGetContainerResourceMetric", e);
                        Err((
                            u,
                            format!(
                                "failed to get {} container metric value: {e}",
                                src.container
                            ),
                        ))
                    }
                }
            }
            (
                "External",
                MetricSpec {
                    external: Some(src),
                    ..
                },
            ) => self
                .external_metric(hpa, src, args)
                .await
                .map_err(|(u, e)| {
                    (
                        u,
                        format!(
                            "failed to get {} external metric value: {e}",
                            src.metric.name
                        ),
                    )
                }),
            (type_, _) => {
                // Validation refuses these; a source missing for its type
                // is treated as an unknown type.
                let err = format!("unknown metric source type {type_:?}");
                Err(self.fail(hpa, "InvalidMetricSourceType", err))
            }
        }
    }

    /// Upstream's computeStatusForObjectMetric.
    async fn object_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        src: &ObjectMetricSource,
        metric_selector: &LabelSelector,
        args: &MetricArgs<'_>,
    ) -> Result<Proposal, Failure> {
        let ns = namespace(hpa);
        let name = &src.metric.name;
        let object = &src.described_object;
        // Upstream's format string puts the error after the name.
        let fetch_err = |e| {
            format!(
                "unable to get metric {name}: {} on {ns} {}/{e}",
                object.kind, object.name
            )
        };
        let target = &src.target;
        if let (true, Some(value)) = (target.type_ == "Value", &target.value) {
            let result = self
                .metrics
                .get_object_metric(name, &ns, object, metric_selector)
                .await
                .map_err(fetch_err)
                .and_then(|(usage, _)| {
                    object_metric_replicas(
                        args.spec_replicas,
                        usage,
                        milli(value),
                        args.tolerances,
                        args.pods,
                    )
                    .map_err(|e| e.to_string())
                });
            let r = result.map_err(|e| self.fail(hpa, "FailedGetObjectMetric", e))?;
            return Ok(Proposal {
                replicas: r.replicas,
                metric: format!("{} metric {name}", object.kind),
                timestamp: None,
                status: MetricStatus {
                    type_: "Object".into(),
                    object: Some(ObjectMetricStatus {
                        described_object: object.clone(),
                        metric: identifier(&src.metric),
                        current: MetricValueStatus {
                            value: Some(milli_quantity(r.usage)),
                            ..Default::default()
                        },
                    }),
                    ..Default::default()
                },
            });
        }
        if let (true, Some(average)) = (target.type_ == "AverageValue", &target.average_value) {
            let (usage, timestamp) = self
                .metrics
                .get_object_metric(name, &ns, object, metric_selector)
                .await
                .map_err(|e| {
                    let (u, e) = self.fail(hpa, "FailedGetObjectMetric", fetch_err(e));
                    (u, format!("failed to get {name} object metric: {e}"))
                })?;
            let r = object_per_pod_metric_replicas(
                args.status_replicas,
                usage,
                milli(average),
                args.tolerances,
            );
            return Ok(Proposal {
                replicas: r.replicas,
                // Upstream's wording, although the metric is an Object one.
                metric: format!(
                    "external metric {name}({})",
                    go_string(src.metric.selector.as_ref())
                ),
                timestamp: Some(timestamp),
                status: MetricStatus {
                    type_: "Object".into(),
                    object: Some(ObjectMetricStatus {
                        // Upstream leaves the described object out here.
                        described_object: Default::default(),
                        metric: identifier(&src.metric),
                        current: MetricValueStatus {
                            average_value: Some(milli_quantity(r.usage)),
                            ..Default::default()
                        },
                    }),
                    ..Default::default()
                },
            });
        }
        let err = "invalid object metric source: neither a value target nor an average value target was set";
        Err(self.fail(hpa, "FailedGetObjectMetric", err.to_string()))
    }

    /// Upstream's computeStatusForPodsMetric.
    async fn pods_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        src: &PodsMetricSource,
        metric_selector: &LabelSelector,
        args: &MetricArgs<'_>,
    ) -> Result<Proposal, Failure> {
        let ns = namespace(hpa);
        let name = &src.metric.name;
        let Some(target) = &src.target.average_value else {
            let err = "invalid pods metric source: the average value target was not set";
            return Err(self.fail(hpa, "FailedGetPodsMetric", err.to_string()));
        };
        let result = match self
            .metrics
            .get_raw_metric(name, &ns, args.selector, metric_selector)
            .await
        {
            Err(e) => Err(format!("unable to get metric {name}: {e}")),
            Ok((metrics, timestamp)) => self
                .calc
                .plain_metric_replicas(
                    args.now,
                    metrics,
                    args.spec_replicas,
                    milli(target),
                    args.tolerances,
                    args.pods,
                    "",
                )
                .map(|r| (r, timestamp))
                .map_err(|e| e.to_string()),
        };
        let (r, timestamp) = result.map_err(|e| self.fail(hpa, "FailedGetPodsMetric", e))?;
        Ok(Proposal {
            replicas: r.replicas,
            metric: format!("pods metric {name}"),
            timestamp: Some(timestamp),
            status: MetricStatus {
                type_: "Pods".into(),
                pods: Some(PodsMetricStatus {
                    metric: identifier(&src.metric),
                    current: MetricValueStatus {
                        average_value: Some(milli_quantity(r.usage)),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            },
        })
    }

    /// Upstream's computeStatusForResourceMetricGeneric: an AverageValue
    /// or a Utilization target on a resource of the pods (or of one of
    /// their containers).
    async fn resource_metric(
        &self,
        target: &MetricTarget,
        resource: &str,
        ns: &str,
        container: &str,
        args: &MetricArgs<'_>,
    ) -> Result<(i32, MetricValueStatus, Option<Timestamp>, String), String> {
        if let Some(average) = &target.average_value {
            let (metrics, timestamp) = self
                .metrics
                .get_resource_metric(resource, ns, args.selector, container)
                .await
                .map_err(|e| format!("failed to get {resource} usage: unable to get metrics for resource {resource}: {e}"))?;
            let r = self
                .calc
                .plain_metric_replicas(
                    args.now,
                    metrics,
                    args.spec_replicas,
                    milli(average),
                    args.tolerances,
                    args.pods,
                    resource,
                )
                .map_err(|e| format!("failed to get {resource} usage: {e}"))?;
            let status = MetricValueStatus {
                average_value: Some(milli_quantity(r.usage)),
                ..Default::default()
            };
            return Ok((
                r.replicas,
                status,
                Some(timestamp),
                format!("{resource} resource"),
            ));
        }
        let Some(utilization) = target.average_utilization else {
            return Err("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set".into());
        };
        let (metrics, timestamp) = self
            .metrics
            .get_resource_metric(resource, ns, args.selector, container)
            .await
            .map_err(|e| {
                format!("failed to get {resource} utilization: unable to get metrics for resource {resource}: {e}")
            })?;
        let r = self
            .calc
            .resource_replicas(
                args.now,
                args.spec_replicas,
                utilization,
                resource,
                args.tolerances,
                args.pods,
                metrics,
                container,
            )
            .map_err(|e| format!("failed to get {resource} utilization: {e}"))?;
        let metric = if container.is_empty() {
            format!("{resource} resource utilization (percentage of request)")
        } else {
            format!("{resource} container resource utilization (percentage of request)")
        };
        let status = MetricValueStatus {
            average_utilization: Some(r.utilization),
            average_value: Some(milli_quantity(r.raw_utilization)),
            value: None,
        };
        Ok((r.replicas, status, Some(timestamp), metric))
    }

    /// Upstream's computeStatusForExternalMetric.
    async fn external_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        src: &ExternalMetricSource,
        args: &MetricArgs<'_>,
    ) -> Result<Proposal, Failure> {
        let ns = namespace(hpa);
        let name = &src.metric.name;
        let shown = go_string(src.metric.selector.as_ref());
        let metric = format!("external metric {name}({shown})");
        let status = |current| MetricStatus {
            type_: "External".into(),
            external: Some(ExternalMetricStatus {
                metric: identifier(&src.metric),
                current,
            }),
            ..Default::default()
        };
        let (average, value) = (&src.target.average_value, &src.target.value);
        if average.is_none() && value.is_none() {
            let err = "invalid external metric source: neither a value target nor an average value target was set";
            return Err(self.fail(hpa, "FailedGetExternalMetric", err.to_string()));
        }
        let fetched = match as_selector(src.metric.selector.as_ref()) {
            Err(e) => Err(e.to_string()),
            Ok(sel) => self
                .metrics
                .get_external_metric(name, &ns, &sel)
                .await
                .map_err(|e| format!("unable to get external metric {ns}/{name}/{shown}: {e}")),
        };
        if let Some(average) = average {
            let (values, timestamp) = fetched.map_err(|e| {
                let (u, e) = self.fail(hpa, "FailedGetExternalMetric", e);
                (u, format!("failed to get {name} external metric: {e}"))
            })?;
            let r = external_per_pod_metric_replicas(
                args.status_replicas,
                &values,
                milli(average),
                args.tolerances,
            );
            return Ok(Proposal {
                replicas: r.replicas,
                metric,
                timestamp: Some(timestamp),
                status: status(MetricValueStatus {
                    average_value: Some(milli_quantity(r.usage)),
                    ..Default::default()
                }),
            });
        }
        let target = value.as_ref().map_or(0, milli);
        let result = fetched.and_then(|(values, _)| {
            external_metric_replicas(
                args.spec_replicas,
                &values,
                target,
                args.tolerances,
                args.pods,
            )
            .map_err(|e| e.to_string())
        });
        let r = result.map_err(|e| {
            let (u, e) = self.fail(hpa, "FailedGetExternalMetric", e);
            (u, format!("failed to get external metric {name}: {e}"))
        })?;
        Ok(Proposal {
            replicas: r.replicas,
            metric,
            timestamp: None,
            status: status(MetricValueStatus {
                value: Some(milli_quantity(r.usage)),
                ..Default::default()
            }),
        })
    }
}

/// What every metric's computation reads.
pub(super) struct MetricArgs<'a> {
    spec_replicas: i32,
    status_replicas: i32,
    selector: &'a LabelSelector,
    pods: &'a [Pod],
    tolerances: Tolerances,
    now: Timestamp,
}
