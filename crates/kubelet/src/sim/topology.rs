//! The simulated nodes' Topology Manager (`--sim-topology-manager-policy
//! single-numa-node`): each node's NUMA cells (`--sim-numa-nodes`) hold its
//! whole CPUs and its extended resources (devices) split evenly; a pod's
//! exclusive CPUs and devices are placed on single cells with the rule the
//! scheduler's NodeResourceTopologyMatch filter uses
//! (`berth_topology::numa_fit`), or the pod is rejected with upstream's
//! TopologyAffinityError. Each node publishes its cells' free resources and
//! the pods counted in them in the `numa_fit::ANNOTATION` Node annotation, so
//! the scheduler's topology-aware filter is measurable at scale.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use berth_api::quantity::Quantity;
use berth_topology::numa_fit::{self, CellFree, Demand, NumaResources};
use berth_topology::{PodResources, Scope};
use k8s_openapi::api::core::v1::Pod;

use super::SimConfig;

pub const POLICY_SINGLE_NUMA_NODE: &str = "single-numa-node";

/// Extended resources of a node's capacity that cells hold as devices.
fn device_resources(cfg: &SimConfig) -> BTreeMap<String, i64> {
    cfg.capacity
        .iter()
        .filter(|(name, _)| berth_api::quota::is_extended_resource(name))
        .map(|(name, q)| (name.clone(), Quantity::value(q)))
        .collect()
}

pub(super) struct SimTopology {
    scope: Scope,
    /// A node's cells when nothing runs on it.
    empty: Vec<CellFree>,
    devices: BTreeSet<String>,
    cells: HashMap<String, Vec<CellFree>>,
    /// Pod UID → its node and what it took from which cell.
    placed: HashMap<String, (String, Vec<(usize, Demand)>)>,
    dirty: HashSet<String>,
}

impl SimTopology {
    /// None unless the nodes run `single-numa-node` on NUMA cells.
    pub(super) fn new(cfg: &SimConfig, nodes: &HashSet<String>) -> Option<SimTopology> {
        if cfg.topology_manager_policy != POLICY_SINGLE_NUMA_NODE || cfg.numa.is_empty() {
            return None;
        }
        let devices = device_resources(cfg);
        let n = cfg.numa.len() as i64;
        let empty = cfg
            .numa
            .iter()
            .enumerate()
            .map(|(i, cell)| CellFree {
                id: cell.id as usize,
                cpus: cell.cpus.len() as i64,
                // The first cells take the remainder, as the CPUs are split.
                devices: devices
                    .iter()
                    .map(|(r, total)| (r.clone(), total / n + i64::from((i as i64) < total % n)))
                    .collect(),
            })
            .collect();
        Some(SimTopology {
            scope: cfg.topology_manager_scope,
            empty,
            devices: devices.into_keys().collect(),
            cells: HashMap::new(),
            placed: HashMap::new(),
            dirty: nodes.clone(),
        })
    }

    /// Admits `pod` on `node`: its demands placed (true), or nothing taken
    /// and the pod to be rejected (false). A pod placed already stays.
    pub(super) fn admit(&mut self, node: &str, pod: &Pod) -> bool {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if self.placed.contains_key(&uid) {
            return true;
        }
        let demands = numa_fit::demands(&PodResources::of_pod(pod), self.scope, &self.devices);
        let cells = self
            .cells
            .entry(node.to_string())
            .or_insert_with(|| self.empty.clone());
        let Some(at) = numa_fit::place(cells, &demands) else {
            return false;
        };
        if !demands.is_empty() {
            self.dirty.insert(node.to_string());
        }
        self.placed.insert(
            uid,
            (node.to_string(), at.into_iter().zip(demands).collect()),
        );
        true
    }

    /// A finished or deleted pod gives its cells' resources back.
    pub(super) fn release(&mut self, uid: &str) {
        let Some((node, taken)) = self.placed.remove(uid) else {
            return;
        };
        if let Some(cells) = self.cells.get_mut(&node) {
            for (i, d) in &taken {
                numa_fit::give_back(&mut cells[*i], d);
            }
        }
        if !taken.is_empty() {
            self.dirty.insert(node);
        }
    }

    /// The nodes whose published state changed, with the annotation's JSON.
    pub(super) fn take_dirty(&mut self) -> Vec<(String, String)> {
        let dirty: Vec<String> = self.dirty.drain().collect();
        dirty
            .into_iter()
            .map(|node| {
                let pods = self
                    .placed
                    .iter()
                    .filter(|(_, (n, _))| *n == node)
                    .map(|(uid, _)| uid.clone())
                    .collect();
                let state = NumaResources {
                    policy: POLICY_SINGLE_NUMA_NODE.into(),
                    scope: self.scope.name().into(),
                    cells: self.cells.get(&node).unwrap_or(&self.empty).clone(),
                    pods,
                };
                let json = serde_json::to_string(&state).unwrap_or_default();
                (node, json)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, cpu: &str, gpus: &str) -> Pod {
        let r = json!({"cpu": cpu, "memory": "1Gi", "example.com/gpu": gpus});
        serde_json::from_value(json!({
            "metadata": {"name": uid, "namespace": "ns", "uid": uid},
            "spec": {"containers": [{"name": "c", "resources": {"requests": r, "limits": r}}]},
        }))
        .unwrap()
    }

    #[test]
    fn cells_split_the_node_and_admission_follows_them() {
        let mut cfg = SimConfig {
            capacity: crate::node::parse_resources("cpu=8,memory=16Gi,example.com/gpu=2").unwrap(),
            topology_manager_policy: POLICY_SINGLE_NUMA_NODE.into(),
            ..Default::default()
        };
        cfg.numa = crate::node::topology::split_evenly(2, &cfg.capacity).unwrap();
        let nodes: HashSet<String> = ["n".to_string()].into();
        let mut t = SimTopology::new(&cfg, &nodes).unwrap();
        // Every node publishes its empty cells first.
        let first = t.take_dirty();
        assert_eq!(first.len(), 1);
        let state: NumaResources = serde_json::from_str(&first[0].1).unwrap();
        assert_eq!(
            state.cells.iter().map(|c| c.cpus).collect::<Vec<_>>(),
            [4, 4]
        );
        assert_eq!(state.cells[1].devices["example.com/gpu"], 1);
        // 3 CPUs + a GPU on cell 0, 3 CPUs on cell 1: a pod of 2 CPUs + a
        // GPU fits the node's totals but no single cell.
        assert!(t.admit("n", &pod("a", "3", "1")));
        let mut plain = pod("b", "3", "0");
        for c in &mut plain.spec.as_mut().unwrap().containers {
            let r = c.resources.as_mut().unwrap();
            r.limits.as_mut().unwrap().remove("example.com/gpu");
            r.requests.as_mut().unwrap().remove("example.com/gpu");
        }
        assert!(t.admit("n", &plain));
        assert!(!t.admit("n", &pod("c", "2", "1")));
        assert!(t.admit("n", &pod("d", "1", "1")));
        let state: NumaResources = serde_json::from_str(&t.take_dirty()[0].1).unwrap();
        assert_eq!(
            state.cells.iter().map(|c| c.cpus).collect::<Vec<_>>(),
            [1, 0]
        );
        assert_eq!(state.pods, ["a", "b", "d"].map(String::from).into());
        // Released pods give their cells back.
        t.release("a");
        assert!(t.admit("n", &pod("c", "2", "1")));
        // Without single-numa-node or without cells, nothing is modelled.
        cfg.topology_manager_policy = "none".into();
        assert!(SimTopology::new(&cfg, &nodes).is_none());
    }
}
