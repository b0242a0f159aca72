//! Priority: a new pod's `priority` and `preemptionPolicy` come from its
//! PriorityClass (or the global default), and a pod may not claim others.

use async_trait::async_trait;
use serde_json::Value;

use super::{Attributes, Operation, Plugin, forbidden};
use crate::objects;
use crate::rest::Rest;
use crate::status::ApiResult;

pub struct Priority;

#[async_trait]
impl Plugin for Priority {
    fn name(&self) -> &'static str {
        "Priority"
    }

    async fn admit(&self, rest: &Rest, a: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        if a.operation != Operation::Create || !a.is("", "Pod") {
            return Ok(());
        }
        let classes = priority_classes(rest, obj).await?;
        berth_api::defaults::admit_pod_priority(obj, &classes).map_err(|m| forbidden(a, m))
    }
}

/// PriorityClasses from the watch cache, as upstream's admission reads its
/// informer; from the store when the pod names a class the cache has not seen yet.
async fn priority_classes(rest: &Rest, pod: &Value) -> ApiResult<Vec<Value>> {
    let Some(rt) = berth_api::registry::lookup("scheduling.k8s.io", "v1", "priorityclasses") else {
        return Ok(Vec::new());
    };
    let (cached, _) = rest.cache.snapshot(&objects::prefix(rt));
    let classes = cached
        .iter()
        .map(|(_, s)| objects::decode_at(&s.bytes, s.mod_revision))
        .collect::<ApiResult<Vec<_>>>()?;
    let named = pod
        .pointer("/spec/priorityClassName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    match named {
        Some(n) if !classes.iter().any(|c| objects::name(c) == Some(n)) => {
            rest.all_stored(rt).await
        }
        _ => Ok(classes),
    }
}
