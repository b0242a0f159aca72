//! The PodStatus the node agent reports, as upstream's kubelet generates it
//! (`generateAPIPodStatus`): container statuses from what the runtime reports
//! (`containers`), the start failures the agent remembers (its reason cache:
//! CrashLoopBackOff, ErrImagePull, CreateContainerConfigError, …), probe
//! results ([`ProbeView`]), then the phase (`getPhase`) and the kubelet-owned
//! conditions with upstream's reasons and messages.
//!
//! Plain data in, plain data out: no runtime or API calls here.

pub mod conditions;
pub mod containers;
pub mod manager;
pub mod phase;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{HostIP, Pod, PodCondition, PodIP, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::runtime;

/// A container instance's state as the runtime reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Created,
    Running,
    Exited,
    Unknown,
}

/// One container instance the runtime knows about (upstream's
/// `kubecontainer.Status`); a pod's list holds old, exited instances too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedContainer {
    /// As the API shows it: `containerd://<id>`.
    pub id: String,
    pub name: String,
    pub state: State,
    pub created_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub exit_code: i32,
    /// Exit reason (`Completed`, `Error`, `OOMKilled`, `ContainerCannotRun`).
    pub reason: String,
    pub message: String,
    pub image: String,
    /// The image's digest reference (`status.imageID`).
    pub image_ref: String,
    /// The restart count recorded on this instance.
    pub restart_count: i32,
}

impl ObservedContainer {
    /// From the node agent's runtime view; `runtime_type` prefixes the id
    /// (`containerd`). The CRI attempt number is the restart count.
    pub fn from_runtime(c: &runtime::ContainerStatus, runtime_type: &str) -> Self {
        Self {
            id: format!("{runtime_type}://{}", c.id),
            name: c.name.clone(),
            state: match c.state {
                runtime::ContainerState::Created => State::Created,
                runtime::ContainerState::Running => State::Running,
                runtime::ContainerState::Exited => State::Exited,
                runtime::ContainerState::Unknown => State::Unknown,
            },
            created_at: c.created_at,
            started_at: c.started_at,
            finished_at: c.finished_at,
            exit_code: c.exit_code,
            reason: c.reason.clone(),
            message: c.message.clone(),
            image: c.image.clone(),
            image_ref: c.image_ref.clone(),
            restart_count: c.attempt as i32,
        }
    }
}

/// Why the agent could not start a container on its last try (upstream's
/// reason cache): the waiting reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartFailure {
    pub reason: String,
    pub message: String,
}

/// Everything a pod's status is computed from.
#[derive(Debug, Clone, Copy)]
pub struct StatusInput<'a> {
    pub pod: &'a Pod,
    /// The status last reported (or the API's), for lastState, restart counts,
    /// start time and condition transition times.
    pub old: &'a PodStatus,
    /// Every instance of the pod's containers the runtime knows.
    pub containers: &'a [ObservedContainer],
    /// A ready sandbox with networking exists.
    pub sandbox_ready: bool,
    pub pod_ips: &'a [String],
    pub host_ips: &'a [String],
    /// Start failures by container name.
    pub start_failures: &'a HashMap<String, StartFailure>,
    /// The pod is done: no container will run again.
    pub terminal: bool,
    pub now: DateTime<Utc>,
}

/// Probe-derived `started` and `ready` of container statuses (the prober
/// manager; [`NoProbes`] when none run).
pub trait ProbeView {
    fn update_pod_status(&self, pod: &Pod, status: &mut PodStatus);
}

/// Containers without probe workers: started when running, ready when
/// started; an init container is ready once it exited 0.
pub struct NoProbes;

impl ProbeView for NoProbes {
    fn update_pod_status(&self, pod: &Pod, status: &mut PodStatus) {
        let running = |cs: &k8s_openapi::api::core::v1::ContainerStatus| {
            cs.state.as_ref().is_some_and(|s| s.running.is_some())
        };
        for cs in status.container_statuses.iter_mut().flatten() {
            cs.started = Some(running(cs));
            cs.ready = running(cs);
        }
        let specs = pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.clone())
            .unwrap_or_default();
        for cs in status.init_container_statuses.iter_mut().flatten() {
            cs.started = Some(running(cs));
            let sidecar = specs
                .iter()
                .find(|c| c.name == cs.name)
                .is_some_and(|c| c.restart_policy.as_deref() == Some("Always"));
            if sidecar {
                cs.ready = running(cs);
            } else if cs
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .is_some_and(|t| t.exit_code == 0)
            {
                cs.ready = true;
            }
        }
    }
}

/// A chrono time as an API time.
pub fn api_time(t: DateTime<Utc>) -> Time {
    let ts = k8s_openapi::jiff::Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    Time(ts)
}

/// An API time as a chrono time.
pub fn chrono_time(t: &Time) -> DateTime<Utc> {
    DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
        .unwrap_or_default()
}

/// Generates the pod's status.
pub fn generate(input: &StatusInput<'_>, probes: &dyn ProbeView) -> PodStatus {
    let pod = input.pod;
    let old = input.old;
    let spec = pod.spec.clone().unwrap_or_default();
    let mut s = PodStatus::default();

    let has_init = spec.init_containers.as_ref().is_some_and(|c| !c.is_empty());
    s.container_statuses = Some(containers::convert(
        input,
        old.container_statuses.as_deref().unwrap_or_default(),
        &spec.containers,
        has_init,
        false,
    ));
    if let Some(init) = spec.init_containers.as_ref().filter(|c| !c.is_empty()) {
        s.init_container_statuses = Some(containers::convert(
            input,
            old.init_container_statuses.as_deref().unwrap_or_default(),
            init,
            has_init,
            true,
        ));
    }
    if let Some(eph) = spec.ephemeral_containers.as_ref().filter(|c| !c.is_empty()) {
        let as_containers: Vec<_> = eph.iter().map(containers::ephemeral_as_container).collect();
        s.ephemeral_container_statuses = Some(containers::convert(
            input,
            old.ephemeral_container_statuses
                .as_deref()
                .unwrap_or_default(),
            &as_containers,
            has_init,
            true,
        ));
    }
    // The phase comes from the lifecycle alone: upstream computes it before
    // the prober fills in `started` and `ready`.
    let mut all = s.container_statuses.clone().unwrap_or_default();
    all.extend(s.init_container_statuses.clone().unwrap_or_default());
    let initialized = phase::has_any_regular_container_started(&spec, &all);
    let mut ph = phase::get_phase(pod, &all, input.terminal, initialized).to_string();
    // A terminal phase never goes back.
    if ph != "Failed" && ph != "Succeeded" {
        for prev in [
            old.phase.as_deref(),
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        ] {
            if let Some(p @ ("Failed" | "Succeeded")) = prev {
                ph = p.to_string();
                break;
            }
        }
    }
    if old.phase.as_deref() == Some(ph.as_str()) {
        s.reason = old.reason.clone();
        s.message = old.message.clone();
    }
    s.phase = Some(ph.clone());
    probes.update_pod_status(pod, &mut s);

    let mut init_and_regular = s.init_container_statuses.clone().unwrap_or_default();
    init_and_regular.extend(s.container_statuses.clone().unwrap_or_default());
    let owned = conditions::generate(pod, &init_and_regular, &ph, input.sandbox_ready);
    // Conditions others own come first, as the API had them.
    let mut conds = conditions::preserved(pod);
    conds.extend(conditions::with_transition_times(
        owned,
        old.conditions.as_deref().unwrap_or_default(),
        input.now,
    ));
    s.conditions = Some(conds);

    s.host_ip = input.host_ips.first().cloned();
    s.host_ips = (!input.host_ips.is_empty()).then(|| {
        input
            .host_ips
            .iter()
            .map(|ip| HostIP { ip: ip.clone() })
            .collect()
    });
    // Keep the pod IPs once known (they stay through termination).
    let pod_ips: Vec<String> = if input.pod_ips.is_empty() {
        old.pod_ips.iter().flatten().map(|p| p.ip.clone()).collect()
    } else {
        input.pod_ips.to_vec()
    };
    s.pod_ip = pod_ips.first().cloned();
    s.pod_ips =
        (!pod_ips.is_empty()).then(|| pod_ips.iter().map(|ip| PodIP { ip: ip.clone() }).collect());
    s.start_time = old.start_time.clone().or_else(|| Some(api_time(input.now)));
    s.qos_class = old.qos_class.clone().or_else(|| {
        serde_json::to_value(pod)
            .ok()
            .map(|v| berth_api::qos::qos_class(&v).to_string())
    });
    s.nominated_node_name = old.nominated_node_name.clone();
    s
}

/// Shorthand for a condition.
pub fn condition(
    type_: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<String>,
) -> PodCondition {
    PodCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.map(str::to_string),
        message,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
