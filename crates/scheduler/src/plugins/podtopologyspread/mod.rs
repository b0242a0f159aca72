//! PodTopologySpread: matching pods must stay within `maxSkew` of the least
//! loaded domain (Filter, `DoNotSchedule`); less loaded domains score higher
//! (Score, `ScheduleAnyway`). Pods without constraints get the cluster's
//! default constraints (upstream's system defaults unless configured).

mod filtering;
mod scoring;

use std::collections::BTreeMap;

use berth_api::selector::LabelSelector;
use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use serde::Deserialize;

use crate::framework::{NodeInfo, Plugin, PodInfo, Snapshot};
use crate::plugins::{nodeaffinity, tainttoleration};

pub const NAME: &str = "PodTopologySpread";
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";

/// `PodTopologySpreadArgs`: `defaultingType` System (upstream's default) or List.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodTopologySpreadArgs {
    #[serde(default)]
    pub default_constraints: Vec<TopologySpreadConstraint>,
    #[serde(default)]
    pub defaulting_type: Option<String>,
}

/// A constraint with its selector compiled and its policies resolved.
#[derive(Clone, Debug)]
pub struct Constraint {
    pub max_skew: i64,
    pub topology_key: String,
    pub selector: LabelSelector,
    pub min_domains: usize,
    pub honor_node_affinity: bool,
    pub honor_node_taints: bool,
}

impl Constraint {
    /// Whether `node` counts for this constraint under its inclusion policies
    /// (nodeAffinityPolicy defaults to Honor, nodeTaintsPolicy to Ignore).
    fn includes(&self, pod: &PodInfo, node: &NodeInfo) -> bool {
        if self.honor_node_affinity && !nodeaffinity::required_matches(pod, node) {
            return false;
        }
        if self.honor_node_taints {
            let tols = pod
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.tolerations.as_deref())
                .unwrap_or_default();
            let taints = node
                .node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_deref())
                .unwrap_or_default();
            let untolerated = taints.iter().any(|t| {
                matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
                    && !tols.iter().any(|tol| tainttoleration::tolerates(tol, t))
            });
            if untolerated {
                return false;
            }
        }
        true
    }
}

/// Pods on the node in `ns`, not terminating, matching `selector`.
pub fn count_pods_match_selector(
    pods: &[std::sync::Arc<PodInfo>],
    sel: &LabelSelector,
    ns: &str,
) -> i64 {
    if sel.matches_nothing() {
        return 0;
    }
    pods.iter()
        .filter(|p| !p.is_terminating() && p.namespace() == ns && sel.matches(p.labels()))
        .count() as i64
}

fn has_all_keys(labels: &BTreeMap<String, String>, cs: &[Constraint]) -> bool {
    cs.iter().all(|c| labels.contains_key(&c.topology_key))
}

fn compile(pod: &PodInfo, c: &TopologySpreadConstraint) -> Constraint {
    let mut sel = c.label_selector.clone();
    // matchLabelKeys: the pod's own values join the selector.
    if let Some(s) = sel.as_mut() {
        for key in c.match_label_keys.iter().flatten() {
            if let Some(v) = pod.labels().get(key) {
                s.match_expressions.get_or_insert_default().push(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                        key: key.clone(),
                        operator: "In".into(),
                        values: Some(vec![v.clone()]),
                    },
                );
            }
        }
    }
    let selector = match sel {
        Some(s) => serde_json::to_value(&s)
            .ok()
            .and_then(|v| LabelSelector::from_meta(&v).ok())
            .unwrap_or_else(LabelSelector::nothing),
        None => LabelSelector::nothing(),
    };
    Constraint {
        max_skew: i64::from(c.max_skew),
        topology_key: c.topology_key.clone(),
        selector,
        min_domains: c.min_domains.map(|m| m.max(1) as usize).unwrap_or(1),
        honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
        honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
    }
}

pub struct PodTopologySpread {
    /// Constraints for pods that have none; empty disables defaulting.
    pub default_constraints: Vec<TopologySpreadConstraint>,
    /// Upstream's systemDefaulted: scoring then tolerates nodes missing a key.
    pub system_defaulted: bool,
}

impl Default for PodTopologySpread {
    fn default() -> Self {
        Self::new(PodTopologySpreadArgs::default())
    }
}

/// Upstream's system default constraints (hostname 3, zone 5, ScheduleAnyway).
pub fn system_default_constraints() -> Vec<TopologySpreadConstraint> {
    [(LABEL_HOSTNAME, 3), (LABEL_ZONE, 5)]
        .into_iter()
        .map(|(key, skew)| TopologySpreadConstraint {
            max_skew: skew,
            topology_key: key.into(),
            when_unsatisfiable: "ScheduleAnyway".into(),
            ..Default::default()
        })
        .collect()
}

impl PodTopologySpread {
    pub fn new(args: PodTopologySpreadArgs) -> Self {
        if args.defaulting_type.as_deref() == Some("List") {
            PodTopologySpread {
                default_constraints: args.default_constraints,
                system_defaulted: false,
            }
        } else {
            PodTopologySpread {
                default_constraints: system_default_constraints(),
                system_defaulted: true,
            }
        }
    }

    /// The pod's constraints with the given `whenUnsatisfiable`, or the
    /// defaults when it declares none.
    pub fn constraints(&self, pod: &PodInfo, action: &str, snap: &Snapshot) -> Vec<Constraint> {
        let own = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_deref())
            .unwrap_or_default();
        if !own.is_empty() {
            return own
                .iter()
                .filter(|c| c.when_unsatisfiable == action)
                .map(|c| compile(pod, c))
                .collect();
        }
        let Some(selector) = default_selector(pod, snap) else {
            return Vec::new();
        };
        self.default_constraints
            .iter()
            .filter(|c| c.when_unsatisfiable == action)
            .map(|c| {
                let mut cc = compile(pod, c);
                cc.selector = selector.clone();
                cc
            })
            .collect()
    }

    fn require_all_topologies(&self, pod: &PodInfo) -> bool {
        let own = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_ref())
            .is_some_and(|c| !c.is_empty());
        own || !self.system_defaulted
    }
}

/// Upstream's `DefaultSelector`: the selectors of the Services,
/// ReplicaSets, ReplicationControllers and StatefulSets selecting the pod,
/// together. Services are taken as they are; for a pod controlled by one of
/// those workload kinds Berth uses the pod's own labels in place of its
/// controller's selector (which the template's labels satisfy).
fn default_selector(pod: &PodInfo, snap: &Snapshot) -> Option<LabelSelector> {
    let labels = pod.labels();
    let mut merged: BTreeMap<&str, &str> = BTreeMap::new();
    for (ns, sel) in snap.service_selectors.iter() {
        if ns == pod.namespace()
            && !sel.is_empty()
            && sel.iter().all(|(k, v)| labels.get(k) == Some(v))
        {
            merged.extend(sel.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        }
    }
    let controlled = pod.pod.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true)
            && matches!(
                o.kind.as_str(),
                "ReplicaSet" | "ReplicationController" | "StatefulSet"
            )
    });
    if controlled {
        merged.extend(labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    }
    (!merged.is_empty()).then(|| LabelSelector::from_pairs(merged))
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        NAME
    }
}

#[cfg(test)]
mod tests;
