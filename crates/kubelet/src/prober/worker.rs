//! The per-container, per-probe-type state machine (upstream's `worker.doProbe`),
//! as pure logic: the caller supplies the pod's current status and the time,
//! runs the probe when told to, and hands the result back.
//!
//! - A new container ID resets the cached result to the type's initial value
//!   (liveness Success, readiness Failure, startup Unknown) and lifts a hold.
//! - A container that is not running has Failure cached; the worker stops when
//!   the container terminated and will not be restarted (restartPolicy Never),
//!   or when the pod reached a terminal phase.
//! - Deleting the pod sets liveness/startup to Success and stops them.
//! - Nothing is probed during initialDelaySeconds; liveness and readiness wait
//!   until the container has started (its startup probe succeeded); the startup
//!   probe stops probing once it has.
//! - A result is cached only after successThreshold/failureThreshold equal
//!   results in a row. A liveness or startup failure asks for a restart; it
//!   and any startup verdict hold the worker until a new container appears.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodStatus};

use super::{ProbeResult, ProbeTiming, ProbeType};

/// Cached results of one probe type, by container ID (`containerd://…`).
pub type Results = HashMap<String, ProbeResult>;

/// What the caller should do after [`Worker::before_probe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The worker is done (pod terminal, container never restarting, pod deleted).
    Stop,
    /// Nothing to probe on this tick.
    Wait,
    /// Run the probe against this container.
    Probe { container_id: String },
}

/// A change of a cached result, to publish (upstream's results `Update`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub container_id: String,
    pub result: ProbeResult,
}

#[derive(Debug, Clone)]
pub struct Worker {
    pub probe_type: ProbeType,
    pub container: String,
    pub timing: ProbeTiming,
    initial_value: ProbeResult,
    container_id: Option<String>,
    last_result: ProbeResult,
    result_run: i32,
    on_hold: bool,
}

fn set(results: &mut Results, changes: &mut Vec<Change>, id: &str, r: ProbeResult) {
    if results.insert(id.to_string(), r) != Some(r) {
        changes.push(Change {
            container_id: id.to_string(),
            result: r,
        });
    }
}

/// The status of container `name` (regular first, then init containers) if
/// it has a container ID.
pub fn find_status<'a>(status: &'a PodStatus, name: &str) -> Option<&'a ContainerStatus> {
    let with_id = |list: &'a Option<Vec<ContainerStatus>>| {
        list.iter()
            .flatten()
            .find(|c| c.name == name)
            .filter(|c| c.container_id.as_deref().is_some_and(|id| !id.is_empty()))
    };
    with_id(&status.container_statuses).or_else(|| with_id(&status.init_container_statuses))
}

impl Worker {
    /// A worker for the container's probe of `probe_type`; None without one.
    pub fn new(probe_type: ProbeType, container: &Container) -> Option<Self> {
        let spec = probe_type.spec(container)?;
        let initial_value = match probe_type {
            ProbeType::Liveness => ProbeResult::Success,
            ProbeType::Readiness => ProbeResult::Failure,
            ProbeType::Startup => ProbeResult::Unknown,
        };
        Some(Self {
            probe_type,
            container: container.name.clone(),
            timing: ProbeTiming::of(spec),
            initial_value,
            container_id: None,
            last_result: ProbeResult::Unknown,
            result_run: 0,
            on_hold: false,
        })
    }

    /// The container this worker last saw.
    pub fn container_id(&self) -> Option<&str> {
        self.container_id.as_deref()
    }

    /// Decides what this tick does, updating cached results on the way.
    pub fn before_probe(
        &mut self,
        pod: &Pod,
        status: Option<&PodStatus>,
        now: DateTime<Utc>,
        results: &mut Results,
        changes: &mut Vec<Change>,
    ) -> Step {
        let Some(status) = status else {
            return Step::Wait; // not created yet, or already gone
        };
        if matches!(status.phase.as_deref(), Some("Failed") | Some("Succeeded")) {
            return Step::Stop;
        }
        let Some(c) = find_status(status, &self.container) else {
            return Step::Wait; // the container has not been created yet
        };
        let id = c.container_id.clone().unwrap_or_default();
        if self.container_id.as_deref() != Some(id.as_str()) {
            if let Some(old) = self.container_id.take() {
                results.remove(&old);
            }
            set(results, changes, &id, self.initial_value);
            self.container_id = Some(id.clone());
            self.on_hold = false;
        }
        if self.on_hold {
            return Step::Wait;
        }
        let state = c.state.clone().unwrap_or_default();
        let Some(running) = state.running else {
            set(results, changes, &id, ProbeResult::Failure);
            let never =
                pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("Never");
            // A sidecar (restartable init container) restarts whatever the policy.
            let sidecar = pod
                .spec
                .as_ref()
                .and_then(|s| s.init_containers.as_ref())
                .is_some_and(|i| {
                    i.iter().any(|c| {
                        c.name == self.container && c.restart_policy.as_deref() == Some("Always")
                    })
                });
            return if state.terminated.is_some() && never && !sidecar {
                Step::Stop
            } else {
                Step::Wait
            };
        };
        if pod.metadata.deletion_timestamp.is_some()
            && matches!(self.probe_type, ProbeType::Liveness | ProbeType::Startup)
        {
            set(results, changes, &id, ProbeResult::Success);
            return Step::Stop;
        }
        if let Some(started_at) = running.started_at {
            let ran = now.timestamp() - started_at.0.as_second();
            if ran < i64::from(self.timing.initial_delay_seconds) {
                return Step::Wait;
            }
        }
        let started = c.started == Some(true);
        match (started, self.probe_type) {
            (true, ProbeType::Startup) => return Step::Wait,
            (false, ProbeType::Liveness | ProbeType::Readiness) => return Step::Wait,
            _ => {}
        }
        Step::Probe { container_id: id }
    }

    /// Records a probe's result (not an errored one). True when the container
    /// must be killed: liveness or startup failed failureThreshold times.
    pub fn after_probe(
        &mut self,
        result: ProbeResult,
        results: &mut Results,
        changes: &mut Vec<Change>,
    ) -> bool {
        if self.last_result == result {
            self.result_run += 1;
        } else {
            self.last_result = result;
            self.result_run = 1;
        }
        let below = match result {
            ProbeResult::Failure => self.result_run < self.timing.failure_threshold,
            ProbeResult::Success => self.result_run < self.timing.success_threshold,
            ProbeResult::Unknown => false,
        };
        if below {
            return false;
        }
        let Some(id) = self.container_id.clone() else {
            return false;
        };
        set(results, changes, &id, result);
        // Hold until a new container: after a liveness failure (it will be
        // killed) and after any startup verdict (nothing left to probe).
        let liveness_failed =
            self.probe_type == ProbeType::Liveness && result == ProbeResult::Failure;
        if liveness_failed || self.probe_type == ProbeType::Startup {
            self.on_hold = true;
            self.result_run = 0;
        }
        let kills = matches!(self.probe_type, ProbeType::Liveness | ProbeType::Startup);
        kills && result == ProbeResult::Failure
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn t(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
    }

    fn ts(secs: i64) -> String {
        t(secs).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    fn pod(container: serde_json::Value, policy: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "uid": "u"},
            "spec": {"restartPolicy": policy, "containers": [container]}}))
        .unwrap()
    }

    fn running(id: &str, started_at: i64, started: bool) -> PodStatus {
        serde_json::from_value(json!({"phase": "Running", "containerStatuses": [{
            "name": "app", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "containerID": id, "started": started,
            "state": {"running": {"startedAt": ts(started_at)}}}]}))
        .unwrap()
    }

    fn terminated(id: &str) -> PodStatus {
        serde_json::from_value(json!({"phase": "Running", "containerStatuses": [{
            "name": "app", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "containerID": id, "started": false,
            "state": {"terminated": {"exitCode": 1}}}]}))
        .unwrap()
    }

    fn worker(probe: &str, spec: serde_json::Value, policy: &str) -> (Worker, Pod) {
        let c = json!({"name": "app", probe: spec});
        let p = pod(c.clone(), policy);
        let container: Container = serde_json::from_value(c).unwrap();
        let ty = match probe {
            "livenessProbe" => ProbeType::Liveness,
            "readinessProbe" => ProbeType::Readiness,
            _ => ProbeType::Startup,
        };
        (Worker::new(ty, &container).unwrap(), p)
    }

    #[test]
    fn initial_values_and_new_containers() {
        for (probe, want) in [
            ("livenessProbe", ProbeResult::Success),
            ("readinessProbe", ProbeResult::Failure),
            ("startupProbe", ProbeResult::Unknown),
        ] {
            let (mut w, p) = worker(probe, json!({}), "Always");
            let mut r = Results::new();
            let mut ch = vec![];
            // No status, no container ID: wait.
            assert_eq!(w.before_probe(&p, None, t(0), &mut r, &mut ch), Step::Wait);
            let st = running("containerd://a", 0, probe != "startupProbe");
            let step = w.before_probe(&p, Some(&st), t(1), &mut r, &mut ch);
            assert_eq!(
                step,
                Step::Probe {
                    container_id: "containerd://a".into()
                },
                "{probe}"
            );
            assert_eq!(r.get("containerd://a"), Some(&want), "{probe}");
            // A new container replaces the old one's result.
            let st = running("containerd://b", 0, probe != "startupProbe");
            w.before_probe(&p, Some(&st), t(2), &mut r, &mut ch);
            assert!(!r.contains_key("containerd://a"));
            assert_eq!(r.get("containerd://b"), Some(&want));
        }
    }

    #[test]
    fn thresholds() {
        // (successThreshold, failureThreshold, results in order, cached after each)
        use ProbeResult::{Failure as F, Success as S};
        let cases: Vec<(i32, i32, Vec<ProbeResult>, Vec<ProbeResult>)> = vec![
            (1, 3, vec![F, F, F], vec![F, F, F]), // readiness starts at Failure
            (1, 3, vec![S, F, F, S], vec![S, S, S, S]),
            (1, 3, vec![S, F, F, F], vec![S, S, S, F]),
            (2, 1, vec![S, S, F, S, S], vec![F, S, F, F, S]),
        ];
        for (success, failure, seq, want) in cases {
            let (mut w, p) = worker(
                "readinessProbe",
                json!({"successThreshold": success, "failureThreshold": failure}),
                "Always",
            );
            let mut r = Results::new();
            let mut ch = vec![];
            let st = running("containerd://a", 0, true);
            let mut got = vec![];
            for res in &seq {
                assert!(matches!(
                    w.before_probe(&p, Some(&st), t(5), &mut r, &mut ch),
                    Step::Probe { .. }
                ));
                assert!(
                    !w.after_probe(*res, &mut r, &mut ch),
                    "readiness never restarts"
                );
                got.push(r["containerd://a"]);
            }
            assert_eq!(got, want, "success {success} failure {failure} {seq:?}");
        }
    }

    #[test]
    fn liveness_failure_restarts_and_holds() {
        let (mut w, p) = worker("livenessProbe", json!({"failureThreshold": 2}), "Always");
        let mut r = Results::new();
        let mut ch = vec![];
        let st = running("containerd://a", 0, true);
        w.before_probe(&p, Some(&st), t(1), &mut r, &mut ch);
        assert!(!w.after_probe(ProbeResult::Failure, &mut r, &mut ch));
        assert_eq!(r["containerd://a"], ProbeResult::Success);
        w.before_probe(&p, Some(&st), t(2), &mut r, &mut ch);
        assert!(w.after_probe(ProbeResult::Failure, &mut r, &mut ch));
        assert_eq!(r["containerd://a"], ProbeResult::Failure);
        // On hold until a new container appears.
        assert_eq!(
            w.before_probe(&p, Some(&st), t(3), &mut r, &mut ch),
            Step::Wait
        );
        let st = running("containerd://b", 3, true);
        assert!(matches!(
            w.before_probe(&p, Some(&st), t(4), &mut r, &mut ch),
            Step::Probe { .. }
        ));
        assert_eq!(r["containerd://b"], ProbeResult::Success);
        // The run restarted: one failure is below the threshold again.
        assert!(!w.after_probe(ProbeResult::Failure, &mut r, &mut ch));
        let changes: Vec<_> = ch
            .iter()
            .map(|c| (c.container_id.as_str(), c.result))
            .collect();
        assert_eq!(
            changes,
            [
                ("containerd://a", ProbeResult::Success),
                ("containerd://a", ProbeResult::Failure),
                ("containerd://b", ProbeResult::Success)
            ]
        );
    }

    #[test]
    fn startup_verdicts_hold_until_a_new_container() {
        use ProbeResult::{Failure as F, Success as S};
        for (result, restart) in [(S, false), (F, true)] {
            let (mut w, p) = worker("startupProbe", json!({"failureThreshold": 1}), "Always");
            let mut r = Results::new();
            let mut ch = vec![];
            let st = running("containerd://a", 0, false);
            assert!(matches!(
                w.before_probe(&p, Some(&st), t(1), &mut r, &mut ch),
                Step::Probe { .. }
            ));
            assert_eq!(w.after_probe(result, &mut r, &mut ch), restart);
            assert_eq!(r["containerd://a"], result);
            // Still not started in the status: no extra probe anyway.
            assert_eq!(
                w.before_probe(&p, Some(&st), t(2), &mut r, &mut ch),
                Step::Wait
            );
            let st = running("containerd://b", 2, false);
            assert!(matches!(
                w.before_probe(&p, Some(&st), t(3), &mut r, &mut ch),
                Step::Probe { .. }
            ));
        }
    }

    #[test]
    fn sidecars_keep_their_workers_under_restart_policy_never() {
        let spec = json!({"restartPolicy": "Never",
            "initContainers": [{"name": "app", "restartPolicy": "Always", "readinessProbe": {}}],
            "containers": [{"name": "main"}]});
        let p: Pod =
            serde_json::from_value(json!({"metadata": {"name": "p", "uid": "u"}, "spec": spec}))
                .unwrap();
        let c = p.spec.as_ref().unwrap().init_containers.as_ref().unwrap()[0].clone();
        let mut w = Worker::new(ProbeType::Readiness, &c).unwrap();
        let st: PodStatus =
            serde_json::from_value(json!({"phase": "Running", "initContainerStatuses": [{
            "name": "app", "image": "", "imageID": "", "ready": false, "restartCount": 0,
            "containerID": "containerd://s", "state": {"terminated": {"exitCode": 1}}}]}))
            .unwrap();
        let (mut r, mut ch) = (Results::new(), vec![]);
        assert_eq!(
            w.before_probe(&p, Some(&st), t(1), &mut r, &mut ch),
            Step::Wait
        );
    }

    #[test]
    fn gating_delay_and_stopping() {
        let mut r = Results::new();
        let mut ch = vec![];
        // Liveness waits for the startup probe (started false) and the initial delay.
        let (mut w, p) = worker(
            "livenessProbe",
            json!({"initialDelaySeconds": 10}),
            "Always",
        );
        assert_eq!(
            w.before_probe(
                &p,
                Some(&running("containerd://a", 0, false)),
                t(20),
                &mut r,
                &mut ch
            ),
            Step::Wait
        );
        assert_eq!(
            w.before_probe(
                &p,
                Some(&running("containerd://a", 0, true)),
                t(9),
                &mut r,
                &mut ch
            ),
            Step::Wait
        );
        assert!(matches!(
            w.before_probe(
                &p,
                Some(&running("containerd://a", 0, true)),
                t(10),
                &mut r,
                &mut ch
            ),
            Step::Probe { .. }
        ));
        // The startup probe stops probing once started, without stopping.
        let (mut w, p) = worker("startupProbe", json!({}), "Always");
        assert_eq!(
            w.before_probe(
                &p,
                Some(&running("containerd://a", 0, true)),
                t(1),
                &mut r,
                &mut ch
            ),
            Step::Wait
        );
        // A terminated container: Failure cached; stop only with restartPolicy Never.
        for (policy, want) in [
            ("Always", Step::Wait),
            ("OnFailure", Step::Wait),
            ("Never", Step::Stop),
        ] {
            let (mut w, p) = worker("readinessProbe", json!({}), policy);
            let mut r = Results::new();
            assert_eq!(
                w.before_probe(
                    &p,
                    Some(&terminated("containerd://x")),
                    t(1),
                    &mut r,
                    &mut ch
                ),
                want,
                "{policy}"
            );
            assert_eq!(r["containerd://x"], ProbeResult::Failure);
        }
        // A terminal pod stops every worker.
        let mut st = running("containerd://a", 0, true);
        st.phase = Some("Succeeded".into());
        assert_eq!(
            w.before_probe(&p, Some(&st), t(1), &mut r, &mut ch),
            Step::Stop
        );
        // Deletion: liveness goes quiet with Success; readiness keeps probing.
        let (mut w, mut p) = worker("livenessProbe", json!({}), "Always");
        p.metadata.deletion_timestamp = serde_json::from_value(json!(ts(0))).unwrap();
        let st = running("containerd://d", 0, true);
        assert_eq!(
            w.before_probe(&p, Some(&st), t(1), &mut r, &mut ch),
            Step::Stop
        );
        assert_eq!(r["containerd://d"], ProbeResult::Success);
        let (mut w, mut p) = worker("readinessProbe", json!({}), "Always");
        p.metadata.deletion_timestamp = serde_json::from_value(json!(ts(0))).unwrap();
        assert!(matches!(
            w.before_probe(&p, Some(&st), t(1), &mut r, &mut ch),
            Step::Probe { .. }
        ));
    }
}
