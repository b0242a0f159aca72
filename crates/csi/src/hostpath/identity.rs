//! The Identity service: who the driver is and what it offers.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::Driver;
use crate::v1::identity_server::Identity;
use crate::v1::plugin_capability::{self, service, volume_expansion};
use crate::v1::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest,
    GetPluginInfoResponse, PluginCapability, ProbeRequest, ProbeResponse,
};

pub struct IdentityService(pub Arc<Driver>);

/// The plugin capabilities: a controller service, node-local volumes (topology), and
/// expansion of volumes in use.
pub fn plugin_capabilities() -> Vec<PluginCapability> {
    let service = |t: service::Type| PluginCapability {
        r#type: Some(plugin_capability::Type::Service(
            plugin_capability::Service { r#type: t as i32 },
        )),
    };
    vec![
        service(service::Type::ControllerService),
        service(service::Type::VolumeAccessibilityConstraints),
        PluginCapability {
            r#type: Some(plugin_capability::Type::VolumeExpansion(
                plugin_capability::VolumeExpansion {
                    r#type: volume_expansion::Type::Online as i32,
                },
            )),
        },
    ]
}

#[tonic::async_trait]
impl Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        self.0.faults.check("GetPluginInfo")?;
        Ok(Response::new(GetPluginInfoResponse {
            name: self.0.config.drivername.clone(),
            vendor_version: env!("CARGO_PKG_VERSION").to_string(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        self.0.faults.check("GetPluginCapabilities")?;
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities: plugin_capabilities(),
        }))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        self.0.faults.check("Probe")?;
        // Everything the driver needs is loaded before it listens, so it is ready
        // as soon as it answers.
        Ok(Response::new(ProbeResponse { ready: Some(true) }))
    }
}
