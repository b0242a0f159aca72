//! The container runtime boundary (DESIGN.md invariant 2).
//!
//! Pod logic talks to containers only through [`Runtime`], in Berth's own small
//! types, so it is unit-tested against [`fake::FakeRuntime`]; the real
//! implementation is CRI v1 over containerd's socket (`crate::cri`).

pub mod fake;
pub mod gc;
pub mod stats;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

pub use stats::{
    ContainerStats, CpuUsage, FsUsage, MemoryUsage, NetworkInterfaceUsage, NetworkUsage,
    SandboxStats, SwapUsage,
};

/// What a runtime call can fail with, typed where pod logic decides on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// The image does not exist (locally, or in the registry): ErrImagePull.
    #[error("{0}")]
    ImageNotFound(String),
    /// Pulling failed for another reason (registry unreachable, bad reference).
    #[error("{0}")]
    ImagePull(String),
    /// The sandbox or container does not exist (already removed).
    #[error("not found: {0}")]
    NotFound(String),
    /// A call with a deadline (exec_sync) ran past it.
    #[error("command timed out after {0:?}")]
    Timeout(Duration),
    /// The runtime cannot be reached.
    #[error("container runtime unavailable: {0}")]
    Unavailable(String),
    /// Any other runtime error, with the runtime's message.
    #[error("{0}")]
    Other(String),
}

pub type RuntimeResult<T> = Result<T, RuntimeError>;

/// A port the sandbox publishes on the host (hostPort).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMapping {
    pub protocol: Protocol,
    pub container_port: i32,
    pub host_port: i32,
    pub host_ip: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
    Sctp,
}

/// DNS settings written into the sandbox's resolv.conf.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsConfig {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

/// Whose PID namespace a pod's containers run in: each its own (the default),
/// the pod's (`shareProcessNamespace`) or the node's (`hostPID`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PidNamespace {
    #[default]
    Container,
    Pod,
    Node,
}

/// Everything needed to create a pod sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxConfig {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub attempt: u32,
    pub hostname: String,
    pub log_directory: String,
    pub dns: Option<DnsConfig>,
    pub port_mappings: Vec<PortMapping>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The pod's cgroup (cgroupfs path), under its QoS class's cgroup.
    pub cgroup_parent: String,
    pub host_network: bool,
    pub pid: PidNamespace,
    pub host_ipc: bool,
    /// Sysctls for the sandbox (namespaced ones only).
    pub sysctls: BTreeMap<String, String>,
    /// Some container of the pod is privileged (containerd refuses privileged
    /// containers in an unprivileged sandbox).
    pub privileged: bool,
    /// The pod-level seccomp profile, applied to the pause container.
    pub seccomp: SecurityProfile,
    /// The pod's runAsUser/runAsGroup/supplementalGroups (with fsGroup), as
    /// upstream hands them to the sandbox.
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub supplemental_groups: Vec<i64>,
}

/// A seccomp or AppArmor profile (CRI `SecurityProfile`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SecurityProfile {
    /// The runtime's default profile (`runtime/default`).
    RuntimeDefault,
    /// No profile: upstream's default for seccomp when none is asked for.
    #[default]
    Unconfined,
    /// A profile on the node: a file path for seccomp, a loaded profile's
    /// name for AppArmor.
    Localhost(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxState {
    Ready,
    NotReady,
}

/// A sandbox as the runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxStatus {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub attempt: u32,
    pub state: SandboxState,
    pub created_at: Option<DateTime<Utc>>,
    /// The pod's primary IP and any others (dual stack), empty with host network.
    pub ips: Vec<String>,
    pub labels: BTreeMap<String, String>,
}

/// A filesystem mount into a container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mount {
    pub container_path: String,
    pub host_path: String,
    pub readonly: bool,
}

/// A host device node made available in a container (a device plugin's
/// DeviceSpec; CRI's Device).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceNode {
    pub container_path: String,
    pub host_path: String,
    /// cgroup permissions: any of r, w, m.
    pub permissions: String,
}

/// Linux resources for a container (cgroup settings the runtime applies).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinuxResources {
    /// CFS period in microseconds (0: runtime default).
    pub cpu_period: i64,
    /// CFS quota in microseconds (0 or negative: unlimited).
    pub cpu_quota: i64,
    /// cpu.shares (v1) / weight derived from it (v2).
    pub cpu_shares: i64,
    /// Memory limit in bytes (0: unlimited).
    pub memory_limit_in_bytes: i64,
    pub oom_score_adj: i64,
    /// The CPUs the container may run on, as a Linux list (empty: all; the
    /// CPU Manager sets it).
    pub cpuset_cpus: String,
}

/// Everything needed to create a container in a sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerConfig {
    pub name: String,
    pub attempt: u32,
    /// The image as the runtime knows it (the reference pull returned, or the name).
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: String,
    pub envs: Vec<(String, String)>,
    pub mounts: Vec<Mount>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Relative to the sandbox's log directory.
    pub log_path: String,
    pub stdin: bool,
    pub stdin_once: bool,
    pub tty: bool,
    pub resources: LinuxResources,
    pub privileged: bool,
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub readonly_rootfs: bool,
    /// The image's non-numeric user, when neither the pod nor the image gives
    /// a uid (upstream's RunAsUsername).
    pub run_as_username: String,
    /// Extra groups of the container's processes (supplementalGroups, fsGroup).
    pub supplemental_groups: Vec<i64>,
    /// `supplementalGroupsPolicy: Strict`: only those groups, none from the
    /// image's /etc/group (admitted only where the runtime supports it).
    pub supplemental_groups_strict: bool,
    /// `capabilities.add` / `capabilities.drop`, as the pod names them
    /// (containerd prefixes `CAP_`; `ALL` means every capability).
    pub capabilities_add: Vec<String>,
    pub capabilities_drop: Vec<String>,
    /// `allowPrivilegeEscalation: false`.
    pub no_new_privs: bool,
    /// procMount: upstream's default masked and read-only /proc and /sys
    /// paths, both empty for `Unmasked`.
    pub masked_paths: Vec<String>,
    pub readonly_paths: Vec<String>,
    pub seccomp: SecurityProfile,
    /// None: the runtime's choice (its default profile where AppArmor is on).
    pub apparmor: Option<SecurityProfile>,
    /// Share the PID namespace of this container (ephemeral containers' target).
    pub target_container_id: Option<String>,
    /// Device nodes from device plugins.
    pub devices: Vec<DeviceNode>,
    /// Fully qualified CDI device names from device plugins.
    pub cdi_devices: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ContainerState {
    Created,
    Running,
    Exited,
    #[default]
    Unknown,
}

/// A container as the runtime reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerStatus {
    pub id: String,
    pub sandbox_id: String,
    pub name: String,
    pub attempt: u32,
    pub state: ContainerState,
    pub created_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub exit_code: i32,
    /// The runtime's reason for an exit (containerd: "Completed", "Error", "OOMKilled").
    pub reason: String,
    pub message: String,
    pub image: String,
    pub image_ref: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub log_path: String,
}

/// An image present in the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    pub size: u64,
    /// The image's `USER` when it is numeric (CRI `Image.uid`).
    pub uid: Option<i64>,
    /// The image's `USER` when it is a name (CRI `Image.username`).
    pub username: String,
    /// The runtime keeps this image (CRI `Image.pinned`, e.g. its sandbox
    /// image): image garbage collection never removes it.
    pub pinned: bool,
}

/// The result of a command run to completion in a container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecResult {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

/// Which sandboxes/containers to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only this sandbox (for containers: only containers in it).
    pub sandbox_id: Option<String>,
    /// Every label here must match.
    pub labels: BTreeMap<String, String>,
}

/// Where a streaming session (exec/attach/port-forward) is served by the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamUrl(pub String);

/// One of the runtime's conditions (CRI `RuntimeCondition`: `RuntimeReady`,
/// `NetworkReady`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeCondition {
    pub type_: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// Optional runtime features the node agent asks about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeFeatures {
    /// The default handler runs pods in their own user namespace (CRI
    /// `RuntimeHandlerFeatures.user_namespaces`, upstream's
    /// HandlerSupportsUserNamespaces).
    pub user_namespaces: bool,
    /// `supplementalGroupsPolicy: Strict` is honoured (CRI
    /// `RuntimeFeatures.supplemental_groups_policy`).
    pub supplemental_groups_policy: bool,
}

/// What the runtime says of itself (CRI `Status`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeStatus {
    pub conditions: Vec<RuntimeCondition>,
}

impl RuntimeStatus {
    /// Both conditions true: a runtime whose network is set up.
    pub fn ready() -> Self {
        let ready = |t: &str| RuntimeCondition {
            type_: t.into(),
            status: true,
            ..Default::default()
        };
        RuntimeStatus {
            conditions: vec![ready("RuntimeReady"), ready("NetworkReady")],
        }
    }

    pub fn condition(&self, type_: &str) -> Option<&RuntimeCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// A container runtime, as the node agent needs it.
#[async_trait::async_trait]
pub trait Runtime: Send + Sync + 'static {
    /// Runtime name and version, e.g. ("containerd", "1.6.20").
    async fn version(&self) -> RuntimeResult<(String, String)>;

    /// The runtime's conditions (CRI `Status`); a runtime that has none to
    /// report is ready.
    async fn status(&self) -> RuntimeResult<RuntimeStatus> {
        Ok(RuntimeStatus::ready())
    }

    /// What the runtime says it supports (CRI `StatusResponse.features` and
    /// its default handler's); a runtime that does not say supports neither.
    async fn features(&self) -> RuntimeResult<RuntimeFeatures> {
        Ok(RuntimeFeatures::default())
    }

    /// Creates and starts a sandbox (network namespace, pause container); its id.
    async fn run_sandbox(&self, config: &SandboxConfig) -> RuntimeResult<String>;
    /// Stops a sandbox's containers and tears down its network; idempotent.
    async fn stop_sandbox(&self, id: &str) -> RuntimeResult<()>;
    /// Removes a stopped sandbox; a missing one is not an error.
    async fn remove_sandbox(&self, id: &str) -> RuntimeResult<()>;
    async fn sandbox_status(&self, id: &str) -> RuntimeResult<SandboxStatus>;
    async fn list_sandboxes(&self, filter: &Filter) -> RuntimeResult<Vec<SandboxStatus>>;

    /// Creates a container in a sandbox; its id.
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> RuntimeResult<String>;
    async fn start_container(&self, id: &str) -> RuntimeResult<()>;
    /// Sends SIGTERM (or the image's stop signal), then SIGKILL after `grace`.
    async fn stop_container(&self, id: &str, grace: Duration) -> RuntimeResult<()>;
    /// Changes a running container's resources (CRI UpdateContainerResources;
    /// zero and empty fields are left as they are).
    async fn update_container_resources(
        &self,
        id: &str,
        resources: &LinuxResources,
    ) -> RuntimeResult<()>;
    /// Removes a container; a missing one is not an error.
    async fn remove_container(&self, id: &str) -> RuntimeResult<()>;
    async fn container_status(&self, id: &str) -> RuntimeResult<ContainerStatus>;
    async fn list_containers(&self, filter: &Filter) -> RuntimeResult<Vec<ContainerStatus>>;

    /// Runs `cmd` in a running container and waits at most `timeout` for it.
    /// Running past the deadline is [`RuntimeError::Timeout`].
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> RuntimeResult<ExecResult>;

    /// The image's status, None when it is not present.
    async fn image_status(&self, image: &str) -> RuntimeResult<Option<ImageInfo>>;
    /// Pulls an image; its reference (image id). A missing image is
    /// [`RuntimeError::ImageNotFound`].
    async fn pull_image(&self, image: &str) -> RuntimeResult<String>;
    async fn list_images(&self) -> RuntimeResult<Vec<ImageInfo>>;
    async fn remove_image(&self, image: &str) -> RuntimeResult<()>;

    /// Streaming endpoints (served by the runtime's streaming server).
    async fn exec(
        &self,
        container_id: &str,
        cmd: &[String],
        tty: bool,
        stdin: bool,
    ) -> RuntimeResult<StreamUrl>;
    async fn attach(&self, container_id: &str, tty: bool, stdin: bool) -> RuntimeResult<StreamUrl>;
    async fn port_forward(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<StreamUrl>;

    /// Resource use of every container the runtime has stats for (CRI
    /// `ListContainerStats`); exited containers may be among them.
    async fn list_container_stats(&self) -> RuntimeResult<Vec<ContainerStats>>;
    /// Resource use of every sandbox (CRI `ListPodSandboxStats`); empty where
    /// the runtime does not implement it.
    async fn list_sandbox_stats(&self) -> RuntimeResult<Vec<SandboxStats>>;
    /// The filesystems images are stored on and what images use of them (CRI
    /// `ImageFsInfo`).
    async fn image_fs_info(&self) -> RuntimeResult<Vec<FsUsage>>;
}
