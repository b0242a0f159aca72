//! The Device Manager as a Topology Manager hint provider (upstream's
//! `topology_hints.go` GetTopologyHints / GetPodTopologyHints, and the
//! affinity its `devicesToAllocate` honours). Hints come from the healthy
//! devices' NUMA nodes; a container admitted with an affinity gets its devices
//! reserved at once (aligned ones first), so the next pod's hints see them
//! taken, and the plugin's Allocate later uses that reservation.

use std::collections::{BTreeMap, BTreeSet};

use berth_topology::TopologyHint;
use berth_topology::provider::{
    AdmissionError, ContainerResources, HintMap, HintProvider, PodResources,
};

use super::topology_hints::{device_hints, pick_aligned};
use super::{DeviceManager, HEALTHY, State};

/// Healthy devices of `resource` → their NUMA nodes (empty: no topology).
fn affinities(st: &State, resource: &str) -> BTreeMap<String, Vec<usize>> {
    let Some(r) = st.resources.get(resource) else {
        return BTreeMap::new();
    };
    r.devices
        .values()
        .filter(|d| d.health == HEALTHY)
        .map(|d| {
            let nodes = d
                .topology
                .iter()
                .flat_map(|t| &t.nodes)
                .filter_map(|n| usize::try_from(n.id).ok())
                .collect();
            (d.id.clone(), nodes)
        })
        .collect()
}

/// A container's whole requests of the registered device resources (limits,
/// which extended resources must set, else requests).
fn device_requests(st: &State, c: &ContainerResources) -> Vec<(String, usize)> {
    let names: BTreeSet<&String> = c.requests.keys().chain(c.limits.keys()).collect();
    names
        .into_iter()
        .filter(|r| st.resources.contains_key(*r))
        .filter_map(|r| {
            let milli = c.limits.get(r).or_else(|| c.requests.get(r))?;
            let n = usize::try_from(milli / 1000).ok()?;
            (n > 0).then(|| (r.clone(), n))
        })
        .collect()
}

impl DeviceManager {
    /// Hints for `n` devices of `resource`, `held` being what the container
    /// (or pod) already has: only those when they suffice (a restart).
    fn hints(
        &self,
        st: &State,
        resource: &str,
        n: usize,
        held: BTreeSet<String>,
    ) -> Option<Vec<TopologyHint>> {
        let affinity = affinities(st, resource);
        let available: BTreeSet<String> = if held.len() >= n {
            BTreeSet::new()
        } else {
            let in_use = st.in_use(resource, None);
            affinity
                .keys()
                .filter(|id| !in_use.contains(*id))
                .cloned()
                .collect()
        };
        device_hints(&self.numa_nodes, &affinity, &available, &held, n)
    }
}

impl HintProvider for DeviceManager {
    fn get_topology_hints(&self, pod: &PodResources, c: &ContainerResources) -> HintMap {
        let st = self.lock();
        device_requests(&st, c)
            .into_iter()
            .map(|(r, n)| {
                let held: BTreeSet<String> = st
                    .pod_devices
                    .get(&pod.uid, &c.name, &r)
                    .map(|a| a.device_ids.iter().cloned().collect())
                    .unwrap_or_default();
                let hints = self.hints(&st, &r, n, held);
                (r, hints)
            })
            .collect()
    }

    fn get_pod_topology_hints(&self, pod: &PodResources) -> HintMap {
        let st = self.lock();
        // Upstream's getPodDeviceRequest: the widest regular init container,
        // or the app containers with the sidecars beside them.
        let mut init_max: BTreeMap<String, usize> = BTreeMap::new();
        let mut running: BTreeMap<String, usize> = BTreeMap::new();
        for c in pod.all_containers() {
            let is_init = pod.init_containers.iter().any(|i| i.name == c.name);
            for (r, n) in device_requests(&st, c) {
                if is_init && !c.sidecar {
                    let e = init_max.entry(r).or_default();
                    *e = (*e).max(n);
                } else {
                    *running.entry(r).or_default() += n;
                }
            }
        }
        for (r, n) in init_max {
            let e = running.entry(r).or_default();
            *e = (*e).max(n);
        }
        running
            .into_iter()
            .map(|(r, n)| {
                let held = st.in_use(&r, Some(&pod.uid));
                let hints = self.hints(&st, &r, n, held);
                (r, hints)
            })
            .collect()
    }

    fn allocate(
        &self,
        pod: &PodResources,
        c: &ContainerResources,
        hint: &TopologyHint,
    ) -> Result<(), AdmissionError> {
        // Without an affinity the plugin's preferred allocation decides later.
        let Some(mask) = &hint.affinity else {
            return Ok(());
        };
        let mut st = self.lock();
        let key = (pod.uid.clone(), c.name.clone());
        for (r, n) in device_requests(&st, c) {
            let allocated = st
                .pod_devices
                .get(&pod.uid, &c.name, &r)
                .is_some_and(|a| a.device_ids.len() == n);
            let reserved = st.reserved.get(&key).is_some_and(|m| m.contains_key(&r));
            if allocated || reserved {
                continue;
            }
            let affinity = affinities(&st, &r);
            let in_use = st.in_use(&r, None);
            let available: BTreeSet<String> = affinity
                .keys()
                .filter(|id| !in_use.contains(*id))
                .cloned()
                .collect();
            let ids = pick_aligned(&r, n, mask, &affinity, &available)
                .map_err(AdmissionError::unexpected)?;
            st.reserved.entry(key.clone()).or_default().insert(r, ids);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use berth_topology::provider::QosClass;
    use berth_topology::{NumaInfo, PolicyOptions, Scope, TopologyManager, new_policy};

    use super::super::pb;
    use super::*;
    use crate::testutil::TempDir;

    const GPU: &str = "example.com/gpu";

    /// The seed's machine: two GPUs on each of two NUMA nodes.
    async fn manager(dir: &TempDir) -> Arc<DeviceManager> {
        let dm = DeviceManager::start(dir.path().join("plugins"), vec![0, 1])
            .await
            .unwrap();
        let generation = dm.registered(GPU, dir.path().join("none.sock"), Default::default());
        let device = |id: &str, node: i64| pb::Device {
            id: id.into(),
            health: HEALTHY.into(),
            topology: Some(pb::TopologyInfo {
                nodes: vec![pb::NumaNode { id: node }],
            }),
        };
        dm.update_devices(
            GPU,
            generation,
            vec![
                device("g0", 0),
                device("g1", 0),
                device("g2", 1),
                device("g3", 1),
            ],
        );
        dm
    }

    fn pod(uid: &str, gpus: &[i64]) -> PodResources {
        PodResources {
            uid: uid.into(),
            namespace: "ns".into(),
            name: uid.into(),
            qos: QosClass::BestEffort,
            init_containers: vec![],
            containers: gpus
                .iter()
                .enumerate()
                .map(|(i, n)| ContainerResources {
                    name: format!("c{i}"),
                    limits: [(GPU.to_string(), n * 1000)].into(),
                    ..Default::default()
                })
                .collect(),
        }
    }

    fn reserved(dm: &DeviceManager, uid: &str, container: &str) -> Vec<String> {
        let st = dm.lock();
        st.reserved
            .get(&(uid.to_string(), container.to_string()))
            .and_then(|m| m.get(GPU))
            .cloned()
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn single_numa_node_keeps_each_containers_gpus_on_one_node() {
        let dir = TempDir::new("devhints");
        let dm = manager(&dir).await;
        let tm = |scope| TopologyManager {
            policy: new_policy(
                "single-numa-node",
                NumaInfo::uniform(2),
                PolicyOptions::default(),
            )
            .unwrap(),
            scope,
            providers: vec![dm.clone() as Arc<dyn HintProvider>],
        };
        // One GPU: node 0 (the lowest preferred mask).
        tm(Scope::Container).admit(&pod("a", &[1])).unwrap();
        assert_eq!(reserved(&dm, "a", "c0"), ["g0"]);
        // Two GPUs no longer fit node 0: both of node 1, not g1 + g2.
        tm(Scope::Container).admit(&pod("b", &[2])).unwrap();
        assert_eq!(reserved(&dm, "b", "c0"), ["g2", "g3"]);
        // Pod scope: 1 + 1 must share a node; only g1 is left, so no.
        let err = tm(Scope::Pod).admit(&pod("c", &[1, 1])).unwrap_err();
        assert_eq!(err, AdmissionError::topology_affinity());
        // Container scope places one and rejects the second: the manager
        // releases the first's reservation (as the Topology Manager does).
        assert!(tm(Scope::Container).admit(&pod("d", &[1, 1])).is_err());
        assert_eq!(reserved(&dm, "d", "c0"), ["g1"]);
        dm.release_reservations("d");
        assert!(reserved(&dm, "d", "c0").is_empty());
        // Once allocated (the plugin's answer), readmission (every sync
        // admits again) keeps the pod on its devices.
        {
            let mut st = dm.lock();
            let ids = st
                .reserved
                .remove(&("a".to_string(), "c0".to_string()))
                .unwrap();
            st.pod_devices.insert(
                "a",
                "c0",
                GPU,
                super::super::Allocation {
                    device_ids: ids[GPU].clone(),
                    response: Default::default(),
                },
            );
        }
        tm(Scope::Container).admit(&pod("a", &[1])).unwrap();
        tm(Scope::Pod).admit(&pod("a", &[1])).unwrap();
        assert!(reserved(&dm, "a", "c0").is_empty());
        // Freed devices are hinted again.
        dm.remove_pod("b");
        tm(Scope::Pod).admit(&pod("e", &[1, 1])).unwrap();
        assert_eq!(reserved(&dm, "e", "c0"), ["g2"]);
        assert_eq!(reserved(&dm, "e", "c1"), ["g3"]);
    }

    #[tokio::test]
    async fn without_topology_or_affinity_nothing_is_reserved() {
        let dir = TempDir::new("devhints");
        let dm = manager(&dir).await;
        let none = TopologyManager {
            policy: new_policy("none", NumaInfo::uniform(2), PolicyOptions::default()).unwrap(),
            scope: Scope::Container,
            providers: vec![dm.clone() as Arc<dyn HintProvider>],
        };
        none.admit(&pod("a", &[1])).unwrap();
        assert!(reserved(&dm, "a", "c0").is_empty());
        // Five GPUs: no mask holds them, the hint list is empty.
        let p = pod("b", &[5]);
        let hints = dm.get_topology_hints(&p, &p.containers[0]);
        assert_eq!(hints.get(GPU), Some(&Some(vec![])));
    }
}
