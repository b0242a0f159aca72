//! A profile's plugins run in order (upstream `framework/runtime/framework.go`)
//! and the scheduling algorithm over them (upstream `schedule_one.go`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rand::Rng;

use super::fit_error::{Diagnosis, FitError, Nomination};
use super::interface::{
    Bind, CycleState, Filter, FilterHandle, NodeScore, Permit, PostFilter, PreBind, PreFilter,
    PreScore, QueueSort, Reserve, Score,
};
use super::snapshot::Snapshot;
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
    /// The profile's own percentageOfNodesToScore, over the global one.
    pub percentage_of_nodes_to_score: Option<u32>,
    pub queue_sort: Arc<dyn QueueSort>,
    pub pre_filter: Vec<Arc<dyn PreFilter>>,
    pub filter: Vec<Arc<dyn Filter>>,
    pub post_filter: Vec<Arc<dyn PostFilter>>,
    pub pre_score: Vec<Arc<dyn PreScore>>,
    pub score: Vec<WeightedScore>,
    pub reserve: Vec<Arc<dyn Reserve>>,
    pub permit: Vec<Arc<dyn Permit>>,
    pub pre_bind: Vec<Arc<dyn PreBind>>,
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
    /// The best-scored feasible nodes with their per-plugin scores, best first.
    pub scores: Vec<NodePluginScores>,
    /// The cycle's state, for Reserve, Permit, PreBind and Unreserve
    /// (VolumeBinding reserves what its Filter found for the chosen node).
    pub state: CycleState,
}

#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error("{0}")]
    Fit(Box<FitError>),
    #[error("no nodes available to schedule pods")]
    NoNodes,
    #[error("{0}")]
    Internal(Status),
}

/// Upstream's bounds for `percentageOfNodesToScore`.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;
/// How many explained candidates ScheduleResult keeps.
pub const EXPLAINED_CANDIDATES: usize = 3;

/// Upstream's `numFeasibleNodesToFind`: all nodes below 100; otherwise the
/// configured percentage, or adaptively 50% − nodes/125 (at least 5%), and
/// never fewer than 100 nodes.
pub fn num_feasible_nodes_to_find(percentage: Option<u32>, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let percentage = match percentage {
        Some(p) if p > 0 => (p as usize).min(100),
        _ => 50usize
            .saturating_sub(num_all_nodes / 125)
            .max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND),
    };
    (num_all_nodes * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// What carries over between cycles: where the next node search starts
/// (upstream's round-robin `nextStartNodeIndex`) and how it is bounded.
#[derive(Clone, Debug)]
pub struct SearchState {
    pub next_start_node_index: usize,
    pub percentage_of_nodes_to_score: Option<u32>,
    pub parallelism: usize,
}

impl Default for SearchState {
    fn default() -> Self {
        Self {
            next_start_node_index: 0,
            percentage_of_nodes_to_score: None,
            parallelism: 1,
        }
    }
}

/// How far ahead of the node being filtered its successors are fetched.
const PREFETCH_DISTANCE: usize = 8;

/// Asks the CPU to load the NodeInfo two strides ahead and the parts of its
/// Node the filters read (labels, spec) one stride ahead of `at` into cache.
/// Each node is its own allocation, so without this every first touch of a
/// node waits on memory, which cost more than the filters themselves on 5,000
/// nodes.
#[inline]
fn prefetch_ahead(nodes: &[Arc<NodeInfo>], at: usize) {
    let n = nodes.len();
    if n <= 2 * PREFETCH_DISTANCE {
        return;
    }
    let far = Arc::as_ptr(&nodes[(at + 2 * PREFETCH_DISTANCE) % n]);
    prefetch_lines(far.cast(), std::mem::size_of::<NodeInfo>());
    // Fetched a stride ago: reading its Node pointer no longer waits.
    let soon = &nodes[(at + PREFETCH_DISTANCE) % n].node;
    prefetch_lines(
        (&soon.metadata.labels as *const Option<_>).cast(),
        std::mem::size_of_val(&soon.metadata.labels),
    );
    prefetch_lines(
        (&soon.spec as *const Option<_>).cast(),
        std::mem::size_of_val(&soon.spec),
    );
}

/// Prefetches the cache lines of `len` bytes at `p`.
#[inline(always)]
fn prefetch_lines(p: *const u8, len: usize) {
    for off in (0..len).step_by(64) {
        prefetch(p.wrapping_add(off));
    }
}

#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults and reads nothing into the
    // program, whatever the address; SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Nodes per work item when filtering in parallel.
const CHUNK: usize = 32;
/// Below this many nodes to check, starting threads costs more than it saves.
const PARALLEL_MIN_NODES: usize = 1024;

/// Runs `f` over `0..n` in chunks on up to `parallelism` threads (upstream's
/// `parallelize.Until`); `f` gets the chunk's range and returns false to stop.
fn parallelize<T: Send>(
    n: usize,
    parallelism: usize,
    f: impl Fn(std::ops::Range<usize>, &mut Vec<T>) -> bool + Sync,
) -> Vec<T> {
    if parallelism <= 1 {
        let mut out = Vec::new();
        let mut i = 0;
        while i < n {
            let end = (i + CHUNK).min(n);
            if !f(i..end, &mut out) {
                break;
            }
            i = end;
        }
        return out;
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let worker = || {
        let mut out = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let i = next.fetch_add(CHUNK, Ordering::Relaxed);
            if i >= n {
                break;
            }
            if !f(i..(i + CHUNK).min(n), &mut out) {
                stop.store(true, Ordering::Relaxed);
            }
        }
        out
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = (1..parallelism).map(|_| s.spawn(worker)).collect();
        let mut out = worker();
        for h in handles {
            // A panicking plugin is a bug; its chunk's results are lost, not the scheduler.
            if let Ok(mut o) = h.join() {
                out.append(&mut o);
            }
        }
        out
    })
}

enum Checked {
    Feasible(usize),
    Rejected(usize, Status),
    Failed(Status),
}

impl Framework {
    /// Runs every Filter plugin on one node; the first rejection wins, as upstream.
    pub fn run_filter_plugins(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let masked = state.filter_skip_mask.len() == self.filter.len();
        for (i, pl) in self.filter.iter().enumerate() {
            let skip = if masked {
                state.filter_skip_mask[i]
            } else {
                state.skip_filter.contains(pl.name())
            };
            if skip {
                continue;
            }
            let s = pl.filter(state, pod, node);
            if !s.is_success() {
                return s.with_plugin(pl.name());
            }
        }
        Status::success()
    }

    /// Upstream's `RunFilterPluginsWithNominatedPods`: pods of at least this
    /// pod's priority nominated to the node count as if already there; when
    /// they do, the filters run a second time without them (so affinity to
    /// a nominated pod is not assumed).
    pub fn run_filter_plugins_with_nominated_pods(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        snap: &Snapshot,
    ) -> Status {
        // Checked for every node: no work unless something is nominated here.
        let Some(here) = (!snap.nominated.is_empty())
            .then(|| snap.nominated.get(node.name()))
            .flatten()
        else {
            return self.run_filter_plugins(state, pod, node);
        };
        let key = pod.key();
        let nominated: Vec<&Arc<PodInfo>> = here
            .iter()
            .filter(|p| p.priority() >= pod.priority() && p.key() != key)
            .collect();
        if nominated.is_empty() {
            return self.run_filter_plugins(state, pod, node);
        }
        let mut with = state.clone();
        let mut info = node.clone();
        for p in nominated {
            info.add_pod_arc(p.clone());
            FilterHandle::add_pod(self, &mut with, pod, p, &info);
        }
        let s = self.run_filter_plugins(&with, pod, &info);
        if !s.is_success() {
            return s;
        }
        self.run_filter_plugins(state, pod, node)
    }

    /// Filters and scores the snapshot's nodes for `pod`, returning the chosen node.
    pub fn schedule_pod(
        &self,
        pod: &PodInfo,
        snap: &Snapshot,
        search: &mut SearchState,
    ) -> Result<ScheduleResult, ScheduleError> {
        let nodes = &snap.nodes;
        if nodes.is_empty() {
            return Err(ScheduleError::NoNodes);
        }
        let mut state = CycleState::default();
        let mut diagnosis = Diagnosis::default();

        for pl in &self.pre_filter {
            let s = pl.pre_filter(&mut state, pod, snap);
            match s.code() {
                Code::Success => {}
                Code::Skip => {
                    state.skip_filter.insert(pl.name());
                }
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
                    return Err(self.fit_error(&state, pod, snap, diagnosis));
                }
            }
        }

        state.filter_skip_mask = self
            .filter
            .iter()
            .map(|pl| state.skip_filter.contains(pl.name()))
            .collect();
        // Upstream's evaluateNominatedNode: a pod nominated by preemption
        // takes its node when it fits there, without searching further.
        if let Some(nominated) = pod
            .pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .and_then(|n| snap.get(n))
            && self
                .run_filter_plugins_with_nominated_pods(&state, pod, nominated, snap)
                .is_success()
        {
            return Ok(ScheduleResult {
                suggested_host: nominated.name().to_string(),
                evaluated_nodes: 1,
                feasible_nodes: 1,
                scores: pick_and_explain(&[&**nominated], &[0], &[]),
                state,
            });
        }
        let n = nodes.len();
        let percentage = self
            .percentage_of_nodes_to_score
            .or(search.percentage_of_nodes_to_score);
        let to_find = num_feasible_nodes_to_find(percentage, n);
        let start = search.next_start_node_index % n;
        let found = AtomicUsize::new(0);
        let state_ref = &state;
        // Most nodes usually pass, so about `to_find` get checked.
        let parallelism = if to_find < PARALLEL_MIN_NODES {
            1
        } else {
            search.parallelism
        };
        let checked = parallelize(n, parallelism, |range, out: &mut Vec<Checked>| {
            for i in range {
                if found.load(Ordering::Relaxed) >= to_find {
                    return false;
                }
                prefetch_ahead(nodes, start + i);
                let idx = (start + i) % n;
                let s =
                    self.run_filter_plugins_with_nominated_pods(state_ref, pod, &nodes[idx], snap);
                match s.code() {
                    Code::Success | Code::Skip => {
                        if found.fetch_add(1, Ordering::Relaxed) < to_find {
                            out.push(Checked::Feasible(i));
                        }
                    }
                    Code::Error => {
                        out.push(Checked::Failed(s));
                        return false;
                    }
                    _ => out.push(Checked::Rejected(i, s)),
                }
            }
            true
        });
        let mut feasible_order: Vec<usize> = Vec::new();
        for c in checked {
            match c {
                Checked::Feasible(i) => feasible_order.push(i),
                Checked::Rejected(i, s) => {
                    diagnosis
                        .node_to_status
                        .insert(nodes[(start + i) % n].name().to_string(), s);
                }
                Checked::Failed(s) => return Err(ScheduleError::Internal(s)),
            }
        }
        feasible_order.sort_unstable();
        feasible_order.truncate(to_find);
        let processed = feasible_order.len() + diagnosis.node_to_status.len();
        search.next_start_node_index = (start + processed) % n;
        if feasible_order.is_empty() {
            return Err(self.fit_error(&state, pod, snap, diagnosis));
        }
        let feasible: Vec<&NodeInfo> = feasible_order
            .iter()
            .map(|i| &*nodes[(start + i) % n])
            .collect();

        let scores = self.prioritize_nodes(&mut state, pod, &feasible, snap)?;
        let suggested_host = scores.first().map(|s| s.name.clone()).unwrap_or_default();
        Ok(ScheduleResult {
            suggested_host,
            evaluated_nodes: processed,
            feasible_nodes: feasible.len(),
            scores,
            state,
        })
    }

    fn fit_error(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        snap: &Snapshot,
        mut diagnosis: Diagnosis,
    ) -> ScheduleError {
        let mut nomination = None;
        for pl in &self.post_filter {
            let r = pl.post_filter(state, pod, snap, &diagnosis.node_to_status, self);
            if !r.status.is_success() && !r.status.message().is_empty() {
                diagnosis.post_filter_msg = r.status.message();
            }
            if r.status.is_success() {
                nomination = r.nominated_node.map(|node| Nomination {
                    node,
                    victims: r.victims,
                });
                break;
            }
        }
        ScheduleError::Fit(Box::new(FitError {
            num_all_nodes: snap.len(),
            diagnosis,
            nomination,
        }))
    }

    /// PreScore, Score, NormalizeScore and weights (upstream `prioritizeNodes`);
    /// returns the chosen node first, then the next best, `EXPLAINED_CANDIDATES` in all.
    fn prioritize_nodes(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        snap: &Snapshot,
    ) -> Result<Vec<NodePluginScores>, ScheduleError> {
        // Upstream skips scoring when there is nothing to choose between.
        if nodes.len() == 1 || self.score.is_empty() {
            return Ok(pick_and_explain(nodes, &vec![0; nodes.len()], &[]));
        }
        for pl in &self.pre_score {
            let s = pl.pre_score(state, pod, nodes, snap);
            match s.code() {
                Code::Success => {}
                Code::Skip => {
                    state.skip_score.insert(pl.name());
                }
                _ => return Err(ScheduleError::Internal(s.with_plugin(pl.name()))),
            }
        }
        let mut totals = vec![0i64; nodes.len()];
        let mut per_plugin: Vec<(&'static str, Vec<i64>)> = Vec::with_capacity(self.score.len());
        // One list reused by every plugin: names are set once.
        let mut list: Vec<NodeScore> = nodes
            .iter()
            .map(|n| NodeScore {
                name: n.name_arc(),
                score: 0,
            })
            .collect();
        for ws in &self.score {
            let name = ws.plugin.name();
            if state.skip_score.contains(name) {
                continue;
            }
            for (ns, n) in list.iter_mut().zip(nodes) {
                ns.score = ws
                    .plugin
                    .score(state, pod, n)
                    .map_err(|s| ScheduleError::Internal(s.with_plugin(name)))?;
            }
            let s = ws.plugin.normalize_score(state, pod, &mut list);
            if !s.is_success() {
                return Err(ScheduleError::Internal(s.with_plugin(name)));
            }
            let weighted: Vec<i64> = list
                .iter()
                .map(|ns| ns.score.clamp(0, super::interface::MAX_NODE_SCORE) * ws.weight)
                .collect();
            for (t, w) in totals.iter_mut().zip(&weighted) {
                *t += w;
            }
            per_plugin.push((name, weighted));
        }
        Ok(pick_and_explain(nodes, &totals, &per_plugin))
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

    /// Unreserve in reverse order (upstream's RunReservePluginsUnreserve),
    /// when a later step of the pod's cycle or its binding failed.
    pub fn run_unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        for pl in self.reserve.iter().rev() {
            pl.unreserve(state, pod, node);
        }
    }

    /// Every PreBind plugin in order; the first failure stops the binding.
    pub async fn run_pre_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        for pl in &self.pre_bind {
            let s = pl.pre_bind(state, pod, node).await;
            if !s.is_success() {
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
    pub fn filter_all(&self, pod: &PodInfo, snap: &Snapshot) -> HashMap<String, Status> {
        let mut state = CycleState::default();
        for pl in &self.pre_filter {
            if pl.pre_filter(&mut state, pod, snap).code() == Code::Skip {
                state.skip_filter.insert(pl.name());
            }
        }
        snap.nodes
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

impl FilterHandle for Framework {
    fn run_filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        self.run_filter_plugins(state, pod, node)
    }

    fn add_pod(&self, state: &mut CycleState, pod: &PodInfo, added: &PodInfo, node: &NodeInfo) {
        for pl in &self.pre_filter {
            if !state.skip_filter.contains(pl.name())
                && let Some(ext) = pl.extensions()
            {
                ext.add_pod(state, pod, added, node);
            }
        }
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        removed: &PodInfo,
        node: &NodeInfo,
    ) {
        for pl in &self.pre_filter {
            if !state.skip_filter.contains(pl.name())
                && let Some(ext) = pl.extensions()
            {
                ext.remove_pod(state, pod, removed, node);
            }
        }
    }
}

/// Picks the highest total, ties broken uniformly at random (as upstream's
/// reservoir sampling), and explains it and the next best nodes.
fn pick_and_explain(
    nodes: &[&NodeInfo],
    totals: &[i64],
    per_plugin: &[(&'static str, Vec<i64>)],
) -> Vec<NodePluginScores> {
    let Some(best) = totals.iter().max().copied() else {
        return Vec::new();
    };
    let ties = totals.iter().filter(|t| **t == best).count();
    let pick = rand::rng().random_range(0..ties);
    let chosen = (0..totals.len())
        .filter(|&i| totals[i] == best)
        .nth(pick)
        .unwrap_or(0);
    let better = |a: &usize, b: &usize| {
        totals[*b]
            .cmp(&totals[*a])
            .then_with(|| nodes[*a].name().cmp(nodes[*b].name()))
    };
    let mut others: Vec<usize> = (0..totals.len()).filter(|&i| i != chosen).collect();
    let k = (EXPLAINED_CANDIDATES - 1).min(others.len());
    if k > 0 && k < others.len() {
        others.select_nth_unstable_by(k - 1, better);
    }
    others.truncate(k);
    others.sort_by(better);
    std::iter::once(chosen)
        .chain(others)
        .map(|i| NodePluginScores {
            name: nodes[i].name().to_string(),
            scores: per_plugin
                .iter()
                .map(|(p, v)| (p.to_string(), v[i]))
                .collect(),
            total: totals[i],
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Profile;
    use crate::plugins::new_framework;
    use crate::plugins::testing::*;

    #[test]
    fn feasible_nodes_to_find() {
        // (configured percentage, nodes, want)
        let cases = [
            (None, 50, 50),
            (None, 99, 99),
            (None, 100, 100),
            (None, 500, 230),  // 50 − 4 = 46%
            (None, 5000, 500), // 50 − 40 = 10%
            (None, 6000, 300), // 50 − 48 = 2% → floor 5%
            (None, 1000, 420), // 42%
            (Some(100), 5000, 5000),
            (Some(1), 5000, 100), // never below 100 nodes
            (Some(0), 5000, 500), // 0 means adaptive
        ];
        for (pct, n, want) in cases {
            assert_eq!(num_feasible_nodes_to_find(pct, n), want, "{pct:?} {n}");
        }
    }

    #[test]
    fn searches_round_robin_and_stops_at_enough_feasible_nodes() {
        let fw = new_framework(&Profile::default()).unwrap();
        let nodes: Vec<NodeInfo> = (0..300)
            .map(|i| {
                node_info(
                    node(&format!("n{i:03}"), &[("cpu", "4"), ("pods", "10")]),
                    vec![],
                )
            })
            .collect();
        let snap = Snapshot::new(nodes);
        for parallelism in [1, 2] {
            let mut search = SearchState {
                percentage_of_nodes_to_score: Some(50),
                parallelism,
                ..Default::default()
            };
            let p = PodInfo::new(pod("p", &[&[("cpu", "1")]]));
            let r = fw.schedule_pod(&p, &snap, &mut search).unwrap();
            assert_eq!(r.feasible_nodes, 150, "parallelism {parallelism}");
            assert_eq!(search.next_start_node_index, 150);
            let r = fw.schedule_pod(&p, &snap, &mut search).unwrap();
            assert_eq!(r.feasible_nodes, 150);
            assert_eq!(search.next_start_node_index, 0);
            // The chosen node comes from the evaluated half.
            assert!(r.suggested_host.as_str() >= "n150", "{}", r.suggested_host);
        }
        // In parallel over 2000 nodes: exactly 60% are kept, the search moves on.
        let many = Snapshot::new(
            (0..2000)
                .map(|i| {
                    node_info(
                        node(&format!("m{i:04}"), &[("cpu", "4"), ("pods", "10")]),
                        vec![],
                    )
                })
                .collect(),
        );
        let mut search = SearchState {
            parallelism: 2,
            percentage_of_nodes_to_score: Some(60),
            ..Default::default()
        };
        let p = PodInfo::new(pod("p", &[&[("cpu", "1")]]));
        let r = fw.schedule_pod(&p, &many, &mut search).unwrap();
        assert_eq!(r.feasible_nodes, 1200);
        assert!(search.next_start_node_index >= 1200);
        // Too big for every node: every node was evaluated and reported.
        let mut search = SearchState::default();
        let big = PodInfo::new(pod("big", &[&[("cpu", "8")]]));
        match fw.schedule_pod(&big, &snap, &mut search) {
            Err(ScheduleError::Fit(fe)) => {
                assert_eq!(fe.diagnosis.node_to_status.len(), 300);
                assert!(
                    fe.to_string()
                        .starts_with("0/300 nodes are available: 300 Insufficient cpu.")
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nominated_pods_keep_their_room_from_lower_priorities() {
        let fw = new_framework(&Profile::default()).unwrap();
        let mut snap = Snapshot::new(vec![node_info(
            node("n1", &[("cpu", "1"), ("pods", "10")]),
            vec![],
        )]);
        let mut nominated = pod("preemptor", &[&[("cpu", "1")]]);
        nominated.spec.as_mut().unwrap().priority = Some(10);
        snap.nominated = Arc::new(HashMap::from([(
            "n1".to_string(),
            vec![Arc::new(PodInfo::new(nominated.clone()))],
        )]));
        // (pod priority, fits)
        for (prio, fits) in [(0, false), (10, false), (20, true)] {
            let mut p = pod("p", &[&[("cpu", "500m")]]);
            p.spec.as_mut().unwrap().priority = Some(prio);
            let r = fw.schedule_pod(&PodInfo::new(p), &snap, &mut SearchState::default());
            assert_eq!(r.is_ok(), fits, "priority {prio}");
        }
        // The nominated pod itself is not in its own way.
        let r = fw.schedule_pod(&PodInfo::new(nominated), &snap, &mut SearchState::default());
        assert_eq!(r.unwrap().suggested_host, "n1");
    }

    #[test]
    fn a_nominated_pod_takes_its_node_when_it_fits() {
        let fw = new_framework(&Profile::default()).unwrap();
        // LeastAllocated alone would prefer the empty node b.
        let snap = Snapshot::new(vec![
            node_info(
                node("a", &[("cpu", "4"), ("pods", "10")]),
                vec![pod("busy", &[&[("cpu", "2")]])],
            ),
            node_info(node("b", &[("cpu", "4"), ("pods", "10")]), vec![]),
        ]);
        let mut p = pod("p", &[&[("cpu", "1")]]);
        let r = fw.schedule_pod(&PodInfo::new(p.clone()), &snap, &mut SearchState::default());
        assert_eq!(r.unwrap().suggested_host, "b");
        p.status.get_or_insert_default().nominated_node_name = Some("a".into());
        let r = fw.schedule_pod(&PodInfo::new(p.clone()), &snap, &mut SearchState::default());
        assert_eq!(r.unwrap().suggested_host, "a");
        // Too big for its nominated node: the normal search.
        p.spec.as_mut().unwrap().containers[0]
            .resources
            .as_mut()
            .unwrap()
            .requests = Some(crate::plugins::testing::qmap(&[("cpu", "3")]));
        let r = fw.schedule_pod(&PodInfo::new(p), &snap, &mut SearchState::default());
        assert_eq!(r.unwrap().suggested_host, "b");
    }
}
