//! A container's own cgroup accounting, read from the host's cgroupfs (v1 or
//! v2), as the reference the node agent's and metrics server's figures are
//! checked against.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The first directory under `root` whose name contains `id` (the runtime
/// names a container's cgroup after its ID), searched breadth-first.
fn find_dir(root: &Path, id: &str) -> Option<PathBuf> {
    let mut queue = vec![root.to_path_buf()];
    while let Some(dir) = queue.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if !e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                continue;
            }
            let p = e.path();
            if e.file_name().to_string_lossy().contains(id) {
                return Some(p);
            }
            queue.insert(0, p);
        }
    }
    None
}

/// One container's cgroups: its CPU accounting and memory directories.
pub struct ContainerCgroup {
    cpu: PathBuf,
    memory: PathBuf,
    v2: bool,
}

impl ContainerCgroup {
    /// Finds the cgroups of the container with runtime ID `id` (the
    /// `containerd://` prefix is dropped).
    pub fn find(id: &str) -> ContainerCgroup {
        let id = id.rsplit("://").next().unwrap_or(id);
        let base = Path::new("/sys/fs/cgroup");
        if base.join("cgroup.controllers").exists() {
            let dir = find_dir(base, id).unwrap_or_else(|| panic!("no cgroup for container {id}"));
            return ContainerCgroup {
                cpu: dir.clone(),
                memory: dir,
                v2: true,
            };
        }
        let cpu_root = ["cpu,cpuacct", "cpuacct", "cpuacct,cpu"]
            .iter()
            .map(|c| base.join(c))
            .find(|p| p.exists())
            .expect("a cpuacct hierarchy");
        ContainerCgroup {
            cpu: find_dir(&cpu_root, id).unwrap_or_else(|| panic!("no cpuacct cgroup for {id}")),
            memory: find_dir(&base.join("memory"), id)
                .unwrap_or_else(|| panic!("no memory cgroup for {id}")),
            v2: false,
        }
    }

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
    }

    fn stat(text: &str, key: &str) -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Cumulative CPU time in nanoseconds.
    pub fn cpu_ns(&self) -> u64 {
        if self.v2 {
            Self::stat(&Self::read(&self.cpu.join("cpu.stat")), "usage_usec") * 1000
        } else {
            Self::read(&self.cpu.join("cpuacct.usage"))
                .trim()
                .parse()
                .unwrap_or(0)
        }
    }

    /// The working set as the kubelet computes it: usage minus inactive file pages.
    pub fn working_set(&self) -> u64 {
        let (usage, inactive) = if self.v2 {
            let usage: u64 = Self::read(&self.memory.join("memory.current"))
                .trim()
                .parse()
                .unwrap_or(0);
            (
                usage,
                Self::stat(
                    &Self::read(&self.memory.join("memory.stat")),
                    "inactive_file",
                ),
            )
        } else {
            let usage: u64 = Self::read(&self.memory.join("memory.usage_in_bytes"))
                .trim()
                .parse()
                .unwrap_or(0);
            (
                usage,
                Self::stat(
                    &Self::read(&self.memory.join("memory.stat")),
                    "total_inactive_file",
                ),
            )
        };
        usage.saturating_sub(inactive)
    }
}

/// Now, in nanoseconds since the epoch (the clock sample times use).
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Cumulative CPU of a cgroup sampled every 100 ms, for rates over any window.
pub struct Sampler {
    samples: Arc<Mutex<Vec<(i64, u64)>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    pub fn start(cg: ContainerCgroup) -> Sampler {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (out, halt) = (samples.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !halt.load(std::sync::atomic::Ordering::Relaxed) {
                let v = cg.cpu_ns();
                out.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((now_ns(), v));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Sampler {
            samples,
            stop,
            thread: Some(thread),
        }
    }

    pub fn at(&self, t: i64) -> Option<f64> {
        let s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let i = s.iter().position(|(ts, _)| *ts >= t)?;
        if i == 0 {
            return None;
        }
        let ((t0, c0), (t1, c1)) = (s[i - 1], s[i]);
        Some(c0 as f64 + (c1 as f64 - c0 as f64) * (t - t0) as f64 / (t1 - t0).max(1) as f64)
    }

    /// Cores used over [from, to] (nanoseconds since the epoch).
    pub fn rate(&self, from: i64, to: i64) -> Option<f64> {
        Some((self.at(to)? - self.at(from)?) / (to - from) as f64)
    }
}

impl Drop for Sampler {
    /// Stops and waits for the thread, so it never reads a removed cgroup.
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
