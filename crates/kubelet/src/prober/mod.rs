//! Container probes, as upstream's `pkg/kubelet/prober` and `pkg/probe`.
//!
//! One runner per protocol (`http`, `tcp`, `grpc`, `exec`), each answering an
//! [`Outcome`] and its output; [`Prober`] picks the runner for a probe spec and
//! turns the outcome into a [`ProbeResult`] and the `Unhealthy` event upstream
//! records. [`worker`] is the per-container state machine (thresholds, initial
//! delay, startup gating) as pure logic; [`manager`] runs one worker task per
//! (container, probe type) and publishes results and restart requests.

pub mod exec;
pub mod grpc;
pub mod http;
pub mod manager;
pub mod tcp;
pub mod worker;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The User-Agent upstream's probes send (`kube-probe/<major>.<minor>`).
pub const USER_AGENT: &str = "kube-probe/1.33";

/// Output of exec and HTTP probes is kept up to 10 KiB.
pub const MAX_OUTPUT: usize = 10 * 1024;

/// The three probe types, displayed as upstream does in event messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeType {
    Liveness,
    Readiness,
    Startup,
}

impl fmt::Display for ProbeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProbeType::Liveness => "Liveness",
            ProbeType::Readiness => "Readiness",
            ProbeType::Startup => "Startup",
        })
    }
}

impl ProbeType {
    /// The container's probe of this type.
    pub fn spec(self, container: &Container) -> Option<&Probe> {
        match self {
            ProbeType::Liveness => container.liveness_probe.as_ref(),
            ProbeType::Readiness => container.readiness_probe.as_ref(),
            ProbeType::Startup => container.startup_probe.as_ref(),
        }
    }
}

/// What one run of a protocol runner said (upstream's `probe.Result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Success with a warning (an HTTP redirect to another host not followed).
    Warning,
    Failure,
    Unknown,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Success => "success",
            Outcome::Warning => "warning",
            Outcome::Failure => "failure",
            Outcome::Unknown => "unknown",
        })
    }
}

/// A probe's cached result (upstream's `results.Result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResult {
    Unknown,
    Success,
    Failure,
}

/// A probe spec with upstream's defaults applied (period 10 s, timeout 1 s,
/// success threshold 1, failure threshold 3, no initial delay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeTiming {
    pub initial_delay_seconds: i32,
    pub period_seconds: i32,
    pub timeout_seconds: i32,
    pub success_threshold: i32,
    pub failure_threshold: i32,
}

impl ProbeTiming {
    pub fn of(p: &Probe) -> Self {
        let pos = |v: Option<i32>, d: i32| v.filter(|v| *v > 0).unwrap_or(d);
        Self {
            initial_delay_seconds: p.initial_delay_seconds.unwrap_or(0).max(0),
            period_seconds: pos(p.period_seconds, 10),
            timeout_seconds: pos(p.timeout_seconds, 1),
            success_threshold: pos(p.success_threshold, 1),
            failure_threshold: pos(p.failure_threshold, 3),
        }
    }

    pub fn period(&self) -> Duration {
        Duration::from_secs(self.period_seconds as u64)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds as u64)
    }
}

/// An event the prober records on a container (`involvedObject` is the
/// container's field path `spec.containers{name}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeEvent {
    /// "Warning" for every probe event.
    pub type_: &'static str,
    /// `Unhealthy` or `ProbeWarning`.
    pub reason: &'static str,
    pub message: String,
}

/// The result of [`Prober::probe`]: the result to record, the event to emit,
/// and whether the probe errored (its result must then be thrown away).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRun {
    pub result: ProbeResult,
    pub event: Option<ProbeEvent>,
    pub errored: bool,
}

/// Resolves a probe's port against the container's named ports
/// (`probe.ResolveContainerPort`).
pub fn resolve_container_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    let n: i64 = match port {
        IntOrString::Int(i) => *i as i64,
        IntOrString::String(name) => {
            let named = container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| p.container_port as i64);
            match named {
                Some(p) => p,
                None => name
                    .parse::<i64>()
                    .map_err(|_| format!("strconv.Atoi: parsing {name:?}: invalid syntax"))?,
            }
        }
    };
    if n > 0 && n < 65536 {
        Ok(n as u16)
    } else {
        Err(format!("invalid port number: {n}"))
    }
}

/// Runs probes of any protocol (upstream's `prober`).
#[derive(Clone)]
pub struct Prober {
    exec: Arc<dyn exec::ExecInContainer>,
}

/// How many times a probe that errors (not fails) is retried.
const MAX_PROBE_RETRIES: usize = 3;

impl Prober {
    pub fn new(exec: Arc<dyn exec::ExecInContainer>) -> Self {
        Self { exec }
    }

    /// Runs the container's probe of `probe_type` once (with upstream's
    /// retries on errors) and says what to record. A container without that
    /// probe is a success.
    pub async fn probe(
        &self,
        probe_type: ProbeType,
        pod: &Pod,
        pod_ip: &str,
        container: &Container,
        container_id: &str,
    ) -> ProbeRun {
        let Some(spec) = probe_type.spec(container) else {
            return ProbeRun {
                result: ProbeResult::Success,
                event: None,
                errored: false,
            };
        };
        let mut last = (Outcome::Unknown, String::new(), None);
        for _ in 0..MAX_PROBE_RETRIES {
            last = self
                .run_once(spec, pod, pod_ip, container, container_id)
                .await;
            if last.2.is_none() {
                break;
            }
        }
        let (outcome, output, err) = last;
        let warn = |reason, message| {
            Some(ProbeEvent {
                type_: "Warning",
                reason,
                message,
            })
        };
        if let Some(err) = err {
            return ProbeRun {
                result: ProbeResult::Failure,
                event: warn(
                    "Unhealthy",
                    format!("{probe_type} probe errored and resulted in {outcome} state: {err}"),
                ),
                errored: true,
            };
        }
        let (result, event) = match outcome {
            Outcome::Success => (ProbeResult::Success, None),
            Outcome::Warning => (
                ProbeResult::Success,
                warn(
                    "ProbeWarning",
                    format!("{probe_type} probe warning: {output}"),
                ),
            ),
            Outcome::Failure => (
                ProbeResult::Failure,
                warn("Unhealthy", format!("{probe_type} probe failed: {output}")),
            ),
            Outcome::Unknown => (ProbeResult::Failure, None),
        };
        ProbeRun {
            result,
            event,
            errored: false,
        }
    }

    /// One run of the probe's protocol: (outcome, output, error).
    async fn run_once(
        &self,
        spec: &Probe,
        pod: &Pod,
        pod_ip: &str,
        container: &Container,
        container_id: &str,
    ) -> (Outcome, String, Option<String>) {
        let timeout = ProbeTiming::of(spec).timeout();
        if let Some(e) = &spec.exec {
            let cmd = crate::envvars::expand_command_only_static(
                e.command.as_deref().unwrap_or_default(),
                container,
            );
            return exec::probe(self.exec.as_ref(), container_id, &cmd, timeout).await;
        }
        if let Some(h) = &spec.http_get {
            let port = match resolve_container_port(&h.port, container) {
                Ok(p) => p,
                Err(e) => return (Outcome::Unknown, String::new(), Some(e)),
            };
            let target = match http::HttpTarget::from_action(h, pod_ip, port) {
                Ok(t) => t,
                Err(e) => return (Outcome::Unknown, String::new(), Some(e)),
            };
            let (o, out) = http::probe(&target, timeout).await;
            return (o, out, None);
        }
        if let Some(t) = &spec.tcp_socket {
            let port = match resolve_container_port(&t.port, container) {
                Ok(p) => p,
                Err(e) => return (Outcome::Unknown, String::new(), Some(e)),
            };
            let host = t
                .host
                .as_deref()
                .filter(|h| !h.is_empty())
                .unwrap_or(pod_ip);
            let (o, out) = tcp::probe(host, port, timeout).await;
            return (o, out, None);
        }
        if let Some(g) = &spec.grpc {
            let Ok(port) = u16::try_from(g.port) else {
                return (
                    Outcome::Unknown,
                    String::new(),
                    Some(format!("invalid port number: {}", g.port)),
                );
            };
            let service = g.service.as_deref().unwrap_or("");
            let (o, out) = grpc::probe(pod_ip, port, service, timeout).await;
            return (o, out, None);
        }
        (
            Outcome::Unknown,
            String::new(),
            Some(format!(
                "missing probe handler for {}:{}",
                crate::backoff::format_pod(
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                    pod.metadata.uid.as_deref().unwrap_or_default(),
                ),
                container.name
            )),
        )
    }
}

/// The `fieldPath` of a container's events (`spec.containers{app}`,
/// `spec.initContainers{sidecar}`, `spec.ephemeralContainers{debugger}`).
pub fn container_field_path(pod: &Pod, container: &str) -> String {
    let spec = pod.spec.as_ref();
    let is_in = |list: Option<Vec<String>>| list.is_some_and(|l| l.iter().any(|n| n == container));
    let init = spec
        .and_then(|s| s.init_containers.as_ref())
        .map(|l| l.iter().map(|c| c.name.clone()).collect());
    let eph = spec
        .and_then(|s| s.ephemeral_containers.as_ref())
        .map(|l| l.iter().map(|c| c.name.clone()).collect());
    let list = if is_in(init) {
        "initContainers"
    } else if is_in(eph) {
        "ephemeralContainers"
    } else {
        "containers"
    };
    format!("spec.{list}{{{container}}}")
}

/// Why the kubelet kills a running container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillReason {
    LivenessProbe,
    StartupProbe,
}

/// The `Killing` event message for a container that failed its liveness or
/// startup probe (`computePodActions`): restarted unless restartPolicy Never.
pub fn kill_message(container: &str, reason: KillReason, pod: &Pod) -> String {
    let what = match reason {
        KillReason::LivenessProbe => "liveness",
        KillReason::StartupProbe => "startup",
    };
    let base = format!("Container {container} failed {what} probe");
    if will_restart(pod) {
        format!("{base}, will be restarted")
    } else {
        base
    }
}

/// `shouldRestartOnFailure`.
pub fn will_restart(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) != Some("Never")
}

/// The grace period of a probe-triggered kill (`setTerminationGracePeriod`):
/// the pod's deletion grace period if it is being deleted; else, when the pod
/// sets terminationGracePeriodSeconds (API defaulting always does, 30), the
/// probe's own terminationGracePeriodSeconds or the pod's; else the 2 s minimum.
pub fn kill_grace_period(pod: &Pod, container: &Container, reason: KillReason) -> i64 {
    const MINIMUM_GRACE_PERIOD: i64 = 2;
    if let Some(g) = pod.metadata.deletion_grace_period_seconds {
        return g;
    }
    let Some(pod_grace) = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
    else {
        return MINIMUM_GRACE_PERIOD;
    };
    let probe = match reason {
        KillReason::LivenessProbe => container.liveness_probe.as_ref(),
        KillReason::StartupProbe => container.startup_probe.as_ref(),
    };
    probe
        .and_then(|p| p.termination_grace_period_seconds)
        .unwrap_or(pod_grace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn container(v: serde_json::Value) -> Container {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn timing_defaults() {
        let p: Probe = serde_json::from_value(json!({"exec": {"command": ["true"]}})).unwrap();
        assert_eq!(
            ProbeTiming::of(&p),
            ProbeTiming {
                initial_delay_seconds: 0,
                period_seconds: 10,
                timeout_seconds: 1,
                success_threshold: 1,
                failure_threshold: 3
            }
        );
        let p: Probe = serde_json::from_value(json!({"periodSeconds": 5, "failureThreshold": 1, "initialDelaySeconds": 7, "timeoutSeconds": 2, "successThreshold": 2})).unwrap();
        let t = ProbeTiming::of(&p);
        assert_eq!(
            (
                t.period_seconds,
                t.failure_threshold,
                t.initial_delay_seconds,
                t.timeout_seconds,
                t.success_threshold
            ),
            (5, 1, 7, 2, 2)
        );
    }

    #[test]
    fn port_resolution() {
        let c = container(
            json!({"name": "app", "ports": [{"name": "http", "containerPort": 8080}, {"name": "big", "containerPort": 70000}]}),
        );
        let cases = [
            (IntOrString::Int(80), Ok(80)),
            (IntOrString::String("http".into()), Ok(8080)),
            (IntOrString::String("9090".into()), Ok(9090)),
            (
                IntOrString::Int(0),
                Err("invalid port number: 0".to_string()),
            ),
            (
                IntOrString::String("big".into()),
                Err("invalid port number: 70000".to_string()),
            ),
            (
                IntOrString::String("nope".into()),
                Err("strconv.Atoi: parsing \"nope\": invalid syntax".to_string()),
            ),
        ];
        for (port, want) in cases {
            assert_eq!(resolve_container_port(&port, &c), want, "{port:?}");
        }
    }

    /// Exec answers: exit code 1 with `output`, or a timeout.
    struct Exec(Option<&'static str>);

    #[async_trait::async_trait]
    impl exec::ExecInContainer for Exec {
        async fn exec_sync(
            &self,
            _: &str,
            _: &[String],
            _: Duration,
        ) -> Result<exec::ExecOutput, exec::ExecError> {
            match self.0 {
                Some(out) => Ok(exec::ExecOutput {
                    stdout: out.into(),
                    stderr: vec![],
                    exit_code: 1,
                }),
                None => Err(exec::ExecError::Timeout),
            }
        }
    }

    #[tokio::test]
    async fn results_and_events() {
        let pod: Pod = serde_json::from_value(
            json!({"metadata": {"name": "web", "namespace": "default", "uid": "u1"}, "spec": {"containers": []}}),
        )
        .unwrap();
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let warn = |reason: &'static str, message: String| {
            Some(ProbeEvent {
                type_: "Warning",
                reason,
                message,
            })
        };
        let cases = [
            // (probe type, container, exec answer, result, event, errored)
            (
                ProbeType::Liveness,
                json!({"name": "app", "livenessProbe": {"exec": {"command": ["test", "-f", "/tmp/healthy"]}}}),
                Some(""),
                ProbeResult::Failure,
                warn("Unhealthy", "Liveness probe failed: ".into()),
                false,
            ),
            (
                ProbeType::Readiness,
                json!({"name": "app", "readinessProbe": {"exec": {"command": ["sleep", "10"]}, "timeoutSeconds": 1}}),
                None,
                ProbeResult::Failure,
                warn("Unhealthy", r#"Readiness probe failed: command "sleep 10" timed out"#.into()),
                false,
            ),
            (
                ProbeType::Startup,
                json!({"name": "app", "startupProbe": {"tcpSocket": {"port": closed}}}),
                None,
                ProbeResult::Failure,
                warn("Unhealthy", format!("Startup probe failed: dial tcp 127.0.0.1:{closed}: connect: connection refused")),
                false,
            ),
            (
                ProbeType::Liveness,
                json!({"name": "app", "livenessProbe": {"httpGet": {"port": "web"}}}),
                None,
                ProbeResult::Failure,
                warn("Unhealthy", "Liveness probe errored and resulted in unknown state: strconv.Atoi: parsing \"web\": invalid syntax".into()),
                true,
            ),
            (
                ProbeType::Liveness,
                json!({"name": "app", "livenessProbe": {"periodSeconds": 5}}),
                None,
                ProbeResult::Failure,
                warn("Unhealthy", "Liveness probe errored and resulted in unknown state: missing probe handler for web_default(u1):app".into()),
                true,
            ),
            (
                ProbeType::Readiness,
                json!({"name": "app"}),
                None,
                ProbeResult::Success,
                None,
                false,
            ),
        ];
        for (ty, c, answer, result, event, errored) in cases {
            let prober = Prober::new(Arc::new(Exec(answer)));
            let c = container(c);
            let run = prober
                .probe(ty, &pod, "127.0.0.1", &c, "containerd://x")
                .await;
            assert_eq!(
                run,
                ProbeRun {
                    result,
                    event,
                    errored
                },
                "{ty} {c:?}"
            );
        }
    }

    #[test]
    fn field_paths() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {
            "initContainers": [{"name": "side", "restartPolicy": "Always"}],
            "containers": [{"name": "app"}],
            "ephemeralContainers": [{"name": "dbg"}]}}))
        .unwrap();
        assert_eq!(container_field_path(&pod, "app"), "spec.containers{app}");
        assert_eq!(
            container_field_path(&pod, "side"),
            "spec.initContainers{side}"
        );
        assert_eq!(
            container_field_path(&pod, "dbg"),
            "spec.ephemeralContainers{dbg}"
        );
    }

    #[test]
    fn kill_messages_and_grace() {
        let pod = |policy: &str, tgps: Option<i64>| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": policy, "terminationGracePeriodSeconds": tgps, "containers": []}})).unwrap()
        };
        assert_eq!(
            kill_message("busybox", KillReason::LivenessProbe, &pod("Always", None)),
            "Container busybox failed liveness probe, will be restarted"
        );
        assert_eq!(
            kill_message("busybox", KillReason::StartupProbe, &pod("OnFailure", None)),
            "Container busybox failed startup probe, will be restarted"
        );
        assert_eq!(
            kill_message("busybox", KillReason::LivenessProbe, &pod("Never", None)),
            "Container busybox failed liveness probe"
        );
        let c = container(
            json!({"name": "a", "livenessProbe": {"terminationGracePeriodSeconds": 5}, "startupProbe": {}}),
        );
        assert_eq!(
            kill_grace_period(&pod("Always", Some(60)), &c, KillReason::LivenessProbe),
            5
        );
        assert_eq!(
            kill_grace_period(&pod("Always", Some(60)), &c, KillReason::StartupProbe),
            60
        );
        // No pod-level grace period: the minimum, even with a probe-level one.
        assert_eq!(
            kill_grace_period(&pod("Always", None), &c, KillReason::LivenessProbe),
            2
        );
        let mut deleting = pod("Always", Some(60));
        deleting.metadata.deletion_grace_period_seconds = Some(1);
        assert_eq!(
            kill_grace_period(&deleting, &c, KillReason::LivenessProbe),
            1
        );
    }
}
