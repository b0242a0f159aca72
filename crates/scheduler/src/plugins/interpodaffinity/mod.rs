//! InterPodAffinity: required pod affinity/anti-affinity of the incoming
//! pod, and existing pods' required anti-affinity against it (Filter);
//! preferred terms of both sides and existing pods' required affinity
//! (× hardPodAffinityWeight) (Score).

mod filtering;
mod scoring;

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use crate::framework::Plugin;
use crate::framework::affinity::AffinityTerm;

pub const NAME: &str = "InterPodAffinity";
pub const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";
pub const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
pub const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't match pod anti-affinity rules";

/// `InterPodAffinityArgs` with upstream's defaults.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterPodAffinityArgs {
    #[serde(default = "default_hard_weight")]
    pub hard_pod_affinity_weight: i32,
    #[serde(default)]
    pub ignore_preferred_terms_of_existing_pods: bool,
}

fn default_hard_weight() -> i32 {
    1
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        Self {
            hard_pod_affinity_weight: default_hard_weight(),
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

#[derive(Default)]
pub struct InterPodAffinity {
    pub args: InterPodAffinityArgs,
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        NAME
    }
}

/// (topology key, value) → count.
pub(crate) type TopologyCounts = HashMap<(String, String), i64>;

fn update(m: &mut TopologyCounts, labels: &BTreeMap<String, String>, key: &str, by: i64) {
    if let Some(v) = labels.get(key) {
        let e = m.entry((key.to_string(), v.clone())).or_insert(0);
        *e += by;
        if *e == 0 {
            m.remove(&(key.to_string(), v.clone()));
        }
    }
}

/// Whether `pod` matches every term (upstream `podMatchesAllAffinityTerms`); false for none.
fn matches_all(
    terms: &[AffinityTerm],
    pod: &k8s_openapi::api::core::v1::Pod,
    ns: &crate::framework::affinity::NamespaceLabels,
) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod, ns))
}

#[cfg(test)]
mod tests;
