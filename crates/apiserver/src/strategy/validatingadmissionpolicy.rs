//! ValidatingAdmissionPolicy (upstream's
//! `pkg/registry/admissionregistration/validatingadmissionpolicy/strategy.go`);
//! the rules are in `crate::admission::validating_admission_policy`.

use berth_api::validation::FieldError;
use serde_json::Value;

use super::{RestStrategy, UpdateScope};
use crate::admission::validating_admission_policy as vap;

pub(super) struct ValidatingAdmissionPolicy;

impl RestStrategy for ValidatingAdmissionPolicy {
    fn validate(
        &self,
        scope: Option<UpdateScope>,
        obj: &Value,
        old: Option<&Value>,
    ) -> Vec<FieldError> {
        match (scope, old) {
            (Some(UpdateScope::Status), _) => vap::validate_policy_status(obj),
            (_, Some(old)) => vap::validate_policy_update(obj, old),
            (_, None) => vap::validate_policy(obj),
        }
    }
}
