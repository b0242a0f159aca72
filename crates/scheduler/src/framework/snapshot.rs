//! What one scheduling cycle sees of the cluster (upstream
//! `internal/cache.Snapshot`): node infos in name order, plus the lists
//! plugins would otherwise recompute per pod.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::affinity::NamespaceLabels;
use super::storage::StorageSnapshot;
use super::types::{NodeInfo, PodInfo};

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub nodes: Vec<Arc<NodeInfo>>,
    index: HashMap<Arc<str>, usize>,
    /// Image name → how many nodes have it (ImageLocality's spread).
    pub image_num_nodes: HashMap<String, usize>,
    /// Indices of nodes with pods that have (anti-)affinity terms.
    pub have_pods_with_affinity: Vec<usize>,
    /// Indices of nodes with pods that have required anti-affinity.
    pub have_pods_with_required_anti_affinity: Vec<usize>,
    pub namespaces: Arc<NamespaceLabels>,
    pub pdbs: Arc<Vec<PodDisruptionBudget>>,
    /// Services' selectors (namespace, selector): PodTopologySpread's
    /// default constraints spread the pods a Service selects.
    pub service_selectors: Arc<Vec<(String, BTreeMap<String, String>)>>,
    /// Pending pods nominated to a node by preemption, by node name.
    pub nominated: Arc<HashMap<String, Vec<Arc<PodInfo>>>>,
    /// Claims, volumes, classes and CSINodes as the informers last saw them.
    pub storage: Arc<StorageSnapshot>,
}

impl Snapshot {
    /// A snapshot of `nodes` (tests and the cache's full rebuild).
    pub fn new(nodes: Vec<NodeInfo>) -> Self {
        Self::from_arcs(nodes.into_iter().map(Arc::new).collect())
    }

    pub fn from_arcs(mut nodes: Vec<Arc<NodeInfo>>) -> Self {
        nodes.sort_by(|a, b| a.name().cmp(b.name()));
        let mut s = Snapshot {
            nodes,
            ..Default::default()
        };
        s.reindex();
        s.refresh_images();
        s.refresh_affinity_lists();
        s
    }

    pub fn with_namespaces(mut self, ns: NamespaceLabels) -> Self {
        self.namespaces = Arc::new(ns);
        self
    }

    pub fn with_service_selectors(mut self, s: Vec<(String, BTreeMap<String, String>)>) -> Self {
        self.service_selectors = Arc::new(s);
        self
    }

    pub fn with_storage(mut self, storage: StorageSnapshot) -> Self {
        self.storage = Arc::new(storage);
        self
    }

    pub fn with_pdbs(mut self, pdbs: Vec<PodDisruptionBudget>) -> Self {
        self.pdbs = Arc::new(pdbs);
        self
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.index.get(name).map(|&i| &self.nodes[i])
    }

    pub(crate) fn index_of(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Swaps in a node's new info (same name, so the order holds).
    pub(crate) fn replace(&mut self, i: usize, info: Arc<NodeInfo>) {
        self.nodes[i] = info;
    }

    pub(crate) fn reindex(&mut self) {
        self.index = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name_arc(), i))
            .collect();
    }

    pub(crate) fn refresh_images(&mut self) {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for n in &self.nodes {
            for name in n.image_sizes.keys() {
                *counts.entry(name.clone()).or_insert(0) += 1;
            }
        }
        self.image_num_nodes = counts;
    }

    pub(crate) fn refresh_affinity_lists(&mut self) {
        self.have_pods_with_affinity.clear();
        self.have_pods_with_required_anti_affinity.clear();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.pods_with_affinity > 0 {
                self.have_pods_with_affinity.push(i);
            }
            if n.pods_with_required_anti_affinity > 0 {
                self.have_pods_with_required_anti_affinity.push(i);
            }
        }
    }
}
