//! Resource use read from cgroup files, where CRI has none: pod cgroups
//! (containerd finds no memory for them, see `cri::stats`), containers' limits
//! and swap, and the node (the hierarchies' roots, as upstream's root
//! container "/").
//!
//! Everything hangs off [`CgroupFs`]'s two directories (`/sys/fs/cgroup` and
//! `/proc` on a real node), so tests lay a fake v1 or v2 tree out in a temp dir.
//! Figures follow cAdvisor's, which upstream's kubelet reports: the working set
//! is usage minus inactive file pages, RSS is `total_rss` (v1) or `anon` (v2),
//! page faults are the cgroup's own `pgfault`/`pgmajfault`, a limit above 2^62
//! is no limit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::{Qos, parse_proc_cgroup, pod_cgroup_parent};
use crate::runtime::{CpuUsage, MemoryUsage, SwapUsage};

/// Above this a limit means "unlimited" (the kernel rounds its maximum).
const UNLIMITED: u64 = 1 << 62;

/// One cgroup's counters at a moment; `None` where its files are missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupSample {
    pub cpu: Option<CpuUsage>,
    pub memory: Option<MemoryUsage>,
    pub swap: Option<SwapUsage>,
    /// Tasks in the cgroup (the pids controller's count).
    pub process_count: Option<u64>,
}

/// Which cgroup version a controller is mounted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hierarchy {
    V1,
    V2,
}

/// Where cgroups are mounted and where this process sits in them.
#[derive(Debug, Clone)]
pub struct CgroupFs {
    root: PathBuf,
    proc: PathBuf,
    /// This process's cgroup per v1 controller, and "" for the v2 tree.
    own: Vec<(String, String)>,
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn read_u64(path: &Path) -> Option<u64> {
    read(path)?.trim().parse().ok()
}

/// A v2 limit file: a number, or `max`.
fn read_limit(path: &Path) -> Option<u64> {
    read_u64(path).filter(|v| *v <= UNLIMITED)
}

/// `key value` lines (memory.stat, cpu.stat, /proc/vmstat).
pub fn parse_flat_keyed(text: &str) -> HashMap<&str, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?, it.next()?.parse().ok()?))
        })
        .collect()
}

/// `/proc/meminfo` in bytes (`MemTotal:  16 kB`).
pub fn parse_meminfo(text: &str) -> HashMap<&str, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, rest) = l.split_once(':')?;
            let mut it = rest.split_whitespace();
            let n: u64 = it.next()?.parse().ok()?;
            let scale = if it.next() == Some("kB") { 1024 } else { 1 };
            Some((k.trim(), n.saturating_mul(scale)))
        })
        .collect()
}

/// Busy CPU time from `/proc/stat`'s `cpu` line (user, nice, system, irq,
/// softirq, steal; not idle or iowait), in nanoseconds at `ticks_per_second`.
pub fn parse_proc_stat_cpu(text: &str, ticks_per_second: u64) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let busy: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|i| f.get(*i)).sum();
    Some(busy.saturating_mul(1_000_000_000) / ticks_per_second.max(1))
}

/// Usage minus inactive file pages, never below 0 (cAdvisor's working set).
fn working_set(usage: u64, inactive_file: Option<u64>) -> u64 {
    usage.saturating_sub(inactive_file.unwrap_or(0))
}

impl CgroupFs {
    /// `root` as `/sys/fs/cgroup`, `proc` as `/proc`, `proc_self_cgroup` the
    /// text of `/proc/self/cgroup`.
    pub fn new(root: &Path, proc: &Path, proc_self_cgroup: &str) -> Self {
        CgroupFs {
            root: root.to_path_buf(),
            proc: proc.to_path_buf(),
            own: parse_proc_cgroup(proc_self_cgroup),
        }
    }

    /// This machine's.
    pub fn system() -> Self {
        let own = read(Path::new("/proc/self/cgroup")).unwrap_or_default();
        Self::new(Path::new("/sys/fs/cgroup"), Path::new("/proc"), &own)
    }

    /// The v2 tree, if `controller` is enabled there (a hybrid machine's
    /// `unified` tree has none).
    fn v2_mount(&self, controller: &str) -> Option<PathBuf> {
        [self.root.join("unified"), self.root.clone()]
            .into_iter()
            .find(|m| m.join("cgroup.controllers").is_file())
            .filter(|m| {
                read(&m.join("cgroup.controllers"))
                    .is_some_and(|c| c.split_whitespace().any(|x| x == controller))
            })
    }

    /// The mount holding `controller` (v1 first: on a hybrid machine the
    /// controllers are there).
    fn mount(&self, controller: &str) -> Option<(PathBuf, Hierarchy)> {
        let v1 = self.root.join(controller);
        if v1.is_dir() && !v1.join("cgroup.controllers").exists() {
            return Some((v1, Hierarchy::V1));
        }
        self.v2_mount(controller).map(|m| (m, Hierarchy::V2))
    }

    /// The directory of `rel` (relative to this process's cgroup, as runc
    /// nests Berth's cgroup parents) in `controller`'s hierarchy.
    fn dir(&self, controller: &str, rel: &str) -> Option<(PathBuf, Hierarchy)> {
        let (mount, h) = self.mount(controller)?;
        let key = if h == Hierarchy::V1 { controller } else { "" };
        let own = self
            .own
            .iter()
            .find(|(c, _)| c == key)
            .map(|(_, p)| p.as_str())
            .unwrap_or("/");
        Some((mount.join(own.trim_start_matches('/')).join(rel), h))
    }

    /// The pod's cgroup, relative to Berth's, in whichever QoS class it exists.
    fn pod_rel(&self, uid: &str) -> Option<String> {
        [Qos::Guaranteed, Qos::Burstable, Qos::BestEffort]
            .into_iter()
            .map(|q| pod_cgroup_parent(q, uid))
            .find(|rel| {
                ["memory", "cpu"]
                    .iter()
                    .any(|c| self.dir(c, rel).is_some_and(|(d, _)| d.is_dir()))
            })
    }

    /// A pod's cgroup (all its containers and the sandbox).
    pub fn pod(&self, uid: &str, now: DateTime<Utc>) -> Option<CgroupSample> {
        let rel = self.pod_rel(uid)?;
        Some(self.sample(&rel, now))
    }

    /// A container's cgroup: `<pod cgroup>/<container id>`, as containerd
    /// names it with the cgroupfs driver.
    pub fn container(&self, uid: &str, id: &str, now: DateTime<Utc>) -> Option<CgroupSample> {
        let rel = format!("{}/{id}", self.pod_rel(uid)?);
        Some(self.sample(&rel, now))
    }

    fn sample(&self, rel: &str, now: DateTime<Utc>) -> CgroupSample {
        let cpu = self
            .dir("cpuacct", rel)
            .filter(|(_, h)| *h == Hierarchy::V1)
            .or_else(|| self.dir("cpu", rel))
            .and_then(|(d, h)| cpu_usage(&d, h, now));
        let (memory, swap) = match self.dir("memory", rel) {
            Some((d, h)) => (memory_usage(&d, h, now), swap_usage(&d, h, now)),
            None => (None, None),
        };
        let process_count = self
            .dir("pids", rel)
            .and_then(|(d, _)| read_u64(&d.join("pids.current")));
        CgroupSample {
            cpu,
            memory,
            swap,
            process_count,
        }
    }

    /// The node: the hierarchies' roots (not Berth's own cgroup), with
    /// `/proc` where a v2 root lacks the files.
    pub fn node(&self, now: DateTime<Utc>) -> CgroupSample {
        let cpu = match self.mount("cpuacct").or_else(|| self.mount("cpu")) {
            Some((d, h)) => cpu_usage(&d, h, now),
            None => None,
        }
        .or_else(|| {
            let ns = parse_proc_stat_cpu(&read(&self.proc.join("stat"))?, clock_ticks())?;
            Some(CpuUsage {
                timestamp: now,
                usage_core_nano_seconds: ns,
            })
        });
        let meminfo = read(&self.proc.join("meminfo")).unwrap_or_default();
        let meminfo = parse_meminfo(&meminfo);
        match self.mount("memory") {
            Some((d, Hierarchy::V1)) => CgroupSample {
                cpu,
                memory: memory_usage(&d, Hierarchy::V1, now),
                swap: swap_usage(&d, Hierarchy::V1, now),
                process_count: None,
            },
            // The v2 root has no memory.current: runc reads /proc/meminfo.
            _ => CgroupSample {
                cpu,
                memory: meminfo_usage(&meminfo, &self.root, now),
                swap: meminfo_swap(&meminfo, now),
                process_count: None,
            },
        }
    }
}

/// Clock ticks per second for `/proc/stat` (USER_HZ).
fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

fn cpu_usage(dir: &Path, h: Hierarchy, now: DateTime<Utc>) -> Option<CpuUsage> {
    let ns = match h {
        Hierarchy::V1 => read_u64(&dir.join("cpuacct.usage"))?,
        Hierarchy::V2 => {
            let text = read(&dir.join("cpu.stat"))?;
            parse_flat_keyed(&text)
                .get("usage_usec")?
                .saturating_mul(1000)
        }
    };
    Some(CpuUsage {
        timestamp: now,
        usage_core_nano_seconds: ns,
    })
}

fn memory_usage(dir: &Path, h: Hierarchy, now: DateTime<Utc>) -> Option<MemoryUsage> {
    let (usage, limit, inactive_key, rss_key) = match h {
        Hierarchy::V1 => (
            read_u64(&dir.join("memory.usage_in_bytes"))?,
            read_limit(&dir.join("memory.limit_in_bytes")),
            "total_inactive_file",
            "total_rss",
        ),
        Hierarchy::V2 => (
            read_u64(&dir.join("memory.current"))?,
            read_limit(&dir.join("memory.max")),
            "inactive_file",
            "anon",
        ),
    };
    let stat_text = read(&dir.join("memory.stat")).unwrap_or_default();
    let stat = parse_flat_keyed(&stat_text);
    let ws = working_set(usage, stat.get(inactive_key).copied());
    Some(MemoryUsage {
        timestamp: now,
        working_set_bytes: ws,
        available_bytes: limit.map(|l| l.saturating_sub(ws)),
        usage_bytes: Some(usage),
        rss_bytes: stat.get(rss_key).copied(),
        page_faults: stat.get("pgfault").copied(),
        major_page_faults: stat.get("pgmajfault").copied(),
    })
}

/// Swap in use: v1 counts memory+swap (memsw) beside memory; v2 has its own
/// file. Absent without swap accounting. The available figure is the limit
/// minus the swap in use, as cAdvisor computes it from memsw's limit on v1.
fn swap_usage(dir: &Path, h: Hierarchy, now: DateTime<Utc>) -> Option<SwapUsage> {
    let (used, limit) = match h {
        Hierarchy::V1 => {
            let memsw = read_u64(&dir.join("memory.memsw.usage_in_bytes"))?;
            let mem = read_u64(&dir.join("memory.usage_in_bytes"))?;
            (
                memsw.saturating_sub(mem),
                read_limit(&dir.join("memory.memsw.limit_in_bytes")),
            )
        }
        Hierarchy::V2 => (
            read_u64(&dir.join("memory.swap.current"))?,
            read_limit(&dir.join("memory.swap.max")),
        ),
    };
    Some(SwapUsage {
        timestamp: now,
        swap_usage_bytes: used,
        swap_available_bytes: limit.map(|l| l.saturating_sub(used)),
    })
}

/// The node's memory from /proc/meminfo (a v2 root), with the root's
/// memory.stat for RSS and page faults where the kernel has one.
fn meminfo_usage(
    meminfo: &HashMap<&str, u64>,
    v2_root: &Path,
    now: DateTime<Utc>,
) -> Option<MemoryUsage> {
    let usage = meminfo
        .get("MemTotal")?
        .saturating_sub(*meminfo.get("MemFree")?);
    let stat_text = read(&v2_root.join("memory.stat")).unwrap_or_default();
    let stat = parse_flat_keyed(&stat_text);
    Some(MemoryUsage {
        timestamp: now,
        working_set_bytes: working_set(usage, meminfo.get("Inactive(file)").copied()),
        available_bytes: None,
        usage_bytes: Some(usage),
        rss_bytes: stat.get("anon").copied(),
        page_faults: stat.get("pgfault").copied(),
        major_page_faults: stat.get("pgmajfault").copied(),
    })
}

fn meminfo_swap(meminfo: &HashMap<&str, u64>, now: DateTime<Utc>) -> Option<SwapUsage> {
    let total = *meminfo.get("SwapTotal")?;
    let used = total.saturating_sub(*meminfo.get("SwapFree")?);
    Some(SwapUsage {
        timestamp: now,
        swap_usage_bytes: used,
        swap_available_bytes: Some(total - used),
    })
}

#[cfg(test)]
mod tests;
