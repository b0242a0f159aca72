//! NodeAffinity: `nodeSelector` and required node affinity (Filter);
//! preferred node affinity weights (Score).

use crate::framework::{
    CycleState, Filter, MAX_NODE_SCORE, NodeInfo, NodeScore, Plugin, PodInfo, Score, Status,
    default_normalize_score,
};

pub const NAME: &str = "NodeAffinity";
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";

pub use berth_api::nodeselector::term_matches;

/// `nodeSelector` and required affinity both have to hold.
pub fn required_matches(pod: &PodInfo, node: &NodeInfo) -> bool {
    let Some(spec) = pod.pod.spec.as_ref() else {
        return true;
    };
    let labels = node.labels();
    if let Some(sel) = spec.node_selector.as_ref()
        && !sel.iter().all(|(k, v)| labels.get(k) == Some(v))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        Some(ns) => ns
            .node_selector_terms
            .iter()
            .any(|t| term_matches(t, labels, node.name())),
        None => true,
    }
}

pub struct NodeAffinity;

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl Filter for NodeAffinity {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if required_matches(pod, node) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_POD)
        }
    }
}

impl Score for NodeAffinity {
    fn score(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let preferred = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.preferred_during_scheduling_ignored_during_execution
                    .as_deref()
            })
            .unwrap_or_default();
        Ok(preferred
            .iter()
            .filter(|p| p.weight != 0 && term_matches(&p.preference, node.labels(), node.name()))
            .map(|p| i64::from(p.weight))
            .sum())
    }

    fn normalize_score(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::*;
    use k8s_openapi::api::core::v1::{Affinity, NodeSelector, PreferredSchedulingTerm};
    use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn with_required(terms: Vec<NodeSelectorTerm>) -> PodInfo {
        let mut p = pod("p", &[]);
        p.spec.get_or_insert_default().affinity = Some(Affinity {
            node_affinity: Some(k8s_openapi::api::core::v1::NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: terms,
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        PodInfo::new(p)
    }

    fn term(exprs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(exprs),
            match_fields: None,
        }
    }

    #[test]
    fn required_table() {
        let n = node_info(
            labeled(node("n1", &[]), &[("zone", "a"), ("gen", "5")]),
            vec![],
        );
        let cases: Vec<(Vec<NodeSelectorTerm>, bool)> = vec![
            (vec![term(vec![req("zone", "In", &["a", "b"])])], true),
            (vec![term(vec![req("zone", "NotIn", &["a"])])], false),
            (
                vec![
                    term(vec![req("zone", "NotIn", &["a"])]),
                    term(vec![req("gen", "Gt", &["4"])]),
                ],
                true,
            ),
            (vec![term(vec![req("gen", "Lt", &["4"])])], false),
            (vec![term(vec![req("gpu", "DoesNotExist", &[])])], true),
            (vec![term(vec![req("gpu", "Exists", &[])])], false),
            (vec![term(vec![])], false),
            (
                vec![NodeSelectorTerm {
                    match_expressions: None,
                    match_fields: Some(vec![req("metadata.name", "In", &["n1"])]),
                }],
                true,
            ),
        ];
        for (i, (terms, fits)) in cases.into_iter().enumerate() {
            let s = NodeAffinity.filter(&CycleState::default(), &with_required(terms), &n);
            assert_eq!(s.is_success(), fits, "case {i}");
            if !fits {
                assert_eq!(s.message(), ERR_REASON_POD);
            }
        }
    }

    #[test]
    fn node_selector() {
        let n = node_info(labeled(node("n1", &[]), &[("disk", "ssd")]), vec![]);
        for (sel, fits) in [
            (("disk", "ssd"), true),
            (("disk", "hdd"), false),
            (("x", "y"), false),
        ] {
            let mut p = pod("p", &[]);
            p.spec.get_or_insert_default().node_selector =
                Some([(sel.0.to_string(), sel.1.to_string())].into());
            assert_eq!(
                NodeAffinity
                    .filter(&CycleState::default(), &PodInfo::new(p), &n)
                    .is_success(),
                fits
            );
        }
    }

    #[test]
    fn preferred_scores_are_normalised() {
        let mut p = pod("p", &[]);
        p.spec.get_or_insert_default().affinity = Some(Affinity {
            node_affinity: Some(k8s_openapi::api::core::v1::NodeAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    PreferredSchedulingTerm {
                        weight: 2,
                        preference: term(vec![req("zone", "In", &["a"])]),
                    },
                    PreferredSchedulingTerm {
                        weight: 6,
                        preference: term(vec![req("disk", "In", &["ssd"])]),
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        });
        let p = PodInfo::new(p);
        let nodes = [
            node_info(labeled(node("a", &[]), &[("zone", "a")]), vec![]),
            node_info(
                labeled(node("b", &[]), &[("zone", "a"), ("disk", "ssd")]),
                vec![],
            ),
            node_info(node("c", &[]), vec![]),
        ];
        let st = CycleState::default();
        let mut scores: Vec<NodeScore> = nodes
            .iter()
            .map(|n| NodeScore {
                name: n.name().into(),
                score: NodeAffinity.score(&st, &p, n).unwrap(),
            })
            .collect();
        NodeAffinity.normalize_score(&st, &p, &mut scores);
        assert_eq!(
            scores.iter().map(|s| s.score).collect::<Vec<_>>(),
            vec![25, 100, 0]
        );
    }
}
