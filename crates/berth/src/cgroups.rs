//! The kubelet's cgroup and node allocatable flags, on `berth server` and
//! `berth agent` alike (upstream's names and defaults).

use anyhow::{Context, Result};
use berth_kubelet::cgroups::CgroupsConfig;

#[derive(clap::Args, Debug, Clone)]
pub struct CgroupArgs {
    /// Create the QoS and pod cgroup hierarchy (the root `berth`, `burstable`,
    /// `besteffort`, `pod<uid>`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub cgroups_per_qos: bool,
    /// The cgroup driver: only `cgroupfs` is implemented (`systemd` is refused).
    #[arg(long, default_value = "cgroupfs")]
    pub cgroup_driver: String,
    /// Maximum number of processes in each pod (-1: unlimited).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub pod_max_pids: i64,
    /// Levels of node allocatable enforcement: `pods`, `kube-reserved`,
    /// `system-reserved` (and their `-compressible` forms), or `none`.
    #[arg(long, default_value = "pods", value_delimiter = ',')]
    pub enforce_node_allocatable: Vec<String>,
    /// Resources reserved for Kubernetes system daemons, e.g. `cpu=500m,memory=1Gi,pid=1000`.
    #[arg(long, default_value = "")]
    pub kube_reserved: String,
    /// Resources reserved for non-Kubernetes system daemons, e.g. `cpu=500m,memory=1Gi`.
    #[arg(long, default_value = "")]
    pub system_reserved: String,
    /// The existing cgroup kube-reserved is enforced on (`kube-reserved` in
    /// --enforce-node-allocatable), relative to the cgroup Berth started in.
    #[arg(long, default_value = "")]
    pub kube_reserved_cgroup: String,
    /// The existing cgroup system-reserved is enforced on.
    #[arg(long, default_value = "")]
    pub system_reserved_cgroup: String,
}

impl CgroupArgs {
    /// The kubelet's configuration from the flags, validated as upstream's.
    pub fn config(&self) -> Result<CgroupsConfig> {
        let mut c = CgroupsConfig {
            cgroups_per_qos: self.cgroups_per_qos,
            cgroup_driver: self.cgroup_driver.clone(),
            ..Default::default()
        };
        c.pods.pod_pids_limit = self.pod_max_pids;
        let a = &mut c.allocatable;
        a.enforce = self
            .enforce_node_allocatable
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        a.kube_reserved =
            berth_kubelet::node::parse_resources(&self.kube_reserved).context("--kube-reserved")?;
        a.system_reserved = berth_kubelet::node::parse_resources(&self.system_reserved)
            .context("--system-reserved")?;
        a.kube_reserved_cgroup = self.kube_reserved_cgroup.clone();
        a.system_reserved_cgroup = self.system_reserved_cgroup.clone();
        c.validate().map_err(anyhow::Error::msg)?;
        Ok(c)
    }
}
