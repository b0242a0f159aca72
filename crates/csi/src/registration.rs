//! kubelet plugin registration, both sides.
//!
//! - The plugin's side, what kubernetes-csi's node-driver-registrar does:
//!   [`PluginRegistration::start`] serves `Registration` on
//!   `<registry_dir>/<driver>-reg.sock`, answering `GetInfo` with
//!   `{type: "CSIPlugin", name, endpoint, supported_versions: ["1.0.0"]}` and
//!   recording kubelet's `NotifyRegistrationStatus`.
//! - kubelet's side, its plugin watcher: [`discover`] lists the `*.sock` sockets of
//!   the registry directory, asks each `GetInfo`, validates it as kubelet's CSI
//!   plugin handler does, and reports the verdict with `NotifyRegistrationStatus`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::watch;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

use crate::client::{CsiError, call, unix_channel};
use crate::pluginregistration::registration_client::RegistrationClient;
use crate::pluginregistration::registration_server::{Registration, RegistrationServer};
use crate::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};
use crate::{CSI_PLUGIN_TYPE, SUPPORTED_VERSIONS};

/// How long [`discover`] waits for each plugin's answers.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// Registration could not be served or completed.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Socket(#[from] crate::SocketError),
    /// GetInfo or NotifyRegistrationStatus failed.
    #[error("{}: {source}", socket.display())]
    Rpc { socket: PathBuf, source: CsiError },
    /// kubelet's CSI handler refused the plugin (the message is what it tells the
    /// plugin in NotifyRegistrationStatus).
    #[error("{}: {message}", socket.display())]
    Rejected { socket: PathBuf, message: String },
}

/// The registration socket's path for a driver (node-driver-registrar's name).
pub fn socket_for(registry_dir: &Path, driver: &str) -> PathBuf {
    registry_dir.join(format!("{driver}-reg.sock"))
}

/// The plugin side's Registration service.
struct Registrar {
    info: PluginInfo,
    status: watch::Sender<Option<RegistrationStatus>>,
}

#[tonic::async_trait]
impl Registration for Registrar {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        if status.plugin_registered {
            tracing::info!(driver = %self.info.name, "registered with kubelet");
        } else {
            // node-driver-registrar exits here so its pod restarts; an embedded
            // registrar records it and keeps serving for the next attempt.
            tracing::error!(driver = %self.info.name, error = %status.error, "kubelet refused registration");
        }
        self.status.send_replace(Some(status));
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

/// A running registration socket.
pub struct PluginRegistration {
    socket: PathBuf,
    status: watch::Receiver<Option<RegistrationStatus>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl PluginRegistration {
    /// Serves Registration for `driver`, whose CSI socket is `endpoint`, in
    /// `registry_dir` (a stale socket of an earlier run is replaced).
    pub fn start(
        registry_dir: &Path,
        driver: &str,
        endpoint: &Path,
    ) -> Result<PluginRegistration, RegistrationError> {
        let socket = socket_for(registry_dir, driver);
        let listener = crate::bind_unix(&socket)?;
        let (tx, rx) = watch::channel(None);
        let registrar = Registrar {
            info: PluginInfo {
                r#type: CSI_PLUGIN_TYPE.to_string(),
                name: driver.to_string(),
                endpoint: endpoint.display().to_string(),
                supported_versions: SUPPORTED_VERSIONS.iter().map(|v| v.to_string()).collect(),
            },
            status: tx,
        };
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let path = socket.clone();
        let task = tokio::spawn(async move {
            let r = tonic::transport::Server::builder()
                .add_service(RegistrationServer::new(registrar))
                .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
                    let _ = stop_rx.await;
                })
                .await;
            if let Err(e) = r {
                tracing::error!(socket = %path.display(), "registration server: {e}");
            }
        });
        Ok(PluginRegistration {
            socket,
            status: rx,
            stop: Some(stop_tx),
            task,
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// kubelet's last verdict, if it gave one.
    pub fn status(&self) -> Option<RegistrationStatus> {
        self.status.borrow().clone()
    }

    /// Waits for kubelet's next verdict.
    pub async fn wait_status(&mut self) -> Option<RegistrationStatus> {
        self.status.changed().await.ok()?;
        self.status.borrow().clone()
    }

    /// Stops serving and removes the socket (kubelet then deregisters the plugin).
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = (&mut self.task).await;
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// A plugin kubelet accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredPlugin {
    /// Its registration socket.
    pub socket: PathBuf,
    pub name: String,
    /// Its CSI endpoint.
    pub endpoint: String,
    /// The CSI version chosen (the highest supported one).
    pub version: String,
}

/// What one pass over the registry directory found.
#[derive(Debug, Default)]
pub struct Discovery {
    pub registered: Vec<RegisteredPlugin>,
    pub failed: Vec<RegistrationError>,
}

/// kubelet's CSI plugin handler's checks of a plugin's GetInfo: a CSI plugin with a
/// name, an endpoint, and a supported CSI version (the highest one wins). The error
/// texts are upstream's.
pub fn validate(info: &PluginInfo) -> Result<String, String> {
    if info.r#type != CSI_PLUGIN_TYPE {
        return Err(format!(
            "plugin type {:?} is not handled (want {CSI_PLUGIN_TYPE:?})",
            info.r#type
        ));
    }
    if info.name.is_empty() {
        return Err("plugin name is empty".to_string());
    }
    if info.endpoint.is_empty() {
        return Err(format!("plugin {} has an empty endpoint", info.name));
    }
    let supported: Vec<(u64, u64, u64, &str)> = info
        .supported_versions
        .iter()
        .filter_map(|v| parse_version(v).map(|p| (p.0, p.1, p.2, v.as_str())))
        .filter(|(major, ..)| *major == 1)
        .collect();
    match supported.iter().max() {
        Some((.., v)) => Ok((*v).to_string()),
        None => Err(format!(
            "none of the versions specified {:?} are supported",
            info.supported_versions
        )),
    }
}

/// `1.0.0`, `v1.2`, `1` → (major, minor, patch).
fn parse_version(v: &str) -> Option<(u64, u64, u64)> {
    let v = v.strip_prefix('v').unwrap_or(v);
    let mut parts = v.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    let patch = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    Some((major, minor, patch))
}

/// Registers every plugin socket in `registry_dir`, as kubelet's plugin watcher
/// does on start: GetInfo, validate, NotifyRegistrationStatus with the verdict.
/// Dot files and non-sockets are skipped, as kubelet skips them.
pub async fn discover(registry_dir: &Path) -> Result<Discovery, RegistrationError> {
    let mut entries =
        tokio::fs::read_dir(registry_dir)
            .await
            .map_err(|source| RegistrationError::Io {
                what: "reading",
                path: registry_dir.to_path_buf(),
                source,
            })?;
    let mut sockets = Vec::new();
    while let Some(e) = entries
        .next_entry()
        .await
        .map_err(|source| RegistrationError::Io {
            what: "reading",
            path: registry_dir.to_path_buf(),
            source,
        })?
    {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || !name.ends_with(".sock") {
            continue;
        }
        use std::os::unix::fs::FileTypeExt;
        if e.file_type().await.is_ok_and(|t| t.is_socket()) {
            sockets.push(e.path());
        }
    }
    sockets.sort();
    let mut out = Discovery::default();
    for socket in sockets {
        match register_one(&socket).await {
            Ok(p) => out.registered.push(p),
            Err(e) => out.failed.push(e),
        }
    }
    Ok(out)
}

/// One plugin's registration handshake.
pub async fn register_one(socket: &Path) -> Result<RegisteredPlugin, RegistrationError> {
    let rpc_err = |source| RegistrationError::Rpc {
        socket: socket.to_path_buf(),
        source,
    };
    let channel = unix_channel(socket.to_path_buf()).map_err(rpc_err)?;
    let mut client = RegistrationClient::new(channel);
    let info = call(
        "GetInfo",
        DISCOVERY_TIMEOUT,
        client.get_info(InfoRequest {}),
    )
    .await
    .map_err(rpc_err)?;
    let verdict = validate(&info);
    let status = RegistrationStatus {
        plugin_registered: verdict.is_ok(),
        error: verdict.as_ref().err().cloned().unwrap_or_default(),
    };
    call(
        "NotifyRegistrationStatus",
        DISCOVERY_TIMEOUT,
        client.notify_registration_status(status),
    )
    .await
    .map_err(rpc_err)?;
    match verdict {
        Ok(version) => Ok(RegisteredPlugin {
            socket: socket.to_path_buf(),
            name: info.name,
            endpoint: info.endpoint,
            version,
        }),
        Err(message) => Err(RegistrationError::Rejected {
            socket: socket.to_path_buf(),
            message,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(t: &str, name: &str, endpoint: &str, versions: &[&str]) -> PluginInfo {
        PluginInfo {
            r#type: t.into(),
            name: name.into(),
            endpoint: endpoint.into(),
            supported_versions: versions.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn validation() {
        let cases = [
            (info("CSIPlugin", "d", "/csi.sock", &["1.0.0"]), Ok("1.0.0")),
            (
                info("CSIPlugin", "d", "/csi.sock", &["0.3.0", "1.2.0", "1.0.0"]),
                Ok("1.2.0"),
            ),
            (info("CSIPlugin", "d", "/csi.sock", &["v1.5"]), Ok("v1.5")),
            (info("DevicePlugin", "d", "/csi.sock", &["1.0.0"]), Err(())),
            (info("CSIPlugin", "", "/csi.sock", &["1.0.0"]), Err(())),
            (info("CSIPlugin", "d", "", &["1.0.0"]), Err(())),
            (
                info("CSIPlugin", "d", "/csi.sock", &["0.3.0", "2.0.0", "x"]),
                Err(()),
            ),
            (info("CSIPlugin", "d", "/csi.sock", &[]), Err(())),
        ];
        for (i, want) in cases {
            let got = validate(&i);
            assert_eq!(got.as_deref().map_err(drop), want, "{i:?}");
        }
        let e = validate(&info("CSIPlugin", "d", "/s", &["0.3.0"])).expect_err("old");
        assert_eq!(
            e,
            r#"none of the versions specified ["0.3.0"] are supported"#
        );
    }

    #[tokio::test]
    async fn registrar_and_discovery_handshake() {
        let dir = std::env::temp_dir().join(format!("berth-csi-reg-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        // Things kubelet ignores: a dot file and a regular file named .sock.
        std::fs::write(dir.join("not-a-socket.sock"), b"").expect("file");
        let mut reg = PluginRegistration::start(&dir, "hostpath.test", Path::new("/run/csi.sock"))
            .expect("start");
        assert_eq!(reg.socket(), dir.join("hostpath.test-reg.sock"));
        assert_eq!(reg.status(), None);

        let found = discover(&dir).await.expect("discover");
        assert!(found.failed.is_empty(), "{:?}", found.failed);
        assert_eq!(
            found.registered,
            vec![RegisteredPlugin {
                socket: dir.join("hostpath.test-reg.sock"),
                name: "hostpath.test".into(),
                endpoint: "/run/csi.sock".into(),
                version: "1.0.0".into(),
            }]
        );
        let status = match reg.status() {
            Some(s) => s,
            None => reg.wait_status().await.expect("status"),
        };
        assert!(status.plugin_registered);
        assert_eq!(status.error, "");

        reg.stop().await;
        assert!(!dir.join("hostpath.test-reg.sock").exists());
        let found = discover(&dir).await.expect("discover");
        assert!(found.registered.is_empty() && found.failed.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
