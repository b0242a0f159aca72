//! `best-effort`: the best merged hint, admitted even when it is not
//! preferred (upstream's `policy_best_effort.go`).

use super::{POLICY_BEST_EFFORT, Policy, PolicyOptions, filtered, merge_filtered};
use crate::hint::TopologyHint;
use crate::merge::NumaInfo;
use crate::provider::HintMap;

pub struct BestEffort {
    pub numa: NumaInfo,
    pub opts: PolicyOptions,
}

impl Policy for BestEffort {
    fn name(&self) -> &'static str {
        POLICY_BEST_EFFORT
    }

    fn merge(&self, providers_hints: &[HintMap]) -> (TopologyHint, bool) {
        let hint = merge_filtered(&self.numa, &self.opts, true, &filtered(providers_hints));
        (hint, true)
    }
}
