//! Runtime and probe figures → Summary API pieces.

use chrono::{DateTime, Utc};

use super::fs::{DirUsage, FsCapacity};
use super::host::DEFAULT_INTERFACE;
use super::summary::{CpuStats, FsStats, InterfaceStats, MemoryStats, NetworkStats, SwapStats};
use crate::runtime::{CpuUsage, MemoryUsage, NetworkInterfaceUsage, NetworkUsage, SwapUsage};

pub fn cpu(sample: &CpuUsage, nano_cores: Option<u64>) -> CpuStats {
    CpuStats {
        time: Some(sample.timestamp),
        usage_nano_cores: nano_cores,
        usage_core_nano_seconds: Some(sample.usage_core_nano_seconds),
    }
}

/// Upstream's stand-in when the runtime has no CPU figures: zero, now.
pub fn zero_cpu(now: DateTime<Utc>) -> CpuStats {
    CpuStats {
        time: Some(now),
        usage_nano_cores: Some(0),
        usage_core_nano_seconds: Some(0),
    }
}

pub fn memory(m: &MemoryUsage) -> MemoryStats {
    MemoryStats {
        time: Some(m.timestamp),
        available_bytes: m.available_bytes,
        usage_bytes: m.usage_bytes,
        working_set_bytes: Some(m.working_set_bytes),
        rss_bytes: m.rss_bytes,
        page_faults: m.page_faults,
        major_page_faults: m.major_page_faults,
    }
}

/// Upstream's stand-in without memory figures: a zero working set, now.
pub fn zero_memory(now: DateTime<Utc>) -> MemoryStats {
    MemoryStats {
        time: Some(now),
        working_set_bytes: Some(0),
        ..Default::default()
    }
}

pub fn swap(s: &SwapUsage) -> SwapStats {
    SwapStats {
        time: Some(s.timestamp),
        swap_available_bytes: s.swap_available_bytes,
        swap_usage_bytes: Some(s.swap_usage_bytes),
    }
}

/// A filesystem's size with what something uses of it.
pub fn fs(
    time: DateTime<Utc>,
    capacity: Option<FsCapacity>,
    used_bytes: Option<u64>,
    inodes_used: Option<u64>,
) -> FsStats {
    FsStats {
        time: Some(time),
        available_bytes: capacity.map(|c| c.available_bytes),
        capacity_bytes: capacity.map(|c| c.capacity_bytes),
        used_bytes,
        inodes_free: capacity.map(|c| c.inodes_free),
        inodes: capacity.map(|c| c.inodes),
        inodes_used,
    }
}

/// A directory tree's use on its filesystem (logs, volumes).
pub fn dir_fs(time: DateTime<Utc>, capacity: Option<FsCapacity>, usage: DirUsage) -> FsStats {
    fs(
        time,
        capacity,
        Some(usage.used_bytes),
        Some(usage.inodes_used),
    )
}

fn interface(i: &NetworkInterfaceUsage) -> InterfaceStats {
    InterfaceStats {
        name: i.name.clone(),
        rx_bytes: i.rx_bytes,
        rx_errors: i.rx_errors,
        tx_bytes: i.tx_bytes,
        tx_errors: i.tx_errors,
    }
}

/// Network counters in cAdvisor's shape: eth0 inline as the default, and
/// every interface (the default one among them) listed.
pub fn network(n: &NetworkUsage, now: DateTime<Utc>) -> NetworkStats {
    let mut interfaces: Vec<InterfaceStats> = n.interfaces.iter().map(interface).collect();
    let default = n.default_interface.as_ref().map(interface).or_else(|| {
        interfaces
            .iter()
            .find(|i| i.name == DEFAULT_INTERFACE)
            .cloned()
    });
    if let Some(d) = &default
        && !interfaces.iter().any(|i| i.name == d.name)
    {
        interfaces.insert(0, d.clone());
    }
    NetworkStats {
        time: Some(n.timestamp.unwrap_or(now)),
        default: default.unwrap_or_default(),
        interfaces,
    }
}

/// Sums optional counters, None only when both are.
pub fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        _ => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}
