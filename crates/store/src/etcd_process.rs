//! A throwaway single-member etcd for tests and benchmarks: started on free loopback
//! ports with a temporary data directory, killed and removed on drop; or on an
//! existing data dir (a restored snapshot), which is kept.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::{Result, StoreError};

/// A running etcd server process.
pub struct EtcdProcess {
    child: Child,
    endpoint: String,
    /// Removed on drop: the temporary data dir, or only the log's dir for
    /// [`EtcdProcess::start_on`].
    data_dir: PathBuf,
}

fn err(msg: impl Into<String>) -> StoreError {
    StoreError::Backend(msg.into())
}

fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| err(format!("bind a free port: {e}")))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| err(format!("free port address: {e}")))
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

impl EtcdProcess {
    /// The etcd binary: `$BERTH_ETCD_BIN`, else `/usr/bin/etcd` (Debian's
    /// `etcd-server`), else `etcd` on `$PATH`.
    pub fn binary() -> Option<PathBuf> {
        if let Some(p) = std::env::var_os("BERTH_ETCD_BIN") {
            return Some(PathBuf::from(p));
        }
        let debian = PathBuf::from("/usr/bin/etcd");
        if debian.is_file() {
            return Some(debian);
        }
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("etcd"))
                .find(|p| p.is_file())
        })
    }

    /// Starts etcd and waits until it serves requests (at most 30 s).
    pub async fn start() -> Result<Self> {
        let bin = Self::binary().ok_or_else(|| {
            err("etcd binary not found: install Debian's etcd-server (/usr/bin/etcd) or set BERTH_ETCD_BIN")
        })?;
        let mut last = None;
        // Ports are picked free but may be taken again before etcd binds them: retry.
        for _ in 0..3 {
            match Self::start_once(&bin).await {
                Ok(p) => return Ok(p),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| err("etcd did not start")))
    }

    /// Starts etcd on the existing member data dir `etcd_dir` (e.g. one that
    /// `etcdutl snapshot restore --name NAME --initial-advertise-peer-urls URL`
    /// wrote) as member `name` listening for peers at `peer_url`; the data dir
    /// is left in place on drop.
    pub async fn start_on(etcd_dir: &Path, name: &str, peer_url: &str) -> Result<Self> {
        let bin = Self::binary().ok_or_else(|| {
            err("etcd binary not found: install Debian's etcd-server (/usr/bin/etcd) or set BERTH_ETCD_BIN")
        })?;
        let mut last = None;
        for _ in 0..3 {
            let member = Member {
                name,
                etcd_dir: Some(etcd_dir),
                peer_url: Some(peer_url),
            };
            match Self::start_once_as(&bin, member).await {
                Ok(p) => return Ok(p),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| err("etcd did not start")))
    }

    async fn start_once(bin: &Path) -> Result<Self> {
        let member = Member {
            name: "berth",
            etcd_dir: None,
            peer_url: None,
        };
        Self::start_once_as(bin, member).await
    }

    async fn start_once_as(bin: &Path, member: Member<'_>) -> Result<Self> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let data_dir = std::env::temp_dir().join(format!(
            "berth-etcd-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&data_dir);
        std::fs::create_dir_all(&data_dir)
            .map_err(|e| err(format!("create {}: {e}", data_dir.display())))?;
        let spawned = Self::spawn(bin, &data_dir, &member);
        if spawned.is_err() {
            // Once spawned, the EtcdProcess's drop cleans up; before that, do it here.
            let _ = std::fs::remove_dir_all(&data_dir);
        }
        let (mut proc, log_path) = spawned?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = proc.child.try_wait() {
                return Err(err(format!(
                    "etcd exited ({status}):\n{}",
                    log_tail(&log_path)
                )));
            }
            if proc.healthy().await {
                return Ok(proc);
            }
            if Instant::now() > deadline {
                return Err(err(format!(
                    "etcd not healthy after 30 s:\n{}",
                    log_tail(&log_path)
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn spawn(bin: &Path, data_dir: &Path, member: &Member<'_>) -> Result<(Self, PathBuf)> {
        let client = format!("http://127.0.0.1:{}", free_port()?);
        let peer = match member.peer_url {
            Some(url) => url.to_string(),
            None => format!("http://127.0.0.1:{}", free_port()?),
        };
        let etcd_dir = member
            .etcd_dir
            .map(Path::to_path_buf)
            .unwrap_or_else(|| data_dir.join("data"));
        let name = member.name;
        let log_path = data_dir.join("etcd.log");
        let log =
            std::fs::File::create(&log_path).map_err(|e| err(format!("create etcd log: {e}")))?;
        let log2 = log.try_clone().map_err(|e| err(format!("etcd log: {e}")))?;
        let child = Command::new(bin)
            .arg(format!("--name={name}"))
            .arg(format!("--data-dir={}", etcd_dir.display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster={name}={peer}"))
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| err(format!("spawn {}: {e}", bin.display())))?;
        let proc = EtcdProcess {
            child,
            endpoint: client,
            data_dir: data_dir.to_path_buf(),
        };
        Ok((proc, log_path))
    }

    async fn healthy(&self) -> bool {
        let opts = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(1))
            .with_timeout(Duration::from_secs(1));
        match etcd_client::Client::connect([self.endpoint.as_str()], Some(opts)).await {
            Ok(mut c) => c.get("health", None).await.is_ok(),
            Err(_) => false,
        }
    }

    /// The client URL, e.g. `http://127.0.0.1:40123`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// [`Self::endpoint`] as the list that `EtcdStore::connect` takes.
    pub fn endpoints(&self) -> Vec<String> {
        vec![self.endpoint.clone()]
    }
}

/// Who the started member is and where its data lives (a temp dir when `None`).
struct Member<'a> {
    name: &'a str,
    etcd_dir: Option<&'a Path>,
    peer_url: Option<&'a str>,
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}
