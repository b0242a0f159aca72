//! MutatingAdmissionWebhook: the MutatingWebhookConfigurations' webhooks, called
//! in order with the object to be stored; their JSONPatches change it
//! (`berth_webhook` does the matching, the calls and the patching).

use async_trait::async_trait;
use serde_json::Value;

use super::webhook::{Dispatcher, Kind};
use super::{Attributes, Plugin};
use crate::rest::Rest;
use crate::status::ApiResult;

pub struct MutatingAdmissionWebhook(Dispatcher);

impl MutatingAdmissionWebhook {
    pub fn new() -> Self {
        MutatingAdmissionWebhook(Dispatcher::new(Kind::Mutating))
    }
}

#[async_trait]
impl Plugin for MutatingAdmissionWebhook {
    fn name(&self) -> &'static str {
        "MutatingAdmissionWebhook"
    }

    async fn admit(&self, rest: &Rest, a: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        self.0.mutate(rest, a, obj).await
    }
}
