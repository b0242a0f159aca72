//! ImageLocality: nodes that already have the pod's images score higher,
//! scaled by how widely each image is spread over the cluster so one node
//! with a popular image does not attract every pod (Score).

use std::sync::Arc;

use crate::framework::{
    Code, CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo, PreScore, Score, Snapshot, Status,
};

pub const NAME: &str = "ImageLocality";

const MB: i64 = 1024 * 1024;
/// Below this total the score is 0 (upstream's minThreshold).
pub const MIN_THRESHOLD: i64 = 23 * MB;
/// Per container, above this the score is 100 (upstream's maxContainerThreshold).
pub const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

const STATE_KEY: &str = "PreScoreImageLocality";

pub struct ImageLocality;

impl Plugin for ImageLocality {
    fn name(&self) -> &'static str {
        NAME
    }
}

/// `nginx` → `nginx:latest`; names with a tag or digest stay as they are.
pub fn normalized_image_name(name: &str) -> String {
    let colon = name.rfind(':');
    let slash = name.rfind('/');
    if colon.map(|c| c as isize).unwrap_or(-1) <= slash.map(|s| s as isize).unwrap_or(-1) {
        format!("{name}:latest")
    } else {
        name.to_string()
    }
}

/// Per image of the pod: its normalised name and how many nodes have it.
struct PodImages {
    images: Vec<(String, usize)>,
    total_nodes: usize,
    containers: usize,
}

impl PreScore for ImageLocality {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[&NodeInfo],
        snap: &Snapshot,
    ) -> Status {
        let Some(spec) = pod.pod.spec.as_ref() else {
            return Status::success();
        };
        let containers: Vec<_> = spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
            .collect();
        let images = containers
            .iter()
            .filter_map(|c| c.image.as_deref())
            .map(normalized_image_name)
            .map(|n| {
                let count = snap.image_num_nodes.get(&n).copied().unwrap_or(0);
                (n, count)
            })
            .collect::<Vec<_>>();
        // No node has any of the images: every node would score 0.
        if images.iter().all(|(_, count)| *count == 0) {
            return Status::new(Code::Skip, Vec::new());
        }
        state.write(
            STATE_KEY,
            Arc::new(PodImages {
                images,
                total_nodes: snap.len(),
                containers: containers.len(),
            }),
        );
        Status::success()
    }
}

/// Upstream's `calculatePriority`: the summed scaled sizes clamped to
/// [min, max × containers], mapped linearly onto 0–100.
pub fn calculate_priority(sum: i64, containers: usize) -> i64 {
    let max = MAX_CONTAINER_THRESHOLD * containers.max(1) as i64;
    let sum = sum.clamp(MIN_THRESHOLD, max.max(MIN_THRESHOLD));
    if max <= MIN_THRESHOLD {
        return 0;
    }
    MAX_NODE_SCORE * (sum - MIN_THRESHOLD) / (max - MIN_THRESHOLD)
}

impl Score for ImageLocality {
    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(p) = state.read::<Arc<PodImages>>(STATE_KEY) else {
            return Ok(0);
        };
        let mut sum = 0i64;
        for (name, num_nodes) in &p.images {
            if let Some(size) = node.image_sizes.get(name) {
                // Upstream's scaledImageScore: size × spread.
                let spread = *num_nodes as f64 / p.total_nodes.max(1) as f64;
                sum += (*size as f64 * spread) as i64;
            }
        }
        Ok(calculate_priority(sum, p.containers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::*;
    use k8s_openapi::api::core::v1::ContainerImage;

    #[test]
    fn normalises_names() {
        for (name, want) in [
            ("nginx", "nginx:latest"),
            ("nginx:1.25", "nginx:1.25"),
            ("registry:5000/app", "registry:5000/app:latest"),
            ("registry:5000/app:v1", "registry:5000/app:v1"),
            ("gcr.io/a/b@sha256:abc", "gcr.io/a/b@sha256:abc"),
        ] {
            assert_eq!(normalized_image_name(name), want, "{name}");
        }
    }

    fn with_images(
        mut n: k8s_openapi::api::core::v1::Node,
        imgs: &[(&str, i64)],
    ) -> k8s_openapi::api::core::v1::Node {
        n.status.get_or_insert_default().images = Some(
            imgs.iter()
                .map(|(name, size)| ContainerImage {
                    names: Some(vec![name.to_string()]),
                    size_bytes: Some(*size),
                })
                .collect(),
        );
        n
    }

    #[test]
    fn scores_by_size_and_spread() {
        // Upstream's table: 40 MB / 300 MB / 250 MB images over nodes.
        let mut p = pod("p", &[&[]]);
        p.spec.as_mut().unwrap().containers[0].image = Some("gcr.io/300".into());
        let snap = Snapshot::new(vec![
            node_info(
                with_images(node("a", &[]), &[("gcr.io/300:latest", 300 * MB)]),
                vec![],
            ),
            node_info(
                with_images(node("b", &[]), &[("gcr.io/40:latest", 40 * MB)]),
                vec![],
            ),
            node_info(
                with_images(node("c", &[]), &[("gcr.io/300:latest", 300 * MB)]),
                vec![],
            ),
            node_info(node("d", &[]), vec![]),
        ]);
        let pi = PodInfo::new(p);
        let mut state = CycleState::default();
        let feasible: Vec<&NodeInfo> = snap.nodes.iter().map(|n| &**n).collect();
        assert!(
            ImageLocality
                .pre_score(&mut state, &pi, &feasible, &snap)
                .is_success()
        );
        let scores: Vec<i64> = snap
            .nodes
            .iter()
            .map(|n| ImageLocality.score(&state, &pi, n).unwrap())
            .collect();
        // 300 MB on 2 of 4 nodes → 150 MB: 100 × (150 − 23) / (1000 − 23) = 12.
        assert_eq!(scores, vec![12, 0, 12, 0]);
        assert_eq!(calculate_priority(0, 1), 0);
        assert_eq!(calculate_priority(5000 * MB, 1), 100);
        assert_eq!(
            calculate_priority(1000 * MB, 2),
            100 * (1000 - 23) / (2000 - 23)
        );
    }
}
