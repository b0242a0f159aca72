//! [`Runtime`] over CRI v1: gRPC (tonic) to containerd's unix socket.
//!
//! Conversions between Berth's runtime types and CRI messages are plain functions
//! (`convert`), tested without a socket; this file is only the calls.

mod containerd;
mod convert;
mod stats;

pub use containerd::{
    ContainerdConfig, ContainerdProcess, INSTALL_HINT, MissingRuntime, find_program,
};

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use k8s_cri::v1 as cri;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::runtime::{
    ContainerConfig, ContainerStats, ContainerStatus, ExecResult, Filter, FsUsage, ImageInfo,
    LinuxResources, Runtime, RuntimeError, RuntimeResult, SandboxConfig, SandboxStats,
    SandboxStatus, StreamUrl,
};

/// How long an ordinary CRI call may take before it is abandoned.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// How long the runtime health check waits for `Status` (a runtime that does not
/// answer is down once its last good answer is older than the node's threshold).
const STATUS_TIMEOUT: Duration = Duration::from_secs(10);

/// A CRI v1 client on a unix socket.
#[derive(Clone)]
pub struct CriRuntime {
    runtime: RuntimeServiceClient<Channel>,
    images: ImageServiceClient<Channel>,
    socket: PathBuf,
}

impl CriRuntime {
    /// Connects lazily: the channel dials the socket on first use and re-dials
    /// after containerd restarts.
    pub fn connect(socket: &Path) -> RuntimeResult<Self> {
        let path = socket.to_path_buf();
        let endpoint = Endpoint::try_from("http://[::]:0")
            .map_err(|e| RuntimeError::Other(e.to_string()))?
            .timeout(CALL_TIMEOUT)
            .connect_timeout(Duration::from_secs(5));
        let channel = endpoint.connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        }));
        Ok(CriRuntime {
            runtime: RuntimeServiceClient::new(channel.clone()),
            images: ImageServiceClient::new(channel),
            socket: socket.to_path_buf(),
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

fn status_error(what: &str, s: tonic::Status) -> RuntimeError {
    match s.code() {
        tonic::Code::NotFound => RuntimeError::NotFound(format!("{what}: {}", s.message())),
        tonic::Code::DeadlineExceeded => RuntimeError::Timeout(Duration::ZERO),
        tonic::Code::Unavailable => RuntimeError::Unavailable(s.message().to_string()),
        _ => RuntimeError::Other(format!(
            "rpc error: code = {:?} desc = {}",
            s.code(),
            s.message()
        )),
    }
}

/// A stop/remove call is done when it succeeded or the object is already gone
/// (idempotent cleanup).
fn done<T>(what: &str, r: Result<tonic::Response<T>, tonic::Status>) -> RuntimeResult<()> {
    match r.map_err(|e| status_error(what, e)) {
        Ok(_) | Err(RuntimeError::NotFound(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

#[async_trait::async_trait]
impl Runtime for CriRuntime {
    async fn version(&self) -> RuntimeResult<(String, String)> {
        let r = self
            .runtime
            .clone()
            .version(cri::VersionRequest {
                version: "v1".into(),
            })
            .await
            .map_err(|e| status_error("version", e))?
            .into_inner();
        Ok((r.runtime_name, r.runtime_version))
    }

    async fn status(&self) -> RuntimeResult<crate::runtime::RuntimeStatus> {
        let mut req = tonic::Request::new(cri::StatusRequest { verbose: false });
        req.set_timeout(STATUS_TIMEOUT);
        let r = self
            .runtime
            .clone()
            .status(req)
            .await
            .map_err(|e| status_error("status", e))?
            .into_inner();
        let conditions = r
            .status
            .map(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .map(|c| crate::runtime::RuntimeCondition {
                type_: c.r#type,
                status: c.status,
                reason: c.reason,
                message: c.message,
            })
            .collect();
        Ok(crate::runtime::RuntimeStatus { conditions })
    }

    async fn features(&self) -> RuntimeResult<crate::runtime::RuntimeFeatures> {
        let mut req = tonic::Request::new(cri::StatusRequest { verbose: false });
        req.set_timeout(STATUS_TIMEOUT);
        let r = self
            .runtime
            .clone()
            .status(req)
            .await
            .map_err(|e| status_error("status", e))?
            .into_inner();
        Ok(convert::runtime_features(&r))
    }

    async fn run_sandbox(&self, config: &SandboxConfig) -> RuntimeResult<String> {
        let r = self
            .runtime
            .clone()
            .run_pod_sandbox(cri::RunPodSandboxRequest {
                config: Some(convert::sandbox_config(config)),
                runtime_handler: String::new(),
            })
            .await
            .map_err(|e| status_error("run sandbox", e))?
            .into_inner();
        Ok(r.pod_sandbox_id)
    }

    async fn stop_sandbox(&self, id: &str) -> RuntimeResult<()> {
        done(
            id,
            self.runtime
                .clone()
                .stop_pod_sandbox(cri::StopPodSandboxRequest {
                    pod_sandbox_id: id.into(),
                })
                .await,
        )
    }

    async fn remove_sandbox(&self, id: &str) -> RuntimeResult<()> {
        done(
            id,
            self.runtime
                .clone()
                .remove_pod_sandbox(cri::RemovePodSandboxRequest {
                    pod_sandbox_id: id.into(),
                })
                .await,
        )
    }

    async fn sandbox_status(&self, id: &str) -> RuntimeResult<SandboxStatus> {
        let r = self
            .runtime
            .clone()
            .pod_sandbox_status(cri::PodSandboxStatusRequest {
                pod_sandbox_id: id.into(),
                verbose: false,
            })
            .await
            .map_err(|e| status_error(id, e))?
            .into_inner();
        r.status
            .map(convert::sandbox_status)
            .ok_or_else(|| RuntimeError::NotFound(id.to_string()))
    }

    async fn list_sandboxes(&self, filter: &Filter) -> RuntimeResult<Vec<SandboxStatus>> {
        let r = self
            .runtime
            .clone()
            .list_pod_sandbox(cri::ListPodSandboxRequest {
                filter: Some(cri::PodSandboxFilter {
                    id: filter.sandbox_id.clone().unwrap_or_default(),
                    state: None,
                    label_selector: filter.labels.clone().into_iter().collect(),
                }),
            })
            .await
            .map_err(|e| status_error("list sandboxes", e))?
            .into_inner();
        Ok(r.items.into_iter().map(convert::sandbox).collect())
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> RuntimeResult<String> {
        let r = self
            .runtime
            .clone()
            .create_container(cri::CreateContainerRequest {
                pod_sandbox_id: sandbox_id.into(),
                config: Some(convert::container_config(config, sandbox)),
                sandbox_config: Some(convert::sandbox_config(sandbox)),
            })
            .await
            .map_err(|e| status_error("create container", e))?
            .into_inner();
        Ok(r.container_id)
    }

    async fn start_container(&self, id: &str) -> RuntimeResult<()> {
        self.runtime
            .clone()
            .start_container(cri::StartContainerRequest {
                container_id: id.into(),
            })
            .await
            .map(|_| ())
            .map_err(|e| status_error(id, e))
    }

    async fn stop_container(&self, id: &str, grace: Duration) -> RuntimeResult<()> {
        let mut req = tonic::Request::new(cri::StopContainerRequest {
            container_id: id.into(),
            timeout: grace.as_secs() as i64,
        });
        // The runtime waits `grace` before SIGKILL; give the call room beyond it.
        req.set_timeout(grace + CALL_TIMEOUT);
        done(id, self.runtime.clone().stop_container(req).await)
    }

    async fn update_container_resources(
        &self,
        id: &str,
        resources: &LinuxResources,
    ) -> RuntimeResult<()> {
        done(
            id,
            self.runtime
                .clone()
                .update_container_resources(cri::UpdateContainerResourcesRequest {
                    container_id: id.into(),
                    linux: Some(convert::resources(resources)),
                    ..Default::default()
                })
                .await,
        )
    }

    async fn remove_container(&self, id: &str) -> RuntimeResult<()> {
        done(
            id,
            self.runtime
                .clone()
                .remove_container(cri::RemoveContainerRequest {
                    container_id: id.into(),
                })
                .await,
        )
    }

    async fn container_status(&self, id: &str) -> RuntimeResult<ContainerStatus> {
        let r = self
            .runtime
            .clone()
            .container_status(cri::ContainerStatusRequest {
                container_id: id.into(),
                verbose: false,
            })
            .await
            .map_err(|e| status_error(id, e))?
            .into_inner();
        r.status
            .map(|s| convert::container_status(s, ""))
            .ok_or_else(|| RuntimeError::NotFound(id.to_string()))
    }

    async fn list_containers(&self, filter: &Filter) -> RuntimeResult<Vec<ContainerStatus>> {
        let r = self
            .runtime
            .clone()
            .list_containers(cri::ListContainersRequest {
                filter: Some(cri::ContainerFilter {
                    id: String::new(),
                    state: None,
                    pod_sandbox_id: filter.sandbox_id.clone().unwrap_or_default(),
                    label_selector: filter.labels.clone().into_iter().collect(),
                }),
            })
            .await
            .map_err(|e| status_error("list containers", e))?
            .into_inner();
        Ok(r.containers.into_iter().map(convert::container).collect())
    }

    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> RuntimeResult<ExecResult> {
        // CRI's timeout is whole seconds; at least 1 so 0 never means "forever".
        let secs = timeout.as_secs_f64().ceil().max(1.0) as i64;
        let mut req = tonic::Request::new(cri::ExecSyncRequest {
            container_id: container_id.into(),
            cmd: cmd.to_vec(),
            timeout: secs,
        });
        req.set_timeout(timeout + Duration::from_secs(5));
        match self.runtime.clone().exec_sync(req).await {
            Ok(r) => {
                let r = r.into_inner();
                Ok(ExecResult {
                    stdout: r.stdout,
                    stderr: r.stderr,
                    exit_code: r.exit_code,
                })
            }
            Err(s)
                if s.code() == tonic::Code::DeadlineExceeded
                    || s.message().contains("timeout")
                    || s.message().contains("deadline exceeded") =>
            {
                Err(RuntimeError::Timeout(timeout))
            }
            Err(s) => Err(status_error(container_id, s)),
        }
    }

    async fn image_status(&self, image: &str) -> RuntimeResult<Option<ImageInfo>> {
        let r = self
            .images
            .clone()
            .image_status(cri::ImageStatusRequest {
                image: Some(convert::image_spec(image)),
                verbose: false,
            })
            .await
            .map_err(|e| status_error(image, e))?
            .into_inner();
        Ok(r.image.map(convert::image))
    }

    async fn pull_image(&self, image: &str) -> RuntimeResult<String> {
        match self
            .images
            .clone()
            .pull_image(cri::PullImageRequest {
                image: Some(convert::image_spec(image)),
                auth: None,
                sandbox_config: None,
            })
            .await
        {
            Ok(r) => Ok(r.into_inner().image_ref),
            Err(s) => {
                let msg = format!("rpc error: code = {:?} desc = {}", s.code(), s.message());
                if s.code() == tonic::Code::NotFound || s.message().contains("not found") {
                    Err(RuntimeError::ImageNotFound(msg))
                } else {
                    Err(RuntimeError::ImagePull(msg))
                }
            }
        }
    }

    async fn list_images(&self) -> RuntimeResult<Vec<ImageInfo>> {
        let r = self
            .images
            .clone()
            .list_images(cri::ListImagesRequest { filter: None })
            .await
            .map_err(|e| status_error("list images", e))?
            .into_inner();
        Ok(r.images.into_iter().map(convert::image).collect())
    }

    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        let request = cri::RemoveImageRequest {
            image: Some(convert::image_spec(image)),
        };
        done(image, self.images.clone().remove_image(request).await)
    }

    async fn exec(
        &self,
        container_id: &str,
        cmd: &[String],
        tty: bool,
        stdin: bool,
    ) -> RuntimeResult<StreamUrl> {
        let r = self
            .runtime
            .clone()
            .exec(cri::ExecRequest {
                container_id: container_id.into(),
                cmd: cmd.to_vec(),
                tty,
                stdin,
                stdout: true,
                stderr: !tty,
            })
            .await
            .map_err(|e| status_error(container_id, e))?
            .into_inner();
        Ok(StreamUrl(r.url))
    }

    async fn attach(&self, container_id: &str, tty: bool, stdin: bool) -> RuntimeResult<StreamUrl> {
        let r = self
            .runtime
            .clone()
            .attach(cri::AttachRequest {
                container_id: container_id.into(),
                stdin,
                tty,
                stdout: true,
                stderr: !tty,
            })
            .await
            .map_err(|e| status_error(container_id, e))?
            .into_inner();
        Ok(StreamUrl(r.url))
    }

    async fn port_forward(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<StreamUrl> {
        let r = self
            .runtime
            .clone()
            .port_forward(cri::PortForwardRequest {
                pod_sandbox_id: sandbox_id.into(),
                port: ports.to_vec(),
            })
            .await
            .map_err(|e| status_error(sandbox_id, e))?
            .into_inner();
        Ok(StreamUrl(r.url))
    }

    async fn list_container_stats(&self) -> RuntimeResult<Vec<ContainerStats>> {
        let r = self
            .runtime
            .clone()
            .list_container_stats(cri::ListContainerStatsRequest { filter: None })
            .await
            .map_err(|e| status_error("list container stats", e))?
            .into_inner();
        let now = chrono::Utc::now();
        Ok(r.stats
            .into_iter()
            .filter_map(|s| stats::container_stats(s, now))
            .collect())
    }

    async fn list_sandbox_stats(&self) -> RuntimeResult<Vec<SandboxStats>> {
        let r = match self
            .runtime
            .clone()
            .list_pod_sandbox_stats(cri::ListPodSandboxStatsRequest { filter: None })
            .await
        {
            Ok(r) => r.into_inner(),
            // Runtimes before CRI's pod stats (containerd < 1.6): the provider
            // does without, as upstream's falls back to cAdvisor.
            Err(s) if s.code() == tonic::Code::Unimplemented => return Ok(Vec::new()),
            Err(s) => return Err(status_error("list pod sandbox stats", s)),
        };
        let now = chrono::Utc::now();
        Ok(r.stats
            .into_iter()
            .filter_map(|s| stats::sandbox_stats(s, now))
            .collect())
    }

    async fn image_fs_info(&self) -> RuntimeResult<Vec<FsUsage>> {
        let r = self
            .images
            .clone()
            .image_fs_info(cri::ImageFsInfoRequest {})
            .await
            .map_err(|e| status_error("image fs info", e))?
            .into_inner();
        Ok(stats::image_fs(r))
    }
}

/// Against a real containerd (root, containerd/runc installed):
/// `cargo test -p berth-kubelet --lib cri::real -- --ignored`.
#[cfg(test)]
mod real {
    use super::*;
    use crate::runtime::{ContainerState, SandboxConfig};

    #[tokio::test]
    #[ignore = "needs root and containerd"]
    async fn busybox_runs_and_exits_in_a_sandbox() {
        let dir = std::env::temp_dir().join(format!("berth-cri-{}", std::process::id()));
        let cfg = ContainerdConfig::new(&dir.join("agent"), crate::images::PAUSE_IMAGE);
        std::fs::create_dir_all(&cfg.cni_conf_dir).unwrap();
        let proc = ContainerdProcess::start(&cfg).await.unwrap().unwrap();
        for a in crate::images::build_local(&dir.join("images"))
            .await
            .unwrap()
        {
            crate::images::import(&proc.socket, &a).await.unwrap();
        }
        let rt = CriRuntime::connect(&proc.socket).unwrap();
        let (name, _) = rt.version().await.unwrap();
        assert_eq!(name, "containerd");
        assert!(
            rt.image_status(crate::images::BUSYBOX_IMAGE)
                .await
                .unwrap()
                .is_some()
        );
        let missing = rt.pull_image("docker.io/library/nope:1").await;
        assert!(missing.is_err(), "{missing:?}");
        let sb_cfg = SandboxConfig {
            name: "p".into(),
            namespace: "default".into(),
            uid: "uid-1".into(),
            host_network: true,
            log_directory: dir.join("logs").display().to_string(),
            ..Default::default()
        };
        let sb = rt.run_sandbox(&sb_cfg).await.unwrap();
        let c = ContainerConfig {
            name: "c".into(),
            image: crate::images::BUSYBOX_IMAGE.into(),
            command: vec!["sh".into(), "-c".into(), "echo hi; exit 3".into()],
            log_path: "c/0.log".into(),
            ..Default::default()
        };
        let id = rt.create_container(&sb, &c, &sb_cfg).await.unwrap();
        rt.start_container(&id).await.unwrap();
        let mut st = rt.container_status(&id).await.unwrap();
        for _ in 0..100 {
            if st.state == ContainerState::Exited {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            st = rt.container_status(&id).await.unwrap();
        }
        assert_eq!((st.state, st.exit_code), (ContainerState::Exited, 3));
        rt.stop_sandbox(&sb).await.unwrap();
        rt.remove_sandbox(&sb).await.unwrap();
        proc.stop().await;
    }
}
