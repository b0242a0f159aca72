//! The agent's side of the wire: the Registration service on `kubelet.sock`,
//! and a client of each plugin's socket that follows its ListAndWatch stream
//! (upstream's `plugin/v1beta1/server.go`, `client.go` and `endpoint.go`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::{Request, Response, Status};
use tracing::{info, warn};

use super::pb;
use super::pb::device_plugin_client::DevicePluginClient;
use super::pb::registration_server::{Registration, RegistrationServer};
use super::{DeviceManager, KUBELET_SOCKET, registration};

/// Binds `kubelet.sock` (replacing a stale one: its re-creation is what tells
/// running plugins to register again) and serves Registration on it.
pub(super) async fn serve_registration(dm: Arc<DeviceManager>) -> std::io::Result<()> {
    let socket = dm.dir().join(KUBELET_SOCKET);
    match std::fs::remove_file(&socket) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = tokio::net::UnixListener::bind(&socket)?;
    info!(socket = %socket.display(), "device plugin registration service listening");
    tokio::spawn(async move {
        let svc = RegistrationServer::new(RegistrationService { dm });
        if let Err(e) = tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(UnixListenerStream::new(listener))
            .await
        {
            warn!(error = %e, "device plugin registration service stopped");
        }
    });
    Ok(())
}

struct RegistrationService {
    dm: Arc<DeviceManager>,
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn register(
        &self,
        request: Request<pb::RegisterRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let req = request.into_inner();
        info!(resource = %req.resource_name, endpoint = %req.endpoint, version = %req.version, "device plugin registration");
        if let Err(e) = registration::validate(&req) {
            warn!(resource = %req.resource_name, error = %e, "device plugin registration refused");
            // Upstream returns a plain Go error: gRPC code Unknown.
            return Err(Status::unknown(e.to_string()));
        }
        let socket = self.dm.dir().join(&req.endpoint);
        let client =
            PluginClient::connect(socket.clone(), self.dm.call_timeout).map_err(Status::unknown)?;
        // The options the plugin gives in Register; upstream asks again with
        // GetDevicePluginOptions when connecting back, which also checks the
        // plugin is serving before Register returns.
        let options = client
            .options()
            .await
            .map_err(|e| Status::unknown(format!("failed to dial device plugin: {e}")))?;
        let generation = self.dm.registered(&req.resource_name, socket, options);
        tokio::spawn(list_and_watch(
            self.dm.clone(),
            client,
            req.resource_name,
            generation,
        ));
        Ok(Response::new(pb::Empty {}))
    }
}

/// Follows a plugin's ListAndWatch until the stream ends (the plugin stopped or
/// re-registered), then marks its devices unhealthy.
async fn list_and_watch(
    dm: Arc<DeviceManager>,
    client: PluginClient,
    resource: String,
    generation: u64,
) {
    let mut inner = client.inner.clone();
    match inner.list_and_watch(pb::Empty {}).await {
        Ok(resp) => {
            let mut stream = resp.into_inner();
            loop {
                match stream.message().await {
                    Ok(Some(update)) => {
                        let healthy = update
                            .devices
                            .iter()
                            .filter(|d| d.health == super::HEALTHY)
                            .count();
                        info!(%resource, devices = update.devices.len(), healthy, "device plugin ListAndWatch update");
                        dm.update_devices(&resource, generation, update.devices);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        warn!(%resource, error = %e, "device plugin ListAndWatch failed");
                        break;
                    }
                }
            }
        }
        Err(e) => warn!(%resource, error = %e, "device plugin ListAndWatch failed"),
    }
    warn!(%resource, "device plugin stopped: its devices are unhealthy");
    dm.stopped(&resource, generation);
}

/// A client of one plugin's socket, each call under a timeout.
#[derive(Clone)]
pub struct PluginClient {
    inner: DevicePluginClient<Channel>,
    timeout: Duration,
}

impl PluginClient {
    /// Dials lazily (nothing happens before the first call).
    pub fn connect(socket: PathBuf, timeout: Duration) -> Result<PluginClient, String> {
        let endpoint = Endpoint::try_from("http://[::]:0")
            .map_err(|e| e.to_string())?
            .connect_timeout(Duration::from_secs(5));
        let channel = endpoint.connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
            let path = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        }));
        Ok(PluginClient {
            inner: DevicePluginClient::new(channel),
            timeout,
        })
    }

    async fn call<T>(
        &self,
        fut: impl std::future::Future<Output = Result<Response<T>, Status>>,
    ) -> Result<T, String> {
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(format!(
                "rpc error: code = {:?} desc = {}",
                s.code(),
                s.message()
            )),
            Err(_) => {
                Err("rpc error: code = DeadlineExceeded desc = context deadline exceeded".into())
            }
        }
    }

    pub async fn options(&self) -> Result<pb::DevicePluginOptions, String> {
        let mut c = self.inner.clone();
        self.call(c.get_device_plugin_options(pb::Empty {})).await
    }

    pub async fn preferred(
        &self,
        available: Vec<String>,
        size: usize,
    ) -> Result<Vec<String>, String> {
        let mut c = self.inner.clone();
        let req = pb::PreferredAllocationRequest {
            container_requests: vec![pb::ContainerPreferredAllocationRequest {
                available_device_i_ds: available,
                must_include_device_i_ds: Vec::new(),
                allocation_size: i32::try_from(size).unwrap_or(i32::MAX),
            }],
        };
        let resp = self.call(c.get_preferred_allocation(req)).await?;
        Ok(resp
            .container_responses
            .into_iter()
            .next()
            .map(|r| r.device_i_ds)
            .unwrap_or_default())
    }

    pub async fn allocate(
        &self,
        ids: Vec<String>,
    ) -> Result<pb::ContainerAllocateResponse, String> {
        let mut c = self.inner.clone();
        let req = pb::AllocateRequest {
            container_requests: vec![pb::ContainerAllocateRequest { devices_ids: ids }],
        };
        let resp = self.call(c.allocate(req)).await?;
        let n = resp.container_responses.len();
        resp.container_responses
            .into_iter()
            .next()
            .filter(|_| n == 1)
            .ok_or_else(|| {
                format!("plugin answered Allocate with {n} container responses for 1 request")
            })
    }

    pub async fn pre_start(&self, ids: Vec<String>) -> Result<(), String> {
        let mut c = self.inner.clone();
        self.call(c.pre_start_container(pb::PreStartContainerRequest { devices_ids: ids }))
            .await
            .map(|_| ())
    }
}
