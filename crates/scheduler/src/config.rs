//! `KubeSchedulerConfiguration` (kubescheduler.config.k8s.io/v1): the parts
//! the built-in plugins use, with upstream's defaults.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::Error;

pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerConfig {
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    /// Empty means one `default-scheduler` profile with the default plugins.
    #[serde(default)]
    pub profiles: Vec<Profile>,
    /// Share of nodes to find feasible before scoring; 0 or absent means
    /// upstream's adaptive default (50% − nodes/125, at least 5%).
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<u32>,
    /// Threads filtering nodes (upstream default 16; capped by the CPUs here).
    #[serde(default)]
    pub parallelism: Option<usize>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    #[serde(default)]
    pub scheduler_name: Option<String>,
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<u32>,
    #[serde(default)]
    pub plugins: Option<Plugins>,
    #[serde(default)]
    pub plugin_config: Vec<PluginConfig>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plugins {
    pub queue_sort: Option<PluginSet>,
    pub pre_filter: Option<PluginSet>,
    pub filter: Option<PluginSet>,
    pub post_filter: Option<PluginSet>,
    pub pre_score: Option<PluginSet>,
    pub score: Option<PluginSet>,
    pub reserve: Option<PluginSet>,
    pub permit: Option<PluginSet>,
    pub pre_bind: Option<PluginSet>,
    pub bind: Option<PluginSet>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct PluginSet {
    #[serde(default)]
    pub enabled: Vec<PluginRef>,
    #[serde(default)]
    pub disabled: Vec<PluginRef>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct PluginRef {
    pub name: String,
    #[serde(default)]
    pub weight: Option<i64>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct PluginConfig {
    pub name: String,
    #[serde(default)]
    pub args: serde_json::Value,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum ScoringStrategyType {
    #[default]
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct ResourceSpec {
    pub name: String,
    #[serde(default = "one")]
    pub weight: i64,
}

fn one() -> i64 {
    1
}

impl ResourceSpec {
    /// Upstream's default: cpu and memory, weight 1 each.
    pub fn cpu_memory() -> Vec<ResourceSpec> {
        ["cpu", "memory"]
            .into_iter()
            .map(|n| ResourceSpec {
                name: n.into(),
                weight: 1,
            })
            .collect()
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct UtilizationShapePoint {
    pub utilization: i64,
    pub score: i64,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct RequestedToCapacityRatioParam {
    #[serde(default)]
    pub shape: Vec<UtilizationShapePoint>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ScoringStrategy {
    #[serde(rename = "type", default)]
    pub type_: ScoringStrategyType,
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
    #[serde(default)]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

impl ScoringStrategy {
    pub fn effective_resources(&self) -> Vec<ResourceSpec> {
        if self.resources.is_empty() {
            ResourceSpec::cpu_memory()
        } else {
            self.resources.clone()
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResourcesFitArgs {
    #[serde(default)]
    pub ignored_resources: Vec<String>,
    #[serde(default)]
    pub scoring_strategy: Option<ScoringStrategy>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BalancedAllocationArgs {
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
}

impl SchedulerConfig {
    /// Parses a KubeSchedulerConfiguration YAML document.
    pub fn from_yaml(yaml: &str) -> Result<Self, Error> {
        let cfg: SchedulerConfig =
            serde_saphyr::from_str(yaml).map_err(|e| Error::Config(e.to_string()))?;
        if let Some(v) = cfg.api_version.as_deref()
            && v != "kubescheduler.config.k8s.io/v1"
        {
            return Err(Error::Config(format!("unsupported apiVersion {v:?}")));
        }
        Ok(cfg)
    }

    /// Upstream's parallelism (default 16), never more than the machine's CPUs.
    pub fn effective_parallelism(&self) -> usize {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        self.parallelism.unwrap_or(16).clamp(1, cpus)
    }

    /// The profiles, with the implicit default one when none is given.
    pub fn effective_profiles(&self) -> Vec<Profile> {
        if self.profiles.is_empty() {
            vec![Profile::default()]
        } else {
            self.profiles.clone()
        }
    }
}

impl Profile {
    pub fn scheduler_name(&self) -> &str {
        self.scheduler_name
            .as_deref()
            .unwrap_or(DEFAULT_SCHEDULER_NAME)
    }

    /// A plugin's `args` decoded into its typed form; absent means defaults.
    pub fn args<T: for<'de> Deserialize<'de> + Default>(&self, plugin: &str) -> Result<T, Error> {
        match self.plugin_config.iter().find(|c| c.name == plugin) {
            Some(c) if !c.args.is_null() => serde_json::from_value(c.args.clone())
                .map_err(|e| Error::Config(format!("{plugin} args: {e}"))),
            _ => Ok(T::default()),
        }
    }
}

/// Applies a profile's enabled/disabled lists to one extension point's
/// defaults: `*` in disabled drops every default; enabled plugins follow
/// the remaining defaults (a re-enabled default moves to its new place).
pub fn merge_plugins(defaults: &[(&str, i64)], set: Option<&PluginSet>) -> Vec<(String, i64)> {
    let Some(set) = set else {
        return defaults.iter().map(|(n, w)| (n.to_string(), *w)).collect();
    };
    let disabled_all = set.disabled.iter().any(|d| d.name == "*");
    let mut out: Vec<(String, i64)> = defaults
        .iter()
        .filter(|(n, _)| !disabled_all && !set.disabled.iter().any(|d| d.name == *n))
        .filter(|(n, _)| !set.enabled.iter().any(|e| e.name == *n))
        .map(|(n, w)| (n.to_string(), *w))
        .collect();
    let default_weight: BTreeMap<&str, i64> = defaults.iter().copied().collect();
    for e in &set.enabled {
        let w = e
            .weight
            .unwrap_or_else(|| default_weight.get(e.name.as_str()).copied().unwrap_or(1));
        out.push((e.name.clone(), w));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_upstream_yaml() {
        let yaml = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
    plugins:
      score:
        disabled:
          - name: NodeResourcesBalancedAllocation
        enabled:
          - name: NodeResourcesFit
            weight: 5
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
            resources:
              - name: cpu
                weight: 2
              - name: memory
  - schedulerName: bin-packer
    percentageOfNodesToScore: 30
percentageOfNodesToScore: 20
parallelism: 4
"#;
        let cfg = SchedulerConfig::from_yaml(yaml).unwrap();
        assert_eq!(cfg.profiles.len(), 2);
        let p = &cfg.profiles[0];
        let args: NodeResourcesFitArgs = p.args("NodeResourcesFit").unwrap();
        let s = args.scoring_strategy.unwrap();
        assert_eq!(s.type_, ScoringStrategyType::MostAllocated);
        assert_eq!(
            s.resources,
            vec![
                ResourceSpec {
                    name: "cpu".into(),
                    weight: 2
                },
                ResourceSpec {
                    name: "memory".into(),
                    weight: 1
                }
            ]
        );
        let score = merge_plugins(
            &[
                ("TaintToleration", 3),
                ("NodeAffinity", 2),
                ("NodeResourcesFit", 1),
                ("NodeResourcesBalancedAllocation", 1),
            ],
            p.plugins.as_ref().and_then(|p| p.score.as_ref()),
        );
        assert_eq!(
            score,
            vec![
                ("TaintToleration".to_string(), 3),
                ("NodeAffinity".to_string(), 2),
                ("NodeResourcesFit".to_string(), 5)
            ]
        );
        assert_eq!(cfg.profiles[1].scheduler_name(), "bin-packer");
        assert_eq!(cfg.profiles[1].percentage_of_nodes_to_score, Some(30));
        assert_eq!(cfg.percentage_of_nodes_to_score, Some(20));
        assert!(cfg.effective_parallelism() >= 1 && cfg.effective_parallelism() <= 4);
    }

    #[test]
    fn rejects_other_versions() {
        assert!(
            SchedulerConfig::from_yaml("apiVersion: kubescheduler.config.k8s.io/v1beta1\n")
                .is_err()
        );
    }
}
