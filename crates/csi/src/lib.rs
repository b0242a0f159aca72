//! Container Storage Interface for Berth.
//!
//! - [`v1`]: the CSI v1 messages and services (`csi.v1`), generated from
//!   `proto/csi.proto` (the parts of the spec Berth uses).
//! - [`pluginregistration`]: kubelet's plugin registration API v1.
//! - [`client`]: typed clients over a driver's unix socket, for the node agent
//!   (Node service) and the controllers (Controller service), with a timeout per
//!   call and errors carrying the gRPC code and message.
//! - [`registration`]: both sides of plugin registration (the driver's registrar
//!   socket, and kubelet's discovery of the registry directory).
//! - [`hostpath`]: `berth csi-hostpath`, a real CSI driver (loop-mounted ext4 image
//!   files) to test the CSI integration with, as kubernetes-csi's hostpath driver.

pub mod client;
pub mod hostpath;
pub mod registration;

/// CSI v1 (`csi.v1`).
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("csi.v1");
}

/// kubelet's plugin registration API v1 (`pluginregistration`).
#[allow(clippy::all, missing_docs)]
pub mod pluginregistration {
    tonic::include_proto!("pluginregistration");
}

/// The CSI versions Berth speaks, as a driver advertises them in registration.
pub const SUPPORTED_VERSIONS: &[&str] = &["1.0.0"];

/// `PluginInfo.type` of a CSI driver (kubelet's `CSIPlugin`).
pub const CSI_PLUGIN_TYPE: &str = "CSIPlugin";

/// A unix socket that could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("{what} {}: {source}", path.display())]
pub struct SocketError {
    pub what: &'static str,
    pub path: std::path::PathBuf,
    pub source: std::io::Error,
}

/// Binds a unix socket, creating its directory and removing a stale socket file
/// left by an earlier run (a driver restarting finds its old socket in the way).
pub(crate) fn bind_unix(socket: &std::path::Path) -> Result<tokio::net::UnixListener, SocketError> {
    let err = |what, path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| SocketError { what, path, source }
    };
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir).map_err(err("creating", dir))?;
    }
    match std::fs::remove_file(socket) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(err("removing stale socket", socket)(e));
        }
        _ => {}
    }
    tokio::net::UnixListener::bind(socket).map_err(err("listening on", socket))
}
