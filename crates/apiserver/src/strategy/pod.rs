//! Pod (upstream's `pkg/registry/core/pod/strategy.go`).

use berth_api::registry::ResourceType;
use serde_json::Value;

use super::{RestStrategy, UpdateScope};

pub(super) struct Pod;

impl RestStrategy for Pod {
    fn prepare_for_update(
        &self,
        _rt: &ResourceType,
        _scope: UpdateScope,
        new: &mut Value,
        old: &Value,
    ) {
        // qosClass is computed once, at creation; resources of a running pod are immutable.
        if let Some(q) = old.get("status").and_then(|s| s.get("qosClass")).cloned()
            && new.get("status").is_some_and(Value::is_object)
        {
            new["status"]["qosClass"] = q;
        }
    }

    /// `pods/<name>/ephemeralcontainers`: only `spec.ephemeralContainers`.
    fn update_scope(&self, subresource: &str) -> Option<UpdateScope> {
        (subresource == "ephemeralcontainers").then_some(UpdateScope::EphemeralContainers)
    }

    /// Upstream's graceful deletion: only pods bound to a node and still
    /// running wait (`terminationGracePeriodSeconds`, 30 s by default).
    fn grace_period(&self, obj: &Value, requested: Option<i64>) -> i64 {
        let scheduled = obj
            .get("spec")
            .and_then(|s| s.get("nodeName"))
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let phase = obj
            .get("status")
            .and_then(|s| s.get("phase"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if !scheduled || phase == "Succeeded" || phase == "Failed" {
            return 0;
        }
        let default = obj
            .get("spec")
            .and_then(|s| s.get("terminationGracePeriodSeconds"))
            .and_then(Value::as_i64)
            .unwrap_or(30);
        requested.unwrap_or(default).max(0)
    }
}
