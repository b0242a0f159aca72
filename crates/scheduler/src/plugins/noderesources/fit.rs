//! NodeResourcesFit: the pod's requests must fit the node's free allocatable
//! (Filter); nodes are scored by the configured strategy (Score).

use crate::config::ScoringStrategy;
use crate::framework::{
    CycleState, Filter, NodeInfo, Plugin, PodInfo, PreFilter, Score, Snapshot, Status,
};

use super::resource_allocation;

pub const NAME: &str = "NodeResourcesFit";

#[derive(Default)]
pub struct Fit {
    pub strategy: ScoringStrategy,
    /// Extended resources this scheduler does not check (`ignoredResources`).
    pub ignored_resources: Vec<String>,
}

impl Plugin for Fit {
    fn name(&self) -> &'static str {
        NAME
    }
}

/// Upstream's `fitsRequest`: one reason per short resource.
pub fn insufficient_resources(pod: &PodInfo, node: &NodeInfo, ignored: &[String]) -> Vec<String> {
    let mut reasons = Vec::new();
    if node.pods.len() as i64 + 1 > node.allocatable.allowed_pod_number {
        reasons.push("Too many pods".to_string());
    }
    let req = &pod.requests;
    if req.is_zero() {
        return reasons;
    }
    let free =
        |get: fn(&crate::framework::Resource) -> i64| get(&node.allocatable) - get(&node.requested);
    if req.milli_cpu > 0 && req.milli_cpu > free(|r| r.milli_cpu) {
        reasons.push("Insufficient cpu".to_string());
    }
    if req.memory > 0 && req.memory > free(|r| r.memory) {
        reasons.push("Insufficient memory".to_string());
    }
    if req.ephemeral_storage > 0 && req.ephemeral_storage > free(|r| r.ephemeral_storage) {
        reasons.push("Insufficient ephemeral-storage".to_string());
    }
    for (name, amount) in &req.scalar {
        if *amount == 0 || ignored.iter().any(|i| i == name) {
            continue;
        }
        if *amount > node.allocatable.get(name) - node.requested.get(name) {
            reasons.push(format!("Insufficient {name}"));
        }
    }
    reasons
}

impl PreFilter for Fit {
    fn pre_filter(&self, _: &mut CycleState, _: &PodInfo, _: &Snapshot) -> Status {
        // Requests are computed once in PodInfo; nothing to precompute here.
        Status::success()
    }
}

impl Filter for Fit {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let reasons = insufficient_resources(pod, node, &self.ignored_resources);
        if reasons.is_empty() {
            Status::success()
        } else {
            Status::new(crate::framework::Code::Unschedulable, reasons)
        }
    }
}

impl Score for Fit {
    fn score(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        Ok(resource_allocation::score(&self.strategy, pod, node))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ScoringStrategy, ScoringStrategyType};
    use crate::plugins::testing::*;
    use k8s_openapi::api::core::v1::Container;

    const ALLOC: &[(&str, &str)] = &[
        ("cpu", "2"),
        ("memory", "4Gi"),
        ("pods", "2"),
        ("example.com/gpu", "1"),
    ];

    #[test]
    fn filter_table() {
        let used = || pod("used", &[&[("cpu", "1500m"), ("memory", "1Gi")]]);
        let cases: Vec<(
            &str,
            Vec<k8s_openapi::api::core::v1::Pod>,
            k8s_openapi::api::core::v1::Pod,
            Vec<&str>,
        )> = vec![
            ("fits", vec![], pod("p", &[&[("cpu", "1")]]), vec![]),
            (
                "cpu",
                vec![used()],
                pod("p", &[&[("cpu", "1")]]),
                vec!["Insufficient cpu"],
            ),
            (
                "cpu+mem",
                vec![used()],
                pod("p", &[&[("cpu", "1"), ("memory", "4Gi")]]),
                vec!["Insufficient cpu", "Insufficient memory"],
            ),
            (
                "sum of containers",
                vec![],
                pod("p", &[&[("cpu", "1")], &[("cpu", "1500m")]]),
                vec!["Insufficient cpu"],
            ),
            (
                "extended",
                vec![],
                pod("p", &[&[("example.com/gpu", "2")]]),
                vec!["Insufficient example.com/gpu"],
            ),
            (
                "unknown extended",
                vec![],
                pod("p", &[&[("example.com/fpga", "1")]]),
                vec!["Insufficient example.com/fpga"],
            ),
            (
                "storage",
                vec![],
                pod("p", &[&[("ephemeral-storage", "1Gi")]]),
                vec!["Insufficient ephemeral-storage"],
            ),
            (
                "too many pods",
                vec![used(), pod("x", &[])],
                pod("p", &[]),
                vec!["Too many pods"],
            ),
            ("best effort", vec![used()], pod("p", &[]), vec![]),
        ];
        for (name, existing, p, want) in cases {
            let n = node_info(node("n", ALLOC), existing);
            let s = Fit::default().filter(&CycleState::default(), &PodInfo::new(p), &n);
            assert_eq!(
                s.reasons(),
                want.iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .as_slice(),
                "{name}"
            );
        }
    }

    #[test]
    fn init_containers_and_overhead() {
        let mut p = pod("p", &[&[("cpu", "500m")]]);
        let spec = p.spec.get_or_insert_default();
        spec.init_containers = Some(vec![Container {
            name: "init".into(),
            resources: pod("x", &[&[("cpu", "1500m")]]).spec.unwrap().containers[0]
                .resources
                .clone(),
            ..Default::default()
        }]);
        spec.overhead = Some(qmap(&[("cpu", "100m")]));
        assert_eq!(PodInfo::new(p).requests.milli_cpu, 1600);
    }

    #[test]
    fn least_and_most_allocated() {
        let alloc = &[("cpu", "4"), ("memory", "4Gi"), ("pods", "110")];
        let busy = node_info(
            node("busy", alloc),
            vec![pod("u", &[&[("cpu", "2"), ("memory", "2Gi")]])],
        );
        let idle = node_info(node("idle", alloc), vec![]);
        let p = PodInfo::new(pod("p", &[&[("cpu", "1"), ("memory", "1Gi")]]));
        let st = CycleState::default();
        let least = Fit::default();
        assert_eq!(least.score(&st, &p, &busy).unwrap(), 25);
        assert_eq!(least.score(&st, &p, &idle).unwrap(), 75);
        let most = Fit {
            strategy: ScoringStrategy {
                type_: ScoringStrategyType::MostAllocated,
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(most.score(&st, &p, &busy).unwrap(), 75);
        assert_eq!(most.score(&st, &p, &idle).unwrap(), 25);
    }
}
