//! The scheduler's cache (upstream `internal/cache`): node infos kept up to
//! date from the informers plus pods assumed on a node as soon as they are
//! chosen, so the next cycle sees them before the binding lands. Snapshots
//! are refreshed incrementally: only nodes changed since the last one are
//! swapped in.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::framework::types::pod_key;
use crate::framework::{NodeInfo, PodInfo, Snapshot};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CacheError {
    #[error("pod {0} is already in the cache")]
    AlreadyPresent(String),
}

struct NodeEntry {
    info: Arc<NodeInfo>,
    /// False while only pods know the node (it was deleted, or not seen yet).
    present: bool,
}

struct PodState {
    node: String,
    assumed: bool,
}

#[derive(Default)]
pub struct Cache {
    nodes: BTreeMap<String, NodeEntry>,
    pods: HashMap<String, PodState>,
    changed: HashSet<String>,
    /// Nodes came or went: the snapshot's order must be rebuilt.
    structure_changed: bool,
    images_changed: bool,
    /// A pod with (anti-)affinity came or went: the snapshot's lists must be redone.
    affinity_changed: bool,
}

fn placeholder(name: &str) -> NodeInfo {
    let mut n = Node::default();
    n.metadata.name = Some(name.to_string());
    NodeInfo::new(n)
}

pub fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

impl Cache {
    pub fn node_count(&self) -> usize {
        self.nodes.values().filter(|e| e.present).count()
    }

    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    pub fn node_names(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, e)| e.present)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Keys of pods the informer confirmed (not assumed ones).
    pub fn pod_keys(&self) -> Vec<String> {
        self.pods
            .iter()
            .filter(|(_, p)| !p.assumed)
            .map(|(k, _)| k.clone())
            .collect()
    }

    pub fn is_assumed(&self, key: &str) -> bool {
        self.pods.get(key).is_some_and(|p| p.assumed)
    }

    pub fn contains_pod(&self, key: &str) -> bool {
        self.pods.contains_key(key)
    }

    fn entry(&mut self, name: &str) -> &mut NodeEntry {
        self.changed.insert(name.to_string());
        self.nodes
            .entry(name.to_string())
            .or_insert_with(|| NodeEntry {
                info: Arc::new(placeholder(name)),
                present: false,
            })
    }

    pub fn add_or_update_node(&mut self, node: Arc<Node>) {
        let Some(name) = node.metadata.name.clone() else {
            return;
        };
        let e = self.entry(&name);
        let images_before = e.info.image_sizes.len();
        Arc::make_mut(&mut e.info).set_node(node);
        let images = images_before > 0 || !e.info.image_sizes.is_empty();
        let new = !e.present;
        e.present = true;
        self.images_changed |= images || new;
        self.structure_changed |= new;
    }

    pub fn remove_node(&mut self, name: &str) {
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        // Pods still bound there keep the entry alive until they go.
        if e.info.pods.is_empty() {
            self.nodes.remove(name);
        } else {
            e.present = false;
        }
        self.changed.insert(name.to_string());
        self.structure_changed = true;
        self.images_changed = true;
    }

    fn add_to_node(&mut self, node: &str, pi: Arc<PodInfo>) {
        self.affinity_changed |= pi.has_affinity();
        Arc::make_mut(&mut self.entry(node).info).add_pod_arc(pi);
    }

    fn remove_from_node(&mut self, node: &str, key: &str) {
        let Some(e) = self.nodes.get_mut(node) else {
            return;
        };
        let before = (
            e.info.pods_with_affinity,
            e.info.pods_with_required_anti_affinity,
        );
        Arc::make_mut(&mut e.info).remove_pod(key);
        self.affinity_changed |= before
            != (
                e.info.pods_with_affinity,
                e.info.pods_with_required_anti_affinity,
            );
        self.changed.insert(node.to_string());
        if !e.present && e.info.pods.is_empty() {
            self.nodes.remove(node);
            self.structure_changed = true;
        }
    }

    /// Places a pod on `node` before its binding is confirmed.
    pub fn assume_pod(&mut self, pi: Arc<PodInfo>, node: &str) -> Result<(), CacheError> {
        let key = pi.key();
        if self.pods.contains_key(&key) {
            return Err(CacheError::AlreadyPresent(key));
        }
        self.add_to_node(node, pi);
        self.pods.insert(
            key,
            PodState {
                node: node.to_string(),
                assumed: true,
            },
        );
        Ok(())
    }

    /// Drops an assumption whose binding failed; a confirmed pod stays.
    pub fn forget_pod(&mut self, key: &str) {
        if let Some(state) = self.pods.get(key)
            && state.assumed
        {
            let node = state.node.clone();
            self.pods.remove(key);
            self.remove_from_node(&node, key);
        }
    }

    /// A pod as the informer reports it: bound and running pods count
    /// against their node; terminal ones and unbound ones do not.
    pub fn add_or_update_pod(&mut self, pod: Arc<Pod>) {
        let key = pod_key(&pod);
        let Some(node) = node_name(&pod).map(str::to_string) else {
            // Not (or no longer) bound by the informer's account; keep an assumption.
            if !self.is_assumed(&key) {
                self.remove_pod(&key);
            }
            return;
        };
        if is_terminal(&pod) {
            self.remove_pod(&key);
            return;
        }
        if let Some(old) = self.pods.get(&key).map(|s| s.node.clone()) {
            self.remove_from_node(&old, &key);
        }
        self.add_to_node(&node, Arc::new(PodInfo::from_arc(pod)));
        self.pods.insert(
            key,
            PodState {
                node,
                assumed: false,
            },
        );
    }

    pub fn remove_pod(&mut self, key: &str) {
        if let Some(state) = self.pods.remove(key) {
            self.remove_from_node(&state.node, key);
        }
    }

    /// Brings `snap` up to date with the cache, touching only changed nodes.
    pub fn update_snapshot(&mut self, snap: &mut Snapshot) {
        if self.changed.is_empty() && !self.structure_changed {
            return;
        }
        if self.structure_changed {
            snap.nodes = self
                .nodes
                .values()
                .filter(|e| e.present)
                .map(|e| e.info.clone())
                .collect();
            snap.reindex();
        } else {
            for name in &self.changed {
                if let (Some(e), Some(i)) = (self.nodes.get(name), snap.index_of(name))
                    && e.present
                {
                    snap.replace(i, e.info.clone());
                }
            }
        }
        if self.images_changed {
            snap.refresh_images();
        }
        // The lists hold indices, so a new node order needs them redone too.
        if self.affinity_changed || self.structure_changed {
            snap.refresh_affinity_lists();
        }
        self.changed.clear();
        self.structure_changed = false;
        self.images_changed = false;
        self.affinity_changed = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::{node, pod};

    fn bound(name: &str, node: &str) -> Arc<Pod> {
        let mut p = pod(name, &[&[("cpu", "100m")]]);
        p.spec.as_mut().unwrap().node_name = Some(node.into());
        Arc::new(p)
    }

    #[test]
    fn assume_confirm_forget_and_incremental_snapshots() {
        let mut c = Cache::default();
        let mut snap = Snapshot::default();
        c.add_or_update_node(Arc::new(node("b", &[("cpu", "1")])));
        c.add_or_update_node(Arc::new(node("a", &[("cpu", "1")])));
        c.update_snapshot(&mut snap);
        let names: Vec<&str> = snap.nodes.iter().map(|n| n.name()).collect();
        assert_eq!(names, vec!["a", "b"]);

        // Assumed pods count at once; the snapshot swaps in only node a.
        let p = Arc::new(PodInfo::new(pod("p", &[&[("cpu", "300m")]])));
        c.assume_pod(p.clone(), "a").unwrap();
        assert_eq!(
            c.assume_pod(p.clone(), "a"),
            Err(CacheError::AlreadyPresent("default/p".into()))
        );
        let b_before = snap.nodes[1].clone();
        c.update_snapshot(&mut snap);
        assert_eq!(snap.get("a").unwrap().requested.milli_cpu, 300);
        assert!(Arc::ptr_eq(&b_before, &snap.nodes[1]));

        // Binding failed: forgotten.
        c.forget_pod("default/p");
        c.update_snapshot(&mut snap);
        assert_eq!(snap.get("a").unwrap().requested.milli_cpu, 0);

        // Assumed then confirmed by the informer on the same node: counted once.
        c.assume_pod(p, "a").unwrap();
        c.add_or_update_pod(bound("p", "a"));
        assert!(!c.is_assumed("default/p"));
        c.forget_pod("default/p");
        c.update_snapshot(&mut snap);
        assert_eq!(snap.get("a").unwrap().pods.len(), 1);
        assert_eq!(snap.get("a").unwrap().requested.milli_cpu, 100);

        // Terminal pods free their node; removed nodes leave the snapshot.
        let mut done = (*bound("p", "a")).clone();
        done.status.get_or_insert_default().phase = Some("Succeeded".into());
        c.add_or_update_pod(Arc::new(done));
        c.remove_node("b");
        c.update_snapshot(&mut snap);
        assert_eq!(snap.len(), 1);
        assert_eq!(snap.get("a").unwrap().pods.len(), 0);
        assert_eq!(c.pod_count(), 0);
    }

    #[test]
    fn affinity_lists_follow_pods_with_terms() {
        use k8s_openapi::api::core::v1::{Affinity, PodAffinityTerm, PodAntiAffinity};
        let mut c = Cache::default();
        let mut snap = Snapshot::default();
        for n in ["a", "b"] {
            c.add_or_update_node(Arc::new(node(n, &[("cpu", "1")])));
        }
        c.update_snapshot(&mut snap);
        assert!(snap.have_pods_with_required_anti_affinity.is_empty());
        let mut p = pod("anti", &[&[]]);
        p.spec.as_mut().unwrap().affinity = Some(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    topology_key: "kubernetes.io/hostname".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
        c.assume_pod(Arc::new(PodInfo::new(p)), "b").unwrap();
        c.update_snapshot(&mut snap);
        assert_eq!(snap.have_pods_with_required_anti_affinity, vec![1]);
        assert_eq!(snap.have_pods_with_affinity, vec![1]);
        c.forget_pod("default/anti");
        c.update_snapshot(&mut snap);
        assert!(snap.have_pods_with_affinity.is_empty());
    }

    #[test]
    fn pods_of_a_deleted_node_keep_it_until_they_go() {
        let mut c = Cache::default();
        let mut snap = Snapshot::default();
        c.add_or_update_pod(bound("early", "late-node"));
        c.update_snapshot(&mut snap);
        assert_eq!(snap.len(), 0, "a node only pods know is not schedulable");
        c.add_or_update_node(Arc::new(node("late-node", &[("cpu", "1")])));
        c.update_snapshot(&mut snap);
        assert_eq!(snap.get("late-node").unwrap().requested.milli_cpu, 100);
        c.remove_node("late-node");
        c.remove_pod("default/early");
        c.update_snapshot(&mut snap);
        assert_eq!((snap.len(), c.node_count()), (0, 0));
    }
}
