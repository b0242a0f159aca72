//! TaintNodesByCondition (upstream's `plugin/pkg/admission/nodetaint`): a new
//! Node starts with `node.kubernetes.io/not-ready:NoSchedule`, so nothing is
//! scheduled onto it before the node lifecycle controller has seen it Ready
//! (the controller then keeps the condition taints in step with its conditions).

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Attributes, Operation, Plugin};
use crate::rest::Rest;
use crate::status::ApiResult;

pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";

pub struct TaintNodesByCondition;

/// Adds the not-ready NoSchedule taint unless the node already has it.
pub fn add_not_ready_taint(node: &mut Value) {
    let Some(obj) = node.as_object_mut() else {
        return;
    };
    let spec = obj.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    let taints = spec.entry("taints").or_insert_with(|| json!([]));
    if taints.is_null() {
        *taints = json!([]);
    }
    let Some(list) = taints.as_array_mut() else {
        return;
    };
    let present = list.iter().any(|t| {
        t.get("key").and_then(Value::as_str) == Some(TAINT_NOT_READY)
            && t.get("effect").and_then(Value::as_str) == Some("NoSchedule")
    });
    if !present {
        list.push(json!({"key": TAINT_NOT_READY, "effect": "NoSchedule"}));
    }
}

#[async_trait]
impl Plugin for TaintNodesByCondition {
    fn name(&self) -> &'static str {
        "TaintNodesByCondition"
    }

    async fn admit(&self, _rest: &Rest, a: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        if a.operation == Operation::Create && a.is("", "Node") {
            add_not_ready_taint(obj);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_nodes_get_the_not_ready_taint_once() {
        let cases = [
            (json!({"metadata": {"name": "n"}}), 1),
            (json!({"spec": {"taints": null}}), 1),
            (
                json!({"spec": {"taints": [{"key": "a", "effect": "NoExecute"}]}}),
                2,
            ),
            (
                json!({"spec": {"taints": [{"key": TAINT_NOT_READY, "effect": "NoSchedule"}]}}),
                1,
            ),
            (
                json!({"spec": {"taints": [{"key": TAINT_NOT_READY, "effect": "NoExecute"}]}}),
                2,
            ),
        ];
        for (mut node, n) in cases {
            add_not_ready_taint(&mut node);
            let taints = node["spec"]["taints"].as_array().unwrap();
            assert_eq!(taints.len(), n, "{node}");
            assert!(
                taints
                    .iter()
                    .any(|t| t["key"] == TAINT_NOT_READY && t["effect"] == "NoSchedule")
            );
        }
    }
}
