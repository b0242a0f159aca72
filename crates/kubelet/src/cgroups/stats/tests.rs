use super::*;
use crate::testutil::TempDir;

const UNLIMITED_V1: &str = "9223372036854771712";

fn at() -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(1_796_000_000_000_000_000)
}

fn mem(ws: u64, available: Option<u64>, usage: u64, rss: u64, pf: u64, maj: u64) -> MemoryUsage {
    MemoryUsage {
        timestamp: at(),
        working_set_bytes: ws,
        available_bytes: available,
        usage_bytes: Some(usage),
        rss_bytes: Some(rss),
        page_faults: Some(pf),
        major_page_faults: Some(maj),
    }
}

fn cpu(ns: u64) -> Option<CpuUsage> {
    Some(CpuUsage {
        timestamp: at(),
        usage_core_nano_seconds: ns,
    })
}

/// This machine's layout: v1 controllers, memory nested in the sandbox's own
/// cgroup, cpu and cpuacct apart at `/`, an empty cgroup2 at `unified`.
fn hybrid_tree() -> TempDir {
    let t = TempDir::new("cgroup-v1");
    let pod = "berth/burstable/podu1";
    let mem_pod = format!("cgroup/memory/process_api/abc/{pod}");
    let stat = |inactive: u64, rss: u64, pf: u64| {
        format!(
            "cache 1\nrss 2\npgfault {pf}\npgmajfault 3\ntotal_rss {rss}\n\
             total_inactive_file {inactive}\ntotal_pgfault 999\n"
        )
    };
    let files: Vec<(String, String)> = vec![
        ("cgroup/unified/cgroup.controllers".into(), "\n".into()),
        // The node: the roots of the hierarchies.
        (
            "cgroup/cpuacct/cpuacct.usage".into(),
            "28314144780881\n".into(),
        ),
        (
            "cgroup/memory/memory.usage_in_bytes".into(),
            "4749791232\n".into(),
        ),
        (
            "cgroup/memory/memory.memsw.usage_in_bytes".into(),
            "4749791232\n".into(),
        ),
        (
            "cgroup/memory/memory.limit_in_bytes".into(),
            UNLIMITED_V1.into(),
        ),
        (
            "cgroup/memory/memory.stat".into(),
            stat(3_936_014_336, 447_397_888, 113_215),
        ),
        // The pod, without a memory limit.
        (
            format!("cgroup/cpuacct/{pod}/cpuacct.usage"),
            "2017103502\n".into(),
        ),
        (
            format!("{mem_pod}/memory.usage_in_bytes"),
            "1000000\n".into(),
        ),
        (
            format!("{mem_pod}/memory.limit_in_bytes"),
            UNLIMITED_V1.into(),
        ),
        (format!("{mem_pod}/memory.stat"), stat(200_000, 500_000, 42)),
        // Its container, limited to 64 MiB, 4 KiB in swap.
        (
            format!("cgroup/cpuacct/{pod}/c1/cpuacct.usage"),
            "1990255229\n".into(),
        ),
        (
            format!("{mem_pod}/c1/memory.usage_in_bytes"),
            "600000\n".into(),
        ),
        (
            format!("{mem_pod}/c1/memory.memsw.usage_in_bytes"),
            "604096\n".into(),
        ),
        (
            format!("{mem_pod}/c1/memory.limit_in_bytes"),
            "67108864\n".into(),
        ),
        (
            format!("{mem_pod}/c1/memory.memsw.limit_in_bytes"),
            "67108864\n".into(),
        ),
        (
            format!("{mem_pod}/c1/memory.stat"),
            stat(100_000, 300_000, 7),
        ),
        ("cgroup/cpu/cpu.shares".into(), "1024\n".into()),
        (format!("cgroup/pids/{pod}/c1/pids.current"), "2\n".into()),
    ];
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    t.write(&refs);
    t
}

const HYBRID_PROC: &str =
    "9:name=systemd:/\n4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n";

#[test]
fn v1_pod_container_and_node() {
    let t = hybrid_tree();
    let fs = CgroupFs::new(
        &t.path().join("cgroup"),
        &t.path().join("proc"),
        HYBRID_PROC,
    );
    let pod = fs.pod("u1", at()).unwrap();
    assert_eq!(pod.cpu, cpu(2_017_103_502));
    assert_eq!(
        pod.memory,
        Some(mem(800_000, None, 1_000_000, 500_000, 42, 3))
    );
    assert_eq!(pod.swap, None, "no memsw file, no swap accounting");

    let c = fs.container("u1", "c1", at()).unwrap();
    assert_eq!(c.cpu, cpu(1_990_255_229));
    assert_eq!((pod.process_count, c.process_count), (None, Some(2)));
    assert_eq!(
        c.memory,
        Some(mem(
            500_000,
            Some(67_108_864 - 500_000),
            600_000,
            300_000,
            7,
            3
        ))
    );
    assert_eq!(
        c.swap,
        Some(SwapUsage {
            timestamp: at(),
            swap_usage_bytes: 4096,
            swap_available_bytes: Some(67_108_864 - 4096),
        })
    );

    let node = fs.node(at());
    assert_eq!(node.cpu, cpu(28_314_144_780_881));
    assert_eq!(
        node.memory,
        Some(mem(
            4_749_791_232 - 3_936_014_336,
            None,
            4_749_791_232,
            447_397_888,
            113_215,
            3
        ))
    );
    assert_eq!(node.swap.map(|s| s.swap_usage_bytes), Some(0));

    // Pods of other QoS classes, or gone, are not found.
    assert!(fs.pod("u2", at()).is_none());
    assert!(fs.container("u2", "c1", at()).is_none());
}

#[test]
fn v2_pod_container_and_node() {
    let t = TempDir::new("cgroup-v2");
    let pod = "cgroup/svc/berth/podu2";
    t.write(&[
        ("cgroup/cgroup.controllers", "cpuset cpu io memory pids\n"),
        ("cgroup/cpu.stat", "usage_usec 5000000\nuser_usec 4000000\n"),
        (
            &format!("{pod}/cpu.stat"),
            "usage_usec 1500\nuser_usec 1000\n",
        ),
        (&format!("{pod}/memory.current"), "2000000\n"),
        (&format!("{pod}/memory.max"), "max\n"),
        (
            &format!("{pod}/memory.stat"),
            "anon 700000\nfile 900000\ninactive_file 400000\npgfault 11\npgmajfault 2\n",
        ),
        (&format!("{pod}/memory.swap.current"), "0\n"),
        (&format!("{pod}/memory.swap.max"), "max\n"),
        (&format!("{pod}/c2/cpu.stat"), "usage_usec 1000\n"),
        (&format!("{pod}/c2/memory.current"), "1000000\n"),
        (&format!("{pod}/c2/memory.max"), "1048576\n"),
        (
            &format!("{pod}/c2/memory.stat"),
            "anon 600000\ninactive_file 48576\npgfault 5\npgmajfault 0\n",
        ),
        (
            "proc/meminfo",
            "MemTotal:        1000 kB\nMemFree:          200 kB\nInactive(file):   100 kB\n\
             SwapTotal:        50 kB\nSwapFree:         30 kB\n",
        ),
    ]);
    let fs = CgroupFs::new(
        &t.path().join("cgroup"),
        &t.path().join("proc"),
        "0::/svc\n",
    );
    let pod = fs.pod("u2", at()).unwrap();
    assert_eq!(pod.cpu, cpu(1_500_000));
    assert_eq!(
        pod.memory,
        Some(mem(1_600_000, None, 2_000_000, 700_000, 11, 2))
    );
    assert_eq!(
        pod.swap,
        Some(SwapUsage {
            timestamp: at(),
            swap_usage_bytes: 0,
            swap_available_bytes: None,
        })
    );
    let c = fs.container("u2", "c2", at()).unwrap();
    assert_eq!(c.cpu, cpu(1_000_000));
    assert_eq!(
        c.memory,
        Some(mem(
            951_424,
            Some(1_048_576 - 951_424),
            1_000_000,
            600_000,
            5,
            0
        ))
    );
    // The v2 root: cpu.stat, and /proc/meminfo for memory and swap.
    let node = fs.node(at());
    assert_eq!(node.cpu, cpu(5_000_000_000));
    let m = node.memory.unwrap();
    assert_eq!(
        (m.usage_bytes, m.working_set_bytes, m.available_bytes),
        (Some(800 * 1024), 700 * 1024, None)
    );
    assert_eq!(node.swap.map(|s| s.swap_usage_bytes), Some(20 * 1024));
}

#[test]
fn node_cpu_falls_back_to_proc_stat() {
    let t = TempDir::new("cgroup-none");
    t.write(&[(
        "proc/stat",
        "cpu  2565767 0 244749 1736786 13920 0 8904 44085 0 0\ncpu0 1 2 3 4\n",
    )]);
    let fs = CgroupFs::new(&t.path().join("cgroup"), &t.path().join("proc"), "");
    let ticks = clock_ticks();
    let busy: u64 = 2_565_767 + 244_749 + 8904 + 44_085;
    assert_eq!(
        fs.node(at()).cpu.map(|c| c.usage_core_nano_seconds),
        Some(busy * 1_000_000_000 / ticks)
    );
    assert_eq!(fs.node(at()).memory, None);
}

#[test]
fn parsers() {
    let cases = [
        // (/proc/stat text, ticks) → busy ns
        ("cpu  100 0 50 1000 7 0 0 0 0 0\n", 100, Some(1_500_000_000)),
        ("cpu  1 2 3 4 5 6 7 8 9 10\n", 1, Some(27_000_000_000)),
        ("intr 1 2\n", 100, None),
    ];
    for (text, ticks, want) in cases {
        assert_eq!(parse_proc_stat_cpu(text, ticks), want, "{text}");
    }
    let m = parse_meminfo("MemTotal:       16 kB\nHugePages_Total:       3\nbad line\n");
    assert_eq!((m["MemTotal"], m["HugePages_Total"]), (16 * 1024, 3));
    let k = parse_flat_keyed("usage_usec 5\nnr_periods x\nthrottled_usec 7\n");
    assert_eq!(
        (
            k.get("usage_usec"),
            k.get("nr_periods"),
            k.get("throttled_usec")
        ),
        (Some(&5), None, Some(&7))
    );
}
