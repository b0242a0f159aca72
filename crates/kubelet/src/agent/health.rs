//! The node agent's health checks (upstream's `updateRuntimeUp` loop and PLEG
//! relist): they feed [`crate::node::health::RuntimeState`], and with the
//! eviction manager's pressure conditions make the `NodeHealth` the Node's
//! conditions are computed from.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::{debug, warn};

use crate::node::NodeHealth;
use crate::node::health::{RELIST_PERIOD, RUNTIME_STATUS_PERIOD, RuntimeState};
use crate::runtime::{Filter, Runtime};

/// The node's pressure conditions, as the eviction manager last decided them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pressure {
    pub memory: bool,
    pub disk: bool,
    pub pid: bool,
}

/// What the Node status loop reads each period.
#[derive(Debug, Default)]
pub struct HealthMonitor {
    runtime: Mutex<RuntimeState>,
    pressure: Mutex<Pressure>,
}

impl HealthMonitor {
    pub fn set_pressure(&self, p: Pressure) {
        *self.pressure.lock().unwrap_or_else(|e| e.into_inner()) = p;
    }

    pub fn pressure(&self) -> Pressure {
        *self.pressure.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn runtime(&self) -> std::sync::MutexGuard<'_, RuntimeState> {
        self.runtime.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The node's health now.
    pub fn health(&self) -> NodeHealth {
        let p = self.pressure();
        NodeHealth {
            memory_pressure: p.memory,
            disk_pressure: p.disk,
            pid_pressure: p.pid,
            not_ready: self.runtime().errors(Instant::now()),
        }
    }

    /// One runtime health check: `Status`, whose failure leaves the last good
    /// answer to age (upstream logs "Container runtime sanity check failed").
    pub async fn check_runtime(&self, rt: &dyn Runtime) {
        match rt.status().await {
            Ok(s) => self.runtime().observe_status(&s, Instant::now()),
            Err(e) => warn!(error = %e, "container runtime sanity check failed"),
        }
    }

    /// One relist: the runtime's sandboxes and containers (what upstream's PLEG
    /// lists each second); a relist that completes marks PLEG active.
    pub async fn relist(&self, rt: &dyn Runtime) {
        let all = Filter::default();
        let ok = rt.list_sandboxes(&all).await.is_ok() && rt.list_containers(&all).await.is_ok();
        if ok {
            self.runtime().observe_relist(Instant::now());
        } else {
            debug!("PLEG relist failed");
        }
    }
}

/// Runs the runtime check every 5 s and the relist every second, forever.
pub async fn run(monitor: Arc<HealthMonitor>, rt: Arc<dyn Runtime>) {
    let status = {
        let (m, rt) = (monitor.clone(), rt.clone());
        async move {
            loop {
                m.check_runtime(rt.as_ref()).await;
                tokio::time::sleep(RUNTIME_STATUS_PERIOD).await;
            }
        }
    };
    let relist = async move {
        loop {
            monitor.relist(rt.as_ref()).await;
            tokio::time::sleep(RELIST_PERIOD).await;
        }
    };
    futures::future::join(status, relist).await;
}
