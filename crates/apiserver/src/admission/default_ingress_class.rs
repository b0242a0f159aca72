//! DefaultIngressClass: a new Ingress without a class gets the default
//! IngressClass's name.

use async_trait::async_trait;
use serde_json::Value;

use super::{Attributes, Operation, Plugin};
use crate::rest::Rest;
use crate::status::ApiResult;

pub struct DefaultIngressClass;

#[async_trait]
impl Plugin for DefaultIngressClass {
    fn name(&self) -> &'static str {
        "DefaultIngressClass"
    }

    async fn admit(&self, rest: &Rest, a: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        if a.operation != Operation::Create || !a.is("networking.k8s.io", "Ingress") {
            return Ok(());
        }
        let Some(rt) = berth_api::registry::lookup("networking.k8s.io", "v1", "ingressclasses")
        else {
            return Ok(());
        };
        let classes = rest.all_stored(rt).await?;
        berth_api::networking::admit_ingress(obj, &classes);
        Ok(())
    }
}
