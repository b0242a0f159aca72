//! PreScore sums, per topology pair, the weights of every preferred term
//! (and existing pods' required affinity) that the pod pair matches; Score
//! adds up a node's pairs; NormalizeScore maps min–max onto 0–100.

use std::collections::HashMap;
use std::sync::Arc;

use crate::framework::affinity::{AffinityTerm, NamespaceLabels, WeightedAffinityTerm};
use crate::framework::{
    Code, CycleState, MAX_NODE_SCORE, NodeInfo, NodeScore, PodInfo, PreScore, Score, Snapshot,
    Status,
};

use super::InterPodAffinity;

const STATE_KEY: &str = "PreScoreInterPodAffinity";

/// topology key → value → score.
type ScoreMap = HashMap<String, HashMap<String, i64>>;

fn process_term(
    m: &mut ScoreMap,
    t: &AffinityTerm,
    weight: i64,
    pod: &k8s_openapi::api::core::v1::Pod,
    ns: &NamespaceLabels,
    node: &NodeInfo,
) {
    if t.matches(pod, ns)
        && let Some(v) = node.labels().get(&t.topology_key)
    {
        *m.entry(t.topology_key.clone())
            .or_default()
            .entry(v.clone())
            .or_insert(0) += weight;
    }
}

fn process_terms(
    m: &mut ScoreMap,
    terms: &[WeightedAffinityTerm],
    pod: &k8s_openapi::api::core::v1::Pod,
    ns: &NamespaceLabels,
    node: &NodeInfo,
    multiplier: i64,
) {
    for w in terms {
        process_term(m, &w.term, i64::from(w.weight) * multiplier, pod, ns, node);
    }
}

impl InterPodAffinity {
    fn process_existing_pod(
        &self,
        m: &mut ScoreMap,
        incoming: &PodInfo,
        existing: &PodInfo,
        node: &NodeInfo,
        ns: &NamespaceLabels,
    ) {
        if node.labels().is_empty() {
            return;
        }
        process_terms(
            m,
            &incoming.preferred_affinity_terms,
            &existing.pod,
            ns,
            node,
            1,
        );
        process_terms(
            m,
            &incoming.preferred_anti_affinity_terms,
            &existing.pod,
            ns,
            node,
            -1,
        );
        let hard = i64::from(self.args.hard_pod_affinity_weight);
        if hard > 0 {
            for t in &existing.required_affinity_terms {
                process_term(m, t, hard, &incoming.pod, ns, node);
            }
        }
        process_terms(
            m,
            &existing.preferred_affinity_terms,
            &incoming.pod,
            ns,
            node,
            1,
        );
        process_terms(
            m,
            &existing.preferred_anti_affinity_terms,
            &incoming.pod,
            ns,
            node,
            -1,
        );
    }
}

impl PreScore for InterPodAffinity {
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
        let has_constraints = !pod.preferred_affinity_terms.is_empty()
            || !pod.preferred_anti_affinity_terms.is_empty();
        if self.args.ignore_preferred_terms_of_existing_pods && !has_constraints {
            return Status::new(Code::Skip, Vec::new());
        }
        let mut m = ScoreMap::new();
        let mut visit = |n: &NodeInfo| {
            for existing in &n.pods {
                // Without preferred terms of its own, only pods with affinity matter.
                if has_constraints || existing.has_affinity() {
                    self.process_existing_pod(&mut m, pod, existing, n, &snap.namespaces);
                }
            }
        };
        if has_constraints {
            snap.nodes.iter().for_each(|n| visit(n));
        } else {
            snap.have_pods_with_affinity
                .iter()
                .for_each(|&i| visit(&snap.nodes[i]));
        }
        if m.is_empty() {
            return Status::new(Code::Skip, Vec::new());
        }
        state.write(STATE_KEY, Arc::new(m));
        Status::success()
    }
}

impl Score for InterPodAffinity {
    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(m) = state.read::<Arc<ScoreMap>>(STATE_KEY) else {
            return Ok(0);
        };
        Ok(m.iter()
            .filter_map(|(k, values)| node.labels().get(k).and_then(|v| values.get(v)))
            .sum())
    }

    fn normalize_score(&self, state: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        if state.read::<Arc<ScoreMap>>(STATE_KEY).is_none() {
            return Status::success();
        }
        let min = scores.iter().map(|s| s.score).min().unwrap_or(0);
        let max = scores.iter().map(|s| s.score).max().unwrap_or(0);
        let diff = max - min;
        for s in scores.iter_mut() {
            s.score = if diff > 0 {
                (MAX_NODE_SCORE as f64 * ((s.score - min) as f64 / diff as f64)) as i64
            } else {
                0
            };
        }
        Status::success()
    }
}
