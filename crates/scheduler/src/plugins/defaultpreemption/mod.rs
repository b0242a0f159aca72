//! DefaultPreemption as a dry run: it never evicts (not built yet) but
//! reports what upstream's preemption says when it finds no victims, so
//! FailedScheduling messages read as upstream's.

use std::collections::HashMap;

use crate::framework::{
    Code, CycleState, Diagnosis, FitError, NodeInfo, Plugin, PodInfo, PostFilter, Status,
};

pub const NAME: &str = "DefaultPreemption";
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";

pub struct DefaultPreemption;

impl Plugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl PostFilter for DefaultPreemption {
    fn post_filter(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        nodes: &[NodeInfo],
        filtered: &HashMap<String, Status>,
        filter: &dyn Fn(&PodInfo, &NodeInfo) -> Status,
    ) -> Status {
        if pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.preemption_policy.as_deref())
            == Some("Never")
        {
            return Status::unschedulable(
                "preemption: not eligible due to preemptionPolicy=Never.",
            );
        }
        let mut statuses = HashMap::new();
        for n in nodes {
            let name = n.name().to_string();
            let status = match filtered.get(&name) {
                Some(s) if s.code() == Code::UnschedulableAndUnresolvable => {
                    Status::unresolvable(NOT_HELPFUL)
                }
                _ => {
                    // Remove every lower-priority pod and see if the pod would fit.
                    let mut trial = n.clone();
                    let victims: Vec<String> = n
                        .pods
                        .iter()
                        .filter(|p| p.priority() < pod.priority())
                        .map(PodInfo::key)
                        .collect();
                    if victims.is_empty() {
                        Status::unresolvable(NO_VICTIMS)
                    } else {
                        for v in &victims {
                            trial.remove_pod(v);
                        }
                        let s = filter(pod, &trial);
                        if s.is_success() {
                            // A real preemption would evict here; report it as not attempted.
                            Status::unschedulable(
                                "preemption is not supported by this scheduler yet",
                            )
                        } else {
                            s
                        }
                    }
                }
            };
            statuses.insert(name, status);
        }
        let fit = FitError {
            num_all_nodes: nodes.len(),
            diagnosis: Diagnosis {
                node_to_status: statuses,
                ..Default::default()
            },
        };
        Status::unschedulable(format!("preemption: {fit}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::*;

    #[test]
    fn messages() {
        let nodes = vec![
            node_info(node("a", &[]), vec![]),
            node_info(node("b", &[]), vec![]),
        ];
        let mut filtered = HashMap::new();
        filtered.insert(
            "a".to_string(),
            Status::unresolvable("node(s) had untolerated taint {x: }"),
        );
        filtered.insert("b".to_string(), Status::unschedulable("Insufficient cpu"));
        let f = |_: &PodInfo, _: &NodeInfo| Status::unschedulable("Insufficient cpu");
        let s = DefaultPreemption.post_filter(
            &CycleState::default(),
            &PodInfo::new(pod("p", &[])),
            &nodes,
            &filtered,
            &f,
        );
        assert_eq!(
            s.message(),
            "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
        );
    }
}
