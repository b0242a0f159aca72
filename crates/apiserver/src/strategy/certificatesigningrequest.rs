//! CertificateSigningRequest (upstream's
//! `pkg/registry/certificates/certificates/strategy.go`); the rules are in
//! `crate::csr`.

use berth_api::registry::ResourceType;
use berth_api::user::UserInfo;
use berth_api::validation::FieldError;
use serde_json::Value;

use super::{RestStrategy, UpdateScope};
use crate::objects;

pub(super) struct CertificateSigningRequest;

impl RestStrategy for CertificateSigningRequest {
    fn prepare_for_create(&self, _rt: &ResourceType, obj: &mut Value, user: Option<&UserInfo>) {
        crate::csr::prepare_for_create(obj, user);
    }

    fn prepare_for_update(
        &self,
        _rt: &ResourceType,
        scope: UpdateScope,
        new: &mut Value,
        old: &Value,
    ) {
        crate::csr::prepare_for_update(scope, new, old, &objects::now_rfc3339());
    }

    fn validate(
        &self,
        scope: Option<UpdateScope>,
        obj: &Value,
        old: Option<&Value>,
    ) -> Vec<FieldError> {
        crate::csr::validate(obj, old, scope)
    }

    /// `approval`: only `status.conditions` (Approved/Denied).
    fn update_scope(&self, subresource: &str) -> Option<UpdateScope> {
        (subresource == "approval").then_some(UpdateScope::Approval)
    }
}
