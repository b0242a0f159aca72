//! containerd as Berth runs it: its own config, root, state and socket under the
//! data dir, started as a child process when the node agent needs it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};
use tracing::{info, warn};

/// The install command named when containerd or runc is missing.
pub const INSTALL_HINT: &str = "apt-get install containerd runc containernetworking-plugins";

/// containerd or runc is not installed.
#[derive(Debug, thiserror::Error)]
#[error("{program} is not installed (needed to run containers); install it with: {INSTALL_HINT}")]
pub struct MissingRuntime {
    pub program: String,
}

/// Where Berth's containerd keeps everything, and what its CRI plugin uses.
#[derive(Debug, Clone)]
pub struct ContainerdConfig {
    /// `<data-dir>/agent/containerd`.
    pub dir: PathBuf,
    /// The sandbox (pause) image, imported locally.
    pub sandbox_image: String,
    /// CNI plugin binaries.
    pub cni_bin_dir: PathBuf,
    /// CNI network configs (Berth writes its own there).
    pub cni_conf_dir: PathBuf,
    /// Enforce AppArmor profiles (the host has AppArmor on); off, pods asking
    /// for a profile are refused at admission instead.
    pub apparmor: bool,
}

impl ContainerdConfig {
    pub fn new(agent_dir: &Path, sandbox_image: &str) -> Self {
        ContainerdConfig {
            dir: agent_dir.join("containerd"),
            sandbox_image: sandbox_image.to_string(),
            cni_bin_dir: PathBuf::from("/usr/lib/cni"),
            cni_conf_dir: agent_dir.join("cni").join("net.d"),
            apparmor: false,
        }
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.join("config.toml")
    }

    /// containerd's config (version 2, containerd 1.6/1.7). cgroupfs because nothing
    /// here runs systemd; `restrict_oom_score_adj` because these machines cannot
    /// lower oom_score_adj (no CAP_SYS_RESOURCE in the bounding set).
    pub fn render(&self) -> String {
        let d = self.dir.display();
        let sock = self.socket();
        let sock = sock.display();
        format!(
            r#"# Written by Berth; rewritten at every start.
version = 2
root = "{d}/root"
state = "{d}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{sock}"

[ttrpc]
  address = "{sock}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox}"
  restrict_oom_score_adj = true
  disable_apparmor = {disable_apparmor}
  disable_hugetlb_controller = true
  tolerate_missing_hugetlb_controller = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{bin}"
    conf_dir = "{conf}"
    max_conf_num = 1
"#,
            sandbox = self.sandbox_image,
            disable_apparmor = !self.apparmor,
            bin = self.cni_bin_dir.display(),
            conf = self.cni_conf_dir.display(),
        )
    }
}

/// Finds `program` on PATH (and the sbin directories, which a non-login PATH may lack).
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/bin"])
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// A containerd that Berth started and supervises: restarted if it dies (its
/// containers keep running under their shims), stopped by [`ContainerdProcess::stop`],
/// or with a SIGTERM when dropped unstopped (an agent failing after it started
/// containerd, e.g. on a server with another cluster's CA, must not leave it behind).
pub struct ContainerdProcess {
    pub socket: PathBuf,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// The running containerd's pid (the supervisor updates it on restarts).
    pid: Arc<AtomicU32>,
}

/// How containerd is (re)started.
struct Launch {
    program: PathBuf,
    config: PathBuf,
    log: PathBuf,
}

impl Launch {
    fn spawn(&self) -> std::io::Result<Child> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        Command::new(&self.program)
            .arg("--config")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // No registry is reachable, and nothing may leave this machine: pulls of
            // images that are not present fail at once (ErrImagePull) on a refused
            // local proxy instead of resolving remote registries.
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .env("HTTP_PROXY", "http://127.0.0.1:9")
            .env("NO_PROXY", "")
            .kill_on_drop(false)
            .spawn()
    }
}

async fn wait_for_socket(socket: &Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if tokio::net::UnixStream::connect(socket).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

async fn terminate(child: &mut Child) {
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    }
    if tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .is_err()
    {
        warn!("containerd did not stop in 10 s; killing it");
        let _ = child.kill().await;
    }
}

/// Restarts containerd whenever it exits (1 s doubling to 30 s between tries,
/// reset after a minute up), until told to stop.
async fn supervise(
    launch: Launch,
    mut child: Child,
    pid: Arc<AtomicU32>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut delay = Duration::from_secs(1);
    let mut up_since = Instant::now();
    loop {
        tokio::select! {
            _ = stop.changed() => {
                terminate(&mut child).await;
                return;
            }
            status = child.wait() => warn!(?status, "containerd exited; restarting it"),
        }
        if up_since.elapsed() > Duration::from_secs(60) {
            delay = Duration::from_secs(1);
        }
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(Duration::from_secs(30));
            match launch.spawn() {
                Ok(c) => {
                    child = c;
                    pid.store(child.id().unwrap_or(0), Ordering::Release);
                    up_since = Instant::now();
                    break;
                }
                Err(e) => warn!(error = %e, "restarting containerd failed"),
            }
        }
    }
}

impl ContainerdProcess {
    /// Writes the config and starts containerd, unless one already answers on the
    /// socket (then `None`: it is left alone). Waits until the socket accepts.
    pub async fn start(cfg: &ContainerdConfig) -> Result<Option<Self>, crate::Error> {
        let socket = cfg.socket();
        if tokio::net::UnixStream::connect(&socket).await.is_ok() {
            info!(socket = %socket.display(), "containerd already running");
            return Ok(None);
        }
        let containerd = find_program("containerd").ok_or_else(|| MissingRuntime {
            program: "containerd".into(),
        })?;
        if find_program("runc").is_none() {
            return Err(MissingRuntime {
                program: "runc".into(),
            }
            .into());
        }
        std::fs::create_dir_all(&cfg.dir)?;
        std::fs::create_dir_all(&cfg.cni_conf_dir)?;
        std::fs::write(cfg.config_path(), cfg.render())?;
        let _ = std::fs::remove_file(&socket);
        let launch = Launch {
            program: containerd,
            config: cfg.config_path(),
            log: cfg.dir.join("containerd.log"),
        };
        let mut child = launch.spawn()?;
        if !wait_for_socket(&socket, Duration::from_secs(30)).await {
            terminate(&mut child).await;
            return Err(crate::Error::Runtime(format!(
                "containerd did not open {} within 30 s; see {}",
                socket.display(),
                launch.log.display()
            )));
        }
        info!(socket = %socket.display(), "containerd started");
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let pid = Arc::new(AtomicU32::new(child.id().unwrap_or(0)));
        let task = tokio::spawn(supervise(launch, child, pid.clone(), stop_rx));
        Ok(Some(ContainerdProcess {
            socket,
            stop,
            task,
            pid,
        }))
    }

    /// Stops containerd (SIGTERM, then SIGKILL after 10 s). Containers keep
    /// running under their shims, as with a containerd restart.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        let _ = (&mut self.task).await;
    }
}

impl Drop for ContainerdProcess {
    fn drop(&mut self) {
        if self.task.is_finished() {
            return;
        }
        // No runtime may be left to run the supervisor's graceful stop (the
        // process is exiting): tell it not to restart, and signal containerd here.
        let _ = self.stop.send(true);
        let pid = self.pid.load(Ordering::Acquire);
        if pid != 0 {
            // SAFETY: kill(2) on the containerd this process started.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_keeps_everything_under_the_data_dir() {
        let c = ContainerdConfig::new(Path::new("/d/agent"), "registry.k8s.io/pause:3.10");
        let t = c.render();
        for want in [
            "root = \"/d/agent/containerd/root\"",
            "state = \"/d/agent/containerd/state\"",
            "address = \"/d/agent/containerd/containerd.sock\"",
            "sandbox_image = \"registry.k8s.io/pause:3.10\"",
            "restrict_oom_score_adj = true",
            "SystemdCgroup = false",
            "bin_dir = \"/usr/lib/cni\"",
            "conf_dir = \"/d/agent/cni/net.d\"",
        ] {
            assert!(t.contains(want), "missing {want}");
        }
    }

    #[test]
    fn apparmor_follows_the_host() {
        let mut c = ContainerdConfig::new(Path::new("/d/agent"), "pause");
        assert!(c.render().contains("disable_apparmor = true"));
        c.apparmor = true;
        assert!(c.render().contains("disable_apparmor = false"));
    }

    #[test]
    fn missing_runtime_names_the_install_command() {
        let e = MissingRuntime {
            program: "runc".into(),
        };
        let msg = e.to_string();
        assert!(msg.starts_with("runc is not installed"));
        assert!(msg.contains("apt-get install containerd runc containernetworking-plugins"));
    }
}
