//! Container statuses from runtime instances (upstream's
//! `convertToAPIContainerStatuses`): the newest instance gives the state, the
//! one before it `lastState`; a container the agent failed to (re)start shows
//! the failure as its waiting reason (CrashLoopBackOff, ErrImagePull, …) with
//! the last termination moved to `lastState`.

use std::collections::HashMap;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, EphemeralContainer, Pod, ResourceRequirements,
    VolumeMountStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{ObservedContainer, State, StatusInput, api_time};

pub const CONTAINER_CREATING: &str = "ContainerCreating";
pub const POD_INITIALIZING: &str = "PodInitializing";
pub const CONTAINER_STATUS_UNKNOWN: &str = "ContainerStatusUnknown";

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn waiting(reason: &str, message: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: non_empty(reason),
            message: non_empty(message),
        }),
        ..Default::default()
    }
}

/// An ephemeral container seen as a container (same fields the status uses).
pub fn ephemeral_as_container(e: &EphemeralContainer) -> Container {
    let mut v = serde_json::to_value(e).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("targetContainerName");
    }
    serde_json::from_value(v).unwrap_or_else(|_| Container {
        name: e.name.clone(),
        image: e.image.clone(),
        ..Default::default()
    })
}

/// `status.volumeMounts` (RecursiveReadOnlyMounts): read-only mounts report
/// whether they are recursively read-only (Berth never makes them so).
fn volume_mounts(c: &Container) -> Option<Vec<VolumeMountStatus>> {
    let mounts = c.volume_mounts.as_ref().filter(|m| !m.is_empty())?;
    Some(
        mounts
            .iter()
            .map(|m| VolumeMountStatus {
                name: m.name.clone(),
                mount_path: m.mount_path.clone(),
                read_only: m.read_only.filter(|r| *r),
                recursive_read_only: m.read_only.filter(|r| *r).map(|_| "Disabled".to_string()),
            })
            .collect(),
    )
}

/// `status.resources` of a running container (InPlacePodVerticalScaling, on
/// by default since 1.33): cpu and memory as the runtime applies them (cpu in
/// millicores, memory limit in bytes, both in canonical form), the rest as
/// the spec says. A container without requests and limits reports `{}`.
pub fn status_resources(c: &Container) -> ResourceRequirements {
    use berth_api::quantity::{Format, Quantity as Q};
    let spec = c.resources.clone().unwrap_or_default();
    let cpu = |q: &Quantity| {
        Q::parse(&q.0)
            .ok()
            .map(|v| Quantity(Q::from_milli(v.milli_value(), Format::DecimalSI).canonical()))
    };
    let bytes = |q: &Quantity| {
        Q::parse(&q.0)
            .ok()
            .map(|v| Quantity(Q::from_value(v.value(), Format::BinarySI).canonical()))
    };
    let convert = |list: &BTreeMap<String, Quantity>, memory_from_runtime: bool| {
        let mut out = BTreeMap::new();
        for (name, q) in list {
            let v = match name.as_str() {
                "cpu" => cpu(q),
                "memory" if memory_from_runtime => bytes(q),
                "memory" | "ephemeral-storage" => Some(q.clone()),
                _ => None,
            };
            if let Some(v) = v {
                out.insert(name.clone(), v);
            }
        }
        out
    };
    ResourceRequirements {
        limits: spec.limits.as_ref().map(|l| convert(l, true)),
        requests: spec.requests.as_ref().map(|r| convert(r, false)),
        ..Default::default()
    }
}

/// One runtime instance as an API status (`convertContainerStatus`).
fn convert_one(cs: &ObservedContainer, old: Option<&ContainerStatus>) -> ContainerStatus {
    let mut status = ContainerStatus {
        name: cs.name.clone(),
        restart_count: cs.restart_count,
        image: cs.image.clone(),
        image_id: cs.image_ref.clone(),
        container_id: non_empty(&cs.id),
        ..Default::default()
    };
    let old_running = old
        .and_then(|o| o.state.as_ref())
        .is_some_and(|s| s.running.is_some());
    let state = match cs.state {
        State::Running => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: cs.started_at.map(api_time),
            }),
            ..Default::default()
        },
        State::Exited => ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: cs.exit_code,
                reason: non_empty(&cs.reason),
                message: non_empty(&cs.message),
                started_at: cs.started_at.map(api_time),
                finished_at: cs.finished_at.map(api_time),
                container_id: non_empty(&cs.id),
                signal: None,
            }),
            ..Default::default()
        },
        State::Unknown if old_running => {
            status.restart_count = old.map_or(0, |o| o.restart_count) + 1;
            ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 137,
                    reason: Some(CONTAINER_STATUS_UNKNOWN.into()),
                    message: Some(
                        "The container could not be located when the pod was terminated".into(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            }
        }
        // Created but not running, or unknown: waiting to run.
        State::Created | State::Unknown => waiting("", ""),
    };
    status.state = Some(state);
    status
}

/// The policy the status uses (upstream passes the pod's; ephemeral
/// containers are never restarted).
fn restart_policy(pod: &Pod, ephemeral: bool) -> &str {
    if ephemeral {
        return "Never";
    }
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// Whether the agent will (re)start the container (`ShouldContainerBeRestarted`).
pub fn should_restart(pod: &Pod, policy: &str, latest: Option<&ObservedContainer>) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(latest) = latest else { return true };
    match latest.state {
        State::Running => false,
        State::Unknown | State::Created => true,
        State::Exited => match policy {
            "Never" => false,
            "OnFailure" => latest.exit_code != 0,
            _ => true,
        },
    }
}

/// The statuses of one list of containers (regular, init or ephemeral).
pub fn convert(
    input: &StatusInput<'_>,
    previous: &[ContainerStatus],
    containers: &[Container],
    has_init: bool,
    init_or_ephemeral: bool,
) -> Vec<ContainerStatus> {
    let pod = input.pod;
    let ephemeral = init_or_ephemeral
        && pod
            .spec
            .as_ref()
            .and_then(|s| s.ephemeral_containers.as_ref())
            .is_some_and(|e| {
                containers
                    .first()
                    .is_some_and(|c| e.iter().any(|x| x.name == c.name))
            });
    let old: HashMap<&str, &ContainerStatus> =
        previous.iter().map(|s| (s.name.as_str(), s)).collect();
    let default_reason = if has_init {
        POD_INITIALIZING
    } else {
        CONTAINER_CREATING
    };

    let mut statuses: HashMap<String, ContainerStatus> = HashMap::new();
    for c in containers {
        let mut status = ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            state: Some(waiting(default_reason, "")),
            ..Default::default()
        };
        if let Some(o) = old.get(c.name.as_str()) {
            if o.state.as_ref().is_some_and(|s| s.terminated.is_some()) {
                status = (*o).clone();
            } else {
                status.restart_count = o.restart_count;
                status.last_state = o.last_state.clone();
            }
        }
        statuses.insert(c.name.clone(), status);
    }

    // Newest instance first.
    let mut instances: Vec<&ObservedContainer> = input.containers.iter().collect();
    instances.sort_by_key(|i| std::cmp::Reverse(i.created_at));
    let latest = |name: &str| instances.iter().copied().find(|i| i.name == name);

    // A container that ran but vanished from the runtime terminated somehow.
    for c in containers {
        if latest(&c.name).is_some() {
            continue;
        }
        let Some(o) = old.get(c.name.as_str()) else {
            continue;
        };
        let st = o.state.clone().unwrap_or_default();
        if st.terminated.is_some() || st.running.is_none() {
            continue;
        }
        let Some(status) = statuses.get_mut(&c.name) else {
            continue;
        };
        let is_default = status
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .is_some_and(|w| w.reason.as_deref() == Some(default_reason));
        let has_last = status
            .last_state
            .as_ref()
            .is_some_and(|l| l.terminated.is_some());
        if !is_default || has_last {
            continue;
        }
        status.last_state = Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 137,
                reason: Some(CONTAINER_STATUS_UNKNOWN.into()),
                message: Some(
                    "The container could not be located when the pod was deleted.  The container used to be Running"
                        .into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        });
        if pod.metadata.deletion_timestamp.is_none() {
            status.restart_count += 1;
        }
    }

    let mut seen: HashMap<&str, usize> = HashMap::new();
    for inst in &instances {
        if !statuses.contains_key(&inst.name) {
            continue;
        }
        let n = seen.entry(inst.name.as_str()).or_insert(0);
        if *n >= 2 {
            continue;
        }
        let mut converted = convert_one(inst, old.get(inst.name.as_str()).copied());
        let running = converted
            .state
            .as_ref()
            .is_some_and(|s| s.running.is_some());
        if running && let Some(spec) = containers.iter().find(|c| c.name == inst.name) {
            converted.resources = Some(status_resources(spec));
        }
        if *n == 0 {
            statuses.insert(inst.name.clone(), converted);
        } else if let Some(s) = statuses.get_mut(&inst.name) {
            s.last_state = converted.state;
        }
        *n += 1;
    }

    // Containers the agent failed to (re)start wait with that failure.
    for c in containers {
        let newest = latest(&c.name);
        if init_or_ephemeral
            && !ephemeral
            && newest.is_some_and(|i| i.state == State::Exited && i.exit_code == 0)
        {
            continue; // a finished init container is not run again
        }
        if !should_restart(pod, restart_policy(pod, ephemeral), newest) {
            continue;
        }
        let Some(failure) = input.start_failures.get(&c.name) else {
            continue;
        };
        let Some(status) = statuses.get_mut(&c.name) else {
            continue;
        };
        if status
            .state
            .as_ref()
            .is_some_and(|s| s.terminated.is_some())
        {
            status.last_state = status.state.clone();
        }
        status.state = Some(waiting(&failure.reason, &failure.message));
    }

    let mut out: Vec<ContainerStatus> = Vec::with_capacity(containers.len());
    for c in containers {
        if let Some(mut s) = statuses.remove(&c.name) {
            s.volume_mounts = volume_mounts(c);
            out.push(s);
        }
    }
    if !init_or_ephemeral {
        out.sort_by(|a, b| a.name.cmp(&b.name));
    }
    out
}
