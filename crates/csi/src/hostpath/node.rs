//! The Node service: a volume's image attached to a loop device and its ext4 mounted
//! at the staging path (NodeStage), bind-mounted into each pod (NodePublish); for
//! block volumes the loop device node itself is bind-mounted onto the target file.
//! Every RPC is idempotent, as the spec requires: repeating one that already
//! happened succeeds.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::controller::{check_capability, not_found, require};
use super::state::{AccessType, Staged};
use super::{Driver, internal};
use crate::v1::node_server::Node;
use crate::v1::node_service_capability::{self, rpc};
use crate::v1::volume_capability::AccessType as CapAccessType;
use crate::v1::{
    NodeExpandVolumeRequest, NodeExpandVolumeResponse, NodeGetCapabilitiesRequest,
    NodeGetCapabilitiesResponse, NodeGetInfoRequest, NodeGetInfoResponse,
    NodeGetVolumeStatsRequest, NodeGetVolumeStatsResponse, NodePublishVolumeRequest,
    NodePublishVolumeResponse, NodeServiceCapability, NodeStageVolumeRequest,
    NodeStageVolumeResponse, NodeUnpublishVolumeRequest, NodeUnpublishVolumeResponse,
    NodeUnstageVolumeRequest, NodeUnstageVolumeResponse, VolumeCapability, VolumeUsage,
    volume_usage,
};

pub struct NodeService(pub Arc<Driver>);

/// The node capabilities this driver advertises.
pub fn node_capabilities() -> Vec<NodeServiceCapability> {
    [
        rpc::Type::StageUnstageVolume,
        rpc::Type::ExpandVolume,
        rpc::Type::GetVolumeStats,
    ]
    .into_iter()
    .map(|t| NodeServiceCapability {
        r#type: Some(node_service_capability::Type::Rpc(
            node_service_capability::Rpc { r#type: t as i32 },
        )),
    })
    .collect()
}

/// The capability's access type, which must be the volume's.
fn capability_for(
    cap: Option<&VolumeCapability>,
    volume: AccessType,
) -> Result<(AccessType, Vec<String>), Status> {
    let cap =
        cap.ok_or_else(|| Status::invalid_argument("Volume Capability missing in request"))?;
    let t = check_capability(cap).map_err(Status::invalid_argument)?;
    match (t, volume) {
        (AccessType::Block, AccessType::Mount) => Err(Status::invalid_argument(
            "cannot publish a non-block volume as block volume",
        )),
        (AccessType::Mount, AccessType::Block) => Err(Status::invalid_argument(
            "cannot publish a block volume as mount volume",
        )),
        _ => {
            let flags = match &cap.access_type {
                Some(CapAccessType::Mount(m)) => m.mount_flags.clone(),
                _ => Vec::new(),
            };
            Ok((t, flags))
        }
    }
}

fn io_status(what: &str, path: &Path, e: std::io::Error) -> Status {
    Status::internal(format!("{what} {}: {e}", path.display()))
}

async fn remove_target(target: &Path) -> Result<(), Status> {
    let r = match tokio::fs::symlink_metadata(target).await {
        Ok(m) if m.is_dir() => tokio::fs::remove_dir(target).await,
        Ok(_) => tokio::fs::remove_file(target).await,
        Err(e) => Err(e),
    };
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_status("removing", target, e)),
        _ => Ok(()),
    }
}

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        request: Request<NodeStageVolumeRequest>,
    ) -> Result<Response<NodeStageVolumeResponse>, Status> {
        let d = &self.0;
        d.faults.check("NodeStageVolume")?;
        let req = request.into_inner();
        require(&req.volume_id, "Volume ID")?;
        require(&req.staging_target_path, "Staging target path")?;
        let staging = PathBuf::from(&req.staging_target_path);
        let mut st = d.state.lock().await;
        let staged_here = st.node_volumes().len() as i64;
        let v = st
            .volumes
            .get(&req.volume_id)
            .ok_or_else(|| not_found(&req.volume_id))?;
        let (access_type, flags) = capability_for(req.volume_capability.as_ref(), v.access_type)?;
        if d.config.attach_required && !v.attached.contains_key(&d.config.nodeid) {
            return Err(Status::failed_precondition(format!(
                "volume {} is not attached to node {} (ControllerPublishVolume first)",
                v.id, d.config.nodeid
            )));
        }
        if let Some(s) = &v.staged {
            if s.path != staging {
                return Err(Status::already_exists(format!(
                    "volume {} is already staged at {}",
                    v.id,
                    s.path.display()
                )));
            }
            // After a reboot the record may outlive the mount: stage again then.
            let mounted = access_type == AccessType::Block
                || d.mounter.is_mount_point(&staging).await.map_err(internal)?;
            if mounted {
                return Ok(Response::new(NodeStageVolumeResponse {}));
            }
        }
        let max = d.config.max_volumes_per_node;
        if max > 0 && v.staged.is_none() && v.published.is_empty() && staged_here >= max {
            return Err(Status::resource_exhausted(format!(
                "node {} already has the maximum of {max} volumes",
                d.config.nodeid
            )));
        }
        let image = d.image_path(&v.id);
        let (capacity, fs_bytes) = (v.capacity_bytes, v.fs_bytes);
        let device = d.mounter.attach_loop(&image).await.map_err(internal)?;
        let mut grown = None;
        if access_type == AccessType::Mount {
            let mounted = async {
                tokio::fs::create_dir_all(&staging)
                    .await
                    .map_err(|e| io_status("creating", &staging, e))?;
                if fs_bytes < capacity {
                    // Expanded while not staged (offline expansion): grow ext4 before
                    // mounting it, as mount-utils' resize-on-mount does.
                    d.mounter
                        .resize_ext4(&device, false)
                        .await
                        .map_err(internal)?;
                    grown = Some(capacity);
                }
                d.mounter
                    .mount_ext4(&device, &staging, &flags)
                    .await
                    .map_err(internal)
            }
            .await;
            if let Err(e) = mounted {
                // Do not leak the loop device: the CO retries NodeStage.
                let _ = d.mounter.detach_loop(&image).await;
                return Err(e);
            }
        }
        let v = st
            .volumes
            .get_mut(&req.volume_id)
            .ok_or_else(|| not_found(&req.volume_id))?;
        if let Some(g) = grown {
            v.fs_bytes = g;
        }
        v.staged = Some(Staged {
            path: staging,
            device,
        });
        d.save(&st)?;
        Ok(Response::new(NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        request: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        let d = &self.0;
        d.faults.check("NodeUnstageVolume")?;
        let req = request.into_inner();
        require(&req.volume_id, "Volume ID")?;
        require(&req.staging_target_path, "Staging target path")?;
        let staging = PathBuf::from(&req.staging_target_path);
        let mut st = d.state.lock().await;
        let v = st
            .volumes
            .get_mut(&req.volume_id)
            .ok_or_else(|| not_found(&req.volume_id))?;
        if !v.published.is_empty() {
            let targets: Vec<String> = v
                .published
                .keys()
                .map(|p| p.display().to_string())
                .collect();
            return Err(Status::failed_precondition(format!(
                "volume {} is still published at {}",
                v.id,
                targets.join(", ")
            )));
        }
        let image = d
            .config
            .state_dir
            .join("volumes")
            .join(format!("{}.img", v.id));
        d.mounter.unmount(&staging).await.map_err(internal)?;
        d.mounter.detach_loop(&image).await.map_err(internal)?;
        if v.staged.take().is_some() {
            d.save(&st)?;
        }
        Ok(Response::new(NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        request: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let d = &self.0;
        d.faults.check("NodePublishVolume")?;
        let req = request.into_inner();
        require(&req.volume_id, "Volume ID")?;
        require(&req.target_path, "Target path")?;
        require(&req.staging_target_path, "Staging target path")?;
        let target = PathBuf::from(&req.target_path);
        let staging = PathBuf::from(&req.staging_target_path);
        let mut st = d.state.lock().await;
        let v = st
            .volumes
            .get(&req.volume_id)
            .ok_or_else(|| not_found(&req.volume_id))?;
        let (access_type, flags) = capability_for(req.volume_capability.as_ref(), v.access_type)?;
        let device = match &v.staged {
            Some(s) if s.path == staging => s.device.clone(),
            _ => {
                return Err(Status::failed_precondition(format!(
                    "volume {} is not staged at {}",
                    v.id,
                    staging.display()
                )));
            }
        };
        if let Some(ro) = v.published.get(&target) {
            if *ro != req.readonly {
                return Err(Status::already_exists(format!(
                    "Volume published but is incompatible: {} is already published with readonly={ro}",
                    target.display()
                )));
            }
            if d.mounter.is_mount_point(&target).await.map_err(internal)? {
                return Ok(Response::new(NodePublishVolumeResponse {}));
            }
        }
        match access_type {
            AccessType::Mount => {
                tokio::fs::create_dir_all(&target)
                    .await
                    .map_err(|e| io_status("creating", &target, e))?;
                d.mounter
                    .bind(&staging, &target, req.readonly, &flags)
                    .await
                    .map_err(internal)?;
            }
            AccessType::Block => {
                // A device bind-mounts onto a file; the CO made the parent directory.
                if let Some(parent) = target.parent() {
                    tokio::fs::create_dir_all(parent)
                        .await
                        .map_err(|e| io_status("creating", parent, e))?;
                }
                tokio::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&target)
                    .await
                    .map_err(|e| io_status("creating", &target, e))?;
                d.mounter
                    .bind(&device, &target, req.readonly, &[])
                    .await
                    .map_err(internal)?;
            }
        }
        let v = st
            .volumes
            .get_mut(&req.volume_id)
            .ok_or_else(|| not_found(&req.volume_id))?;
        v.published.insert(target, req.readonly);
        d.save(&st)?;
        Ok(Response::new(NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let d = &self.0;
        d.faults.check("NodeUnpublishVolume")?;
        let req = request.into_inner();
        require(&req.volume_id, "Volume ID")?;
        require(&req.target_path, "Target path")?;
        let target = PathBuf::from(&req.target_path);
        let mut st = d.state.lock().await;
        let v = st
            .volumes
            .get_mut(&req.volume_id)
            .ok_or_else(|| not_found(&req.volume_id))?;
        d.mounter.unmount(&target).await.map_err(internal)?;
        remove_target(&target).await?;
        if v.published.remove(&target).is_some() {
            d.save(&st)?;
        }
        Ok(Response::new(NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<NodeGetVolumeStatsRequest>,
    ) -> Result<Response<NodeGetVolumeStatsResponse>, Status> {
        let d = &self.0;
        d.faults.check("NodeGetVolumeStats")?;
        let req = request.into_inner();
        require(&req.volume_id, "Volume ID")?;
        require(&req.volume_path, "Volume Path")?;
        let path = PathBuf::from(&req.volume_path);
        let st = d.state.lock().await;
        let v = st
            .volumes
            .get(&req.volume_id)
            .ok_or_else(|| not_found(&req.volume_id))?;
        if tokio::fs::symlink_metadata(&path).await.is_err() {
            return Err(Status::not_found(format!(
                "volume path {} does not exist",
                path.display()
            )));
        }
        let usage = match v.access_type {
            // A raw device has a size and nothing the driver can see inside it.
            AccessType::Block => vec![VolumeUsage {
                available: 0,
                total: v.capacity_bytes,
                used: 0,
                unit: volume_usage::Unit::Bytes as i32,
            }],
            AccessType::Mount => {
                let s = d.mounter.stats(&path).await.map_err(internal)?;
                vec![
                    VolumeUsage {
                        available: s.available_bytes,
                        total: s.total_bytes,
                        used: s.used_bytes,
                        unit: volume_usage::Unit::Bytes as i32,
                    },
                    VolumeUsage {
                        available: s.free_inodes,
                        total: s.total_inodes,
                        used: s.used_inodes,
                        unit: volume_usage::Unit::Inodes as i32,
                    },
                ]
            }
        };
        Ok(Response::new(NodeGetVolumeStatsResponse { usage }))
    }

    async fn node_expand_volume(
        &self,
        request: Request<NodeExpandVolumeRequest>,
    ) -> Result<Response<NodeExpandVolumeResponse>, Status> {
        let d = &self.0;
        d.faults.check("NodeExpandVolume")?;
        let req = request.into_inner();
        require(&req.volume_id, "Volume ID")?;
        require(&req.volume_path, "Volume path")?;
        let mut st = d.state.lock().await;
        let v = st
            .volumes
            .get_mut(&req.volume_id)
            .ok_or_else(|| not_found(&req.volume_id))?;
        if let Some(r) = &req.capacity_range
            && r.required_bytes > v.capacity_bytes
        {
            return Err(Status::out_of_range(format!(
                "requested {} bytes exceed the volume's {} (ControllerExpandVolume first)",
                r.required_bytes, v.capacity_bytes
            )));
        }
        let Some(staged) = v.staged.clone() else {
            // Not staged on this node: NodeStageVolume grows the filesystem when
            // it next mounts it.
            return Ok(Response::new(NodeExpandVolumeResponse {
                capacity_bytes: v.capacity_bytes,
            }));
        };
        d.mounter
            .refresh_loop(&staged.device)
            .await
            .map_err(internal)?;
        if v.access_type == AccessType::Mount && v.fs_bytes < v.capacity_bytes {
            // Mounted: resize2fs grows it online (the kernel needs CAP_SYS_RESOURCE).
            d.mounter
                .resize_ext4(&staged.device, true)
                .await
                .map_err(internal)?;
            v.fs_bytes = v.capacity_bytes;
            let capacity = v.capacity_bytes;
            d.save(&st)?;
            return Ok(Response::new(NodeExpandVolumeResponse {
                capacity_bytes: capacity,
            }));
        }
        Ok(Response::new(NodeExpandVolumeResponse {
            capacity_bytes: v.capacity_bytes,
        }))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        self.0.faults.check("NodeGetCapabilities")?;
        Ok(Response::new(NodeGetCapabilitiesResponse {
            capabilities: node_capabilities(),
        }))
    }

    async fn node_get_info(
        &self,
        _: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        let d = &self.0;
        d.faults.check("NodeGetInfo")?;
        Ok(Response::new(NodeGetInfoResponse {
            node_id: d.config.nodeid.clone(),
            max_volumes_per_node: d.config.max_volumes_per_node,
            accessible_topology: Some(d.topology()),
        }))
    }
}
