//! Custom resources (upstream's apiextensions-apiserver
//! `pkg/registry/customresource/strategy.go`): status and generation follow
//! the CRD's subresources; the rules are in `crate::apiextensions::customresource`.

use berth_api::registry::ResourceType;
use berth_api::user::UserInfo;
use serde_json::Value;

use super::{RestStrategy, UpdateScope};

pub(super) struct CustomResource;

impl RestStrategy for CustomResource {
    fn prepare_for_create(&self, rt: &ResourceType, obj: &mut Value, _user: Option<&UserInfo>) {
        crate::apiextensions::customresource::prepare_for_create(rt, obj);
    }

    fn prepare_for_update(
        &self,
        rt: &ResourceType,
        scope: UpdateScope,
        new: &mut Value,
        old: &Value,
    ) {
        if matches!(scope, UpdateScope::Main) {
            crate::apiextensions::customresource::prepare_for_update_main(rt, new, old);
        }
    }
}
