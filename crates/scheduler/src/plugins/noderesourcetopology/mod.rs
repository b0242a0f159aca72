//! NodeResourceTopologyMatch (kubernetes-sigs/scheduler-plugins' name; not in
//! upstream's default profile, enabled through the scheduler configuration's
//! `plugins.filter.enabled`): a node whose Topology Manager runs
//! `single-numa-node` and publishes its cells' free exclusive resources
//! (`berth_topology::numa_fit::ANNOTATION`) passes only if the pod's
//! exclusive CPUs and devices fit its cells the way that node's admission will
//! place them, so pods are not sent to nodes that would fail them with
//! TopologyAffinityError. Pods bound to the node but not yet counted in what
//! it published are taken from every cell. Other policies pass.

use std::collections::BTreeSet;

use berth_topology::numa_fit::{self, NumaResources};
use berth_topology::{PodResources, Scope};
use k8s_openapi::api::core::v1::Pod;

use crate::framework::{CycleState, Filter, NodeInfo, Plugin, PodInfo, Status};

pub const NAME: &str = "NodeResourceTopologyMatch";

pub struct NodeResourceTopologyMatch;

impl Plugin for NodeResourceTopologyMatch {
    fn name(&self) -> &'static str {
        NAME
    }
}

fn resources(pod: &Pod) -> PodResources {
    PodResources::of_pod(pod)
}

/// The node's published state, if it has one with a policy this filter models.
fn published(node: &NodeInfo) -> Option<NumaResources> {
    let raw = node
        .node
        .metadata
        .annotations
        .as_ref()?
        .get(numa_fit::ANNOTATION)?;
    let r: NumaResources = serde_json::from_str(raw).ok()?;
    (r.policy == "single-numa-node").then_some(r)
}

impl Filter for NodeResourceTopologyMatch {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(mut state) = published(node) else {
            return Status::success();
        };
        let scope: Scope = state.scope.parse().unwrap_or_default();
        let devices: BTreeSet<String> = state
            .cells
            .iter()
            .flat_map(|c| c.devices.keys().cloned())
            .collect();
        let wanted = numa_fit::demands(&resources(&pod.pod), scope, &devices);
        if wanted.is_empty() {
            return Status::success();
        }
        for other in &node.pods {
            let uid = other.pod.metadata.uid.as_deref().unwrap_or_default();
            if state.pods.contains(uid) {
                continue;
            }
            for d in numa_fit::demands(&resources(&other.pod), Scope::Pod, &devices) {
                numa_fit::reserve_anywhere(&mut state.cells, &d);
            }
        }
        if numa_fit::place(&mut state.cells, &wanted).is_some() {
            return Status::success();
        }
        let name = pod.pod.metadata.name.as_deref().unwrap_or_default();
        Status::unschedulable(match scope {
            Scope::Pod => format!("cannot align pod: {name}"),
            Scope::Container => "cannot align container".to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::testing::*;
    use serde_json::json;

    fn guaranteed(name: &str, uid: &str, cpu: &str, gpus: &str) -> Pod {
        let r = json!({"cpu": cpu, "memory": "1Gi", "example.com/gpu": gpus});
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": uid},
            "spec": {"containers": [{"name": "c", "resources": {"requests": r, "limits": r}}]},
        }))
        .unwrap()
    }

    fn annotated(
        scope: &str,
        cells: serde_json::Value,
        counted: &[&str],
    ) -> k8s_openapi::api::core::v1::Node {
        let mut n = node("n", &[]);
        let state =
            json!({"policy": "single-numa-node", "scope": scope, "cells": cells, "pods": counted});
        n.metadata.annotations =
            Some([(numa_fit::ANNOTATION.to_string(), state.to_string())].into());
        n
    }

    #[test]
    fn table() {
        // The seed's case: CPUs free on cell 0, the free GPU on cell 1.
        let split = json!([{"id": 0, "cpus": 3, "devices": {"example.com/gpu": 0}},
                           {"id": 1, "cpus": 1, "devices": {"example.com/gpu": 1}}]);
        let roomy = json!([{"id": 0, "cpus": 4, "devices": {"example.com/gpu": 1}},
                           {"id": 1, "cpus": 4, "devices": {"example.com/gpu": 1}}]);
        let bound = guaranteed("bound", "b", "3", "1");
        // (case, node, pods on it, pod, expected)
        let cases = [
            (
                "fits no single cell",
                annotated("pod", split.clone(), &[]),
                vec![],
                guaranteed("p", "u", "2", "1"),
                Code::Unschedulable,
            ),
            (
                "fits cell 1",
                annotated("pod", split.clone(), &[]),
                vec![],
                guaranteed("p", "u", "1", "1"),
                Code::Success,
            ),
            (
                "no exclusive demand",
                annotated("pod", split.clone(), &[]),
                vec![],
                {
                    let mut p = guaranteed("p", "u", "500m", "0");
                    p.spec.as_mut().unwrap().containers[0]
                        .resources
                        .as_mut()
                        .unwrap()
                        .limits
                        .as_mut()
                        .unwrap()
                        .remove("example.com/gpu");
                    p.spec.as_mut().unwrap().containers[0]
                        .resources
                        .as_mut()
                        .unwrap()
                        .requests
                        .as_mut()
                        .unwrap()
                        .remove("example.com/gpu");
                    p
                },
                Code::Success,
            ),
            (
                "a bound pod not yet published is reserved from every cell",
                annotated("pod", roomy.clone(), &[]),
                vec![bound.clone()],
                guaranteed("p", "u", "2", "1"),
                Code::Unschedulable,
            ),
            (
                "once published it is not counted twice",
                annotated(
                    "pod",
                    json!([{"id": 0, "cpus": 1, "devices": {"example.com/gpu": 0}}, {"id": 1, "cpus": 4, "devices": {"example.com/gpu": 1}}]),
                    &["b"],
                ),
                vec![bound.clone()],
                guaranteed("p", "u", "2", "1"),
                Code::Success,
            ),
        ];
        for (what, n, pods, p, want) in cases {
            let s = NodeResourceTopologyMatch.filter(
                &CycleState::default(),
                &PodInfo::new(p),
                &node_info(n, pods),
            );
            assert_eq!(s.code(), want, "{what}: {s:?}");
            if want == Code::Unschedulable {
                assert_eq!(s.reasons(), ["cannot align pod: p"], "{what}");
            }
        }
        // A node without the annotation, or with another policy, passes.
        let mut other = annotated("pod", split, &[]);
        let anns = other.metadata.annotations.as_mut().unwrap();
        let v = anns
            .get(numa_fit::ANNOTATION)
            .unwrap()
            .replace("single-numa-node", "best-effort");
        anns.insert(numa_fit::ANNOTATION.into(), v);
        for n in [node("plain", &[]), other] {
            let s = NodeResourceTopologyMatch.filter(
                &CycleState::default(),
                &PodInfo::new(guaranteed("p", "u", "2", "1")),
                &node_info(n, vec![]),
            );
            assert_eq!(s.code(), Code::Success);
        }
    }
}
