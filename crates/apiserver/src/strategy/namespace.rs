//! Namespace (upstream's `pkg/registry/core/namespace/strategy.go` and its
//! storage's delete).

use berth_api::registry::ResourceType;
use berth_api::user::UserInfo;
use serde_json::{Value, json};

use super::{RestStrategy, UpdateScope};
use crate::objects;

pub(super) struct Namespace;

impl RestStrategy for Namespace {
    fn prepare_for_create(&self, _rt: &ResourceType, obj: &mut Value, _user: Option<&UserInfo>) {
        namespace_name_label(obj);
    }

    fn prepare_for_update(
        &self,
        _rt: &ResourceType,
        _scope: UpdateScope,
        new: &mut Value,
        _old: &Value,
    ) {
        namespace_name_label(new);
    }

    /// `namespaces/<name>/finalize`: only `spec.finalizers` (the namespace
    /// controller removes `kubernetes` once the content is gone).
    fn update_scope(&self, subresource: &str) -> Option<UpdateScope> {
        (subresource == "finalize").then_some(UpdateScope::Finalize)
    }

    /// A namespace with `spec.finalizers` left is emptied before it goes.
    fn delete_waits(&self, pending: &Value) -> bool {
        pending
            .get("spec")
            .and_then(|s| s.get("finalizers"))
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
    }

    fn mark_deleting(&self, pending: &mut Value) {
        pending["status"]["phase"] = json!("Terminating");
    }
}

/// Every namespace carries `kubernetes.io/metadata.name`, set by the server.
fn namespace_name_label(obj: &mut Value) {
    let Some(name) = objects::name(obj).map(String::from) else {
        return;
    };
    if let Some(m) = objects::meta_mut(obj) {
        let labels = m.entry("labels").or_insert_with(|| json!({}));
        if !labels.is_object() {
            *labels = json!({});
        }
        labels["kubernetes.io/metadata.name"] = json!(name);
    }
}
