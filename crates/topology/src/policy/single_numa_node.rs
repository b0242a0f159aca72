//! `single-numa-node`: only placements on one NUMA node (or without a
//! preference) count; anything else is rejected (upstream's
//! `policy_single_numa_node.go`). `prefer-closest-numa-nodes` does not apply.

use super::{POLICY_SINGLE_NUMA_NODE, Policy, PolicyOptions, filtered, merge_filtered};
use crate::hint::TopologyHint;
use crate::merge::NumaInfo;
use crate::provider::HintMap;

pub struct SingleNumaNode {
    pub numa: NumaInfo,
    pub opts: PolicyOptions,
}

/// Keeps the preferred hints that name one node or none (upstream's
/// `filterSingleNumaHints`).
pub fn filter_single_numa_hints(hints: Vec<Vec<TopologyHint>>) -> Vec<Vec<TopologyHint>> {
    hints
        .into_iter()
        .map(|list| {
            list.into_iter()
                .filter(|h| h.preferred && h.affinity.is_none_or(|m| m.count() == 1))
                .collect()
        })
        .collect()
}

impl Policy for SingleNumaNode {
    fn name(&self) -> &'static str {
        POLICY_SINGLE_NUMA_NODE
    }

    fn merge(&self, providers_hints: &[HintMap]) -> (TopologyHint, bool) {
        let hints = filter_single_numa_hints(filtered(providers_hints));
        let mut best = merge_filtered(&self.numa, &self.opts, false, &hints);
        if best.affinity == Some(self.numa.default_affinity_mask()) {
            best.affinity = None;
        }
        (best, best.preferred)
    }
}
