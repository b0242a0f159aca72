//! The node agent's cgroups on this machine's real cgroupfs: the root `berth`
//! (node allocatable enforced), the QoS cgroups and the pod cgroups of a
//! Guaranteed, a Burstable and a BestEffort pod carry the computed values, and
//! the pods' cgroups go when the pods are deleted. v1 (and hybrid) machines read
//! each controller's hierarchy at this process's own cgroup (the server is a
//! child and shares it); a pure v2 machine reads the unified tree.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Server, stdout, wait_until};

const KUBE_RESERVED: i64 = 256 << 20;
const SYSTEM_RESERVED: i64 = 128 << 20;
const KUBE_RESERVED_CPU_MILLI: i64 = 100;
const POD_MAX_PIDS: i64 = 512;

/// Where this process's cgroups are: v1 (controller → directory) or v2.
struct Fs {
    v2: Option<PathBuf>,
    proc: String,
}

impl Fs {
    fn here() -> Fs {
        let proc = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let root = Path::new("/sys/fs/cgroup");
        let v2 = root.join("cgroup.controllers").is_file().then(|| {
            let own = proc
                .lines()
                .find_map(|l| l.strip_prefix("0::"))
                .unwrap_or("/");
            root.join(own.trim_start_matches('/'))
        });
        Fs { v2, proc }
    }

    /// The directory of cgroup `rel` (below Berth's own cgroup) for `controller`.
    fn dir(&self, controller: &str, rel: &str) -> PathBuf {
        if let Some(base) = &self.v2 {
            return base.join(rel);
        }
        let own = self
            .proc
            .lines()
            .find_map(|l| {
                let mut p = l.splitn(3, ':');
                let (_, cs, path) = (p.next()?, p.next()?, p.next()?);
                cs.split(',').any(|c| c == controller).then_some(path)
            })
            .unwrap_or_else(|| panic!("no {controller} line in /proc/self/cgroup"));
        Path::new("/sys/fs/cgroup")
            .join(controller)
            .join(own.trim_start_matches('/'))
            .join(rel)
    }

    fn read(&self, controller: &str, rel: &str, v1: &str, v2: &str) -> String {
        let f = if self.v2.is_some() { v2 } else { v1 };
        let p = self.dir(controller, rel).join(f);
        std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .trim()
            .to_string()
    }

    fn shares(&self, rel: &str) -> i64 {
        let v = self.read("cpu", rel, "cpu.shares", "cpu.weight");
        v.parse().unwrap_or_else(|_| panic!("{rel}: {v:?}"))
    }

    /// The expected cpu.shares (v1) or cpu.weight (v2) for `shares`.
    fn want_shares(&self, shares: i64) -> i64 {
        if self.v2.is_some() {
            1 + ((shares - 2) * 9999) / 262_142
        } else {
            shares
        }
    }

    /// CFS quota in µs (None: unlimited).
    fn quota(&self, rel: &str) -> Option<i64> {
        if self.v2.is_some() {
            let v = self.read("cpu", rel, "", "cpu.max");
            let q = v.split_whitespace().next().unwrap().to_string();
            (q != "max").then(|| q.parse().unwrap())
        } else {
            let q: i64 = self
                .read("cpu", rel, "cpu.cfs_quota_us", "")
                .parse()
                .unwrap();
            (q > 0).then_some(q)
        }
    }

    /// Memory limit in bytes (None: unlimited).
    fn memory(&self, rel: &str) -> Option<i64> {
        let v = self.read("memory", rel, "memory.limit_in_bytes", "memory.max");
        if v == "max" {
            return None;
        }
        let m: i64 = v.parse().unwrap();
        (m < 0x7fff_ffff_ffff_f000).then_some(m)
    }

    fn pids(&self, rel: &str) -> Option<i64> {
        let v = self.read("pids", rel, "pids.max", "pids.max");
        (v != "max").then(|| v.parse().unwrap())
    }

    fn gone(&self, rel: &str) -> bool {
        ["cpu", "memory", "pids"]
            .iter()
            .all(|c| !self.dir(c, rel).exists())
    }
}

fn milli_to_shares(milli: i64) -> i64 {
    (milli * 1024 / 1000).clamp(2, 262_144)
}

/// The kernel keeps memory limits in whole pages.
fn page_floor(v: i64) -> i64 {
    v - v % 4096
}

fn pod_yaml(name: &str, requests: &str, limits: &str) -> String {
    let mut res = String::new();
    if !requests.is_empty() || !limits.is_empty() {
        res.push_str("    resources:\n");
        if !requests.is_empty() {
            res.push_str(&format!("      requests: {requests}\n"));
        }
        if !limits.is_empty() {
            res.push_str(&format!("      limits: {limits}\n"));
        }
    }
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: busybox\n    imagePullPolicy: Never\n    command: [\"sleep\", \"3600\"]\n{res}"
    )
}

fn get(s: &Server, args: &[&str]) -> String {
    let out = s.kubectl(args);
    assert!(out.status.success(), "kubectl {args:?}: {out:?}");
    stdout(&out).trim().to_string()
}

#[test]
fn pod_qos_and_root_cgroups_carry_the_computed_values() {
    let kube = format!("--kube-reserved=cpu={KUBE_RESERVED_CPU_MILLI}m,memory={KUBE_RESERVED}");
    let system = format!("--system-reserved=memory={SYSTEM_RESERVED}");
    let pids = format!("--pod-max-pids={POD_MAX_PIDS}");
    let args = [kube.as_str(), system.as_str(), pids.as_str()];
    let s = Server::start_with_agent_args("cgroups", &args);
    let fs = Fs::here();
    // The Node registers once containerd and the local images are ready.
    s.wait_node_ready(Duration::from_secs(90));

    // The root cgroup: capacity − kube-reserved − system-reserved (no eviction threshold).
    let node = get(
        &s,
        &["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"],
    );
    let q = |path: &str| {
        get(
            &s,
            &["get", "node", &node, "-o", &format!("jsonpath={path}")],
        )
    };
    let parse = |v: String| berth_api::quantity::Quantity::parse(&v).unwrap();
    let cap_mem = parse(q("{.status.capacity.memory}")).value();
    let cap_cpu = parse(q("{.status.capacity.cpu}")).milli_value();
    let alloc_mem = parse(q("{.status.allocatable.memory}")).value();
    let alloc_cpu = parse(q("{.status.allocatable.cpu}")).milli_value();
    // The Node keeps the seed's formula (the default hard eviction threshold, 100Mi, too).
    assert_eq!(
        alloc_mem,
        cap_mem - KUBE_RESERVED - SYSTEM_RESERVED - (100 << 20)
    );
    assert_eq!(alloc_cpu, cap_cpu - KUBE_RESERVED_CPU_MILLI);
    assert_eq!(
        fs.memory("berth"),
        Some(page_floor(cap_mem - KUBE_RESERVED - SYSTEM_RESERVED)),
        "root memory limit"
    );
    assert_eq!(
        fs.shares("berth"),
        fs.want_shares(milli_to_shares(cap_cpu - KUBE_RESERVED_CPU_MILLI)),
        "root cpu shares"
    );
    let pid_max: i64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(fs.pids("berth"), Some(pid_max), "root pids.max");
    assert_eq!(fs.shares("berth/besteffort"), fs.want_shares(2));

    // Three pods, one per QoS class.
    let pods = [
        (
            "guaranteed",
            "{cpu: 200m, memory: 64Mi}",
            "{cpu: 200m, memory: 64Mi}",
        ),
        ("burstable", "{cpu: 100m, memory: 32Mi}", "{memory: 96Mi}"),
        ("besteffort", "", ""),
    ];
    for (name, req, lim) in pods {
        let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&pod_yaml(name, req, lim)));
        assert!(out.status.success(), "{out:?}");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let out = s.kubectl(&["get", "pods", "-o", "jsonpath={.items[*].status.phase}"]);
        if stdout(&out)
            .split_whitespace()
            .filter(|p| *p == "Running")
            .count()
            == 3
        {
            break;
        }
        if std::time::Instant::now() > deadline {
            let d = s.kubectl(&["describe", "pods"]);
            panic!("three pods not Running:\n{}", stdout(&d));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let uid = |n: &str| get(&s, &["get", "pod", n, "-o", "jsonpath={.metadata.uid}"]);
    let (g, b, be) = (uid("guaranteed"), uid("burstable"), uid("besteffort"));
    for (n, want) in [
        ("guaranteed", "Guaranteed"),
        ("burstable", "Burstable"),
        ("besteffort", "BestEffort"),
    ] {
        assert_eq!(
            get(&s, &["get", "pod", n, "-o", "jsonpath={.status.qosClass}"]),
            want
        );
    }
    let (gd, bd, bed) = (
        format!("berth/pod{g}"),
        format!("berth/burstable/pod{b}"),
        format!("berth/besteffort/pod{be}"),
    );
    // Guaranteed: shares, quota and memory from its limits; pids from --pod-max-pids.
    assert_eq!(fs.shares(&gd), fs.want_shares(204));
    assert_eq!(fs.quota(&gd), Some(20_000));
    assert_eq!(fs.memory(&gd), Some(64 << 20));
    assert_eq!(fs.pids(&gd), Some(POD_MAX_PIDS));
    // Burstable: shares from the request, no quota (no CPU limit), the memory limit.
    assert_eq!(fs.shares(&bd), fs.want_shares(102));
    assert_eq!(fs.quota(&bd), None);
    assert_eq!(fs.memory(&bd), Some(96 << 20));
    assert_eq!(fs.pids(&bd), Some(POD_MAX_PIDS));
    // BestEffort: the minimum shares and no limits.
    assert_eq!(fs.shares(&bed), fs.want_shares(2));
    assert_eq!(fs.quota(&bed), None);
    assert_eq!(fs.memory(&bed), None);
    assert_eq!(fs.pids(&bed), Some(POD_MAX_PIDS));
    // The QoS cgroups: burstable shares = the burstable pods' CPU requests.
    assert_eq!(fs.shares("berth/burstable"), fs.want_shares(102));
    assert_eq!(fs.memory("berth/burstable"), None);
    assert_eq!(fs.shares("berth/besteffort"), fs.want_shares(2));

    // Deleted pods lose their cgroups; the burstable shares follow.
    let out = s.kubectl(&["delete", "pod", "guaranteed", "burstable", "besteffort"]);
    assert!(out.status.success(), "{out:?}");
    wait_until(Duration::from_secs(60), "pod cgroups removed", || {
        fs.gone(&gd) && fs.gone(&bd) && fs.gone(&bed)
    });
    assert_eq!(fs.shares("berth/burstable"), fs.want_shares(2));
}
