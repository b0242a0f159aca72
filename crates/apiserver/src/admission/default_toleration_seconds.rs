//! DefaultTolerationSeconds: new pods tolerate not-ready and unreachable nodes
//! for 300 s unless they say otherwise.

use async_trait::async_trait;
use serde_json::Value;

use super::{Attributes, Operation, Plugin};
use crate::rest::Rest;
use crate::status::ApiResult;

pub struct DefaultTolerationSeconds;

#[async_trait]
impl Plugin for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        "DefaultTolerationSeconds"
    }

    async fn admit(&self, _rest: &Rest, a: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        if a.operation == Operation::Create && a.is("", "Pod") {
            berth_api::defaults::default_toleration_seconds(obj);
        }
        Ok(())
    }
}
