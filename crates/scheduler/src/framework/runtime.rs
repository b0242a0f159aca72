//! A profile's plugins run in order (upstream `framework/runtime/framework.go`)
//! and the scheduling algorithm over them (upstream `schedule_one.go`).

use std::collections::HashMap;
use std::sync::Arc;

use rand::Rng;

use super::fit_error::{Diagnosis, FitError};
use super::interface::{
    Bind, CycleState, Filter, NodeScore, Permit, PostFilter, PreFilter, PreScore, QueueSort,
    Reserve, Score,
};
use super::status::{Code, Status};
use super::types::{NodeInfo, PodInfo};

/// A Score plugin with its weight in the profile.
pub struct WeightedScore {
    pub plugin: Arc<dyn Score>,
    pub weight: i64,
}

/// The plugins of one profile, per extension point, in run order.
pub struct Framework {
    pub scheduler_name: String,
    pub queue_sort: Arc<dyn QueueSort>,
    pub pre_filter: Vec<Arc<dyn PreFilter>>,
    pub filter: Vec<Arc<dyn Filter>>,
    pub post_filter: Vec<Arc<dyn PostFilter>>,
    pub pre_score: Vec<Arc<dyn PreScore>>,
    pub score: Vec<WeightedScore>,
    pub reserve: Vec<Arc<dyn Reserve>>,
    pub permit: Vec<Arc<dyn Permit>>,
    pub bind: Vec<Arc<dyn Bind>>,
}

/// One feasible node's weighted scores, for the "why here" explanation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePluginScores {
    pub name: String,
    /// (plugin, normalised score × weight)
    pub scores: Vec<(String, i64)>,
    pub total: i64,
}

#[derive(Clone, Debug)]
pub struct ScheduleResult {
    pub suggested_host: String,
    pub evaluated_nodes: usize,
    pub feasible_nodes: usize,
    /// Every feasible node's scores, best first.
    pub scores: Vec<NodePluginScores>,
}

#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error("{0}")]
    Fit(FitError),
    #[error("no nodes available to schedule pods")]
    NoNodes,
    #[error("{0}")]
    Internal(Status),
}

impl Framework {
    /// Runs every Filter plugin on one node; the first rejection wins, as upstream.
    pub fn run_filter_plugins(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        for pl in &self.filter {
            let s = pl.filter(state, pod, node);
            if !s.is_success() {
                return s.with_plugin(pl.name());
            }
        }
        Status::success()
    }

    /// Filters and scores `nodes` for `pod`, returning the chosen node.
    pub fn schedule_pod(
        &self,
        pod: &PodInfo,
        nodes: &[NodeInfo],
    ) -> Result<ScheduleResult, ScheduleError> {
        if nodes.is_empty() {
            return Err(ScheduleError::NoNodes);
        }
        let mut state = CycleState::default();
        let mut diagnosis = Diagnosis::default();

        for pl in &self.pre_filter {
            let s = pl.pre_filter(&mut state, pod, nodes);
            match s.code() {
                Code::Success | Code::Skip => {}
                Code::Error | Code::Wait => {
                    return Err(ScheduleError::Internal(s.with_plugin(pl.name())));
                }
                Code::Unschedulable | Code::UnschedulableAndUnresolvable => {
                    // Every node gets the PreFilter's status (upstream does the same).
                    for n in nodes {
                        diagnosis
                            .node_to_status
                            .insert(n.name().to_string(), s.clone());
                    }
                    diagnosis.pre_filter_msg = s.message();
                    return Err(self.fit_error(&state, pod, nodes, diagnosis));
                }
            }
        }

        let mut feasible: Vec<&NodeInfo> = Vec::new();
        for n in nodes {
            let s = self.run_filter_plugins(&state, pod, n);
            match s.code() {
                Code::Success | Code::Skip => feasible.push(n),
                Code::Error => return Err(ScheduleError::Internal(s)),
                _ => {
                    diagnosis.node_to_status.insert(n.name().to_string(), s);
                }
            }
        }
        if feasible.is_empty() {
            return Err(self.fit_error(&state, pod, nodes, diagnosis));
        }

        let scores = self.prioritize_nodes(&mut state, pod, &feasible)?;
        let suggested_host = select_host(&scores);
        Ok(ScheduleResult {
            suggested_host,
            evaluated_nodes: nodes.len(),
            feasible_nodes: feasible.len(),
            scores,
        })
    }

    fn fit_error(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[NodeInfo],
        mut diagnosis: Diagnosis,
    ) -> ScheduleError {
        let filter = |p: &PodInfo, n: &NodeInfo| self.run_filter_plugins(state, p, n);
        for pl in &self.post_filter {
            let s = pl.post_filter(state, pod, nodes, &diagnosis.node_to_status, &filter);
            if !s.is_success() && !s.message().is_empty() {
                diagnosis.post_filter_msg = s.message();
            }
            if s.is_success() {
                break;
            }
        }
        ScheduleError::Fit(FitError {
            num_all_nodes: nodes.len(),
            diagnosis,
        })
    }

    /// PreScore, Score, NormalizeScore and weights (upstream `prioritizeNodes`).
    fn prioritize_nodes(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
    ) -> Result<Vec<NodePluginScores>, ScheduleError> {
        let mut result: Vec<NodePluginScores> = nodes
            .iter()
            .map(|n| NodePluginScores {
                name: n.name().to_string(),
                scores: Vec::new(),
                total: 0,
            })
            .collect();
        // Upstream skips scoring when there is nothing to choose between.
        if nodes.len() == 1 || self.score.is_empty() {
            return Ok(result);
        }
        for pl in &self.pre_score {
            let s = pl.pre_score(state, pod, nodes);
            if !s.is_success() && s.code() != Code::Skip {
                return Err(ScheduleError::Internal(s.with_plugin(pl.name())));
            }
        }
        for ws in &self.score {
            let mut list = Vec::with_capacity(nodes.len());
            for n in nodes {
                let score = ws
                    .plugin
                    .score(state, pod, n)
                    .map_err(|s| ScheduleError::Internal(s.with_plugin(ws.plugin.name())))?;
                list.push(NodeScore {
                    name: n.name().to_string(),
                    score,
                });
            }
            let s = ws.plugin.normalize_score(state, pod, &mut list);
            if !s.is_success() {
                return Err(ScheduleError::Internal(s.with_plugin(ws.plugin.name())));
            }
            for (r, ns) in result.iter_mut().zip(&list) {
                let weighted = ns.score.clamp(0, super::interface::MAX_NODE_SCORE) * ws.weight;
                r.scores.push((ws.plugin.name().to_string(), weighted));
                r.total += weighted;
            }
        }
        result.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
        Ok(result)
    }

    pub fn run_reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        for (i, pl) in self.reserve.iter().enumerate() {
            let s = pl.reserve(state, pod, node);
            if !s.is_success() {
                for undo in self.reserve[..=i].iter().rev() {
                    undo.unreserve(state, pod, node);
                }
                return s.with_plugin(pl.name());
            }
        }
        Status::success()
    }

    pub fn run_permit(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        for pl in &self.permit {
            let s = pl.permit(state, pod, node);
            if !s.is_success() {
                return s.with_plugin(pl.name());
            }
        }
        Status::success()
    }

    /// The first Bind plugin that does not skip decides the Binding.
    pub fn run_bind(
        &self,
        pod: &PodInfo,
        node: &str,
    ) -> Result<k8s_openapi::api::core::v1::Binding, Status> {
        for pl in &self.bind {
            match pl.bind(pod, node) {
                Err(s) if s.code() == Code::Skip => continue,
                other => return other,
            }
        }
        Err(Status::error("no bind plugin bound the pod"))
    }

    /// Filter statuses by node, exposed for tests and explanations.
    pub fn filter_all(&self, pod: &PodInfo, nodes: &[NodeInfo]) -> HashMap<String, Status> {
        let state = CycleState::default();
        nodes
            .iter()
            .map(|n| {
                (
                    n.name().to_string(),
                    self.run_filter_plugins(&state, pod, n),
                )
            })
            .collect()
    }
}

/// The highest total; ties broken uniformly at random (upstream's reservoir sampling).
fn select_host(scores: &[NodePluginScores]) -> String {
    let Some(best) = scores.iter().map(|s| s.total).max() else {
        return String::new();
    };
    let top: Vec<&NodePluginScores> = scores.iter().filter(|s| s.total == best).collect();
    let i = rand::rng().random_range(0..top.len());
    top[i].name.clone()
}

/// The top `n` candidates as one line: `node-a 300 (NodeResourcesFit 75, …); …`.
pub fn explain(scores: &[NodePluginScores], n: usize) -> String {
    scores
        .iter()
        .take(n)
        .map(|s| {
            let parts: Vec<String> = s.scores.iter().map(|(p, v)| format!("{p} {v}")).collect();
            if parts.is_empty() {
                format!("{} (only feasible node)", s.name)
            } else {
                format!("{} {} ({})", s.name, s.total, parts.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}
