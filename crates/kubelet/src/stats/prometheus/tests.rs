use super::*;
use crate::stats::summary::{CpuStats, MemoryStats, NodeStats, PodReference, SwapStats};

#[test]
fn floats_as_go_formats_them() {
    let cases = [
        (0.0, "0"),
        (1.0, "1"),
        (-1.0, "-1"),
        (0.5, "0.5"),
        (12.345678901, "12.345678901"),
        (123456.0, "123456"),
        (999999.0, "999999"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (503808.0, "503808"),
        (4.749791232e9, "4.749791232e+09"),
        (1.796178184218439e9, "1.796178184218439e+09"),
        (0.0001, "0.0001"),
        (0.00001234, "1.234e-05"),
        (1e21, "1e+21"),
        (1e100, "1e+100"),
        (-2.5e-7, "-2.5e-07"),
        (f64::NAN, "NaN"),
        (f64::INFINITY, "+Inf"),
    ];
    for (f, want) in cases {
        assert_eq!(go_float(f), want, "{f:e}");
    }
}

fn at(ms: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms)
}

fn cpu(ms: i64, ns: u64) -> Option<CpuStats> {
    Some(CpuStats {
        time: at(ms),
        usage_nano_cores: Some(7),
        usage_core_nano_seconds: Some(ns),
    })
}

fn mem(ms: i64, ws: u64) -> Option<MemoryStats> {
    Some(MemoryStats {
        time: at(ms),
        working_set_bytes: Some(ws),
        ..Default::default()
    })
}

fn container(name: &str, start_ms: i64, ns: u64, ws: u64) -> ContainerStats {
    ContainerStats {
        name: name.into(),
        start_time: at(start_ms),
        cpu: cpu(1_796_000_001_234, ns),
        memory: mem(1_796_000_001_235, ws),
        ..Default::default()
    }
}

fn pod(ns: &str, name: &str, containers: Vec<ContainerStats>) -> PodStats {
    PodStats {
        pod_ref: PodReference {
            name: name.into(),
            namespace: ns.into(),
            uid: format!("uid-{name}"),
        },
        containers,
        cpu: cpu(1_796_000_001_300, 3_000_000_000),
        memory: mem(1_796_000_001_300, 1_048_576),
        ..Default::default()
    }
}

const SCRAPE_OK: &str = "# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
";

#[test]
fn renders_upstreams_families() {
    let node = NodeStats {
        node_name: "n1".into(),
        cpu: cpu(1_796_000_000_999, 28_314_144_780_881),
        memory: mem(1_796_000_001_000, 813_776_896),
        swap: Some(SwapStats {
            time: at(1_796_000_001_111),
            swap_usage_bytes: Some(0),
            swap_available_bytes: None,
        }),
        ..Default::default()
    };
    let busy = pod(
        "default",
        "busy",
        vec![
            container("burn", 1_796_000_000_500, 1_990_255_229, 503_808),
            container("a-side", 1_796_000_000_000, 0, 4096),
        ],
    );
    let mut swapped = container("sw", 1_796_000_000_000, 1, 1);
    swapped.swap = Some(SwapStats {
        time: at(1_796_000_001_400),
        swap_usage_bytes: Some(4096),
        swap_available_bytes: Some(8192),
    });
    let mut quoted = pod("kube-system", "we\"ird\\", vec![swapped]);
    quoted.swap = Some(SwapStats {
        time: at(1_796_000_001_400),
        swap_usage_bytes: Some(4096),
        swap_available_bytes: None,
    });
    let cases: Vec<(&str, Option<Summary>, String)> = vec![
        (
            "failed summary",
            None,
            SCRAPE_OK.replace("resource_scrape_error 0", "resource_scrape_error 1"),
        ),
        (
            "empty node",
            Some(Summary::default()),
            SCRAPE_OK.to_string(),
        ),
        (
            "node and pods",
            Some(Summary {
                node: node.clone(),
                pods: vec![busy.clone()],
            }),
            format!(
                r#"# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{{container="a-side",namespace="default",pod="busy"}} 0 1796000001234
container_cpu_usage_seconds_total{{container="burn",namespace="default",pod="busy"}} 1.990255229 1796000001234
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{{container="a-side",namespace="default",pod="busy"}} 4096 1796000001235
container_memory_working_set_bytes{{container="burn",namespace="default",pod="busy"}} 503808 1796000001235
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{{container="a-side",namespace="default",pod="busy"}} 1.796e+09
container_start_time_seconds{{container="burn",namespace="default",pod="busy"}} 1.7960000005e+09
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 28314.144780881 1796000000999
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 8.13776896e+08 1796000001000
# HELP node_swap_usage_bytes [ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems
# TYPE node_swap_usage_bytes gauge
node_swap_usage_bytes 0 1796000001000
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{{namespace="default",pod="busy"}} 3 1796000001300
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{{namespace="default",pod="busy"}} 1.048576e+06 1796000001300
{SCRAPE_OK}"#
            ),
        ),
        (
            "swap and escaping",
            Some(Summary {
                node: NodeStats::default(),
                pods: vec![quoted],
            }),
            format!(
                r#"# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{{container="sw",namespace="kube-system",pod="we\"ird\\"}} 1e-09 1796000001234
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{{container="sw",namespace="kube-system",pod="we\"ird\\"}} 1 1796000001235
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{{container="sw",namespace="kube-system",pod="we\"ird\\"}} 1.796e+09
# HELP container_swap_limit_bytes [ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems
# TYPE container_swap_limit_bytes gauge
container_swap_limit_bytes{{container="sw",namespace="kube-system",pod="we\"ird\\"}} 12288 1796000001400
# HELP container_swap_usage_bytes [ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems
# TYPE container_swap_usage_bytes gauge
container_swap_usage_bytes{{container="sw",namespace="kube-system",pod="we\"ird\\"}} 4096 1796000001400
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{{namespace="kube-system",pod="we\"ird\\"}} 3 1796000001300
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{{namespace="kube-system",pod="we\"ird\\"}} 1.048576e+06 1796000001300
# HELP pod_swap_usage_bytes [ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems
# TYPE pod_swap_usage_bytes gauge
pod_swap_usage_bytes{{namespace="kube-system",pod="we\"ird\\"}} 4096 1796000001400
{SCRAPE_OK}"#
            ),
        ),
    ];
    for (name, summary, want) in cases {
        let got = render(summary.as_ref());
        assert_eq!(got, want, "{name}:\n{got}");
    }
}

#[test]
fn missing_figures_leave_their_series_out() {
    let mut c = container("c", 0, 5, 5);
    c.cpu = None;
    let mut p = pod("ns", "p", vec![c]);
    p.memory = None;
    let text = render(Some(&Summary {
        node: NodeStats::default(),
        pods: vec![p],
    }));
    let series: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(['{', ' ']).next().unwrap_or(""))
        .collect();
    // A start time at the epoch is no start time.
    assert_eq!(
        series,
        [
            "container_memory_working_set_bytes",
            "pod_cpu_usage_seconds_total",
            "resource_scrape_error"
        ]
    );
}
