//! What the runtime reports about resource use, in Berth's own small types
//! (CRI's `ContainerStats`, `PodSandboxStats` and `ImageFsInfo` trimmed to what
//! the stats provider reads). Cumulative counters only: rates such as
//! usageNanoCores are the provider's, computed from two samples.

use chrono::{DateTime, Utc};

/// Cumulative CPU time at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuUsage {
    pub timestamp: DateTime<Utc>,
    /// CPU time summed over all cores since the container (or sandbox) started.
    pub usage_core_nano_seconds: u64,
}

/// Memory use at a moment; `None` where the runtime did not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryUsage {
    pub timestamp: DateTime<Utc>,
    pub working_set_bytes: u64,
    /// Limit minus working set; `None` without a limit.
    pub available_bytes: Option<u64>,
    pub usage_bytes: Option<u64>,
    pub rss_bytes: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
}

/// Swap use at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwapUsage {
    pub timestamp: DateTime<Utc>,
    pub swap_usage_bytes: u64,
    /// Swap limit minus usage; `None` without a limit.
    pub swap_available_bytes: Option<u64>,
}

/// Bytes and inodes a filesystem (or a container's writable layer on it) uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsUsage {
    /// When the runtime measured it; `None` until it has (containerd measures
    /// snapshots in the background, every 10 s).
    pub timestamp: Option<DateTime<Utc>>,
    /// Where the filesystem is mounted (for its capacity).
    pub mountpoint: String,
    pub used_bytes: Option<u64>,
    pub inodes_used: Option<u64>,
}

/// One container's resource use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStats {
    pub id: String,
    pub name: String,
    pub cpu: Option<CpuUsage>,
    pub memory: Option<MemoryUsage>,
    pub swap: Option<SwapUsage>,
    /// The container's writable layer.
    pub writable_layer: Option<FsUsage>,
}

/// Counters of one network interface.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkInterfaceUsage {
    pub name: String,
    pub rx_bytes: Option<u64>,
    pub rx_errors: Option<u64>,
    pub tx_bytes: Option<u64>,
    pub tx_errors: Option<u64>,
}

/// A sandbox's network counters: its default interface (eth0) and the others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkUsage {
    /// `None` where the runtime gives no time (containerd 1.6 sends 0).
    pub timestamp: Option<DateTime<Utc>>,
    pub default_interface: Option<NetworkInterfaceUsage>,
    pub interfaces: Vec<NetworkInterfaceUsage>,
}

/// One pod sandbox's resource use (its cgroup, its network namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxStats {
    pub id: String,
    pub cpu: Option<CpuUsage>,
    pub memory: Option<MemoryUsage>,
    pub network: Option<NetworkUsage>,
    /// Processes in the pod's cgroup.
    pub process_count: Option<u64>,
}
