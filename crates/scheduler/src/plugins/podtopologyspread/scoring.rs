//! PreScore/Score/NormalizeScore: a node scores the matching pods of its
//! domains (weighted by log(domain count + 2)), and normalisation turns
//! fewer matching pods into a higher score.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::framework::{
    Code, CycleState, MAX_NODE_SCORE, NodeInfo, NodeScore, PodInfo, PreScore, Score, Snapshot,
    Status,
};

use super::{
    Constraint, LABEL_HOSTNAME, PodTopologySpread, count_pods_match_selector, has_all_keys,
};

const STATE_KEY: &str = "PreScorePodTopologySpread";

pub(super) struct ScoreState {
    constraints: Vec<Constraint>,
    /// Feasible nodes lacking a required key; they score 0.
    ignored_nodes: HashSet<Arc<str>>,
    /// Per constraint: domain value → matching pods (hostname is counted per node in Score).
    topology_value_to_pod_counts: Vec<HashMap<String, i64>>,
    topology_normalizing_weight: Vec<f64>,
}

fn topology_normalizing_weight(size: usize) -> f64 {
    ((size + 2) as f64).ln()
}

fn score_for_count(cnt: i64, max_skew: i64, weight: f64) -> f64 {
    cnt as f64 * weight + (max_skew - 1) as f64
}

impl PreScore for PodTopologySpread {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        feasible: &[&NodeInfo],
        snap: &Snapshot,
    ) -> Status {
        if feasible.is_empty() {
            return Status::new(Code::Skip, Vec::new());
        }
        let constraints = self.constraints(pod, "ScheduleAnyway", snap);
        if constraints.is_empty() {
            return Status::new(Code::Skip, Vec::new());
        }
        let require_all = self.require_all_topologies(pod);
        let mut ignored_nodes = HashSet::new();
        let mut counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); constraints.len()];
        for n in feasible {
            if require_all && !has_all_keys(n.labels(), &constraints) {
                ignored_nodes.insert(n.name_arc());
                continue;
            }
            for (i, c) in constraints.iter().enumerate() {
                if c.topology_key == LABEL_HOSTNAME {
                    continue;
                }
                if let Some(v) = n.labels().get(&c.topology_key) {
                    counts[i].entry(v.clone()).or_insert(0);
                }
            }
        }
        let weights = constraints
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let size = if c.topology_key == LABEL_HOSTNAME {
                    feasible.len() - ignored_nodes.len()
                } else {
                    counts[i].len()
                };
                topology_normalizing_weight(size)
            })
            .collect();
        // Count matching pods over all nodes, but only in domains of feasible nodes.
        for n in &snap.nodes {
            let labels = n.labels();
            if require_all && !has_all_keys(labels, &constraints) {
                continue;
            }
            for (i, c) in constraints.iter().enumerate() {
                if !c.includes(pod, n) {
                    continue;
                }
                let Some(v) = labels.get(&c.topology_key) else {
                    continue;
                };
                if let Some(cnt) = counts[i].get_mut(v) {
                    *cnt += count_pods_match_selector(&n.pods, &c.selector, pod.namespace());
                }
            }
        }
        state.write(
            STATE_KEY,
            Arc::new(ScoreState {
                constraints,
                ignored_nodes,
                topology_value_to_pod_counts: counts,
                topology_normalizing_weight: weights,
            }),
        );
        Status::success()
    }
}

impl Score for PodTopologySpread {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(s) = state.read::<Arc<ScoreState>>(STATE_KEY) else {
            return Ok(0);
        };
        if s.ignored_nodes.contains(node.name()) {
            return Ok(0);
        }
        let mut score = 0f64;
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(v) = node.labels().get(&c.topology_key) else {
                continue;
            };
            let cnt = if c.topology_key == LABEL_HOSTNAME {
                count_pods_match_selector(&node.pods, &c.selector, pod.namespace())
            } else {
                s.topology_value_to_pod_counts[i]
                    .get(v)
                    .copied()
                    .unwrap_or(0)
            };
            score += score_for_count(cnt, c.max_skew, s.topology_normalizing_weight[i]);
        }
        Ok(score.round() as i64)
    }

    fn normalize_score(&self, state: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        let Some(s) = state.read::<Arc<ScoreState>>(STATE_KEY) else {
            return Status::success();
        };
        let mut min = i64::MAX;
        let mut max = 0i64;
        for ns in scores.iter() {
            if s.ignored_nodes.contains(&ns.name) {
                continue;
            }
            min = min.min(ns.score);
            max = max.max(ns.score);
        }
        for ns in scores.iter_mut() {
            if s.ignored_nodes.contains(&ns.name) {
                ns.score = 0;
            } else if max == 0 {
                ns.score = MAX_NODE_SCORE;
            } else {
                ns.score = MAX_NODE_SCORE * (max + min - ns.score) / max;
            }
        }
        Status::success()
    }
}
