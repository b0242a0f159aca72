//! Upstream's HorizontalController (`horizontal.go`): one sync of one HPA —
//! the target's scale, the metrics' proposal, normalization, the rescale,
//! then the status and events upstream writes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscaler, HorizontalPodAutoscalerStatus, MetricStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use tracing::{debug, info};

use berth_api::selector::LabelSelector;
use berth_runtime::Clock;
use berth_runtime::events::EventType;

use super::Config;
use super::cluster::{Cluster, EventRecorder};
use super::conditions::{ABLE_TO_SCALE, SCALING_ACTIVE, SCALING_LIMITED, set_condition, truncate};
use super::metrics::MetricsClient;
use super::normalization::{
    History, NormalizationArg, ScalingRules, convert_desired_replicas_with_behavior_rate,
    convert_desired_replicas_with_rules, record_initial_recommendation, stabilize_recommendation,
    stabilize_recommendation_with_behaviors, store_scale_event,
};
use super::replica_calculator::{ReplicaCalculator, Tolerances};

/// The HPA controller's state: its clients and, per HPA (`ns/name`), the
/// recommendations and scale events upstream keeps in memory.
pub struct HorizontalController<M, C, E> {
    pub(super) metrics: M,
    pub(super) cluster: C,
    pub(super) events: E,
    pub(super) config: Config,
    pub(super) calc: ReplicaCalculator,
    clock: Arc<dyn Clock>,
    /// Locked only between awaits: syncs of different HPAs run concurrently
    /// (upstream's `--concurrent-horizontal-pod-autoscaler-syncs` workers).
    histories: Mutex<HashMap<String, History>>,
    /// Upstream's hpaSelectors: every known HPA's last parsed selector
    /// ("nothing" until its first sync), to refuse overlapping HPAs.
    pub(super) selectors: Mutex<HashMap<String, LabelSelector>>,
}

/// A lock that survives a panicked holder (the maps stay usable).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Upstream's ParseGroupVersion: `v1`, `apps/v1`; more slashes are refused.
pub fn parse_group_version(api_version: &str) -> Result<(&str, &str), String> {
    if api_version.is_empty() || api_version == "/" {
        return Ok(("", ""));
    }
    match api_version.split_once('/') {
        None => Ok(("", api_version)),
        Some((group, version)) if !version.contains('/') => Ok((group, version)),
        Some(_) => Err(format!("unexpected GroupVersion string: {api_version}")),
    }
}

impl<M: MetricsClient, C: Cluster, E: EventRecorder> HorizontalController<M, C, E> {
    pub fn new(metrics: M, cluster: C, events: E, config: Config, clock: Arc<dyn Clock>) -> Self {
        HorizontalController {
            calc: ReplicaCalculator {
                cpu_initialization_period: config.cpu_initialization_period,
                delay_of_initial_readiness_status: config.initial_readiness_delay,
            },
            metrics,
            cluster,
            events,
            config,
            clock,
            histories: Mutex::new(HashMap::new()),
            selectors: Mutex::new(HashMap::new()),
        }
    }

    pub fn cluster(&self) -> &C {
        &self.cluster
    }

    /// What the controller remembers of an HPA, if anything.
    pub fn history(&self, key: &str) -> Option<History> {
        lock(&self.histories).get(key).cloned()
    }

    /// Upstream's enqueueHPA: an HPA it now knows of (selecting nothing
    /// until it is synced).
    pub fn register(&self, key: &str) {
        lock(&self.selectors)
            .entry(key.to_string())
            .or_insert_with(LabelSelector::nothing);
    }

    /// Upstream's deleteHPA and reconcileKey of a deleted HPA: its history
    /// and selector are dropped.
    pub fn forget(&self, key: &str) {
        lock(&self.selectors).remove(key);
        lock(&self.histories).remove(key);
    }

    pub(super) fn set_condition(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        type_: &str,
        status: bool,
        reason: &str,
        message: impl Into<String>,
        now: Timestamp,
    ) {
        let conditions = hpa
            .status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new);
        set_condition(conditions, type_, status, reason, message, now);
    }

    /// Per-HPA tolerances (`behavior.scale{Up,Down}.tolerance`), else the
    /// controller's `--horizontal-pod-autoscaler-tolerance`.
    fn tolerances(&self, hpa: &HorizontalPodAutoscaler) -> Tolerances {
        let behavior = hpa.spec.as_ref().and_then(|s| s.behavior.as_ref());
        let of = |rules: Option<&k8s_openapi::api::autoscaling::v2::HPAScalingRules>| {
            rules
                .and_then(|r| r.tolerance.as_ref())
                .and_then(|q| berth_api::quantity::Quantity::parse(&q.0).ok())
                .map_or(self.config.tolerance, |q| q.as_f64())
        };
        Tolerances {
            scale_down: of(behavior.and_then(|b| b.scale_down.as_ref())),
            scale_up: of(behavior.and_then(|b| b.scale_up.as_ref())),
        }
    }

    /// Upstream's reconcileAutoscaler for one HPA. An error is returned
    /// (and logged by the caller) after the status has been written.
    pub async fn reconcile_autoscaler(
        &self,
        shared: &HorizontalPodAutoscaler,
    ) -> Result<(), String> {
        let now = self.clock.now();
        let key = super::key_of(shared);
        let mut hpa = shared.clone();
        let original = shared.status.clone();
        let spec = hpa.spec.clone().unwrap_or_default();
        let ns = hpa.metadata.namespace.clone().unwrap_or_default();
        let target = &spec.scale_target_ref;
        let reference = format!("{}/{ns}/{}", target.kind, target.name);

        let scale = match parse_group_version(target.api_version.as_deref().unwrap_or_default()) {
            Err(e) => Err((
                e.clone(),
                format!("invalid API version in scale target reference: {e}"),
            )),
            Ok((group, version)) => self
                .cluster
                .get_scale(&ns, group, version, &target.kind, &target.name)
                .await
                .map_err(|e| {
                    (
                        e.clone(),
                        format!("failed to query scale subresource for {reference}: {e}"),
                    )
                }),
        };
        let (mut scale, resource) = match scale {
            Ok(found) => found,
            Err((e, ret)) => {
                self.events
                    .event(&hpa, EventType::Warning, "FailedGetScale", e.clone());
                self.set_condition(
                    &mut hpa,
                    ABLE_TO_SCALE,
                    false,
                    "FailedGetScale",
                    format!("the HPA controller was unable to get the target's current scale: {e}"),
                    now,
                );
                self.update_status_if_needed(original.as_ref(), &hpa)
                    .await?;
                return Err(ret);
            }
        };
        self.set_condition(
            &mut hpa,
            ABLE_TO_SCALE,
            true,
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
            now,
        );
        let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        record_initial_recommendation(
            lock(&self.histories).entry(key.clone()).or_default(),
            current,
            now,
        );

        let min_replicas = spec.min_replicas.unwrap_or(1);
        let mut statuses: Option<Vec<MetricStatus>> = None;
        let mut desired = 0;
        let mut rescale_reason = String::new();
        let mut ret_err = None;
        let rescale;
        if current == 0 && min_replicas != 0 {
            // Scaled to zero by hand: autoscaling is off until scaled up.
            rescale = false;
            self.set_condition(
                &mut hpa,
                SCALING_ACTIVE,
                false,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
                now,
            );
        } else if current > spec.max_replicas {
            rescale_reason = "Current number of replicas above Spec.MaxReplicas".into();
            desired = spec.max_replicas;
            rescale = desired != current;
        } else if current < min_replicas {
            rescale_reason = "Current number of replicas below Spec.MinReplicas".into();
            desired = min_replicas;
            rescale = desired != current;
        } else {
            let specs = spec.metrics.clone().unwrap_or_default();
            let tolerances = self.tolerances(&hpa);
            let outcome = self
                .compute_replicas_for_metrics(&mut hpa, &scale, &specs, tolerances, now)
                .await;
            statuses = outcome.statuses;
            if outcome.replicas == -1 {
                let err = outcome.error.unwrap_or_default();
                self.set_current_replicas_and_metrics(&mut hpa, current, statuses);
                self.update_status_if_needed(original.as_ref(), &hpa)
                    .await?;
                self.events.event(
                    &hpa,
                    EventType::Warning,
                    "FailedComputeMetricsReplicas",
                    err.clone(),
                );
                return Err(format!(
                    "failed to compute desired number of replicas based on listed metrics for {reference}: {err}"
                ));
            }
            // Some metrics failed but the others scale up: scale, then report.
            ret_err = outcome.error;
            debug!(hpa = %key, desired = outcome.replicas, metric = %outcome.metric, "proposing desired replicas");
            let mut rescale_metric = String::new();
            if outcome.replicas > desired {
                desired = outcome.replicas;
                rescale_metric = outcome.metric;
            }
            if desired > current {
                rescale_reason = format!("{rescale_metric} above target");
            }
            if desired < current {
                rescale_reason = "All metrics below target".into();
            }
            desired = if spec.behavior.is_none() {
                self.normalize_desired_replicas(&mut hpa, &key, current, desired, min_replicas, now)
            } else {
                self.normalize_desired_replicas_with_behaviors(
                    &mut hpa,
                    &key,
                    current,
                    desired,
                    min_replicas,
                    now,
                )
            };
            rescale = desired != current;
        }

        if rescale {
            if let Some(s) = scale.spec.as_mut() {
                s.replicas = Some(desired);
            } else {
                scale.spec = Some(k8s_openapi::api::autoscaling::v1::ScaleSpec {
                    replicas: Some(desired),
                });
            }
            if let Err(e) = self.cluster.update_scale(&ns, &resource, &scale).await {
                self.events.event(
                    &hpa,
                    EventType::Warning,
                    "FailedRescale",
                    format!("New size: {desired}; reason: {rescale_reason}; error: {e}"),
                );
                self.set_condition(
                    &mut hpa,
                    ABLE_TO_SCALE,
                    false,
                    "FailedUpdateScale",
                    format!("the HPA controller was unable to update the target scale: {e}"),
                    now,
                );
                self.set_current_replicas_and_metrics(&mut hpa, current, statuses);
                self.update_status_if_needed(original.as_ref(), &hpa)
                    .await?;
                return Err(format!("failed to rescale {reference}: {e}"));
            }
            self.set_condition(
                &mut hpa,
                ABLE_TO_SCALE,
                true,
                "SucceededRescale",
                format!("the HPA controller was able to update the target scale to {desired}"),
                now,
            );
            self.events.event(
                &hpa,
                EventType::Normal,
                "SuccessfulRescale",
                format!("New size: {desired}; reason: {rescale_reason}"),
            );
            let behavior = spec.behavior.as_ref().map(|b| {
                (
                    ScalingRules::scale_up(b.scale_up.as_ref()),
                    ScalingRules::scale_down(
                        b.scale_down.as_ref(),
                        self.config.downscale_stabilization,
                    ),
                )
            });
            store_scale_event(
                lock(&self.histories).entry(key.clone()).or_default(),
                behavior.as_ref().map(|(u, d)| (u, d)),
                current,
                desired,
                now,
            );
            info!(hpa = %key, current, desired, reason = %rescale_reason, "successfully rescaled");
        } else {
            debug!(hpa = %key, desired, "decided not to scale");
            desired = current;
        }

        self.set_status(&mut hpa, current, desired, statuses, rescale, now);
        self.update_status_if_needed(original.as_ref(), &hpa)
            .await?;
        match ret_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Upstream's normalizeDesiredReplicas (no behavior).
    fn normalize_desired_replicas(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        key: &str,
        current: i32,
        prenormalized: i32,
        min_replicas: i32,
        now: Timestamp,
    ) -> i32 {
        let window = self.config.downscale_stabilization;
        let stabilized = {
            let mut histories = lock(&self.histories);
            let history = histories.entry(key.to_string()).or_default();
            stabilize_recommendation(&mut history.recommendations, now, window, prenormalized)
        };
        if stabilized != prenormalized {
            self.set_condition(
                hpa,
                ABLE_TO_SCALE,
                true,
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation",
                now,
            );
        } else {
            self.set_condition(
                hpa,
                ABLE_TO_SCALE,
                true,
                "ReadyForNewScale",
                "recommended size matches current size",
                now,
            );
        }
        let max = hpa.spec.as_ref().map_or(0, |s| s.max_replicas);
        let (desired, reason, message) =
            convert_desired_replicas_with_rules(current, stabilized, min_replicas, max);
        self.set_condition(
            hpa,
            SCALING_LIMITED,
            desired != stabilized,
            reason,
            message,
            now,
        );
        desired
    }

    /// Upstream's normalizeDesiredReplicasWithBehaviors: stabilization
    /// windows per direction, then the policies' rate.
    fn normalize_desired_replicas_with_behaviors(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        key: &str,
        current: i32,
        prenormalized: i32,
        min_replicas: i32,
        now: Timestamp,
    ) -> i32 {
        let spec = hpa.spec.clone().unwrap_or_default();
        let behavior = spec.behavior.unwrap_or_default();
        let mut args = NormalizationArg {
            scale_up: ScalingRules::scale_up(behavior.scale_up.as_ref()),
            scale_down: ScalingRules::scale_down(
                behavior.scale_down.as_ref(),
                self.config.downscale_stabilization,
            ),
            min_replicas,
            max_replicas: spec.max_replicas,
            current_replicas: current,
            desired_replicas: prenormalized,
        };
        let (stabilized, reason, message, desired, limit_reason, limit_message) = {
            let mut histories = lock(&self.histories);
            let history = histories.entry(key.to_string()).or_default();
            let (stabilized, reason, message) =
                stabilize_recommendation_with_behaviors(&mut history.recommendations, now, &args);
            args.desired_replicas = stabilized;
            let (desired, limit_reason, limit_message) =
                convert_desired_replicas_with_behavior_rate(history, &args, now);
            (
                stabilized,
                reason,
                message,
                desired,
                limit_reason,
                limit_message,
            )
        };
        if stabilized != prenormalized {
            self.set_condition(hpa, ABLE_TO_SCALE, true, reason, message, now);
        } else {
            self.set_condition(
                hpa,
                ABLE_TO_SCALE,
                true,
                "ReadyForNewScale",
                "recommended size matches current size",
                now,
            );
        }
        self.set_condition(
            hpa,
            SCALING_LIMITED,
            desired != stabilized,
            limit_reason,
            limit_message,
            now,
        );
        desired
    }

    /// Upstream's setCurrentReplicasAndMetricsInStatus.
    fn set_current_replicas_and_metrics(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        current: i32,
        statuses: Option<Vec<MetricStatus>>,
    ) {
        let desired = hpa.status.as_ref().map_or(0, |s| s.desired_replicas);
        // Not a rescale: the last scale time is kept, `now` unused.
        self.set_status(hpa, current, desired, statuses, false, Timestamp::MIN);
    }

    /// Upstream's setStatus: the status rebuilt, conditions and the last
    /// scale time kept (moved to `now` on a rescale). `observedGeneration`
    /// is the spec this sync read.
    fn set_status(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        current: i32,
        desired: i32,
        statuses: Option<Vec<MetricStatus>>,
        rescale: bool,
        now: Timestamp,
    ) {
        let old = hpa.status.take().unwrap_or_default();
        hpa.status = Some(HorizontalPodAutoscalerStatus {
            current_replicas: Some(current),
            desired_replicas: desired,
            last_scale_time: if rescale {
                Some(Time(truncate(now)))
            } else {
                old.last_scale_time
            },
            current_metrics: statuses.filter(|s| !s.is_empty()),
            conditions: old.conditions,
            observed_generation: hpa.metadata.generation,
        });
    }

    /// Upstream's updateStatusIfNeeded: written only when it changed.
    async fn update_status_if_needed(
        &self,
        original: Option<&HorizontalPodAutoscalerStatus>,
        hpa: &HorizontalPodAutoscaler,
    ) -> Result<(), String> {
        if original == hpa.status.as_ref() {
            return Ok(());
        }
        if let Err(e) = self.cluster.update_status(hpa).await {
            self.events
                .event(hpa, EventType::Warning, "FailedUpdateStatus", e.clone());
            let name = hpa.metadata.name.as_deref().unwrap_or_default();
            return Err(format!("failed to update status for {name}: {e}"));
        }
        debug!(hpa = %super::key_of(hpa), "successfully updated status");
        Ok(())
    }
}

#[cfg(test)]
#[path = "horizontal_tests.rs"]
mod tests;
