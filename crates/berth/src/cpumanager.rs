//! The kubelet's CPU Manager flags, on `berth server` and `berth agent`
//! alike (upstream's names and defaults).

use anyhow::{Result, anyhow, bail};
use berth_kubelet::cgroups::CgroupsConfig;
use berth_kubelet::cm::cpumanager::{CpuManagerConfig, CpuSet};
use berth_kubelet::eviction::signals::parse_go_duration;

#[derive(clap::Args, Debug, Clone)]
pub struct CpuManagerArgs {
    /// The CPU Manager policy: `none`, or `static` (exclusive CPUs for
    /// containers of Guaranteed pods with integer CPU requests).
    #[arg(long, default_value = "none")]
    pub cpu_manager_policy: String,
    /// Options of the static policy, e.g. `full-pcpus-only=true`.
    #[arg(long, default_value = "", value_delimiter = ',')]
    pub cpu_manager_policy_options: Vec<String>,
    /// How often container cpusets are brought in line with the CPU Manager's state.
    #[arg(long, default_value = "10s")]
    pub cpu_manager_reconcile_period: String,
    /// CPUs (a Linux list, e.g. `0-1`) reserved for system and Kubernetes
    /// daemons; overrides the CPU of --kube-reserved and --system-reserved.
    #[arg(long, default_value = "")]
    pub reserved_cpus: String,
}

impl CpuManagerArgs {
    /// The CPU Manager's configuration; `cgroups` gets upstream's override
    /// of kube-reserved and system-reserved CPU by `--reserved-cpus`.
    pub fn config(&self, cgroups: &mut CgroupsConfig) -> Result<CpuManagerConfig> {
        let mut c = CpuManagerConfig {
            policy: self.cpu_manager_policy.clone(),
            ..Default::default()
        };
        if !["none", "static"].contains(&c.policy.as_str()) {
            bail!("--cpu-manager-policy: unknown policy: {:?}", c.policy);
        }
        for opt in self.cpu_manager_policy_options.iter().map(|s| s.trim()) {
            if opt.is_empty() {
                continue;
            }
            let (name, value) = opt.split_once('=').unwrap_or((opt, "true"));
            let on: bool = value.parse().map_err(|_| {
                anyhow!("--cpu-manager-policy-options: {name}: invalid value {value:?}")
            })?;
            match name {
                "full-pcpus-only" => c.full_pcpus_only = on,
                _ => bail!(
                    "--cpu-manager-policy-options: unsupported cpumanager option: {name:?} ({name})"
                ),
            }
        }
        if c.full_pcpus_only && c.policy != "static" {
            bail!("--cpu-manager-policy-options: options are only supported by the static policy");
        }
        c.reconcile_period = parse_go_duration(&self.cpu_manager_reconcile_period)
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                anyhow!(
                    "--cpu-manager-reconcile-period: invalid duration {:?}",
                    self.cpu_manager_reconcile_period
                )
            })?;
        let a = &mut cgroups.allocatable;
        if !self.reserved_cpus.trim().is_empty() {
            let set: CpuSet = self
                .reserved_cpus
                .parse()
                .map_err(|e| anyhow!("--reserved-cpus: {e}"))?;
            // Upstream: the list overrides the CPU of both reservations.
            a.kube_reserved.remove("cpu");
            let count = berth_kubelet::node::parse_resources(&format!("cpu={}", set.len()))
                .map_err(|e| anyhow!("--reserved-cpus: {e}"))?;
            a.system_reserved.extend(count);
            c.reserved_cpus = Some(set);
        }
        c.reserved_cpu_millis = ["cpu"]
            .iter()
            .flat_map(|k| [a.kube_reserved.get(*k), a.system_reserved.get(*k)])
            .flatten()
            .map(|q| q.milli_value())
            .sum();
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        cpu: CpuManagerArgs,
    }

    fn config(
        args: &[&str],
        kube_reserved_cpu: Option<&str>,
    ) -> Result<(CpuManagerConfig, CgroupsConfig)> {
        let mut all = vec!["berth"];
        all.extend_from_slice(args);
        let mut cg = CgroupsConfig::default();
        if let Some(q) = kube_reserved_cpu {
            cg.allocatable.kube_reserved =
                berth_kubelet::node::parse_resources(&format!("cpu={q}")).unwrap();
        }
        let c = Cli::try_parse_from(all)?.cpu.config(&mut cg)?;
        Ok((c, cg))
    }

    #[test]
    fn flags_default_validate_and_override_reserved_cpu_as_upstream() {
        let (c, _) = config(&[], None).unwrap();
        assert_eq!(c, CpuManagerConfig::default());
        let (c, cg) = config(
            &["--cpu-manager-policy", "static", "--reserved-cpus", "0,2"],
            Some("500m"),
        )
        .unwrap();
        assert_eq!(
            c.reserved_cpus.as_ref().map(ToString::to_string).as_deref(),
            Some("0,2")
        );
        assert_eq!(c.reserved_cpu_millis, 2000);
        assert!(!cg.allocatable.kube_reserved.contains_key("cpu"));
        let (c, _) = config(&["--cpu-manager-policy", "static"], Some("1500m")).unwrap();
        assert_eq!((c.reserved_cpus, c.reserved_cpu_millis), (None, 1500));
        let (c, _) = config(
            &[
                "--cpu-manager-policy",
                "static",
                "--cpu-manager-policy-options",
                "full-pcpus-only=true",
            ],
            None,
        )
        .unwrap();
        assert!(c.full_pcpus_only);
        for (args, want) in [
            (vec!["--cpu-manager-policy", "dynamic"], "unknown policy"),
            (
                vec![
                    "--cpu-manager-policy",
                    "static",
                    "--cpu-manager-policy-options",
                    "distribute-cpus-across-numa=true",
                ],
                "unsupported cpumanager option",
            ),
            (
                vec!["--cpu-manager-policy-options", "full-pcpus-only=true"],
                "only supported by the static policy",
            ),
            (vec!["--reserved-cpus", "3-1"], "--reserved-cpus"),
            (
                vec!["--cpu-manager-reconcile-period", "soon"],
                "invalid duration",
            ),
        ] {
            let err = config(&args, None).unwrap_err().to_string();
            assert!(err.contains(want), "{args:?}: {err}");
        }
    }
}
