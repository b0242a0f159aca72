//! Pod cgroups (cgroupfs driver) and containers' Linux resources.
//!
//! Pods are grouped by QoS class under Berth's root cgroup `berth`, nested in the
//! cgroup Berth was started in: cgroup parents are *relative* paths, which runc
//! resolves against its own cgroup in each hierarchy (containerd's shims inherit
//! Berth's), so on a hybrid machine whose v1 controllers sit at different paths
//! (here `memory:/process_api/…`, `cpu:/`) everything still nests correctly.
//! Guaranteed pods sit directly under the root, as upstream's `kubepods/pod<uid>`.

pub mod allocatable;
pub mod manager;
pub mod node;
pub mod pod;
pub mod qos;
pub mod stats;
pub mod v1;
pub mod v2;

pub use manager::{
    CgroupError, CgroupManager, CgroupMode, CgroupName, CgroupResult, ResourceConfig,
};
pub use node::{CgroupsConfig, NodeCgroups};
pub use pod::{PodLimits, pod_limits};

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Container;

use crate::runtime::LinuxResources;

/// Berth's root cgroup, relative to the cgroup it was started in.
pub const ROOT: &str = "berth";

/// CFS period upstream uses (100 ms).
pub const CPU_PERIOD_US: i64 = 100_000;
const MIN_SHARES: i64 = 2;
const MAX_SHARES: i64 = 262_144;
const MIN_QUOTA_US: i64 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Qos {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl Qos {
    /// From `status.qosClass` / `berth_api::qos` names.
    pub fn from_class(s: &str) -> Qos {
        match s {
            "Guaranteed" => Qos::Guaranteed,
            "Burstable" => Qos::Burstable,
            _ => Qos::BestEffort,
        }
    }
}

/// The hierarchy mounted at `root` (`/sys/fs/cgroup`): pure v2 has
/// `cgroup.controllers` at the root, hybrid a cgroup2 at `unified`.
pub fn detect_mode(root: &Path) -> CgroupMode {
    if root.join("cgroup.controllers").is_file() {
        CgroupMode::V2
    } else if root.join("unified").is_dir() {
        CgroupMode::Hybrid
    } else {
        CgroupMode::V1
    }
}

/// The cgroupfs manager for the machine at `root`, relative to this process's
/// cgroups (`proc_cgroup`, the text of `/proc/self/cgroup`). Hybrid machines
/// get the v1 manager: their controllers are on v1, as upstream decides.
pub fn new_manager(root: &Path, proc_cgroup: &str) -> Box<dyn CgroupManager> {
    match detect_mode(root) {
        CgroupMode::V2 => Box::new(v2::V2Manager::from_proc(root, proc_cgroup)),
        _ => Box::new(v1::V1Manager::new(root, proc_cgroup)),
    }
}

/// The pod's cgroup parent as handed to the runtime.
pub fn pod_cgroup_parent(qos: Qos, uid: &str) -> String {
    // Upstream's cgroupfs names: pod<uid> with the uid's dashes kept.
    match qos {
        Qos::Guaranteed => format!("{ROOT}/pod{uid}"),
        Qos::Burstable => format!("{ROOT}/burstable/pod{uid}"),
        Qos::BestEffort => format!("{ROOT}/besteffort/pod{uid}"),
    }
}

/// The cgroup of this process per v1 controller (and "" for the v2 line), from
/// `/proc/self/cgroup` text.
pub fn parse_proc_cgroup(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        for c in controllers.split(',') {
            let c = c.strip_prefix("name=").unwrap_or(c);
            out.push((c.to_string(), path.to_string()));
        }
    }
    out
}

/// Where a pod's cgroup lives in every mounted hierarchy (v1 controllers and the
/// v2 unified tree), for inspection and cleanup.
pub fn pod_cgroup_dirs(cgroup_root: &Path, proc_cgroup: &str, qos: Qos, uid: &str) -> Vec<PathBuf> {
    let rel = pod_cgroup_parent(qos, uid);
    let mut dirs = Vec::new();
    for (controller, own) in parse_proc_cgroup(proc_cgroup) {
        let mount = if controller.is_empty() {
            // cgroup2: mounted at the root (pure v2) or at `unified` (hybrid).
            if cgroup_root.join("unified").is_dir() {
                cgroup_root.join("unified")
            } else {
                cgroup_root.to_path_buf()
            }
        } else {
            cgroup_root.join(&controller)
        };
        let dir = mount.join(own.trim_start_matches('/')).join(&rel);
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// The pod's cgroup directory in the v1 hierarchy of `controller`, nested as
/// runc will nest it (under this process's cgroup of that controller).
pub fn pod_cgroup_dir(proc_cgroup: &str, controller: &str, qos: Qos, uid: &str) -> Option<PathBuf> {
    let own = parse_proc_cgroup(proc_cgroup)
        .into_iter()
        .find(|(c, _)| c == controller)?
        .1;
    Some(
        Path::new("/sys/fs/cgroup")
            .join(controller)
            .join(own.trim_start_matches('/'))
            .join(pod_cgroup_parent(qos, uid)),
    )
}

fn quantity_milli(c: &Container, which: &str, resource: &str) -> Option<i64> {
    let r = c.resources.as_ref()?;
    let m = if which == "limits" {
        &r.limits
    } else {
        &r.requests
    };
    let q = m.as_ref()?.get(resource)?;
    berth_api::quantity::Quantity::parse(&q.0)
        .ok()
        .map(|q| q.milli_value())
}

fn quantity_value(c: &Container, which: &str, resource: &str) -> Option<i64> {
    let r = c.resources.as_ref()?;
    let m = if which == "limits" {
        &r.limits
    } else {
        &r.requests
    };
    let q = m.as_ref()?.get(resource)?;
    berth_api::quantity::Quantity::parse(&q.0)
        .ok()
        .map(|q| q.value())
}

/// A container's CRI resources from its requests and limits (upstream's
/// `generateLinuxContainerResources`): cpu.shares from the CPU request (2 when
/// none), CFS quota from the CPU limit, the memory limit, and oom_score_adj by QoS
/// (`memory_capacity` is the node's, for burstable pods' score).
pub fn container_resources(c: &Container, qos: Qos, memory_capacity: i64) -> LinuxResources {
    let cpu_request = quantity_milli(c, "requests", "cpu")
        .or_else(|| quantity_milli(c, "limits", "cpu"))
        .unwrap_or(0);
    let cpu_shares = (cpu_request * 1024 / 1000).clamp(MIN_SHARES, MAX_SHARES);
    let (cpu_period, cpu_quota) = match quantity_milli(c, "limits", "cpu") {
        Some(limit) if limit > 0 => (
            CPU_PERIOD_US,
            (limit * CPU_PERIOD_US / 1000).max(MIN_QUOTA_US),
        ),
        _ => (0, 0),
    };
    let memory_limit_in_bytes = quantity_value(c, "limits", "memory").unwrap_or(0).max(0);
    let oom_score_adj = match qos {
        Qos::Guaranteed => -997,
        Qos::BestEffort => 1000,
        Qos::Burstable => {
            let req = quantity_value(c, "requests", "memory").unwrap_or(0);
            let score = if memory_capacity > 0 {
                1000 - (1000 * req as i128 / memory_capacity as i128) as i64
            } else {
                1000
            };
            score.clamp(2, 999)
        }
    };
    LinuxResources {
        cpu_period,
        cpu_quota,
        cpu_shares,
        memory_limit_in_bytes,
        oom_score_adj,
        // The CPU Manager's, set by the worker.
        cpuset_cpus: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::pod::tests::container;
    use super::*;

    #[test]
    fn resources_follow_requests_and_limits() {
        let gib = 1i64 << 30;
        let cases = [
            // (requests, limits, qos) → (shares, period, quota, memory, oom)
            (container(&[], &[]), Qos::BestEffort, (2, 0, 0, 0, 1000)),
            (
                container(
                    &[("cpu", "500m"), ("memory", "64Mi")],
                    &[("cpu", "500m"), ("memory", "64Mi")],
                ),
                Qos::Guaranteed,
                (512, 100_000, 50_000, 64 << 20, -997),
            ),
            (
                container(
                    &[("cpu", "250m"), ("memory", "512Mi")],
                    &[("memory", "1Gi")],
                ),
                Qos::Burstable,
                (256, 0, 0, gib, 500),
            ),
            // A limit alone stands for the request; a tiny limit keeps the 1 ms minimum quota.
            (
                container(&[], &[("cpu", "5m")]),
                Qos::Burstable,
                (5, 100_000, 1000, 0, 999),
            ),
            (
                container(&[("cpu", "1m")], &[]),
                Qos::Burstable,
                (2, 0, 0, 0, 999),
            ),
        ];
        for (c, qos, (shares, period, quota, mem, oom)) in cases {
            let r = container_resources(&c, qos, gib);
            assert_eq!(
                (
                    r.cpu_shares,
                    r.cpu_period,
                    r.cpu_quota,
                    r.memory_limit_in_bytes,
                    r.oom_score_adj
                ),
                (shares, period, quota, mem, oom),
                "{:?}",
                c.resources
            );
        }
    }

    #[test]
    fn pod_cgroup_dir_follows_each_controllers_own_path() {
        let proc = "4:memory:/process_api/abc\n2:cpu,cpuacct:/\n";
        assert_eq!(
            pod_cgroup_dir(proc, "memory", Qos::Burstable, "u").unwrap(),
            Path::new("/sys/fs/cgroup/memory/process_api/abc/berth/burstable/podu")
        );
        assert_eq!(
            pod_cgroup_dir(proc, "cpu", Qos::Guaranteed, "u").unwrap(),
            Path::new("/sys/fs/cgroup/cpu/berth/podu")
        );
        assert!(pod_cgroup_dir(proc, "pids", Qos::Guaranteed, "u").is_none());
    }

    #[test]
    fn pod_cgroups_nest_by_qos_under_berths_own_cgroup() {
        assert_eq!(pod_cgroup_parent(Qos::Guaranteed, "u-1"), "berth/podu-1");
        assert_eq!(
            pod_cgroup_parent(Qos::Burstable, "u-1"),
            "berth/burstable/podu-1"
        );
        assert_eq!(
            pod_cgroup_parent(Qos::BestEffort, "u-1"),
            "berth/besteffort/podu-1"
        );
        let proc = "9:name=systemd:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/\n0::/x\n";
        let root = Path::new("/nonexistent-cgroup-root");
        let dirs = pod_cgroup_dirs(root, proc, Qos::BestEffort, "u");
        let want: Vec<PathBuf> = [
            "systemd/berth/besteffort/podu",
            "memory/process_api/abc/berth/besteffort/podu",
            "cpu/berth/besteffort/podu",
            "cpuacct/berth/besteffort/podu",
            "x/berth/besteffort/podu",
        ]
        .iter()
        .map(|p| root.join(p))
        .collect();
        assert_eq!(dirs, want);
    }
}
