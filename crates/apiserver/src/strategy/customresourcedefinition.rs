//! CustomResourceDefinition (upstream's apiextensions-apiserver
//! `pkg/registry/customresourcedefinition/strategy.go`); the rules are in
//! `crate::apiextensions` and `berth-apiextensions`.

use berth_api::registry::ResourceType;
use berth_api::user::UserInfo;
use berth_api::validation::FieldError;
use serde_json::Value;

use super::{RestStrategy, UpdateScope};

pub(super) struct CustomResourceDefinition;

impl RestStrategy for CustomResourceDefinition {
    fn prepare_for_create(&self, _rt: &ResourceType, obj: &mut Value, _user: Option<&UserInfo>) {
        crate::apiextensions::prepare_for_create(obj);
    }

    fn prepare_for_update(
        &self,
        _rt: &ResourceType,
        scope: UpdateScope,
        new: &mut Value,
        old: &Value,
    ) {
        if matches!(scope, UpdateScope::Main) {
            crate::apiextensions::prepare_for_update(new, old);
        }
    }

    fn validate(
        &self,
        scope: Option<UpdateScope>,
        obj: &Value,
        old: Option<&Value>,
    ) -> Vec<FieldError> {
        if matches!(scope, Some(UpdateScope::Status)) {
            return Vec::new();
        }
        let mut errs = match old {
            None => berth_apiextensions::validate_crd(obj),
            Some(old) => berth_apiextensions::validate_crd_update(obj, old),
        };
        errs.extend(crate::apiextensions::validate_cel_rules(obj));
        // Conversion webhooks are not called yet: refuse them rather than
        // serve every version with `None`'s rules.
        if obj
            .pointer("/spec/conversion/strategy")
            .and_then(Value::as_str)
            == Some("Webhook")
        {
            errs.push(FieldError::not_supported(
                "spec.conversion.strategy",
                "Webhook",
                &["None"],
            ));
        }
        errs
    }

    /// The cleanup finalizer (and the Terminating condition) go on first.
    fn before_delete(&self, finalizers: &mut Vec<String>, pending: &mut Value, first: bool) {
        crate::apiextensions::mark_for_deletion(finalizers, pending, first);
    }
}
