//! NodeResourcesBalancedAllocation: favours nodes whose cpu and memory
//! fractions stay close to each other after placing the pod.

use crate::config::ResourceSpec;
use crate::framework::{CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo, Score, Status};

use super::resource_allocation::request_and_allocatable;

pub const NAME: &str = "NodeResourcesBalancedAllocation";

pub struct BalancedAllocation {
    pub resources: Vec<ResourceSpec>,
}

impl Default for BalancedAllocation {
    fn default() -> Self {
        Self {
            resources: ResourceSpec::cpu_memory(),
        }
    }
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl Score for BalancedAllocation {
    fn score(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let mut fractions = Vec::new();
        for r in &self.resources {
            // Actual requests, not the scoring defaults (upstream: useRequested).
            let (req, alloc) = request_and_allocatable(node, pod, &r.name, false);
            if alloc == 0 {
                continue;
            }
            fractions.push((req as f64 / alloc as f64).min(1.0));
        }
        let std = match fractions.len() {
            0 | 1 => 0.0,
            2 => (fractions[0] - fractions[1]).abs() / 2.0,
            n => {
                let mean = fractions.iter().sum::<f64>() / n as f64;
                (fractions.iter().map(|f| (f - mean).powi(2)).sum::<f64>() / n as f64).sqrt()
            }
        };
        Ok(((1.0 - std) * MAX_NODE_SCORE as f64) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::*;

    #[test]
    fn table() {
        let alloc = [("cpu", "4"), ("memory", "4Gi"), ("pods", "110")];
        // (pod cpu, pod memory, want)
        let cases = [
            ("1", "1Gi", 100),
            ("2", "0", 75),
            ("4", "0", 50),
            ("0", "4Gi", 50),
        ];
        for (cpu, mem, want) in cases {
            let p = PodInfo::new(pod("p", &[&[("cpu", cpu), ("memory", mem)]]));
            let n = node_info(node("n", &alloc), vec![]);
            assert_eq!(
                BalancedAllocation::default()
                    .score(&CycleState::default(), &p, &n)
                    .unwrap(),
                want,
                "{cpu}/{mem}"
            );
        }
    }
}
