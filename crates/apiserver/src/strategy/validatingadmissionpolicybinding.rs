//! ValidatingAdmissionPolicyBinding (upstream's
//! `pkg/registry/admissionregistration/validatingadmissionpolicybinding/strategy.go`).

use berth_api::validation::FieldError;
use serde_json::Value;

use super::{RestStrategy, UpdateScope};

pub(super) struct ValidatingAdmissionPolicyBinding;

impl RestStrategy for ValidatingAdmissionPolicyBinding {
    fn validate(
        &self,
        _scope: Option<UpdateScope>,
        obj: &Value,
        _old: Option<&Value>,
    ) -> Vec<FieldError> {
        crate::admission::validating_admission_policy::validate_binding(obj)
    }
}
