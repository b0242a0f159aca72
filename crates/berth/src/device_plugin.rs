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

use berth_topology::machine::{RealSysfs, Sysfs};

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
            .map(|(i, id)| {
                let node = self.numa.get(i).copied().filter(|n| *n >= 0);
                with_numa(id.clone(), node)
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
    gpus: Vec<Gpu>,
}

/// One NVIDIA GPU: its `/dev/nvidia<minor>` and NUMA node.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Gpu {
    minor: u32,
    numa_node: Option<i64>,
}

/// NVIDIA GPUs from sysfs: PCI devices of vendor 0x10de and class VGA
/// (0x0300) or 3D controller (0x0302), each with its `numa_node` (-1: none)
/// and its minor number from the driver's
/// `/proc/driver/nvidia/gpus/<address>/information` (`Device Minor: N`), or
/// its rank in address order where the driver names none at all.
fn discover_gpus(fs: &dyn Sysfs) -> Vec<Gpu> {
    let mut addrs = fs.list("/sys/bus/pci/devices").unwrap_or_default();
    addrs.sort();
    let read = |path: String| {
        fs.read(&path)
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    let mut gpus: Vec<(Option<u32>, Option<i64>)> = Vec::new();
    for addr in addrs {
        let dir = format!("/sys/bus/pci/devices/{addr}");
        let class = read(format!("{dir}/class"));
        if read(format!("{dir}/vendor")) != "0x10de"
            || !(class.starts_with("0x0300") || class.starts_with("0x0302"))
        {
            continue;
        }
        let minor: Option<u32> = read(format!("/proc/driver/nvidia/gpus/{addr}/information"))
            .lines()
            .find_map(|l| l.strip_prefix("Device Minor:"))
            .and_then(|m| m.trim().parse().ok());
        let numa_node = read(format!("{dir}/numa_node"))
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0);
        gpus.push((minor, numa_node));
    }
    // Where the driver names minors, a GPU it does not drive (bound to
    // vfio, say) has no /dev/nvidia node of its own.
    let driven = gpus.iter().any(|(m, _)| m.is_some());
    let mut out: Vec<Gpu> = gpus
        .into_iter()
        .enumerate()
        .filter_map(|(rank, (minor, numa_node))| {
            let minor = if driven { minor? } else { rank as u32 };
            Some(Gpu { minor, numa_node })
        })
        .collect();
    out.sort_by_key(|g| g.minor);
    out
}

impl Nvidia {
    /// The GPUs sysfs lists that have a device node; without sysfs entries
    /// (a container without /sys/bus/pci), the `/dev/nvidiaN` nodes alone.
    fn discover() -> Nvidia {
        let mut gpus: Vec<Gpu> = discover_gpus(&RealSysfs::new())
            .into_iter()
            .filter(|g| Path::new(&format!("/dev/nvidia{}", g.minor)).exists())
            .collect();
        if gpus.is_empty() {
            let mut minors: Vec<u32> = std::fs::read_dir("/dev")
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
            minors.sort_unstable();
            gpus = minors
                .into_iter()
                .map(|minor| Gpu {
                    minor,
                    numa_node: None,
                })
                .collect();
        }
        tracing::info!(?gpus, "NVIDIA GPUs found");
        Nvidia { gpus }
    }
}

fn with_numa(id: String, node: Option<i64>) -> pb::Device {
    pb::Device {
        topology: node.map(|id| pb::TopologyInfo {
            nodes: vec![pb::NumaNode { id }],
        }),
        ..device(id)
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
            .map(|g| with_numa(format!("nvidia{}", g.minor), g.numa_node))
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
    use berth_topology::machine::FakeSysfs;

    #[test]
    fn nvidia_gpus_come_from_pci_with_their_numa_node_and_minor() {
        let mut fs = FakeSysfs::default();
        // (address, vendor, class, numa_node, driver's minor)
        let devices = [
            ("0000:3b:00.0", "0x10de", "0x030200", "1", Some("0")),
            ("0000:3b:00.1", "0x10de", "0x040300", "1", None), // its audio function
            ("0000:af:00.0", "0x10de", "0x030000", "-1", None), // no driver info
            ("0000:00:02.0", "0x8086", "0x030000", "0", None), // not NVIDIA
            ("0000:5e:00.0", "0x10de", "0x030200", "0", Some("1")),
        ];
        for (addr, vendor, class, node, minor) in devices {
            let dir = format!("/sys/bus/pci/devices/{addr}");
            fs.set(&format!("{dir}/vendor"), format!("{vendor}\n"));
            fs.set(&format!("{dir}/class"), format!("{class}\n"));
            fs.set(&format!("{dir}/numa_node"), format!("{node}\n"));
            if let Some(m) = minor {
                fs.set(
                    &format!("/proc/driver/nvidia/gpus/{addr}/information"),
                    format!("Model: \t\t NVIDIA H100\nDevice Minor: \t {m}\n"),
                );
            }
        }
        let gpu = |minor, numa_node| Gpu { minor, numa_node };
        // The driver names two minors: the GPU it does not drive is left out.
        assert_eq!(discover_gpus(&fs), [gpu(0, Some(1)), gpu(1, Some(0))]);
        // No driver information at all: ranks in address order.
        fs.files.retain(|k, _| !k.starts_with("/proc/"));
        assert_eq!(
            discover_gpus(&fs),
            [gpu(0, Some(1)), gpu(1, Some(0)), gpu(2, None)]
        );
        let d = with_numa("nvidia0".into(), Some(1));
        assert_eq!(d.topology.map(|t| t.nodes[0].id), Some(1));
    }

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
