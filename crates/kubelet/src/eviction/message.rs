//! The texts of an eviction (upstream's `evictionMessage` and the admit handler's
//! rejection), and the status an evicted pod ends with.

use berth_api::quantity::{Format, Quantity};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::ranking::{PodStatsByUid, container_request, uid};
use super::signals::{Condition, Observations, Resource, Threshold, threshold_quantity};

/// `status.reason` of an evicted or rejected pod.
pub const REASON: &str = "Evicted";

/// The pod condition the kubelet adds to a pod it evicts.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
pub const TERMINATION_BY_KUBELET: &str = "TerminationByKubelet";

/// `The node was low on resource: memory. Threshold quantity: 100Mi, available: 95Mi.
/// Container c was using 200Mi, request is 0, has larger consumption of memory. `
pub fn eviction_message(
    resource: Resource,
    pod: &Pod,
    stats: &PodStatsByUid<'_>,
    all: &[Threshold],
    met: &[usize],
    obs: &Observations,
) -> String {
    let mut m = format!("The node was low on resource: {}. ", resource.as_str());
    // The first met threshold of this resource with an observation.
    if let Some((t, o)) = met
        .iter()
        .map(|&i| &all[i])
        .filter(|t| t.signal.resource() == resource)
        .find_map(|t| obs.get(&t.signal).map(|o| (t, o)))
    {
        let format = if matches!(resource, Resource::Memory | Resource::EphemeralStorage) {
            Format::BinarySI
        } else {
            Format::DecimalSI
        };
        m += &format!(
            "Threshold quantity: {}, available: {}. ",
            threshold_quantity(&t.value, o.capacity, t.signal).canonical(),
            Quantity::from_value(o.available, format).canonical()
        );
    }
    let Some(ps) = stats.get(uid(pod)) else {
        return m;
    };
    let spec = pod.spec.clone().unwrap_or_default();
    let containers: Vec<_> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .collect();
    for cs in &ps.containers {
        let Some(c) = containers.iter().find(|c| c.name == cs.name) else {
            continue;
        };
        let request = container_request(c, resource.as_str());
        let used = match resource {
            Resource::Memory => cs.memory.as_ref().and_then(|m| m.working_set_bytes),
            Resource::EphemeralStorage => {
                match (
                    cs.rootfs.as_ref().and_then(|f| f.used_bytes),
                    cs.logs.as_ref().and_then(|f| f.used_bytes),
                ) {
                    (Some(r), Some(l)) => Some(r + l),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(u) = used {
            let u = Quantity::from_value(i64::try_from(u).unwrap_or(i64::MAX), Format::BinarySI);
            if u > request {
                m += &format!(
                    "Container {} was using {}, request is {}, has larger consumption of {}. ",
                    c.name,
                    u.canonical(),
                    request.canonical(),
                    resource.as_str()
                );
            }
        }
    }
    m
}

/// `The node had condition: [MemoryPressure]. ` (Go's `%v` of the condition list).
pub fn node_condition_message(conditions: &[Condition]) -> String {
    let names: Vec<&str> = conditions.iter().map(|c| c.as_str()).collect();
    format!("The node had condition: [{}]. ", names.join(" "))
}

/// The evicted pod's final status: `old` (the agent's last, with containers
/// terminated) made Failed/Evicted with the DisruptionTarget condition.
pub fn evicted_status(mut old: PodStatus, message: &str, now: Timestamp) -> PodStatus {
    old.phase = Some("Failed".into());
    old.reason = Some(REASON.into());
    old.message = Some(message.to_string());
    let cond = PodCondition {
        type_: DISRUPTION_TARGET.into(),
        status: "True".into(),
        reason: Some(TERMINATION_BY_KUBELET.into()),
        message: Some(message.to_string()),
        last_transition_time: Some(Time(now)),
        ..Default::default()
    };
    let conds = old.conditions.get_or_insert_with(Vec::new);
    match conds.iter_mut().find(|c| c.type_ == DISRUPTION_TARGET) {
        Some(c) => *c = cond,
        None => conds.push(cond),
    }
    old
}
