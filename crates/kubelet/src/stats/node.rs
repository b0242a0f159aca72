//! The node's stats: the root cgroup (upstream's "/" container), the node and
//! image filesystems, the host's network and task limits.

use std::path::Path;

use chrono::{DateTime, Utc};

use super::convert;
use super::cpu::NanoCoresCache;
use super::summary::{FsStats, MemoryStats, NodeStats, RlimitStats, RuntimeStats};
use super::{StatsProvider, SummaryOptions, rate};
use crate::runtime::FsUsage;

pub(super) fn build(
    p: &StatsProvider,
    image_fs: &[FsUsage],
    opts: SummaryOptions,
    cache: &mut NanoCoresCache,
    now: DateTime<Utc>,
) -> NodeStats {
    let root = p.cgroups.node(now);
    let mut node = NodeStats {
        node_name: p.cfg.node_name.clone(),
        // Upstream's node start time is the boot time.
        start_time: p.host.boot_time(),
        cpu: root
            .cpu
            .map(|s| convert::cpu(&s, rate(cache, opts, "node", &s))),
        memory: root.memory.map(|m| MemoryStats {
            // The root's limit is the machine's memory.
            available_bytes: (p.cfg.memory_capacity > 0)
                .then(|| p.cfg.memory_capacity.saturating_sub(m.working_set_bytes)),
            ..convert::memory(&m)
        }),
        swap: root.swap.map(|s| convert::swap(&s)),
        ..Default::default()
    };
    if opts.only_cpu_and_memory {
        return node;
    }
    node.network = p.host.network(now).map(|n| convert::network(&n, now));
    node.fs = p.fs.capacity(&p.cfg.root_dir).map(|c| {
        convert::fs(
            now,
            Some(c),
            Some(c.used_bytes),
            Some(c.inodes.saturating_sub(c.inodes_free)),
        )
    });
    // CRI may name several image filesystems; upstream reports the first, and
    // the same for the writable layers (no separate container filesystem yet).
    let image = image_fs.first().map(|f| image_fs_stats(p, f, now));
    node.runtime = Some(RuntimeStats {
        image_fs: image.clone(),
        container_fs: image,
    });
    let r = p.host.rlimit();
    node.rlimit = Some(RlimitStats {
        time: Some(now),
        max_pid: r.max_pid,
        num_of_running_processes: r.running,
    });
    node
}

fn image_fs_stats(p: &StatsProvider, f: &FsUsage, now: DateTime<Utc>) -> FsStats {
    let capacity = (!f.mountpoint.is_empty())
        .then(|| p.fs.capacity(Path::new(&f.mountpoint)))
        .flatten();
    convert::fs(
        f.timestamp.unwrap_or(now),
        capacity,
        f.used_bytes,
        f.inodes_used,
    )
}
