//! Why a node is not ready, as upstream's kubelet decides it (`pkg/kubelet/runtime.go`
//! runtimeState, the PLEG health check, the `ReadyCondition` setter): the last good
//! answer of the container runtime's `Status`, its `NetworkReady` condition, and
//! how long ago the pod lifecycle relist last completed. Pure: the agent feeds it
//! what it observes and reads [`RuntimeState::errors`] into `NodeHealth::not_ready`.

use std::time::{Duration, Instant};

use berth_api::duration::go_duration;

use crate::runtime::{RuntimeCondition, RuntimeStatus};

/// A runtime whose last good `Status` is older than this is down (upstream's
/// `maxWaitForContainerRuntime`).
pub const RUNTIME_SYNC_THRESHOLD: Duration = Duration::from_secs(30);
/// How often the runtime's `Status` is asked (upstream's `updateRuntimeUp` period).
pub const RUNTIME_STATUS_PERIOD: Duration = Duration::from_secs(5);
/// The relist period and the age past which PLEG is unhealthy (upstream's
/// `genericPlegRelistPeriod` and `genericPlegRelistThreshold`).
pub const RELIST_PERIOD: Duration = Duration::from_secs(1);
pub const RELIST_THRESHOLD: Duration = Duration::from_secs(180);

/// What the agent knows of its runtime, as upstream's `runtimeState`.
#[derive(Debug, Clone)]
pub struct RuntimeState {
    /// The last time `Status` answered with RuntimeReady=true.
    last_sync: Option<Instant>,
    network_error: Option<String>,
    runtime_error: Option<String>,
    /// When the relist last completed; `None`: not yet.
    last_relist: Option<Instant>,
    sync_threshold: Duration,
    relist_threshold: Duration,
}

impl Default for RuntimeState {
    fn default() -> Self {
        RuntimeState::new(RUNTIME_SYNC_THRESHOLD, RELIST_THRESHOLD)
    }
}

/// `%v` of a `*RuntimeCondition` in Go: `NetworkReady=false reason:… message:…`.
fn condition_text(c: Option<&RuntimeCondition>) -> String {
    match c {
        Some(c) => format!(
            "{}={} reason:{} message:{}",
            c.type_, c.status, c.reason, c.message
        ),
        None => "<nil>".into(),
    }
}

impl RuntimeState {
    pub fn new(sync_threshold: Duration, relist_threshold: Duration) -> Self {
        RuntimeState {
            last_sync: None,
            network_error: None,
            runtime_error: None,
            last_relist: None,
            sync_threshold,
            relist_threshold,
        }
    }

    /// A `Status` answer (upstream's `updateRuntimeUp`). A failed call changes
    /// nothing: the runtime is down once the last good answer is too old.
    pub fn observe_status(&mut self, status: &RuntimeStatus, now: Instant) {
        let network = status.condition("NetworkReady");
        self.network_error = match network {
            Some(c) if c.status => None,
            c => Some(format!(
                "container runtime network not ready: {}",
                condition_text(c)
            )),
        };
        let runtime = status.condition("RuntimeReady");
        match runtime {
            Some(c) if c.status => {
                self.runtime_error = None;
                self.last_sync = Some(now);
            }
            c => {
                self.runtime_error = Some(format!(
                    "container runtime not ready: {}",
                    condition_text(c)
                ));
            }
        }
    }

    /// A relist that completed (upstream's PLEG `relistTime`).
    pub fn observe_relist(&mut self, now: Instant) {
        self.last_relist = Some(now);
    }

    /// The PLEG health check's error, if unhealthy (upstream's `GenericPLEG.Healthy`).
    fn pleg_error(&self, now: Instant) -> Option<String> {
        let Some(at) = self.last_relist else {
            return Some("pleg has yet to be successful".into());
        };
        let elapsed = now.saturating_duration_since(at);
        (elapsed > self.relist_threshold).then(|| {
            format!(
                "pleg was last seen active {} ago; threshold is {}",
                go_duration(elapsed),
                go_duration(self.relist_threshold)
            )
        })
    }

    /// The runtime and network errors in upstream's order (runtimeErrors, then
    /// networkErrors), each one line of the Ready condition's message.
    pub fn errors(&self, now: Instant) -> Vec<String> {
        let mut errs = Vec::new();
        match self.last_sync {
            None => errs.push("container runtime status check may not have completed yet".into()),
            Some(at) if now.saturating_duration_since(at) >= self.sync_threshold => {
                errs.push("container runtime is down".into())
            }
            Some(_) => {}
        }
        if let Some(e) = self.pleg_error(now) {
            errs.push(format!("PLEG is not healthy: {e}"));
        }
        errs.extend(self.runtime_error.clone());
        errs.extend(self.network_error.clone());
        errs
    }
}

/// Errors joined as Go's `utilerrors.NewAggregate(...).Error()`: one alone as is,
/// several de-duplicated, comma-separated and bracketed.
pub fn aggregate(errs: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errs {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.len() {
        0 => String::new(),
        1 => seen[0].to_string(),
        _ => format!("[{}]", seen.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(t: &str, status: bool, reason: &str, message: &str) -> RuntimeCondition {
        RuntimeCondition {
            type_: t.into(),
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }

    #[test]
    fn runtime_state_messages_as_upstream() {
        let t0 = Instant::now();
        let s = RuntimeState::default();
        assert_eq!(
            s.errors(t0),
            [
                "container runtime status check may not have completed yet",
                "PLEG is not healthy: pleg has yet to be successful"
            ]
        );
        let mut s = RuntimeState::default();
        s.observe_status(&RuntimeStatus::ready(), t0);
        s.observe_relist(t0);
        assert!(s.errors(t0 + Duration::from_secs(29)).is_empty());
        // No good answer for 30 s: down. The relist hangs on the same runtime.
        let later = t0 + Duration::from_secs(30);
        assert_eq!(s.errors(later), ["container runtime is down"]);
        let much_later = t0 + Duration::from_secs(181);
        assert_eq!(
            s.errors(much_later),
            [
                "container runtime is down",
                "PLEG is not healthy: pleg was last seen active 3m1s ago; threshold is 3m0s"
            ]
        );
        // It answers again: ready.
        s.observe_status(&RuntimeStatus::ready(), much_later);
        s.observe_relist(much_later);
        assert!(s.errors(much_later).is_empty());
    }

    #[test]
    fn network_and_runtime_conditions() {
        let t0 = Instant::now();
        let mut s = RuntimeState::default();
        s.observe_relist(t0);
        let st = RuntimeStatus {
            conditions: vec![
                cond("RuntimeReady", true, "", ""),
                cond(
                    "NetworkReady",
                    false,
                    "NetworkPluginNotReady",
                    "Network plugin returns error: cni plugin not initialized",
                ),
            ],
        };
        s.observe_status(&st, t0);
        assert_eq!(
            s.errors(t0),
            [
                "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
            ]
        );
        // RuntimeReady missing: not ready, and no sync recorded.
        let mut s = RuntimeState::default();
        s.observe_relist(t0);
        s.observe_status(&RuntimeStatus::default(), t0);
        assert_eq!(
            s.errors(t0),
            [
                "container runtime status check may not have completed yet",
                "container runtime not ready: <nil>",
                "container runtime network not ready: <nil>"
            ]
        );
    }

    #[test]
    fn aggregate_joins_as_go() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(aggregate(&[]), "");
        assert_eq!(aggregate(&v(&["a"])), "a");
        assert_eq!(aggregate(&v(&["a", "b", "a"])), "[a, b]");
        assert_eq!(aggregate(&v(&["a", "a"])), "a");
    }
}
