//! TaintToleration: NoSchedule/NoExecute taints must be tolerated (Filter);
//! fewer untolerated PreferNoSchedule taints score higher (Score).

use k8s_openapi::api::core::v1::{Taint, Toleration};

use crate::framework::{
    CycleState, Filter, MAX_NODE_SCORE, NodeInfo, NodeScore, Plugin, PodInfo, Score, Status,
    default_normalize_score,
};

pub const NAME: &str = "TaintToleration";

pub use berth_api::taints::tolerates;

fn tolerations(pod: &PodInfo) -> &[Toleration] {
    pod.pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
}

fn taints(node: &NodeInfo) -> &[Taint] {
    node.node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

pub struct TaintToleration;

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl Filter for TaintToleration {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let tols = tolerations(pod);
        let untolerated = taints(node).iter().find(|taint| {
            matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
                && !tols.iter().any(|t| tolerates(t, taint))
        });
        match untolerated {
            Some(t) => Status::unresolvable(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                t.key,
                t.value.as_deref().unwrap_or("")
            )),
            None => Status::success(),
        }
    }
}

impl Score for TaintToleration {
    fn score(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        // Only tolerations that can match PreferNoSchedule count here.
        let tols: Vec<&Toleration> = tolerations(pod)
            .iter()
            .filter(|t| {
                matches!(
                    t.effect.as_deref(),
                    None | Some("") | Some("PreferNoSchedule")
                )
            })
            .collect();
        let count = taints(node)
            .iter()
            .filter(|taint| {
                taint.effect == "PreferNoSchedule" && !tols.iter().any(|t| tolerates(t, taint))
            })
            .count();
        Ok(count as i64)
    }

    fn normalize_score(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        default_normalize_score(MAX_NODE_SCORE, true, scores);
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::testing::*;

    type Case<'a> = (
        Vec<(&'a str, &'a str, &'a str)>,
        Vec<(&'a str, &'a str, &'a str, &'a str)>,
        Option<&'a str>,
    );

    #[test]
    fn filter_table() {
        let cp = "node-role.kubernetes.io/control-plane";
        let cases: Vec<Case> = vec![
            (vec![], vec![], None),
            (
                vec![(cp, "", "NoSchedule")],
                vec![],
                Some("node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"),
            ),
            (
                vec![(cp, "", "NoSchedule")],
                vec![(cp, "Exists", "", "NoSchedule")],
                None,
            ),
            (
                vec![("dedicated", "gpu", "NoExecute")],
                vec![("dedicated", "Equal", "cpu", "")],
                Some("node(s) had untolerated taint {dedicated: gpu}"),
            ),
            (
                vec![("dedicated", "gpu", "NoExecute")],
                vec![("dedicated", "", "gpu", "")],
                None,
            ),
            (
                vec![("dedicated", "gpu", "NoSchedule")],
                vec![("", "Exists", "", "")],
                None,
            ),
            (vec![("a", "b", "PreferNoSchedule")], vec![], None),
        ];
        for (i, (ts, tols, want)) in cases.into_iter().enumerate() {
            let ni = node_info(tainted(node("n", &[]), &ts), vec![]);
            let s = TaintToleration.filter(
                &CycleState::default(),
                &PodInfo::new(tolerating(pod("p", &[]), &tols)),
                &ni,
            );
            match want {
                None => assert!(s.is_success(), "case {i}: {s}"),
                Some(msg) => {
                    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "case {i}");
                    assert_eq!(s.message(), msg, "case {i}");
                }
            }
        }
    }

    #[test]
    fn score_prefers_fewer_untolerated_prefer_no_schedule() {
        let nodes = [
            node_info(node("clean", &[]), vec![]),
            node_info(
                tainted(node("one", &[]), &[("a", "", "PreferNoSchedule")]),
                vec![],
            ),
            node_info(
                tainted(
                    node("two", &[]),
                    &[("a", "", "PreferNoSchedule"), ("b", "", "PreferNoSchedule")],
                ),
                vec![],
            ),
        ];
        let p = PodInfo::new(pod("p", &[]));
        let st = CycleState::default();
        let mut scores: Vec<NodeScore> = nodes
            .iter()
            .map(|n| NodeScore {
                name: n.name().into(),
                score: TaintToleration.score(&st, &p, n).unwrap(),
            })
            .collect();
        TaintToleration.normalize_score(&st, &p, &mut scores);
        assert_eq!(
            scores.iter().map(|s| s.score).collect::<Vec<_>>(),
            vec![100, 50, 0]
        );
    }
}
