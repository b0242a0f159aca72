//! Topology Manager policies (upstream's `policy_*.go`), one file each, and
//! their options (`--topology-manager-policy-options`).

mod best_effort;
mod none;
mod restricted;
mod single_numa_node;

use std::collections::BTreeMap;

pub use best_effort::BestEffort;
pub use none::NonePolicy;
pub use restricted::Restricted;
pub use single_numa_node::SingleNumaNode;

use crate::hint::TopologyHint;
use crate::merge::{Fit, HintMerger, NumaInfo, filter_providers_hints};
use crate::provider::HintMap;

pub const POLICY_NONE: &str = "none";
pub const POLICY_BEST_EFFORT: &str = "best-effort";
pub const POLICY_RESTRICTED: &str = "restricted";
pub const POLICY_SINGLE_NUMA_NODE: &str = "single-numa-node";

pub const OPTION_PREFER_CLOSEST_NUMA_NODES: &str = "prefer-closest-numa-nodes";
pub const OPTION_MAX_ALLOWABLE_NUMA_NODES: &str = "max-allowable-numa-nodes";

/// Upstream's default `max-allowable-numa-nodes`, and the least value it
/// accepts for the option. Berth applies a limit only when the option is set.
pub const UPSTREAM_MAX_ALLOWABLE_NUMA_NODES: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("unknown policy: \"{0}\"")]
    UnknownPolicy(String),
    #[error("unknown Topology Manager Policy option: \"{0}\"")]
    UnknownOption(String),
    #[error("bad value for option \"{option}\": {why}")]
    BadValue { option: String, why: String },
    #[error("unsupported on machines with more than {0} NUMA Nodes")]
    TooManyNumaNodes(usize),
}

/// Parsed `--topology-manager-policy-options`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyOptions {
    pub prefer_closest_numa: bool,
    /// `None`: no limit (Berth's default; upstream's is 8).
    pub max_allowable_numa_nodes: Option<usize>,
}

impl PolicyOptions {
    /// Parses the `key=value` map the flag carries.
    pub fn from_map(opts: &BTreeMap<String, String>) -> Result<Self, PolicyError> {
        let mut out = PolicyOptions::default();
        for (k, v) in opts {
            let bad = |why: String| PolicyError::BadValue {
                option: k.clone(),
                why,
            };
            match k.as_str() {
                OPTION_PREFER_CLOSEST_NUMA_NODES => {
                    out.prefer_closest_numa = parse_go_bool(v).ok_or_else(|| {
                        bad(format!(
                            "strconv.ParseBool: parsing \"{v}\": invalid syntax"
                        ))
                    })?;
                }
                OPTION_MAX_ALLOWABLE_NUMA_NODES => {
                    let n: usize = v.parse().map_err(|_| {
                        bad(format!("strconv.Atoi: parsing \"{v}\": invalid syntax"))
                    })?;
                    if n < UPSTREAM_MAX_ALLOWABLE_NUMA_NODES {
                        return Err(bad(format!(
                            "the minimum value of \"{OPTION_MAX_ALLOWABLE_NUMA_NODES}\" should not be less than {UPSTREAM_MAX_ALLOWABLE_NUMA_NODES}"
                        )));
                    }
                    out.max_allowable_numa_nodes = Some(n);
                }
                _ => return Err(PolicyError::UnknownOption(k.clone())),
            }
        }
        Ok(out)
    }

    /// Parses `key=value,key2=value2` (the flag's text form).
    pub fn parse(s: &str) -> Result<Self, PolicyError> {
        let mut map = BTreeMap::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| PolicyError::BadValue {
                option: part.to_string(),
                why: "expected key=value".to_string(),
            })?;
            map.insert(k.trim().to_string(), v.trim().to_string());
        }
        Self::from_map(&map)
    }

    /// Upstream refuses to start on more NUMA nodes than the limit.
    pub fn check_numa_nodes(&self, count: usize) -> Result<(), PolicyError> {
        match self.max_allowable_numa_nodes {
            Some(max) if count > max => Err(PolicyError::TooManyNumaNodes(max)),
            _ => Ok(()),
        }
    }
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// A Topology Manager policy (upstream's `Policy`): the merged hint of all
/// providers' hints, and whether the pod may be admitted with it.
pub trait Policy: Send + Sync {
    fn name(&self) -> &'static str;
    fn merge(&self, providers_hints: &[HintMap]) -> (TopologyHint, bool);
}

/// A policy by its flag name.
pub fn new_policy(
    name: &str,
    numa: NumaInfo,
    opts: PolicyOptions,
) -> Result<Box<dyn Policy>, PolicyError> {
    opts.check_numa_nodes(numa.nodes.len())?;
    Ok(match name {
        POLICY_NONE => Box::new(NonePolicy),
        POLICY_BEST_EFFORT => Box::new(BestEffort { numa, opts }),
        POLICY_RESTRICTED => Box::new(Restricted { numa, opts }),
        POLICY_SINGLE_NUMA_NODE => Box::new(SingleNumaNode { numa, opts }),
        other => return Err(PolicyError::UnknownPolicy(other.to_string())),
    })
}

/// Filter, then merge, as best-effort and restricted do.
pub(crate) fn merge_filtered(
    numa: &NumaInfo,
    opts: &PolicyOptions,
    fit_closest: bool,
    hints: &[Vec<TopologyHint>],
) -> TopologyHint {
    let fit = if fit_closest && opts.prefer_closest_numa {
        Fit::Closest
    } else {
        Fit::Narrowest
    };
    HintMerger { numa, hints, fit }.merge()
}

pub(crate) fn filtered(providers_hints: &[HintMap]) -> Vec<Vec<TopologyHint>> {
    filter_providers_hints(providers_hints)
}

#[cfg(test)]
mod tests;
