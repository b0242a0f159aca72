//! DefaultPreemption (PostFilter): when no node fits, find nodes where
//! evicting lower-priority pods makes room, keep the minimal set of victims
//! (reprieving higher priorities and PDB-protected pods first), and pick one
//! node by upstream's criteria. The scheduling loop evicts the victims and
//! nominates the node; this module only decides.

mod candidates;

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;

use crate::framework::{
    Code, CycleState, Diagnosis, FilterHandle, FitError, Plugin, PodInfo, PostFilter,
    PostFilterResult, Snapshot, Status,
};

pub use candidates::{Candidate, pick_one_node, select_victims_on_node};

pub const NAME: &str = "DefaultPreemption";
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
pub const NOT_ELIGIBLE_NEVER: &str = "not eligible due to preemptionPolicy=Never.";
pub const NOT_ELIGIBLE_TERMINATING: &str =
    "not eligible due to a terminating pod on the nominated node.";
/// The DisruptionTarget condition's reason on victims.
pub const REASON_PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";

pub struct DefaultPreemption;

impl Plugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        NAME
    }
}

/// A victim the scheduler is already evicting (upstream `podTerminatingByPreemption`).
pub fn terminating_by_preemption(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.type_ == "DisruptionTarget"
                        && c.status == "True"
                        && c.reason.as_deref() == Some(REASON_PREEMPTION_BY_SCHEDULER)
                })
            })
}

/// Upstream's `PodEligibleToPreemptOthers`; the message when not.
fn eligible(
    pod: &PodInfo,
    snap: &Snapshot,
    filtered: &HashMap<String, Status>,
) -> Result<(), &'static str> {
    let spec = pod.pod.spec.as_ref();
    if spec.and_then(|s| s.preemption_policy.as_deref()) == Some("Never") {
        return Err(NOT_ELIGIBLE_NEVER);
    }
    let nominated = pod
        .pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty());
    if let Some(nom) = nominated {
        if filtered
            .get(nom)
            .is_some_and(|s| s.code() == Code::UnschedulableAndUnresolvable)
        {
            return Ok(());
        }
        if let Some(n) = snap.get(nom)
            && n.pods
                .iter()
                .any(|p| p.priority() < pod.priority() && terminating_by_preemption(&p.pod))
        {
            return Err(NOT_ELIGIBLE_TERMINATING);
        }
    }
    Ok(())
}

impl PostFilter for DefaultPreemption {
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        snap: &Snapshot,
        filtered: &HashMap<String, Status>,
        handle: &dyn FilterHandle,
    ) -> PostFilterResult {
        if let Err(msg) = eligible(pod, snap, filtered) {
            return PostFilterResult::status(Status::unschedulable(format!("preemption: {msg}")));
        }
        // Only nodes whose rejection preemption could change.
        let mut statuses: HashMap<String, Status> = HashMap::new();
        let mut found: Vec<Candidate> = Vec::new();
        for n in &snap.nodes {
            let helpful = filtered
                .get(n.name())
                .is_some_and(|s| s.code() == Code::Unschedulable);
            if !helpful {
                statuses.insert(n.name().to_string(), Status::unresolvable(NOT_HELPFUL));
                continue;
            }
            match select_victims_on_node(state, pod, n, &snap.pdbs, handle) {
                Ok(c) => found.push(c),
                Err(s) => {
                    statuses.insert(n.name().to_string(), s);
                }
            }
        }
        match pick_one_node(found) {
            Some(best) => PostFilterResult {
                status: Status::success(),
                nominated_node: Some(best.node),
                victims: best.victims,
            },
            None => {
                let fit = FitError {
                    num_all_nodes: snap.len(),
                    diagnosis: Diagnosis {
                        node_to_status: statuses,
                        ..Default::default()
                    },
                    nomination: None,
                };
                PostFilterResult::status(Status::unschedulable(format!("preemption: {fit}")))
            }
        }
    }
}

/// Victims are told why they go (upstream's DisruptionTarget condition message).
pub fn disruption_message(scheduler_name: &str) -> String {
    format!("{scheduler_name}: preempting to accommodate a higher priority pod")
}

/// The `Preempted` event on each victim.
pub fn preempted_message(preemptor_uid: &str, node: &str) -> String {
    format!("Preempted by pod {preemptor_uid} on node {node}")
}

#[cfg(test)]
mod tests;
