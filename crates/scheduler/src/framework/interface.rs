//! Extension points (upstream `framework/interface.go`). Plugins are plain
//! synchronous functions over snapshots; I/O (binding) stays in the loop.

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::future::BoxFuture;

use super::snapshot::Snapshot;
use super::status::Status;
use super::types::{NodeInfo, PodInfo};

/// Highest and lowest score a Score plugin may return after normalisation.
pub const MAX_NODE_SCORE: i64 = 100;
pub const MIN_NODE_SCORE: i64 = 0;

/// Per-cycle scratch space that PreFilter/PreScore fill for later points.
/// Cloning is shallow (preemption's dry runs clone it per node and replace
/// the entries they change).
#[derive(Default, Clone)]
pub struct CycleState {
    data: HashMap<&'static str, Arc<dyn Any + Send + Sync>>,
    /// Plugins whose PreFilter/PreScore said Skip (upstream's SkipFilterPlugins/SkipScorePlugins).
    pub skip_filter: HashSet<&'static str>,
    /// `skip_filter` per Filter plugin in profile order, computed once per
    /// cycle so the per-node loop does no lookups.
    pub filter_skip_mask: Vec<bool>,
    pub skip_score: HashSet<&'static str>,
}

impl std::fmt::Debug for CycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut keys: Vec<&&str> = self.data.keys().collect();
        keys.sort();
        f.debug_struct("CycleState")
            .field("keys", &keys)
            .field("skip_filter", &self.skip_filter)
            .field("skip_score", &self.skip_score)
            .finish()
    }
}

impl CycleState {
    pub fn write<T: Any + Send + Sync>(&mut self, key: &'static str, value: T) {
        self.data.insert(key, Arc::new(value));
    }

    pub fn read<T: Any>(&self, key: &'static str) -> Option<&T> {
        self.data.get(key).and_then(|v| (**v).downcast_ref())
    }
}

/// One node's score from one plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeScore {
    pub name: Arc<str>,
    pub score: i64,
}

pub trait Plugin: Send + Sync {
    fn name(&self) -> &'static str;
}

/// Orders the active queue.
pub trait QueueSort: Plugin {
    fn less(&self, a: &PodInfo, b: &PodInfo) -> bool;
}

pub trait PreFilter: Plugin {
    /// `Skip` means the plugin's Filter is not needed for this pod.
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snap: &Snapshot) -> Status;

    /// Incremental updates of the PreFilter state when preemption adds or
    /// removes pods in its dry runs (upstream's PreFilterExtensions).
    fn extensions(&self) -> Option<&dyn PreFilterExtensions> {
        None
    }
}

pub trait PreFilterExtensions: Send + Sync {
    fn add_pod(&self, state: &mut CycleState, pod: &PodInfo, added: &PodInfo, node: &NodeInfo);
    fn remove_pod(&self, state: &mut CycleState, pod: &PodInfo, removed: &PodInfo, node: &NodeInfo);
}

/// What a PostFilter may run again on a changed node: the profile's
/// filters and the PreFilter extensions.
pub trait FilterHandle: Sync {
    fn run_filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;
    fn add_pod(&self, state: &mut CycleState, pod: &PodInfo, added: &PodInfo, node: &NodeInfo);
    fn remove_pod(&self, state: &mut CycleState, pod: &PodInfo, removed: &PodInfo, node: &NodeInfo);
}

pub trait Filter: Plugin {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;
}

/// What a PostFilter decided: its status (the message becomes the
/// FitError's post-filter part) and, for preemption, the node to nominate
/// and the pods to evict there.
#[derive(Clone, Debug)]
pub struct PostFilterResult {
    pub status: Status,
    pub nominated_node: Option<String>,
    pub victims: Vec<Arc<PodInfo>>,
}

impl PostFilterResult {
    pub fn status(status: Status) -> Self {
        Self {
            status,
            nominated_node: None,
            victims: Vec::new(),
        }
    }
}

/// Runs when no node fits (preemption).
pub trait PostFilter: Plugin {
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        snap: &Snapshot,
        filtered: &HashMap<String, Status>,
        handle: &dyn FilterHandle,
    ) -> PostFilterResult;
}

pub trait PreScore: Plugin {
    /// `feasible` are the nodes that passed Filter; `snap` has all nodes.
    /// `Skip` means the plugin's Score is not needed for this pod.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        feasible: &[&NodeInfo],
        snap: &Snapshot,
    ) -> Status;
}

pub trait Score: Plugin {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status>;

    /// Maps raw scores onto 0–100; the default leaves them as they are.
    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _scores: &mut [NodeScore],
    ) -> Status {
        Status::success()
    }
}

pub trait Reserve: Plugin {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status;
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str);
}

/// Runs in the binding task before Bind (upstream's PreBindPlugin): it may
/// write to the API and wait (VolumeBinding waits for its claims to bind).
/// A non-success status fails the binding: the pod is unreserved and retried.
pub trait PreBind: Plugin {
    fn pre_bind<'a>(
        &'a self,
        state: &'a CycleState,
        pod: &'a PodInfo,
        node: &'a str,
    ) -> BoxFuture<'a, Status>;
}

pub trait Permit: Plugin {
    fn permit(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status;
}

/// Decides how a pod is bound; the loop performs the returned Binding.
pub trait Bind: Plugin {
    fn bind(
        &self,
        pod: &PodInfo,
        node: &str,
    ) -> Result<k8s_openapi::api::core::v1::Binding, Status>;
}

/// Upstream's `helper.DefaultNormalizeScore`: scales so the best node gets
/// `max`; `reverse` turns "fewer is better" counts into scores.
pub fn default_normalize_score(max: i64, reverse: bool, scores: &mut [NodeScore]) {
    let highest = scores.iter().map(|s| s.score).max().unwrap_or(0);
    if highest == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| s.score = max);
        }
        return;
    }
    for s in scores {
        let v = max * s.score / highest;
        s.score = if reverse { max - v } else { v };
    }
}
