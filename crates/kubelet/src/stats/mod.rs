//! The node agent's stats provider, as upstream's kubelet builds the Summary
//! API (`pkg/kubelet/stats`, CRI stats provider with cAdvisor's figures): CRI
//! for containers (CPU, memory, writable layer) and sandboxes (network), the
//! cgroup files for what CRI lacks (pod CPU and memory, containers' limits and
//! swap, the node's root cgroup), statvfs and `du` for filesystems, `/proc`
//! for the rest of the node. usageNanoCores comes from two cumulative samples
//! ([`cpu`]).
//!
//! Only pods the runtime runs are reported: running containers in their pod's
//! sandbox (a pod recreated under the same name counts its ready sandbox).

mod convert;
pub mod cpu;
pub mod fs;
pub mod host;
mod node;
mod pods;
pub mod prometheus;
pub mod summary;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use berth_runtime::clock::{Clock, RealClock};
use chrono::{DateTime, Utc};

use crate::cgroups::stats::CgroupFs;
use crate::runtime::{Filter, Runtime, RuntimeError};
use cpu::NanoCoresCache;
use fs::{Filesystem, HostFilesystem};
use host::Host;
use summary::Summary;

/// What the provider measures for a node.
#[derive(Debug, Clone)]
pub struct StatsConfig {
    pub node_name: String,
    /// The agent's data dir (`<data-dir>/agent`): the node filesystem, as
    /// upstream's rootfs is the kubelet's root dir.
    pub root_dir: PathBuf,
    /// Pods' log directories (`<ns>_<name>_<uid>/<container>/`).
    pub logs_dir: PathBuf,
    /// Pods' directories (`<uid>/volumes/<plugin>/<volume>`).
    pub pods_dir: PathBuf,
    /// The machine's memory (MemTotal): the node's limit for availableBytes.
    pub memory_capacity: u64,
}

/// Why a summary could not be made (upstream's texts).
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error(
        "failed to list pod stats: failed to get pod or container map: failed to list all containers: {0}"
    )]
    ListContainers(RuntimeError),
    #[error(
        "failed to list pod stats: failed to get pod or container map: failed to list all pod sandboxes: {0}"
    )]
    ListSandboxes(RuntimeError),
    #[error("failed to list pod stats: failed to list all container stats: {0}")]
    ContainerStats(RuntimeError),
    #[error("failed to get imageFs stats: {0}")]
    ImageFs(RuntimeError),
}

/// Which summary to make.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SummaryOptions {
    /// CPU and memory only (`?only_cpu_and_memory=true`, metrics-server's).
    pub only_cpu_and_memory: bool,
    /// Take this summary's CPU samples as the new rate window (summary
    /// requests); otherwise report the kept rates (`/metrics/resource`, which
    /// only needs the cumulative counters).
    pub update_cpu: bool,
}

/// Builds summaries from the runtime, cgroups, filesystems and /proc.
pub struct StatsProvider {
    cfg: StatsConfig,
    runtime: Arc<dyn Runtime>,
    cgroups: CgroupFs,
    host: Host,
    fs: Arc<dyn Filesystem>,
    clock: Arc<dyn Clock>,
    cache: Mutex<NanoCoresCache>,
}

impl StatsProvider {
    /// A provider reading this machine's cgroups, filesystems and /proc.
    pub fn new(cfg: StatsConfig, runtime: Arc<dyn Runtime>) -> Self {
        StatsProvider {
            cfg,
            runtime,
            cgroups: CgroupFs::system(),
            host: Host::system(),
            fs: Arc::new(HostFilesystem),
            clock: Arc::new(RealClock),
            cache: Mutex::new(NanoCoresCache::default()),
        }
    }

    /// Replaces the machine's cgroups, /proc, filesystems and clock (tests).
    pub fn with_sources(
        mut self,
        cgroups: CgroupFs,
        host: Host,
        fs: Arc<dyn Filesystem>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        self.cgroups = cgroups;
        self.host = host;
        self.fs = fs;
        self.clock = clock;
        self
    }

    fn now(&self) -> DateTime<Utc> {
        let nanos = self.clock.now().as_nanosecond();
        DateTime::from_timestamp_nanos(i64::try_from(nanos).unwrap_or(i64::MAX))
    }

    /// The Summary (upstream's summaryProvider `Get`, or
    /// `GetCPUAndMemoryStats` with `only_cpu_and_memory`).
    pub async fn summary(&self, opts: SummaryOptions) -> Result<Summary, StatsError> {
        let all = Filter::default();
        let containers = self
            .runtime
            .list_containers(&all)
            .await
            .map_err(StatsError::ListContainers)?;
        let sandboxes = self
            .runtime
            .list_sandboxes(&all)
            .await
            .map_err(StatsError::ListSandboxes)?;
        let container_stats = self
            .runtime
            .list_container_stats()
            .await
            .map_err(StatsError::ContainerStats)?;
        // Without sandbox stats pods still have their cgroups' figures.
        let sandbox_stats = self.runtime.list_sandbox_stats().await.unwrap_or_else(|e| {
            tracing::debug!(error = %e, "listing pod sandbox stats");
            Vec::new()
        });
        let image_fs = if opts.only_cpu_and_memory {
            Vec::new()
        } else {
            self.runtime
                .image_fs_info()
                .await
                .map_err(StatsError::ImageFs)?
        };
        let now = self.now();
        // A poisoned cache only holds samples: still usable.
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let input = pods::Input {
            containers: &containers,
            sandboxes: &sandboxes,
            container_stats: &container_stats,
            sandbox_stats: &sandbox_stats,
        };
        let pods = pods::build(self, &input, opts, &mut cache, now);
        let node = node::build(self, &image_fs, opts, &mut cache, now);
        if opts.update_cpu {
            cache.expire(now);
        }
        Ok(Summary { node, pods })
    }
}

/// A rate for `key` from `sample`: updating the window or reading the kept one.
fn rate(
    cache: &mut NanoCoresCache,
    opts: SummaryOptions,
    key: &str,
    sample: &crate::runtime::CpuUsage,
) -> Option<u64> {
    if opts.update_cpu {
        cache.update(key, *sample)
    } else {
        cache.get(key)
    }
}

#[cfg(test)]
mod tests;
