//! The plugin's side of the API, for the plugins Berth ships (`berth
//! device-plugin sample|nvidia`): serves DevicePlugin on a socket in the
//! device-plugins directory, registers with the agent, and registers again when
//! `kubelet.sock` is re-created (an agent restart), as upstream's plugins do.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio_stream::wrappers::{ReceiverStream, UnixListenerStream};
use tonic::transport::{Endpoint, Uri};
use tonic::{Request, Response, Status};
use tracing::{info, warn};

use super::pb;
use super::pb::device_plugin_server::{DevicePlugin, DevicePluginServer};
use super::pb::registration_client::RegistrationClient;
use super::{KUBELET_SOCKET, registration::SUPPORTED_VERSIONS};

/// What a plugin advertises and how it allocates.
pub trait DeviceSource: Send + Sync + 'static {
    fn resource_name(&self) -> String;
    /// The devices now, with their health.
    fn devices(&self) -> Vec<pb::Device>;
    /// One container's answer for these devices.
    fn allocate(&self, ids: &[String]) -> Result<pb::ContainerAllocateResponse, String>;
}

/// How often health is re-read and kubelet.sock checked.
const POLL: Duration = Duration::from_secs(1);

struct Service<S> {
    source: Arc<S>,
}

#[tonic::async_trait]
impl<S: DeviceSource> DevicePlugin for Service<S> {
    async fn get_device_plugin_options(
        &self,
        _: Request<pb::Empty>,
    ) -> Result<Response<pb::DevicePluginOptions>, Status> {
        Ok(Response::new(options()))
    }

    type ListAndWatchStream = ReceiverStream<Result<pb::ListAndWatchResponse, Status>>;

    async fn list_and_watch(
        &self,
        _: Request<pb::Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let source = self.source.clone();
        tokio::spawn(async move {
            let mut last: Option<Vec<pb::Device>> = None;
            loop {
                let now = source.devices();
                if last.as_ref() != Some(&now) {
                    let msg = pb::ListAndWatchResponse {
                        devices: now.clone(),
                    };
                    if tx.send(Ok(msg)).await.is_err() {
                        return;
                    }
                    last = Some(now);
                }
                tokio::select! {
                    _ = tokio::time::sleep(POLL) => {}
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn get_preferred_allocation(
        &self,
        request: Request<pb::PreferredAllocationRequest>,
    ) -> Result<Response<pb::PreferredAllocationResponse>, Status> {
        // Must-include devices first, then the available ones in order.
        let container_responses = request
            .into_inner()
            .container_requests
            .into_iter()
            .map(|r| {
                let mut ids = r.must_include_device_i_ds.clone();
                for d in r.available_device_i_ds {
                    if ids.len() >= r.allocation_size.max(0) as usize {
                        break;
                    }
                    if !ids.contains(&d) {
                        ids.push(d);
                    }
                }
                pb::ContainerPreferredAllocationResponse { device_i_ds: ids }
            })
            .collect();
        Ok(Response::new(pb::PreferredAllocationResponse {
            container_responses,
        }))
    }

    async fn allocate(
        &self,
        request: Request<pb::AllocateRequest>,
    ) -> Result<Response<pb::AllocateResponse>, Status> {
        let known: Vec<String> = self.source.devices().into_iter().map(|d| d.id).collect();
        let mut container_responses = Vec::new();
        for r in request.into_inner().container_requests {
            if let Some(bad) = r.devices_ids.iter().find(|id| !known.contains(id)) {
                return Err(Status::invalid_argument(format!("unknown device: {bad}")));
            }
            container_responses.push(
                self.source
                    .allocate(&r.devices_ids)
                    .map_err(Status::internal)?,
            );
        }
        Ok(Response::new(pb::AllocateResponse {
            container_responses,
        }))
    }

    async fn pre_start_container(
        &self,
        _: Request<pb::PreStartContainerRequest>,
    ) -> Result<Response<pb::PreStartContainerResponse>, Status> {
        Ok(Response::new(pb::PreStartContainerResponse {}))
    }
}

fn options() -> pb::DevicePluginOptions {
    pb::DevicePluginOptions {
        pre_start_required: false,
        get_preferred_allocation_available: true,
    }
}

/// Asks the agent to register `endpoint` (a socket name in `dir`).
pub async fn register(dir: &Path, endpoint: &str, resource: &str) -> Result<(), String> {
    let socket = dir.join(KUBELET_SOCKET);
    let channel = Endpoint::try_from("http://[::]:0")
        .map_err(|e| e.to_string())?
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        }))
        .await
        .map_err(|e| format!("connecting to {KUBELET_SOCKET}: {e}"))?;
    RegistrationClient::new(channel)
        .register(pb::RegisterRequest {
            version: SUPPORTED_VERSIONS[0].to_string(),
            endpoint: endpoint.to_string(),
            resource_name: resource.to_string(),
            options: Some(options()),
        })
        .await
        .map(|_| ())
        .map_err(|s| s.message().to_string())
}

/// The identity of kubelet.sock (device and inode), to see it re-created.
fn socket_id(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Serves `source` on `<dir>/<endpoint>` and keeps it registered, until the
/// process ends. A refused registration (a bad resource name) is an error.
pub async fn run<S: DeviceSource>(dir: PathBuf, endpoint: String, source: S) -> Result<(), String> {
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let socket = dir.join(&endpoint);
    match std::fs::remove_file(&socket) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("removing {}: {e}", socket.display()));
        }
        _ => {}
    }
    let listener = tokio::net::UnixListener::bind(&socket)
        .map_err(|e| format!("listening on {}: {e}", socket.display()))?;
    let resource = source.resource_name();
    let source = Arc::new(source);
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(DevicePluginServer::new(Service {
                source: source.clone(),
            }))
            .serve_with_incoming(UnixListenerStream::new(listener)),
    );
    let kubelet = dir.join(KUBELET_SOCKET);
    let mut registered_with: Option<(u64, u64)> = None;
    loop {
        if server.is_finished() {
            return Err("device plugin server stopped".into());
        }
        let now = socket_id(&kubelet);
        if now.is_some() && now != registered_with {
            match register(&dir, &endpoint, &resource).await {
                Ok(()) => {
                    info!(%resource, socket = %socket.display(), "registered with the node agent");
                    registered_with = now;
                }
                // The agent answered and refused: retrying cannot help.
                Err(e) if !e.starts_with("connecting to") => {
                    return Err(format!("registration refused: {e}"));
                }
                Err(e) => warn!(error = %e, "registration failed; retrying"),
            }
        }
        tokio::time::sleep(POLL).await;
    }
}
