//! What a node publishes of its NUMA cells' free exclusive resources, and the
//! `single-numa-node` fit over it: the node side (the simulator's admission)
//! and the scheduler's NodeResourceTopologyMatch filter run the same rule, so
//! the scheduler sends a pod only where the node's Topology Manager admits it
//! (the seed's limit (2) of upstream's Topology Manager, removed). The shape
//! follows kubernetes-sigs/scheduler-plugins' NodeResourceTopology zones, as a
//! Node annotation until CRDs carry it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::provider::{ContainerResources, PodResources, QosClass};
use crate::scope::Scope;

/// The Node annotation holding [`NumaResources`] as JSON.
pub const ANNOTATION: &str = "node.berth.dev/numa-resources";

/// One NUMA cell's free exclusive resources: whole CPUs for Guaranteed pods'
/// integer requests, and devices per resource name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellFree {
    pub id: usize,
    pub cpus: i64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub devices: BTreeMap<String, i64>,
}

/// A node's published topology state: its Topology Manager policy and scope,
/// its cells, and the pods already counted in them (a pod bound since then
/// is not, and the scheduler reserves for it itself).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaResources {
    pub policy: String,
    pub scope: String,
    pub cells: Vec<CellFree>,
    #[serde(default)]
    pub pods: BTreeSet<String>,
}

/// The exclusive resources one container (container scope) or one pod (pod
/// scope) needs on a single cell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Demand {
    pub cpus: i64,
    pub devices: BTreeMap<String, i64>,
}

impl Demand {
    pub fn is_empty(&self) -> bool {
        self.cpus == 0 && self.devices.values().all(|n| *n == 0)
    }

    fn add(&mut self, other: &Demand) {
        self.cpus += other.cpus;
        for (r, n) in &other.devices {
            *self.devices.entry(r.clone()).or_default() += n;
        }
    }

    fn max(&mut self, other: &Demand) {
        self.cpus = self.cpus.max(other.cpus);
        for (r, n) in &other.devices {
            let e = self.devices.entry(r.clone()).or_default();
            *e = (*e).max(*n);
        }
    }
}

fn container_demand(
    pod: &PodResources,
    c: &ContainerResources,
    devices: &BTreeSet<String>,
) -> Demand {
    let cpus = if pod.qos == QosClass::Guaranteed {
        c.whole_request("cpu").unwrap_or(0)
    } else {
        0
    };
    let devices = devices
        .iter()
        .filter_map(|r| {
            let milli = c.limits.get(r).or_else(|| c.requests.get(r))?;
            (*milli >= 1000).then(|| (r.clone(), milli / 1000))
        })
        .collect();
    Demand { cpus, devices }
}

/// The pod's demands under `scope`: one per app container or sidecar
/// (container scope; regular init containers run before them and give their
/// resources back), or one for the whole pod (the widest init container or
/// the running containers together, as upstream's pod-scope hints). Empty
/// demands are left out; `devices` are the resource names cells publish.
pub fn demands(pod: &PodResources, scope: Scope, devices: &BTreeSet<String>) -> Vec<Demand> {
    let running = pod
        .init_containers
        .iter()
        .filter(|c| c.sidecar)
        .chain(&pod.containers);
    let out: Vec<Demand> = match scope {
        Scope::Container => running.map(|c| container_demand(pod, c, devices)).collect(),
        Scope::Pod => {
            let mut total = Demand::default();
            for c in running {
                total.add(&container_demand(pod, c, devices));
            }
            for c in pod.init_containers.iter().filter(|c| !c.sidecar) {
                total.max(&container_demand(pod, c, devices));
            }
            vec![total]
        }
    };
    out.into_iter().filter(|d| !d.is_empty()).collect()
}

fn fits(cell: &CellFree, d: &Demand) -> bool {
    cell.cpus >= d.cpus
        && d.devices
            .iter()
            .all(|(r, n)| cell.devices.get(r).copied().unwrap_or(0) >= *n)
}

fn take(cell: &mut CellFree, d: &Demand) {
    cell.cpus -= d.cpus;
    for (r, n) in &d.devices {
        *cell.devices.entry(r.clone()).or_default() -= n;
    }
}

/// Gives back what [`place`] took from `cell`.
pub fn give_back(cell: &mut CellFree, d: &Demand) {
    cell.cpus += d.cpus;
    for (r, n) in &d.devices {
        *cell.devices.entry(r.clone()).or_default() += n;
    }
}

/// `single-numa-node` placement: each demand on the lowest cell that holds
/// it whole (upstream's merge prefers the narrowest mask, then the lowest),
/// taken from `cells`; the cell index per demand, or None (nothing taken)
/// when one fits no cell.
pub fn place(cells: &mut [CellFree], demands: &[Demand]) -> Option<Vec<usize>> {
    let mut trial = cells.to_vec();
    let mut out = Vec::with_capacity(demands.len());
    for d in demands {
        let i = trial.iter().position(|c| fits(c, d))?;
        take(&mut trial[i], d);
        out.push(i);
    }
    cells.clone_from_slice(&trial);
    Some(out)
}

/// Takes `d` from every cell, down to zero: a pod the published state does
/// not count yet, whose cell the scheduler cannot know (pessimistic, as
/// scheduler-plugins' reserve cache).
pub fn reserve_anywhere(cells: &mut [CellFree], d: &Demand) {
    for c in cells {
        c.cpus = (c.cpus - d.cpus).max(0);
        for (r, n) in &d.devices {
            if let Some(free) = c.devices.get_mut(r) {
                *free = (*free - n).max(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(id: usize, cpus: i64, gpus: i64) -> CellFree {
        CellFree {
            id,
            cpus,
            devices: [("gpu".to_string(), gpus)].into(),
        }
    }

    fn c(name: &str, cpu: i64, gpu: i64) -> ContainerResources {
        let mut r: BTreeMap<String, i64> = [("cpu".to_string(), cpu * 1000)].into();
        if gpu > 0 {
            r.insert("gpu".into(), gpu * 1000);
        }
        ContainerResources {
            name: name.into(),
            requests: r.clone(),
            limits: r,
            sidecar: false,
        }
    }

    fn pod(qos: QosClass, containers: Vec<ContainerResources>) -> PodResources {
        PodResources {
            uid: "u".into(),
            namespace: "ns".into(),
            name: "p".into(),
            qos,
            init_containers: vec![],
            containers,
        }
    }

    #[test]
    fn demands_per_scope_and_qos() {
        let gpus: BTreeSet<String> = ["gpu".to_string()].into();
        let p = pod(QosClass::Guaranteed, vec![c("a", 2, 1), c("b", 1, 0)]);
        let d = |cpus, g: i64| Demand {
            cpus,
            devices: if g > 0 {
                [("gpu".to_string(), g)].into()
            } else {
                BTreeMap::new()
            },
        };
        assert_eq!(demands(&p, Scope::Container, &gpus), [d(2, 1), d(1, 0)]);
        assert_eq!(demands(&p, Scope::Pod, &gpus), [d(3, 1)]);
        // Burstable: no exclusive CPUs, devices still count.
        let b = pod(QosClass::Burstable, vec![c("a", 2, 1), c("b", 1, 0)]);
        assert_eq!(demands(&b, Scope::Container, &gpus), [d(0, 1)]);
        // A regular init container's demand is a maximum, not a sum.
        let mut i = pod(QosClass::Guaranteed, vec![c("a", 1, 0)]);
        i.init_containers.push(c("init", 3, 0));
        assert_eq!(demands(&i, Scope::Pod, &gpus), [d(3, 0)]);
    }

    #[test]
    fn place_on_single_cells_or_not_at_all() {
        let gpu = |cpus, g: i64| Demand {
            cpus,
            devices: [("gpu".to_string(), g)].into(),
        };
        // The seed's case: free CPUs on cell 0, the free GPU on cell 1.
        let mut cells = vec![cell(0, 3, 0), cell(1, 1, 1)];
        assert_eq!(place(&mut cells, &[gpu(2, 1)]), None);
        assert_eq!(cells, vec![cell(0, 3, 0), cell(1, 1, 1)], "nothing taken");
        assert_eq!(place(&mut cells, &[gpu(1, 1)]), Some(vec![1]));
        assert_eq!(cells, vec![cell(0, 3, 0), cell(1, 0, 0)]);
        // Two containers, each on its own cell; the second one no longer fits.
        let mut cells = vec![cell(0, 4, 1), cell(1, 4, 1)];
        assert_eq!(place(&mut cells, &[gpu(3, 1), gpu(3, 1)]), Some(vec![0, 1]));
        assert_eq!(place(&mut cells, &[gpu(1, 0)]), Some(vec![0]));
        assert_eq!(place(&mut cells, &[gpu(1, 1)]), None);
        give_back(&mut cells[1], &gpu(3, 1));
        assert_eq!(cells[1], cell(1, 4, 1));
        // An uncounted pod is taken from every cell, never below zero.
        let mut cells = vec![cell(0, 4, 1), cell(1, 1, 0)];
        reserve_anywhere(&mut cells, &gpu(2, 1));
        assert_eq!(cells, vec![cell(0, 2, 0), cell(1, 0, 0)]);
    }

    #[test]
    fn the_annotation_round_trips() {
        let r = NumaResources {
            policy: "single-numa-node".into(),
            scope: "container".into(),
            cells: vec![
                cell(0, 4, 1),
                CellFree {
                    id: 1,
                    cpus: 2,
                    devices: BTreeMap::new(),
                },
            ],
            pods: ["u1".to_string()].into(),
        };
        let s = serde_json::to_string(&r).unwrap();
        assert_eq!(
            s,
            r#"{"policy":"single-numa-node","scope":"container","cells":[{"id":0,"cpus":4,"devices":{"gpu":1}},{"id":1,"cpus":2}],"pods":["u1"]}"#
        );
        assert_eq!(serde_json::from_str::<NumaResources>(&s).unwrap(), r);
    }
}
