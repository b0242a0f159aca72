//! CRI stats messages → Berth's runtime stats types (plain functions).
//!
//! What containerd 1.6.20 sends (measured on these machines, cgroup v1):
//! `ListContainerStats` carries cumulative CPU, memory (working set, usage,
//! RSS, page faults; `available_bytes` 0 without a limit), the writable layer
//! (timestamp 0 and 0 bytes until its 10 s snapshot sync has run), no swap, and
//! `usage_nano_cores` 0. `ListPodSandboxStats` carries CPU, a process count and,
//! for pods with their own network namespace, eth0's counters (timestamp 0), but
//! no memory: it looks the pod's cgroup up as an absolute path, and Berth's pod
//! cgroups nest inside Berth's own memory cgroup. The stats provider fills in
//! from the cgroup files what is missing here.

use chrono::{DateTime, Utc};
use k8s_cri::v1 as cri;

use crate::runtime::{
    ContainerStats, CpuUsage, FsUsage, MemoryUsage, NetworkInterfaceUsage, NetworkUsage,
    SandboxStats, SwapUsage,
};

/// CRI timestamps are nanoseconds since the epoch; 0 means "not set".
fn time(nanos: i64) -> Option<DateTime<Utc>> {
    (nanos > 0).then(|| DateTime::from_timestamp_nanos(nanos))
}

fn value(v: Option<cri::UInt64Value>) -> Option<u64> {
    v.map(|v| v.value)
}

/// `now` stands in for a missing timestamp.
fn cpu(c: Option<cri::CpuUsage>, now: DateTime<Utc>) -> Option<CpuUsage> {
    let c = c?;
    Some(CpuUsage {
        timestamp: time(c.timestamp).unwrap_or(now),
        usage_core_nano_seconds: value(c.usage_core_nano_seconds)?,
    })
}

fn memory(m: Option<cri::MemoryUsage>, now: DateTime<Utc>) -> Option<MemoryUsage> {
    let m = m?;
    Some(MemoryUsage {
        timestamp: time(m.timestamp).unwrap_or(now),
        working_set_bytes: value(m.working_set_bytes)?,
        // containerd reports 0 when there is no limit (and only then, short of
        // a working set exactly at its limit): no limit, no availableBytes.
        available_bytes: value(m.available_bytes).filter(|v| *v > 0),
        usage_bytes: value(m.usage_bytes),
        rss_bytes: value(m.rss_bytes),
        page_faults: value(m.page_faults),
        major_page_faults: value(m.major_page_faults),
    })
}

fn swap(s: Option<cri::SwapUsage>, now: DateTime<Utc>) -> Option<SwapUsage> {
    let s = s?;
    Some(SwapUsage {
        timestamp: time(s.timestamp).unwrap_or(now),
        swap_usage_bytes: value(s.swap_usage_bytes)?,
        swap_available_bytes: value(s.swap_available_bytes),
    })
}

fn fs(f: cri::FilesystemUsage) -> FsUsage {
    FsUsage {
        timestamp: time(f.timestamp),
        mountpoint: f.fs_id.map(|i| i.mountpoint).unwrap_or_default(),
        used_bytes: value(f.used_bytes),
        inodes_used: value(f.inodes_used),
    }
}

/// One container's stats; None without attributes (nothing to name it by).
pub(super) fn container_stats(
    s: cri::ContainerStats,
    now: DateTime<Utc>,
) -> Option<ContainerStats> {
    let attrs = s.attributes?;
    Some(ContainerStats {
        id: attrs.id,
        name: attrs.metadata.map(|m| m.name).unwrap_or_default(),
        cpu: cpu(s.cpu, now),
        memory: memory(s.memory, now),
        swap: swap(s.swap, now),
        writable_layer: s.writable_layer.map(fs),
    })
}

fn interface(i: cri::NetworkInterfaceUsage) -> NetworkInterfaceUsage {
    NetworkInterfaceUsage {
        name: i.name,
        rx_bytes: value(i.rx_bytes),
        rx_errors: value(i.rx_errors),
        tx_bytes: value(i.tx_bytes),
        tx_errors: value(i.tx_errors),
    }
}

fn network(n: cri::NetworkUsage) -> NetworkUsage {
    NetworkUsage {
        timestamp: time(n.timestamp),
        default_interface: n.default_interface.map(interface),
        interfaces: n.interfaces.into_iter().map(interface).collect(),
    }
}

/// One sandbox's stats (Linux); None without attributes.
pub(super) fn sandbox_stats(s: cri::PodSandboxStats, now: DateTime<Utc>) -> Option<SandboxStats> {
    let id = s.attributes?.id;
    let linux = s.linux.unwrap_or_default();
    Some(SandboxStats {
        id,
        cpu: cpu(linux.cpu, now),
        memory: memory(linux.memory, now),
        network: linux.network.map(network),
        process_count: linux.process.and_then(|p| value(p.process_count)),
    })
}

pub(super) fn image_fs(r: cri::ImageFsInfoResponse) -> Vec<FsUsage> {
    r.image_filesystems.into_iter().map(fs).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(value: u64) -> Option<cri::UInt64Value> {
        Some(cri::UInt64Value { value })
    }

    /// A container as containerd 1.6.20 reported a busy busybox here.
    fn containerd_container() -> cri::ContainerStats {
        cri::ContainerStats {
            attributes: Some(cri::ContainerAttributes {
                id: "8fca".into(),
                metadata: Some(cri::ContainerMetadata {
                    name: "c".into(),
                    attempt: 0,
                }),
                ..Default::default()
            }),
            cpu: Some(cri::CpuUsage {
                timestamp: 1_796_178_186_379_629_218,
                usage_core_nano_seconds: v(1_990_255_229),
                usage_nano_cores: v(0),
            }),
            memory: Some(cri::MemoryUsage {
                timestamp: 1_796_178_186_379_629_218,
                working_set_bytes: v(503_808),
                available_bytes: v(0),
                usage_bytes: v(503_808),
                rss_bytes: v(61_440),
                page_faults: v(848),
                major_page_faults: v(0),
            }),
            writable_layer: Some(cri::FilesystemUsage {
                timestamp: 0,
                fs_id: Some(cri::FilesystemIdentifier {
                    mountpoint: "/d/root/io.containerd.snapshotter.v1.overlayfs".into(),
                }),
                used_bytes: v(0),
                inodes_used: v(0),
            }),
            swap: None,
        }
    }

    #[test]
    fn containerd_container_stats() {
        let now = DateTime::from_timestamp_nanos(5);
        let at = DateTime::from_timestamp_nanos(1_796_178_186_379_629_218);
        let got = container_stats(containerd_container(), now).unwrap();
        assert_eq!(
            got,
            ContainerStats {
                id: "8fca".into(),
                name: "c".into(),
                cpu: Some(CpuUsage {
                    timestamp: at,
                    usage_core_nano_seconds: 1_990_255_229
                }),
                memory: Some(MemoryUsage {
                    timestamp: at,
                    working_set_bytes: 503_808,
                    available_bytes: None,
                    usage_bytes: Some(503_808),
                    rss_bytes: Some(61_440),
                    page_faults: Some(848),
                    major_page_faults: Some(0),
                }),
                swap: None,
                writable_layer: Some(FsUsage {
                    timestamp: None,
                    mountpoint: "/d/root/io.containerd.snapshotter.v1.overlayfs".into(),
                    used_bytes: Some(0),
                    inodes_used: Some(0),
                }),
            }
        );
    }

    #[test]
    fn missing_pieces_stay_missing() {
        let now = DateTime::from_timestamp_nanos(5);
        let cases = [
            // (cpu, memory, swap) → (cpu present, memory present, swap present)
            (
                Some(cri::CpuUsage {
                    timestamp: 0,
                    usage_core_nano_seconds: None,
                    usage_nano_cores: v(7),
                }),
                None,
                Some(cri::SwapUsage {
                    timestamp: 0,
                    swap_available_bytes: v(1),
                    swap_usage_bytes: v(2),
                }),
                (false, false, true),
            ),
            (
                Some(cri::CpuUsage {
                    timestamp: 0,
                    usage_core_nano_seconds: v(1),
                    usage_nano_cores: None,
                }),
                Some(cri::MemoryUsage {
                    working_set_bytes: None,
                    ..Default::default()
                }),
                None,
                (true, false, false),
            ),
        ];
        for (c, m, s, want) in cases {
            let mut msg = containerd_container();
            msg.cpu = c;
            msg.memory = m;
            msg.swap = s;
            let got = container_stats(msg, now).unwrap();
            assert_eq!(
                (got.cpu.is_some(), got.memory.is_some(), got.swap.is_some()),
                want
            );
            // A missing timestamp is the time of asking.
            if let Some(cpu) = got.cpu {
                assert_eq!(cpu.timestamp, now);
            }
        }
        let mut anonymous = containerd_container();
        anonymous.attributes = None;
        assert!(container_stats(anonymous, now).is_none());
    }

    #[test]
    fn sandbox_network_and_processes() {
        let now = DateTime::from_timestamp_nanos(5);
        let eth0 = cri::NetworkInterfaceUsage {
            name: "eth0".into(),
            rx_bytes: v(1474),
            rx_errors: v(0),
            tx_bytes: v(808),
            tx_errors: v(0),
        };
        let msg = cri::PodSandboxStats {
            attributes: Some(cri::PodSandboxAttributes {
                id: "b668".into(),
                ..Default::default()
            }),
            linux: Some(cri::LinuxPodSandboxStats {
                cpu: Some(cri::CpuUsage {
                    timestamp: 9,
                    usage_core_nano_seconds: v(2_017_103_502),
                    usage_nano_cores: v(0),
                }),
                memory: None,
                network: Some(cri::NetworkUsage {
                    timestamp: 0,
                    default_interface: Some(eth0),
                    interfaces: vec![],
                }),
                process: Some(cri::ProcessUsage {
                    timestamp: 9,
                    process_count: v(1),
                }),
                containers: vec![],
            }),
            windows: None,
        };
        let got = sandbox_stats(msg, now).unwrap();
        assert_eq!(got.id, "b668");
        assert_eq!(
            got.cpu.map(|c| c.usage_core_nano_seconds),
            Some(2_017_103_502)
        );
        assert_eq!(got.memory, None);
        assert_eq!(got.process_count, Some(1));
        let net = got.network.unwrap();
        assert_eq!(net.timestamp, None);
        let d = net.default_interface.unwrap();
        assert_eq!(
            (d.name.as_str(), d.rx_bytes, d.tx_bytes),
            ("eth0", Some(1474), Some(808))
        );
    }
}
