//! The node's own figures from `/proc` (a directory, so tests use a fake one):
//! boot time, the task limit and count (upstream's pidlimit), and the host's
//! network interfaces (as cAdvisor reports the root container's).

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::runtime::{NetworkInterfaceUsage, NetworkUsage};

/// Interfaces cAdvisor leaves out of the root container's network stats.
const IGNORED_PREFIXES: [&str; 4] = ["lo", "veth", "docker", "nerdctl"];
/// The interface upstream calls the default one.
pub const DEFAULT_INTERFACE: &str = "eth0";

/// Reads the node's figures under a `/proc` directory.
#[derive(Debug, Clone)]
pub struct Host {
    proc: PathBuf,
}

/// The task limit and the number of tasks (threads, on Linux).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rlimit {
    pub max_pid: Option<i64>,
    pub running: Option<i64>,
}

/// `btime` of /proc/stat: when the machine booted.
pub fn parse_boot_time(stat: &str) -> Option<DateTime<Utc>> {
    let line = stat.lines().find(|l| l.starts_with("btime "))?;
    DateTime::from_timestamp(line[6..].trim().parse().ok()?, 0)
}

/// The total task count of /proc/loadavg (`0.83 0.71 1.13 3/105 14009` → 105);
/// upstream prefers it to sysinfo(2), which truncates above 65535.
pub fn parse_loadavg_tasks(text: &str) -> Option<i64> {
    text.split_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()
}

/// /proc/net/dev: every interface's counters, in file order.
pub fn parse_net_dev(text: &str) -> Vec<NetworkInterfaceUsage> {
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let f: Vec<u64> = rest
                .split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect();
            (f.len() >= 16).then(|| NetworkInterfaceUsage {
                name: name.trim().to_string(),
                rx_bytes: Some(f[0]),
                rx_errors: Some(f[2]),
                tx_bytes: Some(f[8]),
                tx_errors: Some(f[10]),
            })
        })
        .collect()
}

impl Host {
    pub fn new(proc: &Path) -> Self {
        Host {
            proc: proc.to_path_buf(),
        }
    }

    pub fn system() -> Self {
        Self::new(Path::new("/proc"))
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.proc.join(rel)).ok()
    }

    pub fn boot_time(&self) -> Option<DateTime<Utc>> {
        parse_boot_time(&self.read("stat")?)
    }

    /// The lower of kernel.pid_max and kernel.threads-max, and the task count.
    pub fn rlimit(&self) -> Rlimit {
        let max_pid = ["sys/kernel/pid_max", "sys/kernel/threads-max"]
            .iter()
            .filter_map(|f| self.read(f)?.trim().parse::<i64>().ok())
            .min();
        Rlimit {
            max_pid,
            running: self.read("loadavg").and_then(|t| parse_loadavg_tasks(&t)),
        }
    }

    /// The host's interfaces without loopback and container ends (veth…),
    /// eth0 as the default one.
    pub fn network(&self, now: DateTime<Utc>) -> Option<NetworkUsage> {
        let interfaces: Vec<NetworkInterfaceUsage> = parse_net_dev(&self.read("net/dev")?)
            .into_iter()
            .filter(|i| !IGNORED_PREFIXES.iter().any(|p| i.name.starts_with(p)))
            .collect();
        Some(NetworkUsage {
            timestamp: Some(now),
            default_interface: interfaces
                .iter()
                .find(|i| i.name == DEFAULT_INTERFACE)
                .cloned(),
            interfaces,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    const NET_DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 9782754001 6830174    0    0    0     0          0         0 9782754001 6830174    0    0    0     0       0          0
  eth0: 230727037    9934    1    0    0     0          0         0   663807    7598    2    0    0     0       0          0
berth0: 2017047   23043    0    0    0     0          0      7224  2628714   16283    0    2    0     0       0          0
vethab12: 5 1 0 0 0 0 0 0 6 1 0 0 0 0 0 0
";

    #[test]
    fn proc_parsers() {
        assert_eq!(
            parse_boot_time("cpu 1 2\nbtime 1796154972\nprocesses 9\n"),
            DateTime::from_timestamp(1_796_154_972, 0)
        );
        assert_eq!(parse_boot_time("cpu 1\n"), None);
        let cases = [
            ("0.83 0.71 1.13 3/105 14009\n", Some(105)),
            ("0.83 0.71 1.13 3-105 14009\n", None),
            ("0.83\n", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_loadavg_tasks(text), want, "{text}");
        }
        let ifs = parse_net_dev(NET_DEV);
        let names: Vec<&str> = ifs.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["lo", "eth0", "berth0", "vethab12"]);
        assert_eq!(
            ifs[1],
            NetworkInterfaceUsage {
                name: "eth0".into(),
                rx_bytes: Some(230_727_037),
                rx_errors: Some(1),
                tx_bytes: Some(663_807),
                tx_errors: Some(2),
            }
        );
    }

    #[test]
    fn node_figures_from_a_fake_proc() {
        let t = TempDir::new("stats-proc");
        t.write(&[
            ("net/dev", NET_DEV),
            ("loadavg", "0.83 0.71 1.13 3/105 14009\n"),
            ("sys/kernel/pid_max", "32768\n"),
            ("sys/kernel/threads-max", "193098\n"),
        ]);
        let h = Host::new(t.path());
        assert_eq!(
            h.rlimit(),
            Rlimit {
                max_pid: Some(32768),
                running: Some(105)
            }
        );
        let now = DateTime::from_timestamp(1_796_154_999, 0).unwrap_or_default();
        let n = h.network(now).unwrap();
        let names: Vec<&str> = n.interfaces.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["eth0", "berth0"]);
        assert_eq!(n.default_interface.map(|i| i.name), Some("eth0".into()));
        assert_eq!(
            Host::new(&t.path().join("none")).rlimit(),
            Rlimit::default()
        );
    }
}
