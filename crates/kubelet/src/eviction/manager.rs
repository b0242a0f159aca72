//! The eviction manager's loop (upstream's `eviction_manager.go`): every
//! housekeeping interval, observe the signals, decide the met thresholds and node
//! conditions, and when a threshold is met past its grace period rank the active
//! pods and evict the first that may be evicted: one pod per cycle, then wait for
//! its cleanup before the next look. Disk pressure is first met by reclaiming
//! node-level resources (dead containers, unused images); pods are evicted only
//! when that was not enough.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use tracing::{info, warn};

use super::message::eviction_message;
use super::ranking::{is_critical, rank, stats_by_uid};
use super::signals::{
    Condition, Observations, Signal, Threshold, by_eviction_priority, conditions_last_observed,
    conditions_observed_since, first_observed, met_grace_period, node_conditions, observations,
    thresholds_met, updated_stats,
};
use super::{Config, PodEviction};
use crate::stats::summary::Summary;

/// What one cycle decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The node conditions to report (kept through the transition period).
    pub conditions: Vec<Condition>,
    /// The pod to evict this cycle, if any, and how.
    pub evict: Option<(String, PodEviction)>,
    /// The signal of the threshold acted on, when one is met past its grace
    /// period: node-level reclaim comes before evicting for it.
    pub reclaim: Option<Signal>,
}

/// The state kept between cycles.
#[derive(Debug, Default)]
pub struct State {
    met: Vec<usize>,
    first_observed: HashMap<usize, Instant>,
    conditions_observed: HashMap<Condition, Instant>,
    last_observations: Option<Observations>,
    pub conditions: Vec<Condition>,
}

impl State {
    /// Upstream's `synchronize` minus the kill: observes `summary`, updates the
    /// state and picks the pod to evict among `pods` (the active ones).
    pub fn synchronize(
        &mut self,
        cfg: &Config,
        summary: &Summary,
        pods: &[&Pod],
        now: Instant,
    ) -> Decision {
        let all = &cfg.thresholds;
        let obs = observations(summary);
        let every: Vec<usize> = (0..all.len()).collect();
        let mut met = thresholds_met(all, &every, &obs, false);
        // Thresholds met last time stay met until their minimum reclaim is back.
        if !self.met.is_empty() {
            for i in thresholds_met(all, &self.met, &obs, true) {
                if !met.contains(&i) {
                    met.push(i);
                }
            }
        }
        let first = first_observed(&met, &self.first_observed, now);
        let seen = node_conditions(all, &met);
        let last_seen = conditions_last_observed(&seen, &self.conditions_observed, now);
        let conditions = conditions_observed_since(&last_seen, cfg.pressure_transition_period, now);
        let mut met = met_grace_period(all, &first, now);
        if let Some(last) = &self.last_observations {
            met = updated_stats(all, &met, &obs, last);
        }
        self.conditions = conditions.clone();
        self.first_observed = first;
        self.conditions_observed = last_seen;
        self.met = met.clone();
        self.last_observations = Some(obs.clone());
        let mut decision = Decision {
            conditions,
            evict: None,
            reclaim: None,
        };
        if met.is_empty() {
            return decision;
        }
        by_eviction_priority(all, &mut met);
        // Every signal Berth observes has a resource to reclaim.
        let t = &all[met[0]];
        decision.reclaim = Some(t.signal);
        let resource = t.signal.resource();
        if pods.is_empty() {
            info!("eviction manager: no pods to evict");
            return decision;
        }
        let stats = stats_by_uid(&summary.pods);
        let mut ranked: Vec<&Pod> = pods.to_vec();
        rank(&mut ranked, t.signal, &stats);
        // Critical pods are skipped (upstream's evictPod refuses them).
        let Some(pod) = ranked.into_iter().find(|p| !is_critical(p)) else {
            warn!("eviction manager: every pod left is critical");
            return decision;
        };
        let grace = grace_period(cfg, t, pod);
        let message = eviction_message(resource, pod, &stats, all, &met, &obs);
        decision.evict = Some((
            pod.metadata.uid.clone().unwrap_or_default(),
            PodEviction { grace, message },
        ));
        decision
    }
}

/// Hard thresholds kill at once; soft ones with the pod's grace period capped by
/// `--eviction-max-pod-grace-period`.
pub fn grace_period(cfg: &Config, t: &Threshold, pod: &Pod) -> Duration {
    if t.is_hard() {
        return Duration::ZERO;
    }
    let max = cfg.max_pod_grace_period;
    let own = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .map(|s| Duration::from_secs(s.max(0) as u64));
    own.map_or(max, |o| o.min(max))
}

/// Where the loop reads stats.
#[async_trait::async_trait]
pub trait SummaryProvider: Send + Sync {
    async fn summary(&self) -> Option<Summary>;
}

#[async_trait::async_trait]
impl SummaryProvider for crate::stats::StatsProvider {
    async fn summary(&self) -> Option<Summary> {
        match crate::stats::StatsProvider::summary(self, Default::default()).await {
            Ok(s) => Some(s),
            Err(e) => {
                warn!(error = %e, "eviction manager: failed to get summary stats");
                None
            }
        }
    }
}

/// How the loop kills a pod and learns of the pods and conditions.
#[async_trait::async_trait]
pub trait PodKiller: Send + Sync {
    /// The active pods (bound here, not terminal, not being deleted).
    fn active_pods(&self) -> Vec<Pod>;
    /// Kills the pod (event, containers stopped within grace, final status);
    /// returns once it is cleaned up or `timeout` passed.
    async fn evict(&self, uid: &str, eviction: PodEviction, timeout: Duration) -> bool;
    /// The conditions decided this cycle.
    fn set_conditions(&self, conditions: &[Condition]);
}

/// Frees node-level resources for a signal before pods are evicted for it
/// (upstream's `signalToNodeReclaimFuncs`: dead containers and unused images
/// for the disk signals).
#[async_trait::async_trait]
pub trait NodeReclaimer: Send + Sync {
    /// Runs the reclaim functions of `signal`; false when it has none.
    async fn reclaim(&self, signal: Signal) -> bool;
}

/// A node with nothing to reclaim (memory and pids have no reclaim functions).
pub struct NoReclaim;

#[async_trait::async_trait]
impl NodeReclaimer for NoReclaim {
    async fn reclaim(&self, _signal: Signal) -> bool {
        false
    }
}

/// Upstream's `reclaimNodeLevelResources`: reclaims for `signal`, then reads
/// the stats again; true when no threshold (minimum reclaim included) is met
/// any more, so no pod needs to go.
pub async fn reclaim_node_level_resources(
    cfg: &Config,
    signal: Signal,
    stats: &dyn SummaryProvider,
    reclaimer: &dyn NodeReclaimer,
) -> bool {
    if !reclaimer.reclaim(signal).await {
        return false;
    }
    let Some(after) = stats.summary().await else {
        warn!("eviction manager: failed to get summary stats after resource reclaim");
        return false;
    };
    let every: Vec<usize> = (0..cfg.thresholds.len()).collect();
    thresholds_met(&cfg.thresholds, &every, &observations(&after), true).is_empty()
}

/// How long the loop waits for an evicted pod's cleanup (upstream's `podCleanupTimeout`).
pub const POD_CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);

/// One cycle: synchronize, publish the conditions, evict. Returns the evicted uid.
pub async fn cycle(
    state: &mut State,
    cfg: &Config,
    stats: &dyn SummaryProvider,
    killer: &dyn PodKiller,
    reclaimer: &dyn NodeReclaimer,
) -> Option<String> {
    let summary = stats.summary().await?;
    let pods = killer.active_pods();
    let refs: Vec<&Pod> = pods.iter().collect();
    let d = state.synchronize(cfg, &summary, &refs, Instant::now());
    killer.set_conditions(&d.conditions);
    if let Some(signal) = d.reclaim
        && reclaim_node_level_resources(cfg, signal, stats, reclaimer).await
    {
        info!(
            signal = signal.as_str(),
            "eviction manager: able to reduce resource pressure without evicting pods"
        );
        return None;
    }
    let (uid, ev) = d.evict?;
    info!(pod = %uid, message = %ev.message, "eviction manager: evicting pod");
    killer.evict(&uid, ev, POD_CLEANUP_TIMEOUT).await;
    Some(uid)
}

/// Runs forever: a cycle every housekeeping interval, the next at once after an
/// eviction's cleanup.
pub async fn run(
    cfg: Config,
    stats: Arc<dyn SummaryProvider>,
    killer: Arc<dyn PodKiller>,
    reclaimer: Arc<dyn NodeReclaimer>,
) {
    let mut state = State::default();
    loop {
        let evicted = cycle(
            &mut state,
            &cfg,
            stats.as_ref(),
            killer.as_ref(),
            reclaimer.as_ref(),
        )
        .await;
        if evicted.is_none() {
            tokio::time::sleep(cfg.housekeeping_interval).await;
        } else {
            // Stats and kills that answer at once must not starve the runtime.
            tokio::task::yield_now().await;
        }
    }
}
