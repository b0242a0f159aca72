//! The eviction manager as the node agent runs it: stats from the agent's stats
//! provider, pods from its pod watch, kills handed to the pods' workers, disk
//! reclaimed by the garbage collectors first, and the pressure conditions passed
//! on to the Node status.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::health::{HealthMonitor, Pressure};
use super::worker::Shared;
use crate::eviction::manager::{NodeReclaimer, PodKiller, SummaryProvider};
use crate::eviction::{Condition, Evictions, PodEviction};

/// [`PodKiller`] over the agent's pod workers.
pub struct WorkerKiller {
    pub evictions: Arc<Evictions>,
    pub shared: Arc<Shared>,
    pub monitor: Arc<HealthMonitor>,
}

#[async_trait::async_trait]
impl PodKiller for WorkerKiller {
    fn active_pods(&self) -> Vec<Pod> {
        self.evictions.active_pods()
    }

    async fn evict(&self, uid: &str, eviction: PodEviction, timeout: Duration) -> bool {
        let done = self.evictions.request(uid, eviction);
        self.shared.poke(uid);
        matches!(tokio::time::timeout(timeout, done).await, Ok(Ok(())))
    }

    fn set_conditions(&self, conditions: &[Condition]) {
        self.evictions.set_conditions(conditions);
        self.monitor.set_pressure(Pressure {
            memory: conditions.contains(&Condition::MemoryPressure),
            disk: conditions.contains(&Condition::DiskPressure),
            pid: conditions.contains(&Condition::PidPressure),
        });
    }
}

/// Runs the eviction manager over the agent's workers, forever.
pub async fn run(
    cfg: crate::eviction::Config,
    shared: Arc<Shared>,
    monitor: Arc<HealthMonitor>,
    stats: Arc<dyn SummaryProvider>,
    reclaimer: Arc<dyn NodeReclaimer>,
) {
    let killer = WorkerKiller {
        evictions: shared.evictions.clone(),
        shared,
        monitor,
    };
    crate::eviction::manager::run(cfg, stats, Arc::new(killer), reclaimer).await;
}
