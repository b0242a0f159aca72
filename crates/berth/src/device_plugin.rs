//! `berth device-plugin sample|nvidia`: device plugins (API v1beta1) that
//! register with the node agent of the same data dir.
//!
//! - `sample`: `--devices N` fake devices of `example.com/sample` (or
//!   `--resource-name`); each allocation sets `SAMPLE_DEVICES` and mounts each
//!   device's host file (`<plugins dir>/sample/<id>`) at `/sample/<id>`.
//! - `nvidia`: `nvidia.com/gpu` from `/dev/nvidia[0-9]*`; an allocation gives
//!   the GPU's device node plus `/dev/nvidiactl` and the UVM nodes, sets
//!   `NVIDIA_VISIBLE_DEVICES`, and mounts the host's `nvidia-smi` and NVML
//!   libraries read-only.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use berth_kubelet::cm::devicemanager::pb;
use berth_kubelet::cm::devicemanager::plugin::{self, DeviceSource};
use berth_kubelet::cm::devicemanager::{HEALTHY, plugins_dir};

#[derive(clap::Args, Debug)]
pub struct DevicePluginArgs {
    #[command(subcommand)]
    command: PluginCommand,
}

#[derive(clap::Subcommand, Debug)]
enum PluginCommand {
    /// Fake devices for tests: an env var and a mounted host file per allocation.
    Sample(SampleArgs),
    /// NVIDIA GPUs from /dev/nvidia[0-9]* as nvidia.com/gpu.
    Nvidia(CommonArgs),
}

#[derive(clap::Args, Debug)]
struct CommonArgs {
    /// The data dir of the node agent to register with.
    #[arg(
        long,
        short = 'd',
        default_value = "/var/lib/berth",
        env = "BERTH_DATA_DIR"
    )]
    data_dir: PathBuf,
}

#[derive(clap::Args, Debug)]
struct SampleArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// How many devices to advertise.
    #[arg(long, default_value_t = 2)]
    devices: usize,
    /// The extended resource advertised.
    #[arg(long, default_value = "example.com/sample")]
    resource_name: String,
    /// Each device's NUMA node, in order (`1,0`: sample-0 on node 1, sample-1
    /// on node 0; -1: no topology). Devices past the list have none.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    numa_nodes: Vec<i64>,
}

pub async fn run(args: DevicePluginArgs) -> Result<()> {
    match args.command {
        PluginCommand::Sample(a) => {
            let dir = plugins_dir(&a.common.data_dir.join("agent"));
            // One socket per resource, so plugins of different names coexist.
            let endpoint = format!("berth-{}.sock", a.resource_name.replace('/', "_"));
            let source = Sample::new(&dir, a.devices, a.resource_name)?.with_numa(a.numa_nodes);
            plugin::run(dir, endpoint, source)
                .await
                .map_err(anyhow::Error::msg)
        }
        PluginCommand::Nvidia(a) => {
            let dir = plugins_dir(&a.data_dir.join("agent"));
            plugin::run(dir, "berth-nvidia.sock".into(), Nvidia::discover())
                .await
                .map_err(anyhow::Error::msg)
        }
    }
}

fn device(id: String) -> pb::Device {
    pb::Device {
        id,
        health: HEALTHY.into(),
        topology: None,
    }
}

struct Sample {
    resource: String,
    ids: Vec<String>,
    numa: Vec<i64>,
    files: PathBuf,
}

impl Sample {
    fn new(dir: &Path, count: usize, resource: String) -> Result<Sample> {
        let files = dir.join("sample");
        std::fs::create_dir_all(&files).with_context(|| format!("creating {}", files.display()))?;
        let ids: Vec<String> = (0..count).map(|i| format!("sample-{i}")).collect();
        for id in &ids {
            let f = files.join(id);
            std::fs::write(&f, format!("{id}\n"))
                .with_context(|| format!("writing {}", f.display()))?;
        }
        Ok(Sample {
            resource,
            ids,
            numa: Vec::new(),
            files,
        })
    }

    fn with_numa(mut self, numa: Vec<i64>) -> Sample {
        self.numa = numa;
        self
    }
}

impl DeviceSource for Sample {
    fn resource_name(&self) -> String {
        self.resource.clone()
    }

    fn devices(&self) -> Vec<pb::Device> {
        self.ids
            .iter()
            .enumerate()
            .map(|(i, id)| pb::Device {
                topology: self
                    .numa
                    .get(i)
                    .filter(|n| **n >= 0)
                    .map(|n| pb::TopologyInfo {
                        nodes: vec![pb::NumaNode { id: *n }],
                    }),
                ..device(id.clone())
            })
            .collect()
    }

    fn allocate(&self, ids: &[String]) -> Result<pb::ContainerAllocateResponse, String> {
        Ok(pb::ContainerAllocateResponse {
            envs: [("SAMPLE_DEVICES".to_string(), ids.join(","))].into(),
            mounts: ids
                .iter()
                .map(|id| pb::Mount {
                    container_path: format!("/sample/{id}"),
                    host_path: self.files.join(id).display().to_string(),
                    read_only: true,
                })
                .collect(),
            ..Default::default()
        })
    }
}

struct Nvidia {
    /// GPU indices from /dev/nvidiaN.
    gpus: Vec<u32>,
}

impl Nvidia {
    fn discover() -> Nvidia {
        let mut gpus: Vec<u32> = std::fs::read_dir("/dev")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_prefix("nvidia"))
                    .and_then(|n| n.parse().ok())
            })
            .collect();
        gpus.sort_unstable();
        tracing::info!(?gpus, "NVIDIA GPUs found");
        Nvidia { gpus }
    }
}

/// The host's nvidia-smi and the NVML libraries it loads, mounted read-only at
/// the same paths.
fn nvidia_host_files() -> Vec<String> {
    let mut out = Vec::new();
    for bin in ["/usr/bin/nvidia-smi", "/usr/local/bin/nvidia-smi"] {
        if Path::new(bin).exists() {
            out.push(bin.to_string());
        }
    }
    for dir in [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
    ] {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with("libnvidia-ml.so") || name.starts_with("libcuda.so") {
                out.push(e.path().display().to_string());
            }
        }
    }
    out
}

impl DeviceSource for Nvidia {
    fn resource_name(&self) -> String {
        "nvidia.com/gpu".into()
    }

    fn devices(&self) -> Vec<pb::Device> {
        self.gpus
            .iter()
            .map(|i| device(format!("nvidia{i}")))
            .collect()
    }

    fn allocate(&self, ids: &[String]) -> Result<pb::ContainerAllocateResponse, String> {
        let mut nodes: Vec<String> = ids.iter().map(|id| format!("/dev/{id}")).collect();
        for extra in ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"] {
            if Path::new(extra).exists() {
                nodes.push(extra.into());
            }
        }
        let visible: Vec<&str> = ids
            .iter()
            .map(|id| id.trim_start_matches("nvidia"))
            .collect();
        Ok(pb::ContainerAllocateResponse {
            envs: [("NVIDIA_VISIBLE_DEVICES".to_string(), visible.join(","))].into(),
            devices: nodes
                .into_iter()
                .map(|n| pb::DeviceSpec {
                    container_path: n.clone(),
                    host_path: n,
                    permissions: "rw".into(),
                })
                .collect(),
            mounts: nvidia_host_files()
                .into_iter()
                .map(|p| pb::Mount {
                    container_path: p.clone(),
                    host_path: p,
                    read_only: true,
                })
                .collect(),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_allocation_gives_env_and_mounts() {
        let dir = std::env::temp_dir().join(format!("berth-sample-{}", std::process::id()));
        let s = Sample::new(&dir, 2, "example.com/sample".into())
            .expect("sample")
            .with_numa(vec![-1, 1]);
        let devices = s.devices();
        assert_eq!(devices.len(), 2);
        assert_eq!(devices[0].topology, None);
        assert_eq!(devices[1].topology.as_ref().map(|t| t.nodes[0].id), Some(1));
        let r = s.allocate(&["sample-1".into()]).expect("allocate");
        assert_eq!(
            r.envs.get("SAMPLE_DEVICES").map(String::as_str),
            Some("sample-1")
        );
        assert_eq!(r.mounts.len(), 1);
        assert_eq!(r.mounts[0].container_path, "/sample/sample-1");
        assert_eq!(
            std::fs::read_to_string(&r.mounts[0].host_path).expect("host file"),
            "sample-1\n"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
