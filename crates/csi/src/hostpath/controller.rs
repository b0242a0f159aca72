//! The Controller service: volumes' life (create, delete, expand), attachments
//! (ControllerPublish/Unpublish) and capacity. Errors carry the gRPC codes the CSI
//! spec's "Error Scheme" tables give for each RPC.

use std::collections::BTreeMap;
use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::state::{self, AccessType, CapacityError, Volume};
use super::{Driver, internal};
use crate::v1::controller_server::Controller;
use crate::v1::controller_service_capability::{self, rpc};
use crate::v1::volume_capability::AccessType as CapAccessType;
use crate::v1::volume_capability::access_mode::Mode;
use crate::v1::{
    ControllerExpandVolumeRequest, ControllerExpandVolumeResponse,
    ControllerGetCapabilitiesRequest, ControllerGetCapabilitiesResponse,
    ControllerPublishVolumeRequest, ControllerPublishVolumeResponse, ControllerServiceCapability,
    ControllerUnpublishVolumeRequest, ControllerUnpublishVolumeResponse, CreateVolumeRequest,
    CreateVolumeResponse, DeleteVolumeRequest, DeleteVolumeResponse, GetCapacityRequest,
    GetCapacityResponse, ListVolumesRequest, ListVolumesResponse,
    ValidateVolumeCapabilitiesRequest, ValidateVolumeCapabilitiesResponse, VolumeCapability,
    list_volumes_response, validate_volume_capabilities_response,
};

pub struct ControllerService(pub Arc<Driver>);

/// Why a volume capability is not one this driver serves; `Ok` gives its access type.
/// Volumes live on one node's disk, so only single-node access modes fit, and the
/// filesystem is ext4.
pub fn check_capability(cap: &VolumeCapability) -> Result<AccessType, String> {
    let mode = cap
        .access_mode
        .as_ref()
        .map(|m| Mode::try_from(m.mode).unwrap_or(Mode::Unknown))
        .ok_or("access mode is required")?;
    match mode {
        Mode::SingleNodeWriter | Mode::SingleNodeReaderOnly => {}
        other => {
            return Err(format!(
                "access mode {} is not supported: volumes are local to one node",
                other.as_str_name()
            ));
        }
    }
    match &cap.access_type {
        Some(CapAccessType::Block(_)) => Ok(AccessType::Block),
        Some(CapAccessType::Mount(m)) => match m.fs_type.as_str() {
            "" | "ext4" => Ok(AccessType::Mount),
            other => Err(format!("fs_type {other:?} is not supported (ext4 only)")),
        },
        None => Err("access type (block or mount) is required".to_string()),
    }
}

/// The one access type all of a request's capabilities ask for.
pub fn access_type_of(caps: &[VolumeCapability]) -> Result<AccessType, Status> {
    let mut found = None;
    for cap in caps {
        let t = check_capability(cap).map_err(Status::invalid_argument)?;
        if found.is_some_and(|f| f != t) {
            return Err(Status::invalid_argument(
                "cannot have both block and mount access type",
            ));
        }
        found = Some(t);
    }
    found.ok_or_else(|| Status::invalid_argument("Volume Capabilities missing in request"))
}

fn capacity_status(e: CapacityError) -> Status {
    Status::out_of_range(e.to_string())
}

pub(crate) fn require(v: &str, what: &str) -> Result<(), Status> {
    if v.is_empty() {
        return Err(Status::invalid_argument(format!(
            "{what} missing in request"
        )));
    }
    Ok(())
}

pub(crate) fn not_found(id: &str) -> Status {
    Status::not_found(format!("volume id {id} does not exist in the volumes list"))
}

impl ControllerService {
    fn driver(&self) -> &Driver {
        &self.0
    }

    fn attach_enabled(&self) -> Result<(), Status> {
        if self.driver().config.attach_required {
            Ok(())
        } else {
            Err(Status::unimplemented(
                "ControllerPublishVolume is not supported (--attach-required=false)",
            ))
        }
    }

    fn csi_volume(&self, v: &Volume) -> crate::v1::Volume {
        crate::v1::Volume {
            capacity_bytes: v.capacity_bytes,
            volume_id: v.id.clone(),
            volume_context: v.parameters.clone().into_iter().collect(),
            content_source: None,
            accessible_topology: vec![self.driver().topology()],
        }
    }
}

/// The controller capabilities this driver advertises.
pub fn controller_capabilities(attach: bool) -> Vec<ControllerServiceCapability> {
    let mut types = vec![
        rpc::Type::CreateDeleteVolume,
        rpc::Type::ExpandVolume,
        rpc::Type::ListVolumes,
        rpc::Type::ListVolumesPublishedNodes,
        rpc::Type::GetCapacity,
    ];
    if attach {
        types.insert(1, rpc::Type::PublishUnpublishVolume);
    }
    types
        .into_iter()
        .map(|t| ControllerServiceCapability {
            r#type: Some(controller_service_capability::Type::Rpc(
                controller_service_capability::Rpc { r#type: t as i32 },
            )),
        })
        .collect()
}

#[tonic::async_trait]
impl Controller for ControllerService {
    async fn create_volume(
        &self,
        request: Request<CreateVolumeRequest>,
    ) -> Result<Response<CreateVolumeResponse>, Status> {
        let d = self.driver();
        d.faults.check("CreateVolume")?;
        let req = request.into_inner();
        require(&req.name, "Name")?;
        if req.volume_capabilities.is_empty() {
            return Err(Status::invalid_argument(
                "Volume Capabilities missing in request",
            ));
        }
        let access_type = access_type_of(&req.volume_capabilities)?;
        if req.volume_content_source.is_some() {
            return Err(Status::invalid_argument(
                "volume content source (snapshot, clone) is not supported",
            ));
        }
        let (required, limit) = req
            .capacity_range
            .as_ref()
            .map_or((0, 0), |c| (c.required_bytes, c.limit_bytes));
        let size = state::volume_size(required, limit, d.config.max_volume_size)
            .map_err(capacity_status)?;
        if let Some(t) = &req.accessibility_requirements {
            let ours = d.topology();
            // Requisite topologies bound where the volume may be; this node must be
            // one of them (the spec's RESOURCE_EXHAUSTED "Unable to provision in
            // accessible_topology").
            if !t.requisite.is_empty() && !t.requisite.iter().any(|r| r.segments == ours.segments) {
                return Err(Status::resource_exhausted(format!(
                    "requested accessible topology is not satisfiable: volumes are only accessible from {}={}",
                    super::TOPOLOGY_KEY,
                    d.config.nodeid
                )));
            }
        }

        let mut st = d.state.lock().await;
        if let Some(existing) = st.by_name(&req.name) {
            if existing.access_type != access_type {
                return Err(Status::already_exists(format!(
                    "Volume with the same name: {} but with different access type already exists",
                    req.name
                )));
            }
            if !state::fits(existing.capacity_bytes, required, limit) {
                return Err(Status::already_exists(format!(
                    "Volume with the same name: {} but with different size already exist",
                    req.name
                )));
            }
            return Ok(Response::new(CreateVolumeResponse {
                volume: Some(self.csi_volume(existing)),
            }));
        }
        let allocated = st.allocated();
        if allocated.saturating_add(size) > d.config.capacity {
            return Err(Status::resource_exhausted(format!(
                "requested capacity {size} exceeds remaining capacity {} ({allocated} of {} in use)",
                (d.config.capacity - allocated).max(0),
                d.config.capacity
            )));
        }

        let id = uuid::Uuid::new_v4().to_string();
        let image = d.image_path(&id);
        let made = async {
            d.mounter.allocate(&image, size as u64).await?;
            if access_type == AccessType::Mount {
                d.mounter.format_ext4(&image).await?;
            }
            Ok::<_, super::mount::MountError>(())
        }
        .await;
        if let Err(e) = made {
            // Leave nothing behind: the CO retries CreateVolume with the same name.
            let cleanup = d.mounter.remove_image(&image).await;
            let msg = match cleanup {
                Ok(()) => e.to_string(),
                Err(c) => format!("{e} (and removing the image failed: {c})"),
            };
            return Err(Status::internal(msg));
        }
        let volume = Volume {
            id: id.clone(),
            name: req.name.clone(),
            capacity_bytes: size,
            access_type,
            parameters: req.parameters.into_iter().collect::<BTreeMap<_, _>>(),
            fs_bytes: if access_type == AccessType::Mount {
                size
            } else {
                0
            },
            attached: BTreeMap::new(),
            staged: None,
            published: BTreeMap::new(),
        };
        st.volumes.insert(id.clone(), volume);
        if let Err(e) = d.save(&st) {
            st.volumes.remove(&id);
            let _ = d.mounter.remove_image(&image).await;
            return Err(e);
        }
        tracing::info!(volume = %id, name = %req.name, size, "csi-hostpath: created volume");
        Ok(Response::new(CreateVolumeResponse {
            volume: Some(self.csi_volume(&st.volumes[&id])),
        }))
    }

    async fn delete_volume(
        &self,
        request: Request<DeleteVolumeRequest>,
    ) -> Result<Response<DeleteVolumeResponse>, Status> {
        let d = self.driver();
        d.faults.check("DeleteVolume")?;
        let req = request.into_inner();
        require(&req.volume_id, "Volume ID")?;
        let mut st = d.state.lock().await;
        let Some(v) = st.volumes.get(&req.volume_id) else {
            // Deleting what is gone succeeds: the CO may retry after a lost answer.
            return Ok(Response::new(DeleteVolumeResponse {}));
        };
        if v.in_use() {
            let mut users: Vec<String> = v.attached.keys().map(|n| format!("node {n}")).collect();
            if let Some(s) = &v.staged {
                users.push(format!("staged at {}", s.path.display()));
            }
            users.extend(
                v.published
                    .keys()
                    .map(|p| format!("published at {}", p.display())),
            );
            return Err(Status::failed_precondition(format!(
                "volume {} is still in use: {}",
                req.volume_id,
                users.join(", ")
            )));
        }
        let image = d.image_path(&req.volume_id);
        d.mounter.detach_loop(&image).await.map_err(internal)?;
        d.mounter.remove_image(&image).await.map_err(internal)?;
        st.volumes.remove(&req.volume_id);
        d.save(&st)?;
        tracing::info!(volume = %req.volume_id, "csi-hostpath: deleted volume");
        Ok(Response::new(DeleteVolumeResponse {}))
    }

    async fn controller_publish_volume(
        &self,
        request: Request<ControllerPublishVolumeRequest>,
    ) -> Result<Response<ControllerPublishVolumeResponse>, Status> {
        let d = self.driver();
        d.faults.check("ControllerPublishVolume")?;
        self.attach_enabled()?;
        let req = request.into_inner();
        require(&req.volume_id, "Volume ID")?;
        require(&req.node_id, "Node ID")?;
        let cap = req
            .volume_capability
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("Volume Capability missing in request"))?;
        let access_type = check_capability(cap).map_err(Status::invalid_argument)?;
        let mut st = d.state.lock().await;
        let attached_here = st
            .volumes
            .values()
            .filter(|v| v.attached.contains_key(&req.node_id))
            .count() as i64;
        let v = st
            .volumes
            .get_mut(&req.volume_id)
            .ok_or_else(|| not_found(&req.volume_id))?;
        if req.node_id != d.config.nodeid {
            return Err(Status::not_found(format!(
                "Not matching Node ID {} to hostpath Node ID {}",
                req.node_id, d.config.nodeid
            )));
        }
        if v.access_type != access_type {
            return Err(Status::invalid_argument(format!(
                "volume {} is a {:?} volume, not {:?}",
                v.id, v.access_type, access_type
            )));
        }
        match v.attached.get(&req.node_id) {
            Some(ro) if *ro != req.readonly => {
                return Err(Status::already_exists(format!(
                    "Volume published but is incompatible: already published to node {} with readonly={ro}",
                    req.node_id
                )));
            }
            Some(_) => {}
            None => {
                let max = d.config.max_volumes_per_node;
                if max > 0 && attached_here >= max {
                    return Err(Status::resource_exhausted(format!(
                        "node {} already has the maximum of {max} volumes attached",
                        req.node_id
                    )));
                }
                v.attached.insert(req.node_id.clone(), req.readonly);
                d.save(&st)?;
            }
        }
        Ok(Response::new(ControllerPublishVolumeResponse {
            publish_context: [
                ("node".to_string(), req.node_id),
                ("readonly".to_string(), req.readonly.to_string()),
            ]
            .into(),
        }))
    }

    async fn controller_unpublish_volume(
        &self,
        request: Request<ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<ControllerUnpublishVolumeResponse>, Status> {
        let d = self.driver();
        d.faults.check("ControllerUnpublishVolume")?;
        self.attach_enabled()?;
        let req = request.into_inner();
        require(&req.volume_id, "Volume ID")?;
        let mut st = d.state.lock().await;
        let v = st
            .volumes
            .get_mut(&req.volume_id)
            .ok_or_else(|| not_found(&req.volume_id))?;
        // An empty node id means every node (the spec's "unpublish from all nodes").
        let changed = if req.node_id.is_empty() {
            let had = !v.attached.is_empty();
            v.attached.clear();
            had
        } else {
            v.attached.remove(&req.node_id).is_some()
        };
        if changed {
            d.save(&st)?;
        }
        Ok(Response::new(ControllerUnpublishVolumeResponse {}))
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<ValidateVolumeCapabilitiesResponse>, Status> {
        let d = self.driver();
        d.faults.check("ValidateVolumeCapabilities")?;
        let req = request.into_inner();
        require(&req.volume_id, "Volume ID")?;
        if req.volume_capabilities.is_empty() {
            return Err(Status::invalid_argument(
                "Volume Capabilities missing in request",
            ));
        }
        let st = d.state.lock().await;
        let v = st
            .volumes
            .get(&req.volume_id)
            .ok_or_else(|| not_found(&req.volume_id))?;
        let problem = req
            .volume_capabilities
            .iter()
            .find_map(|c| match check_capability(c) {
                Err(e) => Some(e),
                Ok(t) if t != v.access_type => Some(format!(
                    "volume {} is a {:?} volume, not {t:?}",
                    v.id, v.access_type
                )),
                Ok(_) => None,
            });
        let resp = match problem {
            Some(message) => ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message,
            },
            None => ValidateVolumeCapabilitiesResponse {
                confirmed: Some(validate_volume_capabilities_response::Confirmed {
                    volume_context: req.volume_context,
                    volume_capabilities: req.volume_capabilities,
                    parameters: req.parameters,
                }),
                message: String::new(),
            },
        };
        Ok(Response::new(resp))
    }

    async fn list_volumes(
        &self,
        request: Request<ListVolumesRequest>,
    ) -> Result<Response<ListVolumesResponse>, Status> {
        let d = self.driver();
        d.faults.check("ListVolumes")?;
        let req = request.into_inner();
        if req.max_entries < 0 {
            return Err(Status::invalid_argument("max_entries may not be negative"));
        }
        let st = d.state.lock().await;
        let (entries, next_token) = page(
            st.volumes.len(),
            &req.starting_token,
            req.max_entries as usize,
        )?;
        let entries = st
            .volumes
            .values()
            .skip(entries.start)
            .take(entries.len())
            .map(|v| list_volumes_response::Entry {
                volume: Some(self.csi_volume(v)),
                status: Some(list_volumes_response::VolumeStatus {
                    published_node_ids: v.attached.keys().cloned().collect(),
                }),
            })
            .collect();
        Ok(Response::new(ListVolumesResponse {
            entries,
            next_token,
        }))
    }

    async fn get_capacity(
        &self,
        request: Request<GetCapacityRequest>,
    ) -> Result<Response<GetCapacityResponse>, Status> {
        let d = self.driver();
        d.faults.check("GetCapacity")?;
        let req = request.into_inner();
        // Another node's segment (or an unsupported capability) has no room here.
        let elsewhere = req
            .accessible_topology
            .is_some_and(|t| !t.segments.is_empty() && t.segments != d.topology().segments);
        let unsupported = req
            .volume_capabilities
            .iter()
            .any(|c| check_capability(c).is_err());
        let st = d.state.lock().await;
        let available = if elsewhere || unsupported {
            0
        } else {
            (d.config.capacity - st.allocated()).max(0)
        };
        Ok(Response::new(GetCapacityResponse {
            available_capacity: available,
            maximum_volume_size: Some(available.min(d.config.max_volume_size)),
        }))
    }

    async fn controller_get_capabilities(
        &self,
        _: Request<ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<ControllerGetCapabilitiesResponse>, Status> {
        self.driver().faults.check("ControllerGetCapabilities")?;
        Ok(Response::new(ControllerGetCapabilitiesResponse {
            capabilities: controller_capabilities(self.driver().config.attach_required),
        }))
    }

    async fn controller_expand_volume(
        &self,
        request: Request<ControllerExpandVolumeRequest>,
    ) -> Result<Response<ControllerExpandVolumeResponse>, Status> {
        let d = self.driver();
        d.faults.check("ControllerExpandVolume")?;
        let req = request.into_inner();
        require(&req.volume_id, "Volume ID")?;
        let range = req
            .capacity_range
            .ok_or_else(|| Status::invalid_argument("Capacity range not provided"))?;
        let size = state::volume_size(
            range.required_bytes,
            range.limit_bytes,
            d.config.max_volume_size,
        )
        .map_err(capacity_status)?;
        let mut st = d.state.lock().await;
        let allocated = st.allocated();
        let v = st
            .volumes
            .get_mut(&req.volume_id)
            .ok_or_else(|| not_found(&req.volume_id))?;
        if size > v.capacity_bytes {
            let grow = size - v.capacity_bytes;
            if allocated.saturating_add(grow) > d.config.capacity {
                return Err(Status::resource_exhausted(format!(
                    "expanding by {grow} bytes exceeds remaining capacity {}",
                    (d.config.capacity - allocated).max(0)
                )));
            }
            let image = d.image_path(&v.id);
            d.mounter
                .allocate(&image, size as u64)
                .await
                .map_err(internal)?;
            v.capacity_bytes = size;
            let capacity = v.capacity_bytes;
            d.save(&st)?;
            tracing::info!(volume = %req.volume_id, capacity, "csi-hostpath: expanded volume");
        }
        let capacity = st.volumes[&req.volume_id].capacity_bytes;
        // The node still has to refresh the loop device (and grow ext4), so node
        // expansion is always required, as upstream's hostpath driver says.
        Ok(Response::new(ControllerExpandVolumeResponse {
            capacity_bytes: capacity,
            node_expansion_required: true,
        }))
    }
}

/// The slice of `len` entries a ListVolumes page covers, and the next page's token
/// (empty at the end). Tokens are offsets; one the driver did not hand out is the
/// spec's ABORTED "Invalid starting_token".
pub fn page(
    len: usize,
    token: &str,
    max_entries: usize,
) -> Result<(std::ops::Range<usize>, String), Status> {
    let start = if token.is_empty() {
        0
    } else {
        token
            .parse::<usize>()
            .ok()
            .filter(|s| *s <= len)
            .ok_or_else(|| Status::aborted(format!("invalid starting_token {token:?}")))?
    };
    let end = if max_entries == 0 {
        len
    } else {
        (start + max_entries).min(len)
    };
    let next = if end < len {
        end.to_string()
    } else {
        String::new()
    };
    Ok((start..end, next))
}
