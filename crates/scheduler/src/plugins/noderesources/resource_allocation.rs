//! Scorers over (requested, allocatable) per resource (upstream
//! `least_allocated.go`, `most_allocated.go`, `requested_to_capacity_ratio.go`).

use crate::config::{ResourceSpec, ScoringStrategy, ScoringStrategyType, UtilizationShapePoint};
use crate::framework::types::{CPU, MEMORY};
use crate::framework::{MAX_NODE_SCORE, NodeInfo, PodInfo, Resource};

/// Free capacity fraction × 100.
pub fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// Used capacity fraction × 100; defaults for request-less pods may overshoot, so cap.
pub fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.min(capacity) * MAX_NODE_SCORE / capacity
}

/// The broken-linear shape; shape scores are 0–10 and scale to 0–100.
pub fn shape_score(shape: &[UtilizationShapePoint], utilization: i64) -> i64 {
    let Some(first) = shape.first() else {
        return 0;
    };
    if utilization <= first.utilization {
        return first.score * 10;
    }
    for w in shape.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if utilization <= b.utilization {
            let span = (b.utilization - a.utilization).max(1);
            let s = a.score * 10 + (b.score - a.score) * 10 * (utilization - a.utilization) / span;
            return s;
        }
    }
    shape.last().map(|p| p.score * 10).unwrap_or(0)
}

/// Node requested (plus the pod) and allocatable for one resource. CPU and
/// memory use the non-zero defaults so best-effort pods still spread.
pub fn request_and_allocatable(
    node: &NodeInfo,
    pod: &PodInfo,
    resource: &str,
    non_zero: bool,
) -> (i64, i64) {
    let alloc = node.allocatable.get(resource);
    let (node_req, pod_req): (&Resource, &Resource) = if non_zero {
        (&node.non_zero_requested, &pod.non_zero_requests)
    } else {
        (&node.requested, &pod.requests)
    };
    let is_scalar = resource != CPU && resource != MEMORY && resource != "ephemeral-storage";
    // Extended resources the pod does not ask for do not weigh in.
    if is_scalar && pod.requests.get(resource) == 0 {
        return (0, 0);
    }
    (node_req.get(resource) + pod_req.get(resource), alloc)
}

/// A strategy's weighted average over its resources.
pub fn score(strategy: &ScoringStrategy, pod: &PodInfo, node: &NodeInfo) -> i64 {
    // Scored per node: no allocation for the default resource list.
    static CPU_MEMORY: std::sync::LazyLock<Vec<ResourceSpec>> =
        std::sync::LazyLock::new(ResourceSpec::cpu_memory);
    let resources: &[ResourceSpec] = if strategy.resources.is_empty() {
        &CPU_MEMORY
    } else {
        &strategy.resources
    };
    let mut total = 0;
    let mut weight_sum = 0;
    for r in resources {
        let (requested, alloc) = request_and_allocatable(node, pod, &r.name, true);
        if alloc == 0 {
            continue;
        }
        let s = match strategy.type_ {
            ScoringStrategyType::LeastAllocated => least_requested_score(requested, alloc),
            ScoringStrategyType::MostAllocated => most_requested_score(requested, alloc),
            ScoringStrategyType::RequestedToCapacityRatio => {
                let shape = strategy
                    .requested_to_capacity_ratio
                    .as_ref()
                    .map(|r| r.shape.as_slice())
                    .unwrap_or_default();
                shape_score(shape, requested.min(alloc) * 100 / alloc)
            }
        };
        total += s * r.weight;
        weight_sum += r.weight;
    }
    if weight_sum == 0 {
        0
    } else {
        total / weight_sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scorers() {
        // (requested, capacity, least, most)
        let cases = [
            (0, 4000, 100, 0),
            (1000, 4000, 75, 25),
            (4000, 4000, 0, 100),
            (5000, 4000, 0, 100),
            (1, 0, 0, 0),
        ];
        for (req, cap, least, most) in cases {
            assert_eq!(least_requested_score(req, cap), least, "least {req}/{cap}");
            assert_eq!(most_requested_score(req, cap), most, "most {req}/{cap}");
        }
    }

    #[test]
    fn shape() {
        let shape = vec![
            UtilizationShapePoint {
                utilization: 0,
                score: 0,
            },
            UtilizationShapePoint {
                utilization: 100,
                score: 10,
            },
        ];
        assert_eq!(shape_score(&shape, 0), 0);
        assert_eq!(shape_score(&shape, 50), 50);
        assert_eq!(shape_score(&shape, 100), 100);
    }
}
