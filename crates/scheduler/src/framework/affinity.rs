//! Pod (anti-)affinity terms compiled once per pod (upstream
//! `framework.AffinityTerm` and `getAffinityTerms`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use berth_api::selector::LabelSelector;
use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm, WeightedPodAffinityTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

/// Namespace name → its labels, for `namespaceSelector`.
pub type NamespaceLabels = HashMap<String, BTreeMap<String, String>>;

#[derive(Clone, Debug)]
pub struct AffinityTerm {
    pub namespaces: BTreeSet<String>,
    /// Nothing when the term has no namespaceSelector.
    pub namespace_selector: LabelSelector,
    pub selector: LabelSelector,
    pub topology_key: String,
}

#[derive(Clone, Debug)]
pub struct WeightedAffinityTerm {
    pub term: AffinityTerm,
    pub weight: i32,
}

/// A metav1.LabelSelector as a selector: absent selects nothing; a selector
/// that cannot be parsed (validation rejects those) selects nothing too.
fn selector(
    sel: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> LabelSelector {
    let Some(sel) = sel else {
        return LabelSelector::nothing();
    };
    serde_json::to_value(sel)
        .ok()
        .and_then(|v| LabelSelector::from_meta(&v).ok())
        .unwrap_or_else(LabelSelector::nothing)
}

impl AffinityTerm {
    /// Upstream's `newAffinityTerm`: no namespaces and no namespaceSelector
    /// mean the pod's own namespace; matchLabelKeys/mismatchLabelKeys add
    /// `key in (value)` / `key notin (value)` from the pod's labels.
    pub fn new(pod: &Pod, t: &PodAffinityTerm) -> Self {
        let mut label_selector = t.label_selector.clone();
        let labels = pod.metadata.labels.as_ref();
        if let Some(sel) = label_selector.as_mut() {
            for (keys, op) in [
                (t.match_label_keys.as_deref(), "In"),
                (t.mismatch_label_keys.as_deref(), "NotIn"),
            ] {
                for key in keys.unwrap_or_default() {
                    if let Some(v) = labels.and_then(|l| l.get(key)) {
                        sel.match_expressions.get_or_insert_default().push(
                            LabelSelectorRequirement {
                                key: key.clone(),
                                operator: op.to_string(),
                                values: Some(vec![v.clone()]),
                            },
                        );
                    }
                }
            }
        }
        let mut namespaces: BTreeSet<String> = t.namespaces.iter().flatten().cloned().collect();
        if namespaces.is_empty() && t.namespace_selector.is_none() {
            namespaces.insert(
                pod.metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".to_string()),
            );
        }
        AffinityTerm {
            namespaces,
            namespace_selector: selector(t.namespace_selector.as_ref()),
            selector: selector(label_selector.as_ref()),
            topology_key: t.topology_key.clone(),
        }
    }

    /// Whether `pod` is in one of the term's namespaces and matches its selector.
    pub fn matches(&self, pod: &Pod, namespaces: &NamespaceLabels) -> bool {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        let in_ns = self.namespaces.contains(ns)
            || self
                .namespace_selector
                .matches(namespaces.get(ns).unwrap_or(&EMPTY));
        in_ns
            && self
                .selector
                .matches(pod.metadata.labels.as_ref().unwrap_or(&EMPTY))
    }
}

/// All four kinds of terms of one pod.
#[derive(Default)]
pub struct PodTerms {
    pub required_affinity: Vec<AffinityTerm>,
    pub required_anti_affinity: Vec<AffinityTerm>,
    pub preferred_affinity: Vec<WeightedAffinityTerm>,
    pub preferred_anti_affinity: Vec<WeightedAffinityTerm>,
}

impl PodTerms {
    pub fn of(pod: &Pod) -> Self {
        let Some(aff) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else {
            return Self::default();
        };
        let required = |ts: Option<&Vec<PodAffinityTerm>>| -> Vec<AffinityTerm> {
            ts.into_iter()
                .flatten()
                .map(|t| AffinityTerm::new(pod, t))
                .collect()
        };
        let preferred = |ts: Option<&Vec<WeightedPodAffinityTerm>>| -> Vec<WeightedAffinityTerm> {
            ts.into_iter()
                .flatten()
                .filter(|w| w.weight != 0)
                .map(|w| WeightedAffinityTerm {
                    term: AffinityTerm::new(pod, &w.pod_affinity_term),
                    weight: w.weight,
                })
                .collect()
        };
        let a = aff.pod_affinity.as_ref();
        let aa = aff.pod_anti_affinity.as_ref();
        PodTerms {
            required_affinity: required(a.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            required_anti_affinity: required(aa.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred_affinity: preferred(a.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred_anti_affinity: preferred(aa.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
        }
    }
}
