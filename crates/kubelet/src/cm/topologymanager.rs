//! The Topology Manager in the agent's pod admission (upstream's
//! `pkg/kubelet/cm/topologymanager` admit handler), over `berth-topology`'s
//! policies and scopes: `--topology-manager-policy none|best-effort|
//! restricted|single-numa-node`, `--topology-manager-scope container|pod`,
//! `--topology-manager-policy-options` (`prefer-closest-numa-nodes`,
//! `max-allowable-numa-nodes`; no 8-node limit unless that is set). The CPU
//! and Device Managers are its hint providers (`cpumanager/hints.rs`,
//! `devicemanager/hints.rs`); a rejected pod
//! ends Failed with `TopologyAffinityError` and `Resources cannot be
//! allocated with Topology locality`, and what it was given is released.

use std::sync::{Arc, Mutex};

use berth_topology::provider::{HintProvider, PodResources, QosClass};
use berth_topology::{NumaInfo, PolicyError, TopologyManager, new_policy};
pub use berth_topology::{PolicyOptions, Scope};
use k8s_openapi::api::core::v1::Pod;

use super::cpumanager::CpuManager;
use super::devicemanager::DeviceManager;
use crate::cgroups::Qos;

/// The Topology Manager's flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyManagerConfig {
    pub policy: String,
    pub scope: Scope,
    pub options: PolicyOptions,
}

impl Default for TopologyManagerConfig {
    fn default() -> Self {
        TopologyManagerConfig {
            policy: berth_topology::policy::POLICY_NONE.into(),
            scope: Scope::Container,
            options: PolicyOptions::default(),
        }
    }
}

pub struct Manager {
    cfg: TopologyManagerConfig,
    numa: NumaInfo,
    cpus: Arc<CpuManager>,
    devices: Option<Arc<DeviceManager>>,
    /// Pods are admitted one at a time, as by upstream's sync loop: two
    /// pods' hints computed from the same free CPUs would both be granted.
    admitting: Mutex<()>,
}

/// The pod as the hint providers see it.
pub fn pod_resources(pod: &Pod, qos: Qos) -> PodResources {
    let qos = match qos {
        Qos::Guaranteed => QosClass::Guaranteed,
        Qos::Burstable => QosClass::Burstable,
        Qos::BestEffort => QosClass::BestEffort,
    };
    PodResources::from_pod(pod, qos)
}

impl Manager {
    /// Checks the policy against this machine's NUMA nodes (upstream refuses
    /// to start on a machine with more nodes than `max-allowable-numa-nodes`).
    pub fn new(
        cfg: TopologyManagerConfig,
        numa: NumaInfo,
        cpus: Arc<CpuManager>,
        devices: Option<Arc<DeviceManager>>,
    ) -> Result<Manager, PolicyError> {
        new_policy(&cfg.policy, numa.clone(), cfg.options.clone())?;
        Ok(Manager {
            cfg,
            numa,
            cpus,
            devices,
            admitting: Mutex::new(()),
        })
    }

    /// Admits the pod: None, or the rejection's reason and message. A
    /// rejected pod's CPUs are released (admission is all or nothing).
    pub fn admit(&self, pod: &Pod, qos: Qos) -> Option<(String, String)> {
        let policy = match new_policy(
            &self.cfg.policy,
            self.numa.clone(),
            self.cfg.options.clone(),
        ) {
            Ok(p) => p,
            Err(e) => {
                return Some((
                    berth_topology::provider::TOPOLOGY_AFFINITY_ERROR.into(),
                    e.to_string(),
                ));
            }
        };
        let mut providers: Vec<Arc<dyn HintProvider>> = vec![self.cpus.clone()];
        if let Some(d) = &self.devices {
            providers.push(d.clone());
        }
        let tm = TopologyManager {
            policy,
            scope: self.cfg.scope,
            providers,
        };
        let resources = pod_resources(pod, qos);
        let _one_at_a_time = self
            .admitting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A pod readmitted after an agent restart keeps what it holds.
        let held = self.cpus.state().assignments.contains_key(&resources.uid);
        match tm.admit(&resources) {
            Ok(_) => None,
            Err(e) => {
                let hints: Vec<_> = tm
                    .providers
                    .iter()
                    .map(|p| match self.cfg.scope {
                        Scope::Pod => p.get_pod_topology_hints(&resources),
                        Scope::Container => resources
                            .all_containers()
                            .flat_map(|c| p.get_topology_hints(&resources, c))
                            .collect(),
                    })
                    .collect();
                tracing::info!(pod = %resources.name, reason = %e.reason, ?hints, "Topology Manager rejected the pod");
                if !held {
                    self.cpus.remove_pod(&resources.uid);
                }
                if let Some(d) = &self.devices {
                    d.release_reservations(&resources.uid);
                }
                Some((e.reason, e.message))
            }
        }
    }
}

#[cfg(test)]
mod tests;
