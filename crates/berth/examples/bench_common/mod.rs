//! What the benchmarks share: a real `berth server` process from the same
//! target directory, and a kube-rs client for it over HTTPS.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

pub struct BenchServer {
    pub child: Child,
    pub client: kube::Client,
    /// The admin kubeconfig's configuration, for clients with other credentials.
    #[allow(dead_code)]
    pub config: kube::Config,
    data_dir: PathBuf,
}

impl BenchServer {
    /// Starts `berth server` on a free port with `flags`, then any flags given on
    /// the benchmark's command line.
    pub async fn start(tag: &str, flags: &[&str]) -> anyhow::Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut extra: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        extra.extend(std::env::args().skip(1));
        let exe = std::env::current_exe()?;
        let bin: PathBuf = exe
            .parent()
            .and_then(|p| p.parent())
            .map(|p| p.join("berth"))
            .ok_or_else(|| anyhow::anyhow!("no target dir above {}", exe.display()))?;
        let data_dir = std::env::temp_dir().join(format!("berth-{tag}-{}", std::process::id()));
        let mut child = Command::new(&bin)
            .args([
                "server",
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                "0",
                // Benchmarks measure the control plane: no containers, no ingress ports, no DNS.
                "--disable-agent",
                "--disable-ingress",
                "--disable-dns",
                "--data-dir",
            ])
            .arg(&data_dir)
            .args(&extra)
            .env("BERTH_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let mut reader = BufReader::new(stdout);
        let mut kubeconfig = PathBuf::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                anyhow::bail!("server exited");
            }
            if let Some(p) = line.trim().strip_prefix("Wrote kubeconfig ") {
                kubeconfig = PathBuf::from(p);
            }
            if line.starts_with("API server at ") {
                break;
            }
        }
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in reader.lines() {});
        let kc = Kubeconfig::read_from(&kubeconfig)?;
        let config =
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
        let client = kube::Client::try_from(config.clone())?;
        // Benchmarks that turn the controller-manager off still create pods:
        // make the `default` ServiceAccount that ServiceAccount admission
        // requires, as its controller would (a conflict means it did).
        let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
            kube::Api::namespaced(client.clone(), "default");
        let sa = serde_json::from_value(serde_json::json!({"metadata": {"name": "default"}}))?;
        match accounts.create(&Default::default(), &sa).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        Ok(BenchServer {
            child,
            client,
            config,
            data_dir,
        })
    }

    /// The server's `--data-dir`.
    #[allow(dead_code)]
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
}

impl Drop for BenchServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

// Not every benchmark that includes this module uses it.
#[allow(dead_code)]
/// Runs `f(i)` for i in 0..total on `clients` concurrent tasks.
pub async fn concurrently<F, Fut>(total: usize, clients: usize, f: F) -> anyhow::Result<()>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let f = Arc::new(f);
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (next, f) = (next.clone(), f.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return Ok::<_, anyhow::Error>(());
                }
                f(i).await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

#[allow(dead_code)]
/// The `p` quantile (0..=1) of `sorted`, nearest rank; zero when empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[allow(dead_code)]
/// CPU seconds (user + system) a process has used.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at ") ".
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the whole line (11 and 12 here),
    // in clock ticks (USER_HZ, 100 on Linux).
    (ticks(11) + ticks(12)) / 100.0
}
