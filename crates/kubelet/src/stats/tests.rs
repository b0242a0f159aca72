//! The summary a fake runtime, a fake cgroup tree, a fake /proc and fake
//! filesystems give, as upstream's JSON.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_runtime::clock::FakeClock;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::fs::{DirUsage, FsCapacity};
use super::*;
use crate::runtime::fake::FakeRuntime;
use crate::runtime::{
    ContainerConfig, ContainerStats, CpuUsage, FsUsage, MemoryUsage, NetworkInterfaceUsage,
    NetworkUsage, SandboxConfig, SandboxStats,
};
use crate::testutil::TempDir;

/// Every filesystem the same size; trees use what the table says.
struct FakeFs {
    usage: BTreeMap<PathBuf, DirUsage>,
}

const CAPACITY: FsCapacity = FsCapacity {
    capacity_bytes: 100_000_000,
    available_bytes: 60_000_000,
    used_bytes: 40_000_000,
    inodes: 1000,
    inodes_free: 600,
};

impl Filesystem for FakeFs {
    fn capacity(&self, _: &Path) -> Option<FsCapacity> {
        Some(CAPACITY)
    }
    fn usage(&self, path: &Path) -> Option<DirUsage> {
        self.usage.get(path).copied()
    }
    fn subdirs(&self, dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = self
            .usage
            .keys()
            .filter_map(|k| k.strip_prefix(dir).ok()?.iter().next())
            .filter_map(|c| c.to_str().map(String::from))
            .collect();
        names.dedup();
        names
    }
}

fn t(secs: i64, millis: u32) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, millis * 1_000_000).unwrap_or_default()
}

const CREATED: i64 = 1_796_119_200; // 2026-12-01T10:00:00Z
const SAMPLED: i64 = 1_796_119_500; // 10:05:00.250
const NOW: i64 = 1_796_119_501; // 10:05:01

struct World {
    _tree: TempDir,
    rt: Arc<FakeRuntime>,
    clock: Arc<FakeClock>,
    provider: StatsProvider,
    cgroup: PathBuf,
}

/// Writes `files` under `root`.
fn write(root: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

async fn world() -> World {
    let tree = TempDir::new("stats-provider");
    let root = tree.path();
    let pod = "berth/burstable/podu1";
    let mem = format!("cgroup/memory/own/{pod}");
    let stat = "total_inactive_file 200000\ntotal_rss 500000\npgfault 42\npgmajfault 3\n";
    write(
        root,
        &[
            ("cgroup/unified/cgroup.controllers", ""),
            ("cgroup/cpuacct/cpuacct.usage", "28314144780881\n"),
            ("cgroup/memory/memory.usage_in_bytes", "4749791232\n"),
            ("cgroup/memory/memory.memsw.usage_in_bytes", "4749791232\n"),
            (
                "cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "cgroup/memory/memory.stat",
                "total_inactive_file 3936014336\ntotal_rss 447397888\npgfault 113215\npgmajfault 3\n",
            ),
            (
                &format!("cgroup/cpuacct/{pod}/cpuacct.usage"),
                "2017103502\n",
            ),
            (&format!("{mem}/memory.usage_in_bytes"), "1000000\n"),
            (
                &format!("{mem}/memory.limit_in_bytes"),
                "9223372036854771712\n",
            ),
            (&format!("{mem}/memory.stat"), stat),
            (
                &format!("{mem}/container-2/memory.usage_in_bytes"),
                "2000000\n",
            ),
            (
                &format!("{mem}/container-2/memory.memsw.usage_in_bytes"),
                "2004096\n",
            ),
            (
                &format!("{mem}/container-2/memory.limit_in_bytes"),
                "67108864\n",
            ),
            (
                &format!("{mem}/container-2/memory.memsw.limit_in_bytes"),
                "67108864\n",
            ),
            (&format!("{mem}/container-2/memory.stat"), stat),
            (
                &format!("cgroup/pids/{pod}/container-2/pids.current"),
                "2\n",
            ),
            ("proc/stat", "cpu  1 2 3 4\nbtime 1796112000\n"),
            ("proc/loadavg", "0.83 0.71 1.13 3/105 14009\n"),
            ("proc/sys/kernel/pid_max", "32768\n"),
            ("proc/sys/kernel/threads-max", "193098\n"),
            (
                "proc/net/dev",
                "h1\nh2\n    lo: 9 9 0 0 0 0 0 0 9 9 0 0 0 0 0 0\n  eth0: 230727037 9934 0 0 0 0 0 0 663807 7598 0 0 0 0 0 0\nberth0: 2017047 23043 0 0 0 0 0 7224 2628714 16283 0 2 0 0 0 0\n",
            ),
        ],
    );
    let own = "4:memory:/own\n3:pids:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";
    let cgroups = CgroupFs::new(&root.join("cgroup"), &root.join("proc"), own);
    let cfg = StatsConfig {
        node_name: "n1".into(),
        root_dir: "/d/agent".into(),
        logs_dir: "/d/agent/logs".into(),
        pods_dir: "/d/agent/pods".into(),
        memory_capacity: 8 << 30,
    };
    let usage: BTreeMap<PathBuf, DirUsage> = [
        ("/d/agent/logs/default_web_u1/app", 8192, 2),
        (
            "/d/agent/pods/u1/volumes/kubernetes.io~empty-dir/scratch",
            4096,
            1,
        ),
        (
            "/d/agent/pods/u1/volumes/kubernetes.io~projected/kube-api-access-abcde",
            12288,
            5,
        ),
    ]
    .into_iter()
    .map(|(p, used_bytes, inodes_used)| {
        (
            PathBuf::from(p),
            DirUsage {
                used_bytes,
                inodes_used,
            },
        )
    })
    .collect();

    let rt = Arc::new(FakeRuntime::new());
    rt.add_image("busybox");
    let image = |name: &str| ContainerConfig {
        name: name.into(),
        image: "busybox".into(),
        ..Default::default()
    };
    let sandbox = |name: &str, uid: &str| SandboxConfig {
        name: name.into(),
        namespace: "default".into(),
        uid: uid.into(),
        ..Default::default()
    };
    let web_cfg = sandbox("web", "u1");
    let web = rt.run_sandbox(&web_cfg).await.unwrap();
    let app = rt
        .create_container(&web, &image("app"), &web_cfg)
        .await
        .unwrap();
    rt.start_container(&app).await.unwrap();
    let done = rt
        .create_container(&web, &image("done"), &web_cfg)
        .await
        .unwrap();
    rt.start_container(&done).await.unwrap();
    rt.exit_container(&done, 0, "Completed");
    let idle_cfg = sandbox("idle", "u2");
    let idle = rt.run_sandbox(&idle_cfg).await.unwrap();
    let c = rt
        .create_container(&idle, &image("c"), &idle_cfg)
        .await
        .unwrap();
    rt.start_container(&c).await.unwrap();
    for id in [&web, &app, &done, &idle, &c] {
        rt.set_created_at(id, t(CREATED, 0));
    }
    rt.set_container_stats(app_stats(2_000_000_000, t(SAMPLED, 250)));
    rt.set_container_stats(ContainerStats {
        id: done.clone(),
        name: "done".into(),
        cpu: None,
        memory: None,
        swap: None,
        writable_layer: None,
    });
    rt.set_container_stats(ContainerStats {
        id: c,
        name: "c".into(),
        cpu: Some(CpuUsage {
            timestamp: t(SAMPLED, 250),
            usage_core_nano_seconds: 1000,
        }),
        memory: Some(MemoryUsage {
            timestamp: t(SAMPLED, 250),
            working_set_bytes: 4096,
            available_bytes: None,
            usage_bytes: None,
            rss_bytes: None,
            page_faults: None,
            major_page_faults: None,
        }),
        swap: None,
        writable_layer: None,
    });
    rt.set_sandbox_stats(SandboxStats {
        id: web.clone(),
        cpu: None,
        memory: None,
        network: Some(NetworkUsage {
            timestamp: None,
            default_interface: Some(NetworkInterfaceUsage {
                name: "eth0".into(),
                rx_bytes: Some(1474),
                rx_errors: Some(0),
                tx_bytes: Some(808),
                tx_errors: Some(0),
            }),
            interfaces: vec![],
        }),
        process_count: Some(1),
    });
    rt.set_image_fs(vec![FsUsage {
        timestamp: Some(t(SAMPLED, 250)),
        mountpoint: "/d/agent/containerd/root/io.containerd.snapshotter.v1.overlayfs".into(),
        used_bytes: Some(1_000_000),
        inodes_used: Some(10),
    }]);
    let clock = Arc::new(FakeClock::new(
        Timestamp::from_second(NOW).unwrap_or(Timestamp::UNIX_EPOCH),
    ));
    let provider = StatsProvider::new(cfg, rt.clone()).with_sources(
        cgroups,
        Host::new(&root.join("proc")),
        Arc::new(FakeFs { usage }),
        clock.clone(),
    );
    World {
        cgroup: root.join("cgroup"),
        _tree: tree,
        rt,
        clock,
        provider,
    }
}

fn app_stats(cpu_ns: u64, at: DateTime<Utc>) -> ContainerStats {
    ContainerStats {
        id: "container-2".into(),
        name: "app".into(),
        cpu: Some(CpuUsage {
            timestamp: at,
            usage_core_nano_seconds: cpu_ns,
        }),
        memory: Some(MemoryUsage {
            timestamp: at,
            working_set_bytes: 1_048_576,
            available_bytes: None,
            usage_bytes: Some(2_097_152),
            rss_bytes: Some(524_288),
            page_faults: Some(100),
            major_page_faults: Some(1),
        }),
        swap: None,
        writable_layer: Some(FsUsage {
            timestamp: None,
            mountpoint: "/d/agent/containerd/root/io.containerd.snapshotter.v1.overlayfs".into(),
            used_bytes: Some(4096),
            inodes_used: Some(3),
        }),
    }
}

const FULL: SummaryOptions = SummaryOptions {
    only_cpu_and_memory: false,
    update_cpu: true,
};
const CPU_AND_MEMORY: SummaryOptions = SummaryOptions {
    only_cpu_and_memory: true,
    update_cpu: true,
};

fn fs_json(time: &str, used: u64, inodes_used: u64) -> serde_json::Value {
    json!({"time": time, "availableBytes": 60000000, "capacityBytes": 100000000,
        "usedBytes": used, "inodesFree": 600, "inodes": 1000, "inodesUsed": inodes_used})
}

#[tokio::test]
async fn full_summary_as_upstreams_json() {
    let w = world().await;
    let s = w.provider.summary(FULL).await.unwrap();
    let got: serde_json::Value = serde_json::from_slice(&summary::to_json(&s).unwrap()).unwrap();
    let now = "2026-12-01T10:05:01Z";
    let sampled = "2026-12-01T10:05:00Z";
    let created = "2026-12-01T10:00:00Z";
    let image_fs = fs_json(sampled, 1_000_000, 10);
    let eth0 =
        json!({"name": "eth0", "rxBytes": 1474, "rxErrors": 0, "txBytes": 808, "txErrors": 0});
    let want = json!({
        "node": {
            "nodeName": "n1",
            "startTime": "2026-12-01T08:00:00Z",
            "cpu": {"time": now, "usageCoreNanoSeconds": 28314144780881u64},
            "memory": {"time": now, "availableBytes": (8u64 << 30) - 813776896,
                "usageBytes": 4749791232u64, "workingSetBytes": 813776896,
                "rssBytes": 447397888, "pageFaults": 113215, "majorPageFaults": 3},
            "network": {"time": now, "name": "eth0", "rxBytes": 230727037, "rxErrors": 0,
                "txBytes": 663807, "txErrors": 0, "interfaces": [
                {"name": "eth0", "rxBytes": 230727037, "rxErrors": 0, "txBytes": 663807, "txErrors": 0},
                {"name": "berth0", "rxBytes": 2017047, "rxErrors": 0, "txBytes": 2628714, "txErrors": 0}]},
            "fs": fs_json(now, 40_000_000, 400),
            "runtime": {"imageFs": image_fs, "containerFs": image_fs},
            "rlimit": {"time": now, "maxpid": 32768, "curproc": 105},
            "swap": {"time": now, "swapUsageBytes": 0},
        },
        "pods": [
            {
                "podRef": {"name": "idle", "namespace": "default", "uid": "u2"},
                "startTime": created,
                "containers": [{
                    "name": "c",
                    "startTime": created,
                    "cpu": {"time": sampled, "usageCoreNanoSeconds": 1000},
                    "memory": {"time": sampled, "workingSetBytes": 4096},
                    "rootfs": {"time": null},
                    "logs": fs_json(now, 0, 0),
                    "swap": {"time": now, "swapAvailableBytes": 0, "swapUsageBytes": 0},
                }],
                // No pod cgroup, no sandbox stats: the containers' sum.
                "cpu": {"time": sampled, "usageNanoCores": 0, "usageCoreNanoSeconds": 1000},
                "memory": {"time": sampled, "availableBytes": 0, "usageBytes": 0,
                    "workingSetBytes": 4096, "rssBytes": 0, "pageFaults": 0, "majorPageFaults": 0},
                "ephemeral-storage": fs_json(now, 0, 0),
                "swap": {"time": now, "swapAvailableBytes": 0, "swapUsageBytes": 0},
            },
            {
                "podRef": {"name": "web", "namespace": "default", "uid": "u1"},
                "startTime": created,
                "containers": [{
                    "name": "app",
                    "startTime": created,
                    "cpu": {"time": sampled, "usageCoreNanoSeconds": 2000000000u64},
                    "memory": {"time": sampled, "availableBytes": 67108864 - 1048576,
                        "usageBytes": 2097152, "workingSetBytes": 1048576, "rssBytes": 524288,
                        "pageFaults": 100, "majorPageFaults": 1},
                    "rootfs": fs_json(now, 4096, 3),
                    "logs": fs_json(now, 8192, 2),
                    "swap": {"time": now, "swapAvailableBytes": 67108864 - 4096, "swapUsageBytes": 4096},
                }],
                "cpu": {"time": now, "usageCoreNanoSeconds": 2017103502u64},
                "memory": {"time": now, "usageBytes": 1000000, "workingSetBytes": 800000,
                    "rssBytes": 500000, "pageFaults": 42, "majorPageFaults": 3},
                "network": {"time": now, "name": "eth0", "rxBytes": 1474, "rxErrors": 0,
                    "txBytes": 808, "txErrors": 0, "interfaces": [eth0]},
                "volume": [
                    {"name": "kube-api-access-abcde", "time": now, "availableBytes": 60000000,
                        "capacityBytes": 100000000, "usedBytes": 12288, "inodesFree": 600,
                        "inodes": 1000, "inodesUsed": 5},
                    {"name": "scratch", "time": now, "availableBytes": 60000000,
                        "capacityBytes": 100000000, "usedBytes": 4096, "inodesFree": 600,
                        "inodes": 1000, "inodesUsed": 1},
                ],
                // Writable layer 4096 + logs 8192 + emptyDir 4096; the projected
                // token volume is not ephemeral storage.
                "ephemeral-storage": fs_json(now, 16384, 6),
                "process_stats": {"process_count": 2},
                "swap": {"time": now, "swapAvailableBytes": 67108864 - 4096, "swapUsageBytes": 4096},
            },
        ],
    });
    assert_eq!(
        got,
        want,
        "{}",
        serde_json::to_string_pretty(&got).unwrap_or_default()
    );
}

#[tokio::test]
async fn cpu_and_memory_only_and_rates_from_the_second_sample() {
    let w = world().await;
    let first = w.provider.summary(CPU_AND_MEMORY).await.unwrap();
    assert!(first.node.fs.is_none() && first.node.network.is_none());
    assert!(first.node.runtime.is_none() && first.node.rlimit.is_none());
    assert!(first.node.swap.is_some(), "the node's swap stays");
    let web = &first.pods[1];
    assert!(web.network.is_none() && web.ephemeral_storage.is_none() && web.swap.is_none());
    assert!(web.volume_stats.is_empty() && web.process_stats.is_none());
    let c = &web.containers[0];
    assert!(c.rootfs.is_none() && c.logs.is_none() && c.swap.is_none());
    assert_eq!(c.cpu.as_ref().and_then(|c| c.usage_nano_cores), None);
    assert_eq!(
        first.node.cpu.as_ref().and_then(|c| c.usage_nano_cores),
        None
    );

    // Ten seconds on: the container used half a core, the pod a quarter, the node one.
    w.clock.step(Duration::from_secs(10));
    w.rt.set_container_stats(app_stats(7_000_000_000, t(SAMPLED + 10, 250)));
    let pod_cpu = w.cgroup.join("cpuacct/berth/burstable/podu1/cpuacct.usage");
    std::fs::write(&pod_cpu, (2_017_103_502u64 + 2_500_000_000).to_string()).unwrap();
    let node_cpu = w.cgroup.join("cpuacct/cpuacct.usage");
    std::fs::write(
        &node_cpu,
        (28_314_144_780_881u64 + 10_000_000_000).to_string(),
    )
    .unwrap();
    // /metrics/resource reads without moving the window.
    let peek = SummaryOptions {
        only_cpu_and_memory: true,
        update_cpu: false,
    };
    let cores = |s: &Summary| {
        (
            s.node.cpu.as_ref().and_then(|c| c.usage_nano_cores),
            s.pods[1].cpu.as_ref().and_then(|c| c.usage_nano_cores),
            s.pods[1].containers[0]
                .cpu
                .as_ref()
                .and_then(|c| c.usage_nano_cores),
        )
    };
    assert_eq!(
        cores(&w.provider.summary(peek).await.unwrap()),
        (None, None, None)
    );
    let second = w.provider.summary(CPU_AND_MEMORY).await.unwrap();
    assert_eq!(
        cores(&second),
        (Some(1_000_000_000), Some(250_000_000), Some(500_000_000))
    );
    assert_eq!(
        cores(&w.provider.summary(peek).await.unwrap()),
        cores(&second),
        "the kept rates"
    );
    // The idle pod's container reported no new sample: no window yet.
    let idle = &second.pods[0].containers[0];
    assert_eq!(idle.cpu.as_ref().and_then(|c| c.usage_nano_cores), None);
}

#[tokio::test]
async fn runtime_failures_are_upstreams_errors() {
    let w = world().await;
    w.rt.fail_stats(Some(crate::runtime::RuntimeError::Unavailable(
        "connection refused".into(),
    )));
    let err = w.provider.summary(FULL).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to list pod stats: failed to list all container stats: container runtime unavailable: connection refused"
    );
}

#[test]
fn json_is_indented_as_go_restful_writes_it() {
    let s = Summary {
        node: summary::NodeStats {
            node_name: "n1".into(),
            ..Default::default()
        },
        pods: vec![],
    };
    let text = String::from_utf8(summary::to_json(&s).unwrap()).unwrap();
    assert_eq!(
        text,
        "{\n \"node\": {\n  \"nodeName\": \"n1\",\n  \"startTime\": null\n },\n \"pods\": []\n}"
    );
}
