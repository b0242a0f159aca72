//! NamespaceLifecycle: nothing new is created in a namespace that does not
//! exist or is being terminated, and the immortal namespaces cannot be deleted.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Attributes, Operation, Plugin, forbidden};
use crate::objects;
use crate::rest::Rest;
use crate::status::{ApiError, ApiResult};

/// Upstream's immortal namespaces.
const IMMORTAL: &[&str] = &["default", "kube-system", "kube-public"];

pub struct NamespaceLifecycle;

#[async_trait]
impl Plugin for NamespaceLifecycle {
    fn name(&self) -> &'static str {
        "NamespaceLifecycle"
    }

    async fn admit(&self, rest: &Rest, a: &Attributes<'_>, _obj: &mut Value) -> ApiResult<()> {
        if a.operation == Operation::Delete && a.is("", "Namespace") && IMMORTAL.contains(&a.name) {
            return Err(forbidden(a, "this namespace may not be deleted"));
        }
        // Only creates are refused in a terminating namespace: updates and
        // deletes must go on so that its content can be finalized.
        let (Operation::Create, Some(ns)) = (a.operation, a.namespace) else {
            return Ok(());
        };
        let ns_rt = berth_api::registry::lookup("", "v1", "namespaces")
            .ok_or_else(|| ApiError::internal("no namespaces"))?;
        let key = objects::key(ns_rt, None, ns);
        // From the watch cache, as upstream's plugin reads its informer; a
        // namespace the cache has not seen yet is looked up in the store.
        let found = match rest.cache.get(&key) {
            Some(s) => Some(objects::decode_at(&s.bytes, s.mod_revision)?),
            None => match rest.store.get(&key).await? {
                Some(kv) => Some(objects::decode(&kv)?),
                None => None,
            },
        };
        match found {
            None => Err(ApiError::not_found(ns_rt, ns)),
            Some(obj) if objects::is_deleting(&obj) => {
                let mut e = ApiError::forbidden(format!(
                    "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    a.rt.group_resource(),
                    a.name,
                ));
                e.details = Some(json!({"name": a.name, "kind": a.rt.plural, "causes": [{
                    "reason": "NamespaceTerminating",
                    "message": format!("namespace {ns} is being terminated"),
                    "field": "metadata.namespace"}]}));
                Err(e)
            }
            Some(_) => Ok(()),
        }
    }
}
