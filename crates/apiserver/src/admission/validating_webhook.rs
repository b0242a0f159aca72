//! ValidatingAdmissionWebhook: the ValidatingWebhookConfigurations' webhooks,
//! called in parallel right before the store write; any denial refuses it.

use async_trait::async_trait;
use serde_json::Value;

use super::webhook::{Dispatcher, Kind};
use super::{Attributes, Plugin};
use crate::rest::Rest;
use crate::status::ApiResult;

pub struct ValidatingAdmissionWebhook(Dispatcher);

impl ValidatingAdmissionWebhook {
    pub fn new() -> Self {
        ValidatingAdmissionWebhook(Dispatcher::new(Kind::Validating))
    }
}

#[async_trait]
impl Plugin for ValidatingAdmissionWebhook {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionWebhook"
    }

    async fn validate(
        &self,
        rest: &Rest,
        a: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> ApiResult<()> {
        self.0.validate(rest, a, obj).await
    }
}
