//! `berth csi-hostpath`: a CSI v1 driver whose volumes are ext4 filesystems in
//! sparse image files on this node, attached through loop devices — a real driver to
//! test Berth's CSI integration with, as kubernetes-csi's csi-driver-host-path is
//! Kubernetes'. One process serves the Identity, Controller and Node services on a
//! unix socket; state survives restarts in `<state-dir>/state.json`.
//!
//! - [`identity`]: plugin info, capabilities, Probe.
//! - [`controller`]: create/delete/expand volumes, attachments, capacity.
//! - [`node`]: stage (loop + mount), publish (bind), stats, expansion.
//! - [`state`]: the volumes and their records; capacity rules.
//! - [`mount`]: the kernel-facing [`Mounter`] with a real and a fake implementation.
//!
//! `--fail <RPC>[:<count>]` makes an RPC answer `Internal` ("injected failure"), for
//! tests of how the CO handles a driver that fails mid-way.

pub mod controller;
pub mod identity;
pub mod mount;
pub mod node;
pub mod state;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio_stream::wrappers::UnixListenerStream;
use tonic::Status;

use crate::v1::controller_server::ControllerServer;
use crate::v1::identity_server::IdentityServer;
use crate::v1::node_server::NodeServer;
pub use mount::{FakeMounter, Mounter, SystemMounter};
use state::State;

/// Upstream's hostpath driver is `hostpath.csi.k8s.io`; Berth's has its own name so
/// both can run on one node.
pub const DEFAULT_DRIVER_NAME: &str = "hostpath.csi.berth.dev";

/// The topology key volumes and the node report (upstream's hostpath driver's).
pub const TOPOLOGY_KEY: &str = "topology.hostpath.csi/node";

/// Every RPC `--fail` may name.
pub const RPCS: &[&str] = &[
    "GetPluginInfo",
    "GetPluginCapabilities",
    "Probe",
    "CreateVolume",
    "DeleteVolume",
    "ControllerPublishVolume",
    "ControllerUnpublishVolume",
    "ValidateVolumeCapabilities",
    "ListVolumes",
    "GetCapacity",
    "ControllerGetCapabilities",
    "ControllerExpandVolume",
    "NodeStageVolume",
    "NodeUnstageVolume",
    "NodePublishVolume",
    "NodeUnpublishVolume",
    "NodeGetVolumeStats",
    "NodeExpandVolume",
    "NodeGetCapabilities",
    "NodeGetInfo",
];

/// The driver's flags (`berth csi-hostpath --help`), named as upstream's.
#[derive(clap::Args, Debug, Clone)]
pub struct Config {
    /// CSI endpoint to serve: unix:///path/csi.sock or a plain path.
    #[arg(long, default_value = "unix:///var/lib/berth/csi-hostpath/csi.sock")]
    pub endpoint: String,
    /// This node's id, as the CO knows the node (NodeGetInfo, topology).
    #[arg(long)]
    pub nodeid: String,
    /// The driver's name (GetPluginInfo, registration).
    #[arg(long, default_value = DEFAULT_DRIVER_NAME)]
    pub drivername: String,
    /// Where volume images and the state file live.
    #[arg(long, default_value = "/var/lib/berth/csi-hostpath")]
    pub state_dir: PathBuf,
    /// NodeGetInfo's max_volumes_per_node (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_volumes_per_node: i64,
    /// Total bytes all volumes together may have (GetCapacity; beyond it
    /// CreateVolume is ResourceExhausted).
    #[arg(long, default_value = "100Gi", value_parser = state::parse_bytes)]
    pub capacity: i64,
    /// The largest single volume (beyond it CreateVolume is OutOfRange).
    #[arg(long, default_value = "1Ti", value_parser = state::parse_bytes)]
    pub max_volume_size: i64,
    /// Advertise PUBLISH_UNPUBLISH_VOLUME (the CO attaches volumes with
    /// ControllerPublishVolume first); false answers those RPCs Unimplemented.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub attach_required: bool,
    /// Also serve kubelet plugin registration (node-driver-registrar's job) in this
    /// directory, as `<dir>/<drivername>-reg.sock`.
    #[arg(long)]
    pub registry_dir: Option<PathBuf>,
    /// Make RPC answer Internal "injected failure" COUNT times (every time without
    /// a count); repeatable.
    #[arg(long = "fail", value_name = "RPC[:COUNT]", value_parser = parse_fault)]
    pub fail: Vec<Fault>,
}

impl Config {
    /// A config with the defaults, for embedding the driver (tests).
    pub fn new(endpoint: impl Into<String>, nodeid: impl Into<String>, state_dir: PathBuf) -> Self {
        Config {
            endpoint: endpoint.into(),
            nodeid: nodeid.into(),
            drivername: DEFAULT_DRIVER_NAME.to_string(),
            state_dir,
            max_volumes_per_node: 0,
            capacity: 100 * state::GIB,
            max_volume_size: 1 << 40,
            attach_required: true,
            registry_dir: None,
            fail: Vec::new(),
        }
    }
}

/// One `--fail` flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub rpc: String,
    /// None: every call fails.
    pub count: Option<u32>,
}

/// Parses `RPC[:COUNT]`, refusing RPC names the driver does not serve (a typo would
/// otherwise make a test pass for the wrong reason).
pub fn parse_fault(s: &str) -> Result<Fault, String> {
    let (rpc, count) = match s.split_once(':') {
        Some((r, c)) => {
            let n: u32 = c
                .parse()
                .map_err(|_| format!("invalid count {c:?} in --fail {s:?}"))?;
            (r, Some(n))
        }
        None => (s, None),
    };
    if !RPCS.contains(&rpc) {
        return Err(format!(
            "unknown RPC {rpc:?} in --fail (one of {})",
            RPCS.join(", ")
        ));
    }
    Ok(Fault {
        rpc: rpc.to_string(),
        count,
    })
}

/// Remaining injected failures per RPC.
#[derive(Debug, Default)]
pub struct Faults {
    remaining: Mutex<BTreeMap<String, Option<u32>>>,
}

impl Faults {
    pub fn new(faults: &[Fault]) -> Self {
        Faults {
            remaining: Mutex::new(faults.iter().map(|f| (f.rpc.clone(), f.count)).collect()),
        }
    }

    /// Internal("injected failure") while `rpc` has failures left.
    pub fn check(&self, rpc: &str) -> Result<(), Status> {
        let mut m = self.remaining.lock().unwrap_or_else(|p| p.into_inner());
        match m.get_mut(rpc) {
            Some(None) => {}
            Some(Some(n)) if *n > 0 => *n -= 1,
            _ => return Ok(()),
        }
        tracing::info!(rpc, "csi-hostpath: injected failure");
        Err(Status::internal("injected failure"))
    }
}

/// The driver: configuration, state and the kernel, shared by the three services.
pub struct Driver {
    pub config: Config,
    pub(crate) state: tokio::sync::Mutex<State>,
    pub(crate) mounter: Arc<dyn Mounter>,
    pub(crate) faults: Faults,
}

/// The driver could not start or serve.
#[derive(Debug, thiserror::Error)]
pub enum HostpathError {
    #[error(transparent)]
    State(#[from] state::StateError),
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Socket(#[from] crate::SocketError),
    #[error(transparent)]
    Endpoint(#[from] crate::client::CsiError),
    #[error("serving CSI: {0}")]
    Serve(#[from] tonic::transport::Error),
    #[error(transparent)]
    Registration(#[from] crate::registration::RegistrationError),
}

impl Driver {
    /// Loads the state file (creating the state directories).
    pub fn new(config: Config, mounter: Arc<dyn Mounter>) -> Result<Arc<Driver>, HostpathError> {
        let volumes = config.state_dir.join("volumes");
        std::fs::create_dir_all(&volumes).map_err(|source| HostpathError::Io {
            what: "creating",
            path: volumes.clone(),
            source,
        })?;
        let state = State::load(&config.state_dir.join("state.json"))?;
        let faults = Faults::new(&config.fail);
        Ok(Arc::new(Driver {
            config,
            state: tokio::sync::Mutex::new(state),
            mounter,
            faults,
        }))
    }

    pub fn image_path(&self, id: &str) -> PathBuf {
        self.config
            .state_dir
            .join("volumes")
            .join(format!("{id}.img"))
    }

    fn state_file(&self) -> PathBuf {
        self.config.state_dir.join("state.json")
    }

    /// Persists `state`; a failure is Internal (the change happened on disk but
    /// would be forgotten by a restart, so the CO must retry).
    pub(crate) fn save(&self, state: &State) -> Result<(), Status> {
        state
            .save(&self.state_file())
            .map_err(|e| Status::internal(e.to_string()))
    }

    /// The topology segment of this node's volumes.
    pub fn topology(&self) -> crate::v1::Topology {
        crate::v1::Topology {
            segments: [(TOPOLOGY_KEY.to_string(), self.config.nodeid.clone())].into(),
        }
    }
}

/// A kernel failure as the RPC's answer.
pub(crate) fn internal(e: mount::MountError) -> Status {
    Status::internal(e.to_string())
}

/// Serves the driver on its endpoint until `shutdown` resolves (the socket file is
/// replaced if stale, and removed at the end).
pub async fn serve_with(
    driver: Arc<Driver>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HostpathError> {
    let socket = crate::client::socket_path(&driver.config.endpoint)?;
    let listener = crate::bind_unix(&socket)?;
    let registration = match &driver.config.registry_dir {
        Some(dir) => Some(crate::registration::PluginRegistration::start(
            dir,
            &driver.config.drivername,
            &socket,
        )?),
        None => None,
    };
    tracing::info!(
        endpoint = %socket.display(),
        driver = %driver.config.drivername,
        node = %driver.config.nodeid,
        "csi-hostpath: serving"
    );
    let result = tonic::transport::Server::builder()
        .add_service(IdentityServer::new(identity::IdentityService(
            driver.clone(),
        )))
        .add_service(ControllerServer::new(controller::ControllerService(
            driver.clone(),
        )))
        .add_service(NodeServer::new(node::NodeService(driver.clone())))
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await;
    if let Some(r) = registration {
        r.stop().await;
    }
    let _ = std::fs::remove_file(&socket);
    Ok(result?)
}

/// Serves with the real kernel until `shutdown` resolves (embedding, tests).
pub async fn serve(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HostpathError> {
    let driver = Driver::new(config, Arc::new(SystemMounter))?;
    serve_with(driver, shutdown).await
}

/// `berth csi-hostpath`: serves until SIGINT or SIGTERM.
pub async fn run(config: Config) -> Result<(), HostpathError> {
    serve(config, async {
        let ctrl_c = tokio::signal::ctrl_c();
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    })
    .await
}

#[cfg(test)]
mod tests;
