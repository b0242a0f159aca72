//! PreFilter counts, per topology pair, the existing pods that the incoming
//! pod's required terms match and the existing pods whose required
//! anti-affinity matches the incoming pod; Filter checks a node's pairs.

use std::sync::Arc;

use crate::framework::affinity::NamespaceLabels;
use crate::framework::{
    Code, CycleState, Filter, NodeInfo, PodInfo, PreFilter, PreFilterExtensions, Snapshot, Status,
};

use super::{
    ERR_REASON_AFFINITY_RULES_NOT_MATCH, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, InterPodAffinity, TopologyCounts,
    matches_all, update,
};

const STATE_KEY: &str = "PreFilterInterPodAffinity";

#[derive(Clone)]
pub(super) struct FilterState {
    namespaces: Arc<NamespaceLabels>,
    existing_anti_affinity_counts: TopologyCounts,
    affinity_counts: TopologyCounts,
    anti_affinity_counts: TopologyCounts,
    /// The pod matches all its own affinity terms (the first of a group may land anywhere).
    matches_own_affinity: bool,
}

impl PreFilter for InterPodAffinity {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snap: &Snapshot) -> Status {
        let ns = &snap.namespaces;
        let mut existing = TopologyCounts::new();
        for &i in &snap.have_pods_with_required_anti_affinity {
            let n = &snap.nodes[i];
            let labels = n.labels();
            if labels.is_empty() {
                continue;
            }
            for existing_pod in &n.pods {
                for t in &existing_pod.required_anti_affinity_terms {
                    if t.matches(&pod.pod, ns) {
                        update(&mut existing, labels, &t.topology_key, 1);
                    }
                }
            }
        }
        let mut affinity = TopologyCounts::new();
        let mut anti = TopologyCounts::new();
        let req = &pod.required_affinity_terms;
        let req_anti = &pod.required_anti_affinity_terms;
        if !req.is_empty() || !req_anti.is_empty() {
            for n in &snap.nodes {
                let labels = n.labels();
                if labels.is_empty() {
                    continue;
                }
                for existing_pod in &n.pods {
                    if matches_all(req, &existing_pod.pod, ns) {
                        for t in req {
                            update(&mut affinity, labels, &t.topology_key, 1);
                        }
                    }
                    for t in req_anti {
                        if t.matches(&existing_pod.pod, ns) {
                            update(&mut anti, labels, &t.topology_key, 1);
                        }
                    }
                }
            }
        }
        if existing.is_empty() && req.is_empty() && req_anti.is_empty() {
            return Status::new(Code::Skip, Vec::new());
        }
        state.write(
            STATE_KEY,
            FilterState {
                namespaces: snap.namespaces.clone(),
                existing_anti_affinity_counts: existing,
                affinity_counts: affinity,
                anti_affinity_counts: anti,
                matches_own_affinity: matches_all(req, &pod.pod, ns),
            },
        );
        Status::success()
    }

    fn extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

/// Upstream's `updateWithPod`: the pair counts a pod on `node` contributes.
fn update_with_pod(
    state: &mut CycleState,
    pod: &PodInfo,
    other: &PodInfo,
    node: &NodeInfo,
    by: i64,
) {
    let Some(s) = state.read::<FilterState>(STATE_KEY) else {
        return;
    };
    let mut s = s.clone();
    let labels = node.labels();
    let ns = s.namespaces.clone();
    for t in &other.required_anti_affinity_terms {
        if t.matches(&pod.pod, &ns) {
            update(
                &mut s.existing_anti_affinity_counts,
                labels,
                &t.topology_key,
                by,
            );
        }
    }
    if matches_all(&pod.required_affinity_terms, &other.pod, &ns) {
        for t in &pod.required_affinity_terms {
            update(&mut s.affinity_counts, labels, &t.topology_key, by);
        }
    }
    for t in &pod.required_anti_affinity_terms {
        if t.matches(&other.pod, &ns) {
            update(&mut s.anti_affinity_counts, labels, &t.topology_key, by);
        }
    }
    state.write(STATE_KEY, s);
}

impl PreFilterExtensions for InterPodAffinity {
    fn add_pod(&self, state: &mut CycleState, pod: &PodInfo, added: &PodInfo, node: &NodeInfo) {
        update_with_pod(state, pod, added, node, 1);
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        removed: &PodInfo,
        node: &NodeInfo,
    ) {
        update_with_pod(state, pod, removed, node, -1);
    }
}

fn satisfy_existing_pods_anti_affinity(s: &FilterState, node: &NodeInfo) -> bool {
    s.existing_anti_affinity_counts.is_empty()
        || !node.labels().iter().any(|(k, v)| {
            s.existing_anti_affinity_counts
                .get(&(k.clone(), v.clone()))
                .is_some_and(|c| *c > 0)
        })
}

fn satisfy_pod_anti_affinity(s: &FilterState, pod: &PodInfo, node: &NodeInfo) -> bool {
    s.anti_affinity_counts.is_empty()
        || !pod.required_anti_affinity_terms.iter().any(|t| {
            node.labels().get(&t.topology_key).is_some_and(|v| {
                s.anti_affinity_counts
                    .get(&(t.topology_key.clone(), v.clone()))
                    .is_some_and(|c| *c > 0)
            })
        })
}

fn satisfy_pod_affinity(s: &FilterState, pod: &PodInfo, node: &NodeInfo) -> bool {
    let mut pods_exist = true;
    for t in &pod.required_affinity_terms {
        let Some(v) = node.labels().get(&t.topology_key) else {
            // Every topology key must exist on the node.
            return false;
        };
        if s.affinity_counts
            .get(&(t.topology_key.clone(), v.clone()))
            .is_none_or(|c| *c <= 0)
        {
            pods_exist = false;
        }
    }
    // The first pod of a group with affinity to itself may go anywhere that
    // has the keys, when no pod anywhere matches yet.
    pods_exist || (s.affinity_counts.is_empty() && s.matches_own_affinity)
}

impl Filter for InterPodAffinity {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<FilterState>(STATE_KEY) else {
            return Status::success();
        };
        if !satisfy_pod_affinity(s, pod, node) {
            return Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH);
        }
        if !satisfy_pod_anti_affinity(s, pod, node) {
            return Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        if !satisfy_existing_pods_anti_affinity(s, node) {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        Status::success()
    }
}
