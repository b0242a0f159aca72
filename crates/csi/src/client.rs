//! Clients of a CSI driver's unix socket, for the node agent (Identity, Node) and
//! the controllers (Identity, Controller), as kubelet's csi_client.go and the
//! external-provisioner/attacher/resizer sidecars call them.
//!
//! ```no_run
//! # async fn example() -> Result<(), berth_csi::client::CsiError> {
//! use berth_csi::client::CsiConnection;
//! use berth_csi::v1;
//! let csi = CsiConnection::connect("unix:///var/lib/kubelet/plugins/hostpath/csi.sock")?;
//! let info = csi.identity().get_plugin_info().await?;
//! let vol = csi
//!     .controller()
//!     .create_volume(v1::CreateVolumeRequest { name: "pvc-1".into(), ..Default::default() })
//!     .await;
//! if let Err(e) = vol {
//!     // e.code() is the gRPC code; e.to_string() reads as upstream's event text.
//!     eprintln!("{}: {e}", info.name);
//! }
//! # Ok(()) }
//! ```
//!
//! Every call has a timeout (default [`DEFAULT_TIMEOUT`]; `with_timeout` changes
//! it); one that runs out is a [`CsiError::Rpc`] with `DeadlineExceeded`, as a gRPC
//! deadline would be. The channel dials lazily and re-dials after the driver
//! restarts.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::Code;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::v1;
use crate::v1::controller_client::ControllerClient;
use crate::v1::identity_client::IdentityClient;
use crate::v1::node_client::NodeClient;

/// kubelet's and the sidecars' default per-call timeout is of this order (the
/// sidecars' `--timeout` defaults to 10s; kubelet's CSI calls use a few minutes for
/// mounts). Callers pick their own with `with_timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// A failed CSI call or connection.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CsiError {
    /// The endpoint is not a unix socket path.
    #[error("invalid CSI endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },
    /// The driver answered with an error, or the call failed or timed out. The text
    /// is gRPC-go's (`rpc error: code = NotFound desc = ...`), which is what
    /// upstream's events show after their prefix.
    #[error("rpc error: code = {} desc = {message}", code_name(*code))]
    Rpc {
        rpc: &'static str,
        code: Code,
        message: String,
    },
    /// The driver answered, but without a field the spec makes REQUIRED.
    #[error("{rpc}: invalid response from the driver: {reason}")]
    InvalidResponse { rpc: &'static str, reason: String },
}

impl CsiError {
    /// The gRPC code of an RPC error.
    pub fn code(&self) -> Option<Code> {
        match self {
            CsiError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the operation is known to have stopped (a "final" error in the
    /// external-provisioner's terms): the driver rejected it. Timeouts, cancels,
    /// Unavailable, ResourceExhausted and Aborted may leave it still in progress, so
    /// the caller must retry (and, for CreateVolume, must not forget the name).
    pub fn is_final(&self) -> bool {
        match self.code() {
            Some(
                Code::Cancelled
                | Code::DeadlineExceeded
                | Code::Unavailable
                | Code::ResourceExhausted
                | Code::Aborted,
            ) => false,
            Some(_) => true,
            None => true,
        }
    }
}

/// gRPC-go's code names (`codes.Code.String()`).
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

/// The socket path of a CSI endpoint: `unix:///abs/path`, `unix:/abs/path` or a
/// plain absolute path (kubelet and the sidecars accept all three).
pub fn socket_path(endpoint: &str) -> Result<PathBuf, CsiError> {
    let invalid = |reason: &str| CsiError::InvalidEndpoint {
        endpoint: endpoint.to_string(),
        reason: reason.to_string(),
    };
    let path = if let Some(rest) = endpoint.strip_prefix("unix://") {
        rest
    } else if let Some(rest) = endpoint.strip_prefix("unix:") {
        rest
    } else if endpoint.contains("://") {
        return Err(invalid("only unix sockets are supported"));
    } else {
        endpoint
    };
    if path.is_empty() {
        return Err(invalid("empty socket path"));
    }
    if !path.starts_with('/') {
        return Err(invalid("the socket path must be absolute"));
    }
    Ok(PathBuf::from(path))
}

/// A lazily dialled gRPC channel to a unix socket (the connector kubelet's CRI
/// client uses: hyper-util's TokioIo over a tokio UnixStream).
pub fn unix_channel(socket: PathBuf) -> Result<Channel, CsiError> {
    // The URI is required by tonic but unused: the connector ignores it.
    let endpoint = Endpoint::try_from("http://[::]:0")
        .map_err(|e| CsiError::InvalidEndpoint {
            endpoint: socket.display().to_string(),
            reason: e.to_string(),
        })?
        .connect_timeout(Duration::from_secs(5));
    Ok(
        endpoint.connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
            let path = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        })),
    )
}

/// Runs one call under `timeout`, turning its outcome into a [`CsiError`].
pub(crate) async fn call<T>(
    rpc: &'static str,
    timeout: Duration,
    fut: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, CsiError> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(resp)) => Ok(resp.into_inner()),
        Ok(Err(status)) => Err(CsiError::Rpc {
            rpc,
            code: status.code(),
            message: status.message().to_string(),
        }),
        Err(_) => Err(CsiError::Rpc {
            rpc,
            code: Code::DeadlineExceeded,
            message: "context deadline exceeded".to_string(),
        }),
    }
}

/// One connection to a CSI driver, handing out the three services' clients (cheap
/// clones sharing the channel).
#[derive(Clone, Debug)]
pub struct CsiConnection {
    channel: Channel,
    timeout: Duration,
    socket: PathBuf,
}

impl CsiConnection {
    /// Connects lazily: nothing is dialled until the first call.
    pub fn connect(endpoint: &str) -> Result<Self, CsiError> {
        let socket = socket_path(endpoint)?;
        Ok(CsiConnection {
            channel: unix_channel(socket.clone())?,
            timeout: DEFAULT_TIMEOUT,
            socket,
        })
    }

    /// The per-call timeout of the clients made from now on.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    pub fn identity(&self) -> Identity {
        Identity {
            inner: IdentityClient::new(self.channel.clone()),
            timeout: self.timeout,
        }
    }

    pub fn controller(&self) -> Controller {
        Controller {
            inner: ControllerClient::new(self.channel.clone()),
            timeout: self.timeout,
        }
    }

    pub fn node(&self) -> Node {
        Node {
            inner: NodeClient::new(self.channel.clone()),
            timeout: self.timeout,
        }
    }
}

/// Generates a wrapper method per RPC: the request message in, the response message
/// out, under the client's timeout.
macro_rules! rpcs {
    ($($(#[$doc:meta])* $method:ident($req:ty) -> $resp:ty = $rpc:literal;)*) => {
        $(
            $(#[$doc])*
            pub async fn $method(&self, request: $req) -> Result<$resp, CsiError> {
                let mut c = self.inner.clone();
                call($rpc, self.timeout, c.$method(request)).await
            }
        )*
    };
}

/// The Identity service of a driver.
#[derive(Clone, Debug)]
pub struct Identity {
    inner: IdentityClient<Channel>,
    timeout: Duration,
}

impl Identity {
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The driver's name and version; the name is REQUIRED.
    pub async fn get_plugin_info(&self) -> Result<v1::GetPluginInfoResponse, CsiError> {
        let mut c = self.inner.clone();
        let info = call(
            "GetPluginInfo",
            self.timeout,
            c.get_plugin_info(v1::GetPluginInfoRequest {}),
        )
        .await?;
        if info.name.is_empty() {
            return Err(CsiError::InvalidResponse {
                rpc: "GetPluginInfo",
                reason: "name is empty".into(),
            });
        }
        Ok(info)
    }

    pub async fn get_plugin_capabilities(
        &self,
    ) -> Result<v1::GetPluginCapabilitiesResponse, CsiError> {
        let mut c = self.inner.clone();
        call(
            "GetPluginCapabilities",
            self.timeout,
            c.get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {}),
        )
        .await
    }

    /// Whether the driver is ready; an unset `ready` means ready, as the spec says.
    pub async fn probe(&self) -> Result<bool, CsiError> {
        let mut c = self.inner.clone();
        let r = call("Probe", self.timeout, c.probe(v1::ProbeRequest {})).await?;
        Ok(r.ready.unwrap_or(true))
    }
}

/// The Controller service of a driver.
#[derive(Clone, Debug)]
pub struct Controller {
    inner: ControllerClient<Channel>,
    timeout: Duration,
}

impl Controller {
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The RPC capabilities the controller service advertises.
    pub async fn capabilities(
        &self,
    ) -> Result<Vec<v1::controller_service_capability::rpc::Type>, CsiError> {
        use v1::controller_service_capability::{Type, rpc};
        let r = self
            .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
            .await?;
        Ok(r.capabilities
            .into_iter()
            .filter_map(|c| match c.r#type {
                Some(Type::Rpc(r)) => rpc::Type::try_from(r.r#type).ok(),
                None => None,
            })
            .collect())
    }

    rpcs! {
        create_volume(v1::CreateVolumeRequest) -> v1::CreateVolumeResponse = "CreateVolume";
        delete_volume(v1::DeleteVolumeRequest) -> v1::DeleteVolumeResponse = "DeleteVolume";
        controller_publish_volume(v1::ControllerPublishVolumeRequest)
            -> v1::ControllerPublishVolumeResponse = "ControllerPublishVolume";
        controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest)
            -> v1::ControllerUnpublishVolumeResponse = "ControllerUnpublishVolume";
        validate_volume_capabilities(v1::ValidateVolumeCapabilitiesRequest)
            -> v1::ValidateVolumeCapabilitiesResponse = "ValidateVolumeCapabilities";
        list_volumes(v1::ListVolumesRequest) -> v1::ListVolumesResponse = "ListVolumes";
        get_capacity(v1::GetCapacityRequest) -> v1::GetCapacityResponse = "GetCapacity";
        controller_get_capabilities(v1::ControllerGetCapabilitiesRequest)
            -> v1::ControllerGetCapabilitiesResponse = "ControllerGetCapabilities";
        controller_expand_volume(v1::ControllerExpandVolumeRequest)
            -> v1::ControllerExpandVolumeResponse = "ControllerExpandVolume";
    }
}

/// The Node service of a driver.
#[derive(Clone, Debug)]
pub struct Node {
    inner: NodeClient<Channel>,
    timeout: Duration,
}

impl Node {
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The RPC capabilities the node service advertises.
    pub async fn capabilities(
        &self,
    ) -> Result<Vec<v1::node_service_capability::rpc::Type>, CsiError> {
        use v1::node_service_capability::{Type, rpc};
        let r = self
            .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
            .await?;
        Ok(r.capabilities
            .into_iter()
            .filter_map(|c| match c.r#type {
                Some(Type::Rpc(r)) => rpc::Type::try_from(r.r#type).ok(),
                None => None,
            })
            .collect())
    }

    /// The node's id, volume limit and topology; the id is REQUIRED.
    pub async fn get_info(&self) -> Result<v1::NodeGetInfoResponse, CsiError> {
        let r = self.node_get_info(v1::NodeGetInfoRequest {}).await?;
        if r.node_id.is_empty() {
            return Err(CsiError::InvalidResponse {
                rpc: "NodeGetInfo",
                reason: "node_id is empty".into(),
            });
        }
        Ok(r)
    }

    rpcs! {
        node_stage_volume(v1::NodeStageVolumeRequest) -> v1::NodeStageVolumeResponse
            = "NodeStageVolume";
        node_unstage_volume(v1::NodeUnstageVolumeRequest) -> v1::NodeUnstageVolumeResponse
            = "NodeUnstageVolume";
        node_publish_volume(v1::NodePublishVolumeRequest) -> v1::NodePublishVolumeResponse
            = "NodePublishVolume";
        node_unpublish_volume(v1::NodeUnpublishVolumeRequest)
            -> v1::NodeUnpublishVolumeResponse = "NodeUnpublishVolume";
        node_get_volume_stats(v1::NodeGetVolumeStatsRequest)
            -> v1::NodeGetVolumeStatsResponse = "NodeGetVolumeStats";
        node_expand_volume(v1::NodeExpandVolumeRequest) -> v1::NodeExpandVolumeResponse
            = "NodeExpandVolume";
        node_get_capabilities(v1::NodeGetCapabilitiesRequest)
            -> v1::NodeGetCapabilitiesResponse = "NodeGetCapabilities";
        node_get_info(v1::NodeGetInfoRequest) -> v1::NodeGetInfoResponse = "NodeGetInfo";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        let cases: &[(&str, Option<&str>)] = &[
            ("unix:///var/lib/csi.sock", Some("/var/lib/csi.sock")),
            ("unix:/var/lib/csi.sock", Some("/var/lib/csi.sock")),
            ("/run/csi/socket", Some("/run/csi/socket")),
            ("unix://", None),
            ("tcp://127.0.0.1:10000", None),
            ("relative/csi.sock", None),
            ("", None),
        ];
        for (endpoint, want) in cases {
            let got = socket_path(endpoint).ok();
            assert_eq!(got.as_deref(), want.map(std::path::Path::new), "{endpoint}");
        }
    }

    #[test]
    fn error_texts_and_finality() {
        let rpc = |code| CsiError::Rpc {
            rpc: "CreateVolume",
            code,
            message: "boom".into(),
        };
        let cases = [
            (
                Code::InvalidArgument,
                "rpc error: code = InvalidArgument desc = boom",
                true,
            ),
            (
                Code::DeadlineExceeded,
                "rpc error: code = DeadlineExceeded desc = boom",
                false,
            ),
            (
                Code::Cancelled,
                "rpc error: code = Canceled desc = boom",
                false,
            ),
            (
                Code::ResourceExhausted,
                "rpc error: code = ResourceExhausted desc = boom",
                false,
            ),
            (
                Code::Internal,
                "rpc error: code = Internal desc = boom",
                true,
            ),
            (
                Code::Aborted,
                "rpc error: code = Aborted desc = boom",
                false,
            ),
        ];
        for (code, text, fin) in cases {
            let e = rpc(code);
            assert_eq!(e.to_string(), text);
            assert_eq!(e.is_final(), fin, "{code:?}");
            assert_eq!(e.code(), Some(code));
        }
    }

    #[tokio::test]
    async fn unreachable_socket_is_unavailable_and_timeouts_are_deadlines() {
        let csi = CsiConnection::connect("unix:///nonexistent/berth-csi-test.sock")
            .expect("valid endpoint");
        let e = csi.identity().probe().await.expect_err("no driver");
        assert_eq!(e.code(), Some(Code::Unavailable), "{e}");

        let e = call::<()>("Probe", Duration::from_millis(10), std::future::pending())
            .await
            .expect_err("times out");
        assert_eq!(e.code(), Some(Code::DeadlineExceeded));
    }
}
