//! The machine's topology from sysfs (what upstream gets from cAdvisor):
//! NUMA nodes (`/sys/devices/system/node/node*/{cpulist,distance}`), each
//! CPU's socket and core (`/sys/devices/system/cpu/cpu*/topology/`) and PCI
//! devices' NUMA node (`/sys/bus/pci/devices/*/numa_node`), behind [`Sysfs`]
//! so tests describe machines as fake trees.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use crate::cpuset::{CpuSet, CpuSetError};

/// Read access to a sysfs tree.
pub trait Sysfs {
    fn read(&self, path: &str) -> io::Result<String>;
    /// Entry names in a directory.
    fn list(&self, path: &str) -> io::Result<Vec<String>>;
}

/// The real `/sys` (or a copy of it under another root).
pub struct RealSysfs {
    pub root: PathBuf,
}

impl RealSysfs {
    pub fn new() -> Self {
        RealSysfs {
            root: PathBuf::from("/"),
        }
    }
    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }
}

impl Default for RealSysfs {
    fn default() -> Self {
        Self::new()
    }
}

impl Sysfs for RealSysfs {
    fn read(&self, path: &str) -> io::Result<String> {
        std::fs::read_to_string(self.path(path))
    }
    fn list(&self, path: &str) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(self.path(path))? {
            out.push(e?.file_name().to_string_lossy().into_owned());
        }
        Ok(out)
    }
}

/// An in-memory tree: file path → contents; directories are implied.
#[derive(Debug, Clone, Default)]
pub struct FakeSysfs {
    pub files: BTreeMap<String, String>,
}

impl FakeSysfs {
    pub fn set(&mut self, path: &str, contents: impl Into<String>) {
        self.files.insert(path.to_string(), contents.into());
    }

    /// `sockets` sockets, each `numa_per_socket` NUMA nodes of `cores` cores
    /// with `threads` threads each (SMT on when 2), CPU ids numbered as Linux
    /// does (first threads of all cores, then the siblings), and `devices`
    /// PCI devices per NUMA node. Tests `set` more files (a `numa_node` of -1).
    pub fn machine(
        sockets: usize,
        numa_per_socket: usize,
        cores: usize,
        threads: usize,
        devices: usize,
    ) -> Self {
        let mut fs = FakeSysfs::default();
        let nodes = sockets * numa_per_socket;
        let physical = nodes * cores;
        let mut node_cpus: Vec<Vec<usize>> = vec![Vec::new(); nodes];
        for t in 0..threads {
            for core in 0..physical {
                let cpu = t * physical + core;
                let node = core / cores;
                let socket = node / numa_per_socket;
                node_cpus[node].push(cpu);
                let base = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
                fs.set(
                    &format!("{base}/physical_package_id"),
                    format!("{socket}\n"),
                );
                fs.set(
                    &format!("{base}/core_id"),
                    format!("{}\n", core % (cores * numa_per_socket)),
                );
            }
        }
        for (n, cpus) in node_cpus.iter().enumerate() {
            let set: CpuSet = cpus.iter().copied().collect();
            let base = format!("/sys/devices/system/node/node{n}");
            fs.set(&format!("{base}/cpulist"), format!("{set}\n"));
            let dist: Vec<String> = (0..nodes)
                .map(|m| {
                    if m == n {
                        "10".to_string()
                    } else if m / numa_per_socket == n / numa_per_socket {
                        "11".to_string()
                    } else {
                        "21".to_string()
                    }
                })
                .collect();
            fs.set(&format!("{base}/distance"), format!("{}\n", dist.join(" ")));
            for d in 0..devices {
                fs.set(
                    &format!("/sys/bus/pci/devices/0000:{n:02x}:{d:02x}.0/numa_node"),
                    format!("{n}\n"),
                );
            }
        }
        fs
    }
}

impl Sysfs for FakeSysfs {
    fn read(&self, path: &str) -> io::Result<String> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, path.to_string()))
    }
    fn list(&self, path: &str) -> io::Result<Vec<String>> {
        let prefix = format!("{}/", path.trim_end_matches('/'));
        let mut out: Vec<String> = self
            .files
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .filter_map(|rest| rest.split('/').next())
            .map(str::to_string)
            .collect();
        out.dedup();
        if out.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, path.to_string()));
        }
        Ok(out)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    #[error("reading {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{path}: {source}")]
    CpuList { path: String, source: CpuSetError },
    #[error("{path}: {value:?} is not a number")]
    Number { path: String, value: String },
}

/// One CPU's place (upstream's `CPUInfo`); `core` is the lowest CPU id of
/// the core's threads, unique on the machine as upstream's core ids are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuInfo {
    pub numa_node: usize,
    pub socket: usize,
    pub core: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciDevice {
    pub address: String,
    /// `None` for `numa_node = -1` (no affinity, as on single-node VMs).
    pub numa_node: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub cpus: BTreeMap<usize, CpuInfo>,
    pub numa: crate::merge::NumaInfo,
    pub pci_devices: Vec<PciDevice>,
}

fn read(fs: &dyn Sysfs, path: &str) -> Result<String, MachineError> {
    fs.read(path).map_err(|source| MachineError::Io {
        path: path.to_string(),
        source,
    })
}

fn number(fs: &dyn Sysfs, path: &str) -> Result<i64, MachineError> {
    let v = read(fs, path)?;
    v.trim().parse().map_err(|_| MachineError::Number {
        path: path.to_string(),
        value: v.trim().to_string(),
    })
}

fn numbered(names: Vec<String>, prefix: &str) -> Vec<usize> {
    let mut ids: Vec<usize> = names
        .iter()
        .filter_map(|n| n.strip_prefix(prefix)?.parse().ok())
        .collect();
    ids.sort();
    ids
}

impl Machine {
    /// Reads the machine. Without `/sys/devices/system/node` (kernels without
    /// NUMA) every CPU is on node 0.
    pub fn discover(fs: &dyn Sysfs) -> Result<Machine, MachineError> {
        let cpu_ids = numbered(
            fs.list("/sys/devices/system/cpu")
                .map_err(|source| MachineError::Io {
                    path: "/sys/devices/system/cpu".into(),
                    source,
                })?,
            "cpu",
        );
        let mut node_of: BTreeMap<usize, usize> = BTreeMap::new();
        let mut nodes = numbered(
            fs.list("/sys/devices/system/node").unwrap_or_default(),
            "node",
        );
        let mut distances = BTreeMap::new();
        for &n in &nodes {
            let path = format!("/sys/devices/system/node/node{n}/cpulist");
            let list = read(fs, &path)?;
            let set: CpuSet = list
                .parse()
                .map_err(|source| MachineError::CpuList { path, source })?;
            for c in set.iter() {
                node_of.insert(c, n);
            }
            let dpath = format!("/sys/devices/system/node/node{n}/distance");
            if let Ok(d) = fs.read(&dpath) {
                let row: Result<Vec<u64>, _> = d.split_whitespace().map(str::parse).collect();
                let row = row.map_err(|_| MachineError::Number {
                    path: dpath.clone(),
                    value: d.trim().to_string(),
                })?;
                distances.insert(n, row);
            }
        }
        if nodes.is_empty() {
            nodes.push(0);
        }
        let mut cpus = BTreeMap::new();
        let mut core_first: BTreeMap<(i64, i64), usize> = BTreeMap::new();
        for &c in &cpu_ids {
            let base = format!("/sys/devices/system/cpu/cpu{c}/topology");
            let Ok(socket) = number(fs, &format!("{base}/physical_package_id")) else {
                // Offline CPUs have no topology directory.
                continue;
            };
            let core_id = number(fs, &format!("{base}/core_id"))?;
            let core = *core_first.entry((socket, core_id)).or_insert(c);
            cpus.insert(
                c,
                CpuInfo {
                    numa_node: node_of.get(&c).copied().unwrap_or(0),
                    socket: socket.max(0) as usize,
                    core,
                },
            );
        }
        let mut pci_devices = Vec::new();
        let mut addrs = fs.list("/sys/bus/pci/devices").unwrap_or_default();
        addrs.sort();
        for address in addrs {
            let node =
                number(fs, &format!("/sys/bus/pci/devices/{address}/numa_node")).unwrap_or(-1);
            pci_devices.push(PciDevice {
                address,
                numa_node: usize::try_from(node).ok(),
            });
        }
        Ok(Machine {
            cpus,
            numa: crate::merge::NumaInfo { nodes, distances },
            pci_devices,
        })
    }

    /// The CPUs of the given NUMA nodes.
    pub fn cpus_in_numa_nodes(&self, nodes: &[usize]) -> CpuSet {
        self.cpus
            .iter()
            .filter(|(_, i)| nodes.contains(&i.numa_node))
            .map(|(c, _)| *c)
            .collect()
    }

    /// Threads per core (2 with SMT on).
    pub fn cpus_per_core(&self) -> usize {
        let cores: BTreeMap<usize, usize> = self.cpus.values().fold(BTreeMap::new(), |mut m, i| {
            *m.entry(i.core).or_insert(0) += 1;
            m
        });
        cores.values().copied().max().unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_machines() {
        // (name, tree, NUMA nodes, CPUs, threads per core, devices, node of CPU 1, core of the last CPU)
        let cases = [
            (
                "seed: 2 sockets x 4 CPUs, 4 devices each",
                FakeSysfs::machine(2, 1, 4, 1, 4),
                2,
                8,
                1,
                8,
            ),
            (
                "4 nodes, SMT",
                FakeSysfs::machine(2, 2, 4, 2, 1),
                4,
                32,
                2,
                4,
            ),
            ("8 nodes", FakeSysfs::machine(4, 2, 2, 1, 0), 8, 16, 1, 0),
            (
                "16 nodes, SMT",
                FakeSysfs::machine(2, 8, 2, 2, 1),
                16,
                64,
                2,
                16,
            ),
        ];
        for (name, fs, nodes, ncpus, tpc, devices) in cases {
            let m = Machine::discover(&fs).unwrap();
            assert_eq!(m.numa.nodes.len(), nodes, "{name}");
            assert_eq!(m.cpus.len(), ncpus, "{name}");
            assert_eq!(m.cpus_per_core(), tpc, "{name}");
            assert_eq!(m.pci_devices.len(), devices, "{name}");
            assert_eq!(m.cpus_in_numa_nodes(&m.numa.nodes).len(), ncpus, "{name}");
        }
        let seed = Machine::discover(&FakeSysfs::machine(2, 1, 4, 1, 2)).unwrap();
        assert_eq!(seed.cpus_in_numa_nodes(&[1]).to_string(), "4-7");
        assert_eq!(
            seed.cpus[&5],
            CpuInfo {
                numa_node: 1,
                socket: 1,
                core: 5
            }
        );
        assert_eq!(seed.numa.distances[&0], vec![10, 21]);
        assert_eq!(seed.pci_devices[2].numa_node, Some(1));
        // SMT: CPU 8 is CPU 0's sibling (Linux numbering), same core.
        let smt = Machine::discover(&FakeSysfs::machine(2, 1, 4, 2, 0)).unwrap();
        assert_eq!(smt.cpus[&8].core, 0);
        assert_eq!(smt.cpus_in_numa_nodes(&[0]).to_string(), "0-3,8-11");
    }

    #[test]
    fn no_numa_and_unknown_device_nodes() {
        let mut fs = FakeSysfs::default();
        for c in 0..2 {
            fs.set(
                &format!("/sys/devices/system/cpu/cpu{c}/topology/physical_package_id"),
                "0\n",
            );
            fs.set(
                &format!("/sys/devices/system/cpu/cpu{c}/topology/core_id"),
                format!("{c}\n"),
            );
        }
        fs.set("/sys/bus/pci/devices/0000:00:06.0/numa_node", "-1\n");
        let m = Machine::discover(&fs).unwrap();
        assert_eq!(m.numa.nodes, vec![0]);
        assert_eq!(m.cpus_in_numa_nodes(&[0]).to_string(), "0-1");
        assert_eq!(m.pci_devices[0].numa_node, None);
        fs.set("/sys/devices/system/node/node0/cpulist", "0-x\n");
        let e = Machine::discover(&fs).unwrap_err().to_string();
        assert!(
            e.starts_with("/sys/devices/system/node/node0/cpulist: invalid cpuset"),
            "{e}"
        );
    }

    #[test]
    fn this_machine() {
        // The real reader on the host: at least one CPU on a known node.
        let m = Machine::discover(&RealSysfs::new()).unwrap();
        assert!(!m.cpus.is_empty());
        assert!(m.cpus.values().all(|c| m.numa.nodes.contains(&c.numa_node)));
    }
}
