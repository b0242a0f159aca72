//! Builders for plugin tables.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeSpec, NodeStatus, Pod, PodSpec, ResourceRequirements, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;

use crate::framework::{NodeInfo, PodInfo};

pub fn qmap(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

pub fn node(name: &str, alloc: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(qmap(alloc)),
            capacity: Some(qmap(alloc)),
            ..Default::default()
        }),
    }
}

pub fn labeled(mut n: Node, labels: &[(&str, &str)]) -> Node {
    n.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    n
}

pub fn tainted(mut n: Node, taints: &[(&str, &str, &str)]) -> Node {
    n.spec.get_or_insert_default().taints = Some(
        taints
            .iter()
            .map(|(k, v, e)| Taint {
                key: k.to_string(),
                value: (!v.is_empty()).then(|| v.to_string()),
                effect: e.to_string(),
                ..Default::default()
            })
            .collect(),
    );
    n
}

pub fn pod(name: &str, requests: &[&[(&str, &str)]]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: requests
                .iter()
                .enumerate()
                .map(|(i, r)| Container {
                    name: format!("c{i}"),
                    resources: Some(ResourceRequirements {
                        requests: (!r.is_empty()).then(|| qmap(r)),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn tolerating(mut p: Pod, tols: &[(&str, &str, &str, &str)]) -> Pod {
    p.spec.get_or_insert_default().tolerations = Some(
        tols.iter()
            .map(|(k, op, v, e)| Toleration {
                key: (!k.is_empty()).then(|| k.to_string()),
                operator: (!op.is_empty()).then(|| op.to_string()),
                value: (!v.is_empty()).then(|| v.to_string()),
                effect: (!e.is_empty()).then(|| e.to_string()),
                ..Default::default()
            })
            .collect(),
    );
    p
}

pub fn node_info(n: Node, pods: Vec<Pod>) -> NodeInfo {
    let mut ni = NodeInfo::new(n);
    for p in pods {
        ni.add_pod(PodInfo::new(p));
    }
    ni
}
