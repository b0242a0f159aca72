//! NodeRestriction: a node agent (`system:node:<name>`) may only change
//! itself and what is bound to it: its own Node (never the
//! `node-restriction.kubernetes.io/` labels, nor taints once registered), its
//! own Lease, the status of pods bound to it, mirror pods, evictions of
//! pods bound to it, and (Berth's local-path provisioner) PersistentVolumes
//! pinned to it by node affinity. Token requests
//! by nodes are narrowed in `tokens.rs` (bound to a pod on that node).

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{Attributes, Operation, Plugin, forbidden};
use crate::node_authorizer::node_name;
use crate::rest::Rest;
use crate::status::{ApiError, ApiResult};

/// Labels only an administrator may set on a Node.
const RESTRICTED_LABEL_PREFIX: &str = "node-restriction.kubernetes.io/";

pub struct NodeRestriction;

#[async_trait]
impl Plugin for NodeRestriction {
    fn name(&self) -> &'static str {
        "NodeRestriction"
    }

    async fn validate(
        &self,
        rest: &Rest,
        a: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> ApiResult<()> {
        let Some(node) = a.user.and_then(node_name) else {
            return Ok(());
        };
        match (a.rt.group, a.rt.kind) {
            ("", "Pod") if a.subresource == Some("eviction") => pod_eviction(rest, a, node).await,
            ("", "Pod") => pod(a, node, obj),
            ("", "Node") => node_object(a, node, obj),
            ("", "PersistentVolume") => persistent_volume(a, node, obj),
            ("coordination.k8s.io", "Lease") => {
                if a.namespace != Some("kube-node-lease") || a.name != node {
                    return Err(forbidden(
                        a,
                        "can only access node lease with the same name as the requesting node",
                    ));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

fn bound_node(pod: Option<&Value>) -> &str {
    pod.and_then(|p| p.pointer("/spec/nodeName"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn pod(a: &Attributes<'_>, node: &str, obj: Option<&Value>) -> ApiResult<()> {
    match (a.subresource, a.operation) {
        (None, Operation::Create) => {
            let mirror = obj
                .and_then(|p| p.pointer("/metadata/annotations/kubernetes.io~1config.mirror"))
                .is_some();
            if !mirror {
                return Err(forbidden(
                    a,
                    format!(
                        "pod does not have \"kubernetes.io/config.mirror\" annotation, node \"{node}\" can only create mirror pods"
                    ),
                ));
            }
            if bound_node(obj) != node {
                return Err(forbidden(
                    a,
                    format!(
                        "node \"{node}\" can only create pods with spec.nodeName set to itself"
                    ),
                ));
            }
            Ok(())
        }
        (None, Operation::Delete) if bound_node(a.old) != node => Err(forbidden(
            a,
            format!("node \"{node}\" can only delete pods with spec.nodeName set to itself"),
        )),
        (None, Operation::Delete) => Ok(()),
        (None, Operation::Update) => Err(forbidden(
            a,
            format!(
                "unexpected operation \"UPDATE\", node \"{node}\" can only create and delete mirror pods"
            ),
        )),
        (Some("status"), _) if bound_node(a.old) != node => Err(forbidden(
            a,
            format!(
                "node \"{node}\" can only update pod status for pods with spec.nodeName set to itself"
            ),
        )),
        _ => Ok(()),
    }
}

/// Upstream's `admitPodEviction`: a node evicts only pods bound to itself
/// (the pod from the watch cache, else the store; a missing pod is 404).
async fn pod_eviction(rest: &Rest, a: &Attributes<'_>, node: &str) -> ApiResult<()> {
    if a.operation != Operation::Create {
        return Ok(());
    }
    let key = crate::objects::key(a.rt, a.namespace, a.name);
    let pod = match rest.cache.get(&key) {
        Some(s) => crate::objects::decode_at(&s.bytes, s.mod_revision)?,
        None => match rest.store.get(&key).await? {
            Some(kv) => crate::objects::decode(&kv)?,
            None => return Err(ApiError::not_found(a.rt, a.name)),
        },
    };
    if bound_node(Some(&pod)) != node {
        return Err(forbidden(
            a,
            format!("node {node} can only evict pods with spec.nodeName set to itself"),
        ));
    }
    Ok(())
}

/// The volume's required node affinity names only `node`: every term holds
/// `kubernetes.io/hostname In [node]` (a term without it would let the volume
/// be used on other nodes).
fn pinned_to(pv: Option<&Value>, node: &str) -> bool {
    let terms = pv
        .and_then(|v| v.pointer("/spec/nodeAffinity/required/nodeSelectorTerms"))
        .and_then(Value::as_array);
    let pins = |t: &Value| {
        t.get("matchExpressions")
            .and_then(Value::as_array)
            .is_some_and(|es| {
                es.iter().any(|e| {
                    e.get("key").and_then(Value::as_str) == Some("kubernetes.io/hostname")
                        && e.get("operator").and_then(Value::as_str) == Some("In")
                        && e.get("values").and_then(Value::as_array).is_some_and(|vs| {
                            !vs.is_empty() && vs.iter().all(|v| v.as_str() == Some(node))
                        })
                })
            })
    };
    terms.is_some_and(|ts| !ts.is_empty() && ts.iter().all(pins))
}

/// A node's local-path provisioner creates and deletes only the volumes of
/// its own node; it has no other business with PersistentVolumes.
fn persistent_volume(a: &Attributes<'_>, node: &str, obj: Option<&Value>) -> ApiResult<()> {
    let (pv, verb) = match a.operation {
        Operation::Create => (obj, "create"),
        Operation::Delete => (a.old, "delete"),
        _ => {
            return Err(forbidden(
                a,
                format!("node \"{node}\" can only create and delete persistentvolumes"),
            ));
        }
    };
    if !pinned_to(pv, node) {
        return Err(forbidden(
            a,
            format!(
                "node \"{node}\" can only {verb} persistentvolumes whose node affinity requires kubernetes.io/hostname in [{node}]"
            ),
        ));
    }
    Ok(())
}

fn labels(obj: Option<&Value>) -> Map<String, Value> {
    obj.and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn node_object(a: &Attributes<'_>, node: &str, obj: Option<&Value>) -> ApiResult<()> {
    if a.name != node {
        return Err(forbidden(
            a,
            format!(
                "node \"{node}\" is not allowed to modify node \"{}\"",
                a.name
            ),
        ));
    }
    if a.operation == Operation::Delete {
        return Ok(());
    }
    let (new, old) = (labels(obj), labels(a.old));
    let changed: Vec<&String> = new
        .keys()
        .chain(old.keys())
        .filter(|k| k.starts_with(RESTRICTED_LABEL_PREFIX) && new.get(*k) != old.get(*k))
        .collect();
    if let Some(k) = changed.first() {
        let verb = if a.operation == Operation::Create {
            "set"
        } else {
            "modify"
        };
        return Err(forbidden(
            a,
            format!("node \"{node}\" is not allowed to {verb} the following labels: {k}"),
        ));
    }
    if a.operation == Operation::Update && a.subresource.is_none() {
        let taints = |v: Option<&Value>| v.and_then(|o| o.pointer("/spec/taints")).cloned();
        if taints(obj) != taints(a.old) {
            return Err(forbidden(
                a,
                format!("node \"{node}\" is not allowed to modify taints"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::pinned_to;

    fn pv(terms: Value) -> Value {
        json!({"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": terms}}}})
    }

    fn host(op: &str, values: &[&str]) -> Value {
        json!({"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": op, "values": values}]})
    }

    /// (volume, pinned to n1).
    #[test]
    fn volumes_a_node_may_create_or_delete() {
        let rows = [
            (pv(json!([host("In", &["n1"])])), true),
            (pv(json!([host("In", &["n2"])])), false),
            (pv(json!([host("In", &["n1", "n2"])])), false),
            (pv(json!([host("NotIn", &["n2"])])), false),
            (pv(json!([host("In", &[])])), false),
            // Every term must pin: one loose term lets other nodes use it.
            (
                pv(json!([host("In", &["n1"]), {"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]}]}])),
                false,
            ),
            (pv(json!([])), false),
            (json!({"spec": {"hostPath": {"path": "/"}}}), false),
        ];
        for (i, (v, want)) in rows.into_iter().enumerate() {
            assert_eq!(pinned_to(Some(&v), "n1"), want, "row {i}: {v}");
        }
        assert!(!pinned_to(None, "n1"));
    }
}
