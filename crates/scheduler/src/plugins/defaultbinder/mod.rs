//! DefaultBinder: binds through the pod's `binding` subresource.

use k8s_openapi::api::core::v1::{Binding, ObjectReference};
use kube::api::ObjectMeta;

use crate::framework::{Bind, Plugin, PodInfo, Status};

pub const NAME: &str = "DefaultBinder";

pub struct DefaultBinder;

impl Plugin for DefaultBinder {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl Bind for DefaultBinder {
    fn bind(&self, pod: &PodInfo, node: &str) -> Result<Binding, Status> {
        Ok(Binding {
            metadata: ObjectMeta {
                name: pod.pod.metadata.name.clone(),
                namespace: pod.pod.metadata.namespace.clone(),
                uid: pod.pod.metadata.uid.clone(),
                ..Default::default()
            },
            target: ObjectReference {
                kind: Some("Node".into()),
                name: Some(node.into()),
                ..Default::default()
            },
        })
    }
}
