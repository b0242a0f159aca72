//! `TopologyHint` (upstream's `topologymanager.TopologyHint`).

use std::fmt;

use crate::bitmask::BitMask;

/// A NUMA placement a resource could have. `affinity: None` is "no
/// preference" (any NUMA node will do); `preferred` marks the narrowest
/// placements the resource could ever have (by capacity, not what is free now).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TopologyHint {
    pub affinity: Option<BitMask>,
    pub preferred: bool,
}

impl TopologyHint {
    pub fn new(affinity: BitMask, preferred: bool) -> Self {
        TopologyHint {
            affinity: Some(affinity),
            preferred,
        }
    }

    /// The hint of a resource without a NUMA preference.
    pub const fn any() -> Self {
        TopologyHint {
            affinity: None,
            preferred: true,
        }
    }
}

impl fmt::Debug for TopologyHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.affinity {
            Some(m) => write!(f, "{{{m} {}}}", self.preferred),
            None => write!(f, "{{any {}}}", self.preferred),
        }
    }
}

impl fmt::Display for TopologyHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
