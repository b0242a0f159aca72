//! The kubelet's eviction flags, on `berth server` and `berth agent` alike
//! (upstream's names and defaults).

use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use berth_kubelet::eviction::signals::{parse_go_duration, parse_map};
use berth_kubelet::eviction::{EvictionFlags, Settings};
use berth_kubelet::node::EvictionThreshold;

#[derive(clap::Args, Debug, Clone)]
pub struct EvictionArgs {
    /// Hard eviction thresholds: a pod is killed at once when one is met.
    #[arg(
        long,
        default_value = "memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%"
    )]
    pub eviction_hard: String,
    /// Soft eviction thresholds, e.g. `memory.available<1.5Gi`; each needs a grace period.
    #[arg(long, default_value = "")]
    pub eviction_soft: String,
    /// How long each soft threshold must hold before pods are evicted, e.g. `memory.available=1m30s`.
    #[arg(long, default_value = "")]
    pub eviction_soft_grace_period: String,
    /// Longest grace period (seconds) a pod evicted for a soft threshold gets.
    #[arg(long, default_value_t = 0)]
    pub eviction_max_pod_grace_period: i64,
    /// Resources an eviction must reclaim beyond the threshold, e.g. `memory.available=0Mi,nodefs.available=500Mi`.
    #[arg(long, default_value = "")]
    pub eviction_minimum_reclaim: String,
    /// How long a pressure condition stays after its threshold is no longer met.
    #[arg(long, default_value = "5m0s")]
    pub eviction_pressure_transition_period: String,
}

impl EvictionArgs {
    /// The kubelet's eviction settings, validated as upstream's.
    pub fn settings(&self) -> Result<Settings> {
        let pressure_transition_period =
            parse_go_duration(&self.eviction_pressure_transition_period).ok_or_else(|| {
                anyhow!(
                    "--eviction-pressure-transition-period: invalid duration {:?}",
                    self.eviction_pressure_transition_period
                )
            })?;
        let s = Settings {
            flags: EvictionFlags {
                hard: EvictionThreshold::parse_list(&self.eviction_hard)
                    .context("--eviction-hard")?,
                soft: EvictionThreshold::parse_list(&self.eviction_soft)
                    .context("--eviction-soft")?,
                soft_grace_period: parse_map(&self.eviction_soft_grace_period)
                    .context("--eviction-soft-grace-period")?,
                minimum_reclaim: parse_map(&self.eviction_minimum_reclaim)
                    .context("--eviction-minimum-reclaim")?,
            },
            max_pod_grace_period: Duration::from_secs(u64::try_from(
                self.eviction_max_pod_grace_period.max(0),
            )?),
            pressure_transition_period,
            ..Settings::default()
        };
        // Checked here so a bad flag stops the command, not the agent later.
        s.config()?;
        Ok(s)
    }
}
