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
    /// The policy, scope and providers (the CPU Manager, then the Device
    /// Manager), built once.
    tm: TopologyManager,
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
        let mut providers: Vec<Arc<dyn HintProvider>> = vec![cpus.clone()];
        if let Some(d) = &devices {
            providers.push(d.clone());
        }
        let tm = TopologyManager {
            policy: new_policy(&cfg.policy, numa, cfg.options)?,
            scope: cfg.scope,
            providers,
        };
        Ok(Manager {
            tm,
            cpus,
            devices,
            admitting: Mutex::new(()),
        })
    }

    /// Admits the pod: None, or the rejection's reason and message. A
    /// rejected pod's CPUs and reserved devices are released (admission is
    /// all or nothing).
    pub fn admit(&self, pod: &Pod, qos: Qos) -> Option<(String, String)> {
        let resources = pod_resources(pod, qos);
        let _one_at_a_time = self
            .admitting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A pod readmitted after an agent restart keeps what it holds.
        let held = self.cpus.holds(&resources.uid);
        let e = self.tm.admit(&resources).err()?;
        tracing::info!(pod = %resources.name, reason = %e.reason, "Topology Manager rejected the pod");
        if !held {
            self.cpus.remove_pod(&resources.uid);
        }
        if let Some(d) = &self.devices {
            d.release_reservations(&resources.uid);
        }
        Some((e.reason, e.message))
    }
}

#[cfg(test)]
mod tests;
