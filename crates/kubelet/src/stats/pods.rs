//! Pod and container stats (upstream's `listPodStatsPartiallyFromCRI` and
//! `ListPodCPUAndMemoryStats`, with the cgroup files where it reads cAdvisor).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use chrono::{DateTime, Utc};

use super::convert::{self, add};
use super::cpu::NanoCoresCache;
use super::summary::{
    ContainerStats, CpuStats, FsStats, MemoryStats, PodReference, PodStats, ProcessStats,
    SwapStats, VolumeStats,
};
use super::{StatsProvider, SummaryOptions, rate};
use crate::runtime::{
    ContainerState, ContainerStats as RuntimeContainerStats, ContainerStatus, SandboxState,
    SandboxStats, SandboxStatus,
};

/// Volume plugins whose use counts as the pod's ephemeral storage (upstream's
/// IsLocalEphemeralVolume: emptyDir on disk, configMap).
const EPHEMERAL_PLUGINS: [&str; 2] = ["kubernetes.io~empty-dir", "kubernetes.io~configmap"];

/// What the runtime listed, for one summary.
pub(super) struct Input<'a> {
    pub containers: &'a [ContainerStatus],
    pub sandboxes: &'a [SandboxStatus],
    pub container_stats: &'a [RuntimeContainerStats],
    pub sandbox_stats: &'a [SandboxStats],
}

/// The sandboxes to report (upstream's removeTerminatedPods): per pod name,
/// the ready ones, or the newest when none is ready.
fn live_sandboxes(all: &[SandboxStatus]) -> HashMap<&str, &SandboxStatus> {
    let mut by_pod: BTreeMap<(&str, &str), Vec<&SandboxStatus>> = BTreeMap::new();
    for s in all {
        by_pod
            .entry((s.namespace.as_str(), s.name.as_str()))
            .or_default()
            .push(s);
    }
    let mut out = HashMap::new();
    for (_, mut list) in by_pod {
        list.sort_by_key(|s| s.created_at);
        let ready: Vec<&SandboxStatus> = list
            .iter()
            .copied()
            .filter(|s| s.state == SandboxState::Ready)
            .collect();
        let keep = if list.len() == 1 || ready.is_empty() {
            list.last().copied().into_iter().collect()
        } else {
            ready
        };
        out.extend(keep.into_iter().map(|s| (s.id.as_str(), s)));
    }
    out
}

/// One pod being assembled: its summary and what its containers add up to.
struct Pod<'a> {
    sandbox: &'a SandboxStatus,
    stats: PodStats,
    processes: Option<u64>,
    swaps: Vec<SwapStats>,
}

pub(super) fn build(
    p: &StatsProvider,
    input: &Input,
    opts: SummaryOptions,
    cache: &mut NanoCoresCache,
    now: DateTime<Utc>,
) -> Vec<PodStats> {
    let sandboxes = live_sandboxes(input.sandboxes);
    let running: HashMap<&str, &ContainerStatus> = input
        .containers
        .iter()
        .filter(|c| c.state == ContainerState::Running)
        .map(|c| (c.id.as_str(), c))
        .collect();
    let mut pods: BTreeMap<&str, Pod> = BTreeMap::new();
    for cs in input.container_stats {
        let Some(c) = running.get(cs.id.as_str()) else {
            continue;
        };
        let Some(sb) = sandboxes.get(c.sandbox_id.as_str()) else {
            continue;
        };
        let pod = pods.entry(sb.id.as_str()).or_insert_with(|| Pod {
            sandbox: sb,
            stats: PodStats {
                pod_ref: PodReference {
                    name: sb.name.clone(),
                    namespace: sb.namespace.clone(),
                    uid: sb.uid.clone(),
                },
                start_time: sb.created_at,
                ..Default::default()
            },
            processes: None,
            swaps: Vec::new(),
        });
        container(p, pod, c, cs, opts, cache, now);
    }
    let sandbox_stats: HashMap<&str, &SandboxStats> = input
        .sandbox_stats
        .iter()
        .map(|s| (s.id.as_str(), s))
        .collect();
    let mut out: Vec<PodStats> = pods
        .into_values()
        .map(|pod| {
            let sandbox = sandbox_stats.get(pod.sandbox.id.as_str()).copied();
            finish(p, pod, sandbox, opts, cache, now)
        })
        .collect();
    out.sort_by(|a, b| a.pod_ref.cmp(&b.pod_ref));
    out
}

fn container(
    p: &StatsProvider,
    pod: &mut Pod,
    c: &ContainerStatus,
    cs: &RuntimeContainerStats,
    opts: SummaryOptions,
    cache: &mut NanoCoresCache,
    now: DateTime<Utc>,
) {
    let uid = pod.sandbox.uid.as_str();
    let cg = p.cgroups.container(uid, &cs.id, now);
    let key = format!("container/{}", cs.id);
    let cpu = match cs.cpu.or(cg.and_then(|g| g.cpu)) {
        Some(s) => convert::cpu(&s, rate(cache, opts, &key, &s)),
        None => convert::zero_cpu(now),
    };
    let memory = match (cs.memory, cg.and_then(|g| g.memory)) {
        // The runtime's figures, with the limit the cgroup has (containerd
        // cannot tell "no limit" from "at the limit").
        (Some(m), Some(g)) => MemoryStats {
            available_bytes: g.available_bytes.map(|a| {
                let limit = a.saturating_add(g.working_set_bytes);
                limit.saturating_sub(m.working_set_bytes)
            }),
            ..convert::memory(&m)
        },
        (Some(m), None) | (None, Some(m)) => convert::memory(&m),
        (None, None) => convert::zero_memory(now),
    };
    let name = if cs.name.is_empty() {
        &c.name
    } else {
        &cs.name
    };
    let mut stats = ContainerStats {
        name: name.clone(),
        start_time: c.created_at,
        cpu: Some(cpu),
        memory: Some(memory),
        ..Default::default()
    };
    if !opts.only_cpu_and_memory {
        let swap = match cs.swap.or(cg.and_then(|g| g.swap)) {
            Some(s) => convert::swap(&s),
            // Upstream's stand-in without swap figures.
            None => SwapStats {
                time: Some(now),
                swap_available_bytes: Some(0),
                swap_usage_bytes: Some(0),
            },
        };
        pod.swaps.push(swap.clone());
        stats.swap = Some(swap);
        stats.rootfs = Some(rootfs(p, cs, now));
        stats.logs = Some(logs(p, &pod.stats.pod_ref, name, now));
        pod.processes = add(pod.processes, cg.and_then(|g| g.process_count));
    }
    pod.stats.containers.push(stats);
}

/// The writable layer, on the filesystem the runtime names.
fn rootfs(p: &StatsProvider, cs: &RuntimeContainerStats, now: DateTime<Utc>) -> FsStats {
    let Some(w) = &cs.writable_layer else {
        // Upstream reports an empty rootfs rather than none.
        return FsStats::default();
    };
    let capacity = (!w.mountpoint.is_empty())
        .then(|| p.fs.capacity(Path::new(&w.mountpoint)))
        .flatten();
    convert::fs(
        w.timestamp.unwrap_or(now),
        capacity,
        w.used_bytes,
        w.inodes_used,
    )
}

/// The container's log directory, on the node filesystem.
fn logs(p: &StatsProvider, pod: &PodReference, container: &str, now: DateTime<Utc>) -> FsStats {
    let dir = p
        .cfg
        .logs_dir
        .join(format!("{}_{}_{}", pod.namespace, pod.name, pod.uid))
        .join(container);
    let usage = p.fs.usage(&dir).unwrap_or_default();
    convert::dir_fs(now, p.fs.capacity(&p.cfg.root_dir), usage)
}

/// The pod's figures: its cgroup's, else the sandbox's, else its containers'
/// summed (upstream's order: cAdvisor's pod cgroup, then the sum).
fn finish(
    p: &StatsProvider,
    mut pod: Pod,
    sandbox: Option<&SandboxStats>,
    opts: SummaryOptions,
    cache: &mut NanoCoresCache,
    now: DateTime<Utc>,
) -> PodStats {
    let uid = pod.sandbox.uid.clone();
    let cg = p.cgroups.pod(&uid, now);
    let key = format!("pod/{uid}");
    let cpu_sample = cg
        .and_then(|g| g.cpu)
        .or_else(|| sandbox.and_then(|s| s.cpu));
    pod.stats.cpu = Some(match cpu_sample {
        Some(s) => convert::cpu(&s, rate(cache, opts, &key, &s)),
        None => sum_cpu(&pod.stats.containers),
    });
    let memory = cg
        .and_then(|g| g.memory)
        .or_else(|| sandbox.and_then(|s| s.memory));
    pod.stats.memory = Some(match memory {
        Some(m) => convert::memory(&m),
        None => sum_memory(&pod.stats.containers),
    });
    if opts.only_cpu_and_memory {
        return pod.stats;
    }
    pod.stats.network = sandbox
        .and_then(|s| s.network.as_ref())
        .map(|n| convert::network(n, now));
    pod.stats.swap = match cg.and_then(|g| g.swap) {
        Some(s) => Some(convert::swap(&s)),
        None => sum_swap(&pod.swaps),
    };
    pod.stats.process_stats = pod.processes.map(|n| ProcessStats {
        process_count: Some(n),
    });
    let (volumes, ephemeral) = volumes(p, &uid, now);
    pod.stats.ephemeral_storage =
        Some(ephemeral_storage(p, &pod.stats.containers, &ephemeral, now));
    pod.stats.volume_stats = volumes;
    pod.stats
}

fn sum_cpu(containers: &[ContainerStats]) -> CpuStats {
    let mut out = CpuStats::default();
    for c in containers.iter().filter_map(|c| c.cpu.as_ref()) {
        out.time = c.time;
        out.usage_core_nano_seconds =
            Some(out.usage_core_nano_seconds.unwrap_or(0) + c.usage_core_nano_seconds.unwrap_or(0));
        out.usage_nano_cores =
            Some(out.usage_nano_cores.unwrap_or(0) + c.usage_nano_cores.unwrap_or(0));
    }
    out
}

fn sum_memory(containers: &[ContainerStats]) -> MemoryStats {
    let mut out = MemoryStats::default();
    let sum = |a: Option<u64>, b: Option<u64>| Some(a.unwrap_or(0) + b.unwrap_or(0));
    for m in containers.iter().filter_map(|c| c.memory.as_ref()) {
        out.time = m.time;
        out.available_bytes = sum(out.available_bytes, m.available_bytes);
        out.usage_bytes = sum(out.usage_bytes, m.usage_bytes);
        out.working_set_bytes = sum(out.working_set_bytes, m.working_set_bytes);
        out.rss_bytes = sum(out.rss_bytes, m.rss_bytes);
        out.page_faults = sum(out.page_faults, m.page_faults);
        out.major_page_faults = sum(out.major_page_faults, m.major_page_faults);
    }
    out
}

fn sum_swap(swaps: &[SwapStats]) -> Option<SwapStats> {
    swaps.iter().fold(None, |acc: Option<SwapStats>, s| {
        let acc = acc.unwrap_or(SwapStats {
            time: s.time,
            ..Default::default()
        });
        Some(SwapStats {
            time: acc.time,
            swap_available_bytes: Some(
                acc.swap_available_bytes.unwrap_or(0) + s.swap_available_bytes.unwrap_or(0),
            ),
            swap_usage_bytes: Some(
                acc.swap_usage_bytes.unwrap_or(0) + s.swap_usage_bytes.unwrap_or(0),
            ),
        })
    })
}

/// Every volume under the pod's directory, by name, and the ephemeral ones.
fn volumes(p: &StatsProvider, uid: &str, now: DateTime<Utc>) -> (Vec<VolumeStats>, Vec<FsStats>) {
    let base = p.cfg.pods_dir.join(uid).join("volumes");
    let mut all = Vec::new();
    let mut ephemeral = Vec::new();
    for plugin in p.fs.subdirs(&base) {
        for name in p.fs.subdirs(&base.join(&plugin)) {
            let dir = base.join(&plugin).join(&name);
            let Some(usage) = p.fs.usage(&dir) else {
                continue;
            };
            let fs = convert::dir_fs(now, p.fs.capacity(&dir), usage);
            if EPHEMERAL_PLUGINS.contains(&plugin.as_str()) {
                ephemeral.push(fs.clone());
            }
            all.push(VolumeStats { fs, name });
        }
    }
    all.sort_by(|a, b| a.name.cmp(&b.name));
    (all, ephemeral)
}

/// Upstream's calcEphemeralStorage: the node filesystem's size, with the
/// containers' writable layers and logs and the ephemeral volumes as use.
fn ephemeral_storage(
    p: &StatsProvider,
    containers: &[ContainerStats],
    volumes: &[FsStats],
    now: DateTime<Utc>,
) -> FsStats {
    let mut out = convert::fs(now, p.fs.capacity(&p.cfg.root_dir), None, None);
    let later = |a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>| a.max(b);
    for c in containers {
        let Some(r) = &c.rootfs else { continue };
        out.time = later(out.time, r.time);
        out.inodes_used = add(out.inodes_used, r.inodes_used);
        out.used_bytes = add(out.used_bytes, r.used_bytes);
        if let Some(l) = &c.logs {
            out.used_bytes = add(out.used_bytes, l.used_bytes);
            out.inodes_used = add(out.inodes_used, l.inodes_used);
            out.time = later(out.time, l.time);
        }
    }
    for v in volumes {
        out.used_bytes = add(out.used_bytes, v.used_bytes);
        out.inodes_used = add(out.inodes_used, v.inodes_used);
        out.time = later(out.time, v.time);
    }
    out
}
