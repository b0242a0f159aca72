//! APIService (upstream's kube-aggregator `pkg/registry/apiservice/strategy.go`);
//! the rules are in `crate::aggregator`.

use berth_api::validation::FieldError;
use serde_json::Value;

use super::{RestStrategy, UpdateScope};

pub(super) struct APIService;

impl RestStrategy for APIService {
    /// The spec's rules; a status write is the availability controller's.
    fn validate(
        &self,
        scope: Option<UpdateScope>,
        obj: &Value,
        _old: Option<&Value>,
    ) -> Vec<FieldError> {
        if matches!(scope, Some(UpdateScope::Status)) {
            return Vec::new();
        }
        crate::aggregator::validate(obj)
    }
}
