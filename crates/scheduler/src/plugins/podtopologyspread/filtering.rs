//! PreFilter/Filter: counts matching pods per domain once per cycle, then
//! checks `matching in domain + self − global minimum ≤ maxSkew` per node.

use std::collections::HashMap;

use crate::framework::{
    Code, CycleState, Filter, NodeInfo, PodInfo, PreFilter, PreFilterExtensions, Snapshot, Status,
};

use super::{
    Constraint, ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH,
    PodTopologySpread, count_pods_match_selector, has_all_keys,
};

const STATE_KEY: &str = "PreFilterPodTopologySpread";

/// Upstream's preFilterState: matching pods per (constraint, domain value).
#[derive(Clone)]
pub(super) struct FilterState {
    pub constraints: Vec<Constraint>,
    pub tp_value_to_match_num: Vec<HashMap<String, i64>>,
}

impl FilterState {
    /// The global minimum, or 0 while fewer than `minDomains` domains exist.
    fn min_match_num(&self, i: usize) -> i64 {
        let domains = &self.tp_value_to_match_num[i];
        if domains.len() < self.constraints[i].min_domains {
            return 0;
        }
        domains
            .values()
            .copied()
            .min()
            .unwrap_or(i64::from(i32::MAX))
    }
}

impl PodTopologySpread {
    pub(super) fn filter_state(&self, pod: &PodInfo, snap: &Snapshot) -> FilterState {
        let constraints = self.constraints(pod, "DoNotSchedule", snap);
        let mut counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); constraints.len()];
        if !constraints.is_empty() {
            for n in &snap.nodes {
                let labels = n.labels();
                if !has_all_keys(labels, &constraints) {
                    continue;
                }
                for (i, c) in constraints.iter().enumerate() {
                    if !c.includes(pod, n) {
                        continue;
                    }
                    let Some(value) = labels.get(&c.topology_key) else {
                        continue;
                    };
                    let count = count_pods_match_selector(&n.pods, &c.selector, pod.namespace());
                    *counts[i].entry(value.clone()).or_insert(0) += count;
                }
            }
        }
        FilterState {
            constraints,
            tp_value_to_match_num: counts,
        }
    }
}

impl PreFilter for PodTopologySpread {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snap: &Snapshot) -> Status {
        let s = self.filter_state(pod, snap);
        if s.constraints.is_empty() {
            return Status::new(Code::Skip, Vec::new());
        }
        state.write(STATE_KEY, s);
        Status::success()
    }

    fn extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PodTopologySpread {
    /// Upstream's `updateWithPod`: a pod added to or removed from `node`
    /// changes its domain's count for every constraint it matches.
    fn update_with_pod(
        state: &mut CycleState,
        pod: &PodInfo,
        other: &PodInfo,
        node: &NodeInfo,
        delta: i64,
    ) {
        let Some(s) = state.read::<FilterState>(STATE_KEY) else {
            return;
        };
        if other.namespace() != pod.namespace() || !has_all_keys(node.labels(), &s.constraints) {
            return;
        }
        let mut s = s.clone();
        for (i, c) in s.constraints.iter().enumerate() {
            if !c.includes(pod, node) || !c.selector.matches(other.labels()) {
                continue;
            }
            if let Some(v) = node.labels().get(&c.topology_key) {
                *s.tp_value_to_match_num[i].entry(v.clone()).or_insert(0) += delta;
            }
        }
        state.write(STATE_KEY, s);
    }
}

impl PreFilterExtensions for PodTopologySpread {
    fn add_pod(&self, state: &mut CycleState, pod: &PodInfo, added: &PodInfo, node: &NodeInfo) {
        Self::update_with_pod(state, pod, added, node, 1);
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        removed: &PodInfo,
        node: &NodeInfo,
    ) {
        Self::update_with_pod(state, pod, removed, node, -1);
    }
}

impl Filter for PodTopologySpread {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<FilterState>(STATE_KEY) else {
            return Status::success();
        };
        let labels = node.labels();
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = labels.get(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            let self_match = i64::from(c.selector.matches(pod.labels()));
            let match_num = s.tp_value_to_match_num[i].get(value).copied().unwrap_or(0);
            let skew = match_num + self_match - s.min_match_num(i);
            if skew > c.max_skew {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}
