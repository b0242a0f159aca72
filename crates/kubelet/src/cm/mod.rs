//! The container manager's resource managers (upstream's `pkg/kubelet/cm`).

pub mod cpumanager;
pub mod devicemanager;
pub mod topologymanager;
