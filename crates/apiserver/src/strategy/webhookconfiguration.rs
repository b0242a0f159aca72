//! Mutating- and ValidatingWebhookConfiguration (upstream's
//! `pkg/registry/admissionregistration/{mutating,validating}webhookconfiguration/strategy.go`);
//! the rules are in `berth-webhook`.

use berth_api::validation::FieldError;
use serde_json::Value;

use super::{RestStrategy, UpdateScope};

pub(super) struct WebhookConfiguration;

impl RestStrategy for WebhookConfiguration {
    fn validate(
        &self,
        _scope: Option<UpdateScope>,
        obj: &Value,
        old: Option<&Value>,
    ) -> Vec<FieldError> {
        match old {
            None => berth_webhook::validate_configuration(obj),
            Some(old) => berth_webhook::validate_configuration_update(obj, old),
        }
    }
}
