//! The container manager's resource managers (upstream's `pkg/kubelet/cm`).

pub mod devicemanager;
