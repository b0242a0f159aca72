//! The kubelet's Topology Manager flags, on `berth server` and `berth agent`
//! alike (upstream's names and defaults; no 8-NUMA-node limit unless
//! `max-allowable-numa-nodes` sets one).

use anyhow::{Result, anyhow, bail};
use berth_kubelet::cm::topologymanager::{PolicyOptions, TopologyManagerConfig};

const POLICIES: [&str; 4] = ["none", "best-effort", "restricted", "single-numa-node"];

#[derive(clap::Args, Debug, Clone)]
pub struct TopologyManagerArgs {
    /// NUMA alignment at pod admission: `none`, `best-effort`, `restricted`
    /// or `single-numa-node`.
    #[arg(long, default_value = "none")]
    pub topology_manager_policy: String,
    /// What is aligned together: `container` or `pod`.
    #[arg(long, default_value = "container")]
    pub topology_manager_scope: String,
    /// Policy options, e.g. `prefer-closest-numa-nodes=true,max-allowable-numa-nodes=8`.
    #[arg(long, default_value = "")]
    pub topology_manager_policy_options: String,
}

impl TopologyManagerArgs {
    pub fn config(&self) -> Result<TopologyManagerConfig> {
        let policy = self.topology_manager_policy.clone();
        if !POLICIES.contains(&policy.as_str()) {
            bail!("--topology-manager-policy: unknown policy: {policy:?}");
        }
        let scope = self
            .topology_manager_scope
            .parse()
            .map_err(|e| anyhow!("--topology-manager-scope: {e}"))?;
        let options = PolicyOptions::parse(&self.topology_manager_policy_options)
            .map_err(|e| anyhow!("--topology-manager-policy-options: {e}"))?;
        Ok(TopologyManagerConfig {
            policy,
            scope,
            options,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        topology: TopologyManagerArgs,
    }

    fn config(args: &[&str]) -> Result<TopologyManagerConfig> {
        let mut all = vec!["berth"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all)?.topology.config()
    }

    #[test]
    fn flags_default_and_validate_as_upstream() {
        assert_eq!(config(&[]).unwrap(), TopologyManagerConfig::default());
        let c = config(&[
            "--topology-manager-policy",
            "single-numa-node",
            "--topology-manager-scope",
            "pod",
            "--topology-manager-policy-options",
            "prefer-closest-numa-nodes=true",
        ])
        .unwrap();
        assert_eq!(c.policy, "single-numa-node");
        assert_eq!(c.scope.name(), "pod");
        assert!(c.options.prefer_closest_numa);
        for (args, want) in [
            (
                vec!["--topology-manager-policy", "strict"],
                "unknown policy",
            ),
            (vec!["--topology-manager-scope", "node"], "unknown scope"),
            (
                vec!["--topology-manager-policy-options", "fast=true"],
                "unknown Topology Manager Policy option",
            ),
        ] {
            let err = config(&args).unwrap_err().to_string();
            assert!(err.contains(want), "{args:?}: {err}");
        }
    }
}
