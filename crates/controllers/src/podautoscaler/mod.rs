//! The HorizontalPodAutoscaler controller (upstream
//! `pkg/controller/podautoscaler`, autoscaling/v2): every sync period, and
//! when an HPA's spec changes, each HPA's scale target is read through its
//! `scale` subresource, its metrics (`metrics.k8s.io`, `custom.metrics.k8s.io`,
//! `external.metrics.k8s.io`) turned into a replica count
//! ([`replica_calculator`]), the count normalized ([`normalization`]) and
//! written back, and the HPA's status and events written with upstream's
//! conditions, reasons and messages.
//!
//! - [`replica_calculator`]: the replica count per metric (pure).
//! - [`normalization`]: stabilization, limits and `behavior` policies (pure).
//! - [`metrics`]: the [`metrics::MetricsClient`] boundary, its kube-rs
//!   implementation and a fake.
//! - [`cluster`]: scale subresource, pods, status and events as a boundary.
//! - [`horizontal`] and [`compute`]: one sync of one HPA.

pub mod cluster;
pub mod compute;
pub mod conditions;
pub mod fake;
pub mod horizontal;
pub mod labelselector;
pub mod metrics;
pub mod normalization;
pub mod replica_calculator;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tracing::warn;

use berth_runtime::RealClock;
use berth_runtime::events::{EventSource, Recorder};

pub use cluster::{Cluster, EventRecorder, KubeCluster};
pub use horizontal::HorizontalController;
pub use metrics::{FakeMetricsClient, KubeMetricsClient, MetricsClient};

/// The controller's settings; `Default` is upstream's.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `--horizontal-pod-autoscaler-sync-period`: how often every HPA is synced.
    pub sync_period: Duration,
    /// `--horizontal-pod-autoscaler-tolerance`: usage within 1 ± this keeps the count.
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period`.
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay`.
    pub initial_readiness_delay: Duration,
    /// `--horizontal-pod-autoscaler-downscale-stabilization`.
    pub downscale_stabilization: Duration,
    /// `--concurrent-horizontal-pod-autoscaler-syncs`: HPAs synced at once.
    pub concurrent_syncs: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sync_period: Duration::from_secs(15),
            tolerance: 0.1,
            cpu_initialization_period: Duration::from_secs(5 * 60),
            initial_readiness_delay: Duration::from_secs(30),
            downscale_stabilization: Duration::from_secs(5 * 60),
            concurrent_syncs: 5,
        }
    }
}

/// `namespace/name`, upstream's queue key.
pub fn key_of(hpa: &HorizontalPodAutoscaler) -> String {
    format!(
        "{}/{}",
        hpa.metadata.namespace.as_deref().unwrap_or_default(),
        hpa.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The watched HPAs and the generation each was last synced at.
#[derive(Default)]
struct Watched {
    hpas: BTreeMap<String, HorizontalPodAutoscaler>,
    /// Objects of a relist in progress.
    relist: Option<BTreeMap<String, HorizontalPodAutoscaler>>,
    synced_generation: HashMap<String, Option<i64>>,
}

/// Runs the controller until the process ends.
pub async fn run(client: kube::Client, config: Config) {
    let events = Recorder::new(
        client.clone(),
        EventSource::new("horizontal-pod-autoscaler", ""),
    );
    let controller = HorizontalController::new(
        KubeMetricsClient::new(client.clone()),
        KubeCluster::new(client.clone()),
        events,
        config.clone(),
        Arc::new(RealClock),
    );
    let api: Api<HorizontalPodAutoscaler> = Api::all(client);
    let mut stream = watcher(api, berth_runtime::reflect::informer_config())
        .default_backoff()
        .boxed();
    let mut tick = tokio::time::interval(config.sync_period.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut watched = Watched::default();
    loop {
        // Watch events first: a sync must start from the latest object, or
        // its status write conflicts with the one the previous round made.
        tokio::select! {
            biased;
            event = stream.next() => match event {
                None => return,
                Some(event) => on_event(&controller, &mut watched, event).await,
            },
            _ = tick.tick() => {
                // What the watch delivered since (the statuses the last round
                // wrote, spec changes), then every HPA, a few at a time.
                while let Some(Some(event)) = stream.next().now_or_never() {
                    on_event(&controller, &mut watched, event).await;
                }
                controller.cluster().begin_sync();
                let all: Vec<HorizontalPodAutoscaler> = watched.hpas.values().cloned().collect();
                for hpa in &all {
                    watched.synced_generation.insert(key_of(hpa), hpa.metadata.generation);
                }
                futures::stream::iter(&all)
                    .for_each_concurrent(config.concurrent_syncs.max(1), |hpa| reconcile(&controller, hpa))
                    .await;
            }
        }
    }
}

async fn on_event<M: MetricsClient, C: Cluster, E: EventRecorder>(
    controller: &HorizontalController<M, C, E>,
    watched: &mut Watched,
    event: Result<watcher::Event<HorizontalPodAutoscaler>, watcher::Error>,
) {
    match event {
        Err(e) => warn!(error = %e, "watching HorizontalPodAutoscalers"),
        Ok(event) => {
            if let Some(changed) = apply(controller, watched, event) {
                sync(controller, watched, &changed).await;
            }
        }
    }
}

/// Applies a watch event; returns an HPA whose spec changed since it was
/// last synced, to sync now rather than at the next period.
fn apply<M: MetricsClient, C: Cluster, E: EventRecorder>(
    controller: &HorizontalController<M, C, E>,
    watched: &mut Watched,
    event: watcher::Event<HorizontalPodAutoscaler>,
) -> Option<HorizontalPodAutoscaler> {
    match event {
        watcher::Event::Init => {
            watched.relist = Some(BTreeMap::new());
            None
        }
        watcher::Event::InitApply(hpa) => {
            let key = key_of(&hpa);
            controller.register(&key);
            watched
                .relist
                .get_or_insert_with(BTreeMap::new)
                .insert(key, hpa);
            None
        }
        watcher::Event::InitDone => {
            let listed = watched.relist.take().unwrap_or_default();
            for key in watched.hpas.keys().filter(|k| !listed.contains_key(*k)) {
                controller.forget(key);
                watched.synced_generation.remove(key);
            }
            watched.hpas = listed;
            None
        }
        watcher::Event::Apply(hpa) => {
            let key = key_of(&hpa);
            controller.register(&key);
            let changed = watched
                .synced_generation
                .get(&key)
                .is_none_or(|g| *g != hpa.metadata.generation);
            watched.hpas.insert(key, hpa.clone());
            changed.then_some(hpa)
        }
        watcher::Event::Delete(hpa) => {
            let key = key_of(&hpa);
            watched.hpas.remove(&key);
            watched.synced_generation.remove(&key);
            controller.forget(&key);
            None
        }
    }
}

async fn sync<M: MetricsClient, C: Cluster, E: EventRecorder>(
    controller: &HorizontalController<M, C, E>,
    watched: &mut Watched,
    hpa: &HorizontalPodAutoscaler,
) {
    watched
        .synced_generation
        .insert(key_of(hpa), hpa.metadata.generation);
    reconcile(controller, hpa).await;
}

async fn reconcile<M: MetricsClient, C: Cluster, E: EventRecorder>(
    controller: &HorizontalController<M, C, E>,
    hpa: &HorizontalPodAutoscaler,
) {
    if let Err(e) = controller.reconcile_autoscaler(hpa).await {
        warn!(hpa = %key_of(hpa), error = %e, "horizontal pod autoscaler sync failed");
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::podautoscaler::fake::{FakeCluster, FakeEvents};

    fn hpa(name: &str, generation: i64) -> HorizontalPodAutoscaler {
        HorizontalPodAutoscaler {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                generation: Some(generation),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn watch_events_sync_only_spec_changes() {
        let c = HorizontalController::new(
            FakeMetricsClient::new(),
            FakeCluster::new(),
            FakeEvents::default(),
            Config::default(),
            Arc::new(berth_runtime::FakeClock::default()),
        );
        let mut w = Watched::default();
        let name = |h: Option<HorizontalPodAutoscaler>| h.and_then(|h| h.metadata.name);
        // The initial list is synced by the period, not at once.
        assert!(apply(&c, &mut w, watcher::Event::Init).is_none());
        assert!(apply(&c, &mut w, watcher::Event::InitApply(hpa("a", 1))).is_none());
        assert!(apply(&c, &mut w, watcher::Event::InitApply(hpa("b", 1))).is_none());
        assert!(apply(&c, &mut w, watcher::Event::InitDone).is_none());
        assert_eq!(
            w.hpas.keys().cloned().collect::<Vec<_>>(),
            vec!["ns/a", "ns/b"]
        );
        assert!(c.selectors.lock().unwrap().contains_key("ns/a"));
        // Never synced, or a new generation: sync now.
        assert_eq!(
            name(apply(&c, &mut w, watcher::Event::Apply(hpa("a", 1)))),
            Some("a".into())
        );
        w.synced_generation.insert("ns/a".into(), Some(1));
        // Our own status write (same generation): wait for the period.
        assert!(apply(&c, &mut w, watcher::Event::Apply(hpa("a", 1))).is_none());
        assert_eq!(
            name(apply(&c, &mut w, watcher::Event::Apply(hpa("a", 2)))),
            Some("a".into())
        );
        // Deleted, or gone from a relist: forgotten.
        assert!(apply(&c, &mut w, watcher::Event::Delete(hpa("a", 2))).is_none());
        assert!(!c.selectors.lock().unwrap().contains_key("ns/a") && !w.hpas.contains_key("ns/a"));
        apply(&c, &mut w, watcher::Event::Init);
        apply(&c, &mut w, watcher::Event::InitDone);
        assert!(w.hpas.is_empty() && !c.selectors.lock().unwrap().contains_key("ns/b"));
    }

    #[test]
    fn defaults_are_upstreams() {
        let c = Config::default();
        assert_eq!(c.sync_period, Duration::from_secs(15));
        assert_eq!(c.tolerance, 0.1);
        assert_eq!(c.cpu_initialization_period, Duration::from_secs(300));
        assert_eq!(c.initial_readiness_delay, Duration::from_secs(30));
        assert_eq!(c.downscale_stabilization, Duration::from_secs(300));
    }
}
