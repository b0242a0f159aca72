//! `restricted`: as best-effort, but a pod whose merged hint is not preferred
//! is rejected (upstream's `policy_restricted.go`).

use super::{POLICY_RESTRICTED, Policy, PolicyOptions, filtered, merge_filtered};
use crate::hint::TopologyHint;
use crate::merge::NumaInfo;
use crate::provider::HintMap;

pub struct Restricted {
    pub numa: NumaInfo,
    pub opts: PolicyOptions,
}

impl Policy for Restricted {
    fn name(&self) -> &'static str {
        POLICY_RESTRICTED
    }

    fn merge(&self, providers_hints: &[HintMap]) -> (TopologyHint, bool) {
        let hint = merge_filtered(&self.numa, &self.opts, true, &filtered(providers_hints));
        (hint, hint.preferred)
    }
}
