//! `none`: no alignment; every pod is admitted (upstream's `policy_none.go`).

use super::{POLICY_NONE, Policy};
use crate::hint::TopologyHint;
use crate::provider::HintMap;

pub struct NonePolicy;

impl Policy for NonePolicy {
    fn name(&self) -> &'static str {
        POLICY_NONE
    }

    fn merge(&self, _providers_hints: &[HintMap]) -> (TopologyHint, bool) {
        (TopologyHint::default(), true)
    }
}
