//! The node agent's stats on real containers, read as users read them: through
//! the API server's node proxy (`kubectl get --raw
//! /api/v1/nodes/<node>/proxy/stats/summary` and `…/proxy/metrics/resource`),
//! checked against the containers' and pods' own cgroup accounting. Needs root
//! and `scripts/install-deps` (containerd, runc, CNI plugins, busybox-static).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::cgroup::{ContainerCgroup, Sampler, now_ns};
use common::{Server, stderr, stdout, wait_until};
use serde_json::Value;

/// A busybox burning CPU under a 500m limit (steady at half a core on 2
/// cores), and one sleeping.
const PODS: &str = "apiVersion: v1
kind: Pod
metadata: {name: burn}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: burn
    image: busybox
    command: ['sh', '-c', 'while :; do :; done']
    resources: {limits: {cpu: 500m, memory: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: idle}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: idle
    image: busybox
    command: ['sleep', '3600']
";

fn raw(s: &Server, path: &str) -> Vec<u8> {
    let out = s.kubectl(&["get", "--raw", path]);
    assert!(out.status.success(), "get --raw {path}: {}", stderr(&out));
    out.stdout
}

fn summary(s: &Server, node: &str, query: &str) -> Value {
    let body = raw(
        s,
        &format!("/api/v1/nodes/{node}/proxy/stats/summary{query}"),
    );
    serde_json::from_slice(&body).expect("summary JSON")
}

fn pod<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .find(|p| p["podRef"]["name"] == name)
        .unwrap_or_else(|| panic!("pod {name} in {summary:#}"))
}

fn container<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("container {name} in {pod:#}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// One Prometheus sample line: name, labels, value, timestamp.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
    timestamp_ms: Option<i64>,
}

/// Parses the text format strictly enough to catch a malformed line: every
/// family's HELP and TYPE before its samples, quoted labels, a float value and
/// an optional integer timestamp.
fn parse_prometheus(text: &str) -> (Vec<Sample>, BTreeMap<String, (String, String)>) {
    let mut samples = Vec::new();
    let mut families: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut help: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, h) = rest.split_once(' ').expect("HELP text");
            help = Some((name.to_string(), h.to_string()));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE");
            let (hname, h) = help.take().expect("HELP before TYPE");
            assert_eq!(hname, name, "HELP and TYPE of one family");
            assert!(["counter", "gauge"].contains(&kind), "{line}");
            families.insert(name.to_string(), (h, kind.to_string()));
            continue;
        }
        let (head, rest) = match line.find('{') {
            Some(_) => {
                let close = line.rfind('}').expect("closing brace");
                (&line[..close + 1], &line[close + 1..])
            }
            None => line.split_at(line.find(' ').expect("a value")),
        };
        let (name, labels) = match head.split_once('{') {
            Some((n, l)) => {
                let l = l.strip_suffix('}').expect("labels close");
                let labels = l
                    .split("\",")
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        let (k, v) = p.split_once("=\"").expect("label=\"value\"");
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (n.to_string(), labels)
            }
            None => (head.to_string(), BTreeMap::new()),
        };
        assert!(families.contains_key(&name), "{name} before its TYPE");
        let mut fields = rest.split_whitespace();
        let value: f64 = fields.next().expect("value").parse().expect("float value");
        let timestamp_ms = fields.next().map(|t| t.parse().expect("integer timestamp"));
        assert!(fields.next().is_none(), "{line}");
        samples.push(Sample {
            name,
            labels,
            value,
            timestamp_ms,
        });
    }
    (samples, families)
}

/// A summary read between two readings of the burner's cgroup.
struct Reading {
    summary: Value,
    /// Cgroup CPU before and after the request, and the wall times.
    cpu: (u64, u64),
    at: (i64, i64),
}

fn read(s: &Server, node: &str, cg: &ContainerCgroup) -> Reading {
    let (t0, c0) = (now_ns(), cg.cpu_ns());
    let summary = summary(s, node, "");
    let (c1, t1) = (cg.cpu_ns(), now_ns());
    Reading {
        summary,
        cpu: (c0, c1),
        at: (t0, t1),
    }
}

fn within(got: f64, want: f64, share: f64) -> bool {
    (got - want).abs() <= want.abs() * share
}

fn meminfo_total() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
    let line = text
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .expect("MemTotal");
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse::<u64>().ok())
        .expect("MemTotal kB")
        * 1024
}

#[test]
fn summary_and_resource_metrics_match_cgroup_accounting() {
    let s = Server::start_with_agent("stats");
    let mut node = String::new();
    wait_until(Duration::from_secs(60), "node Ready", || {
        node = stdout(&s.kubectl(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]));
        let ready = s.kubectl(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        !node.is_empty() && stdout(&ready) == "True"
    });
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(PODS));
    assert!(out.status.success(), "apply: {}", stderr(&out));
    wait_until(Duration::from_secs(60), "pods running", || {
        s.k(&["get", "pods", "-o", "jsonpath={.items[*].status.phase}"]) == "Running Running"
    });
    let id = |pod: &str| {
        s.k(&[
            "get",
            "pod",
            pod,
            "-o",
            "jsonpath={.status.containerStatuses[0].containerID}",
        ])
    };
    let uid = |pod: &str| s.k(&["get", "pod", pod, "-o", "jsonpath={.metadata.uid}"]);
    let burn_cg = ContainerCgroup::find(&id("burn"));
    let idle_cg = ContainerCgroup::find(&id("idle"));
    // A pod's cgroup directory is named pod<uid>.
    let burn_pod_cg = ContainerCgroup::find(&format!("pod{}", uid("burn")));
    let idle_pod_cg = ContainerCgroup::find(&format!("pod{}", uid("idle")));
    let sampler = Sampler::start(ContainerCgroup::find(&id("burn")));
    std::thread::sleep(Duration::from_secs(2));

    // Two summaries ten seconds apart: the second's usageNanoCores is the rate
    // over the window between them.
    let metrics = |s: &Server| {
        let t = String::from_utf8(raw(
            s,
            &format!("/api/v1/nodes/{node}/proxy/metrics/resource"),
        ))
        .expect("UTF-8 metrics");
        (t, now_ns())
    };
    let a = read(&s, &node, &burn_cg);
    let (metrics_a, _) = metrics(&s);
    std::thread::sleep(Duration::from_secs(10));
    let b = read(&s, &node, &burn_cg);
    let (metrics_b, metrics_b_at) = metrics(&s);
    let idle_ws_after = idle_cg.working_set();
    let burn_ws_after = burn_cg.working_set();
    let (burn_pod_ws, idle_pod_ws) = (burn_pod_cg.working_set(), idle_pod_cg.working_set());

    // The summary's cumulative CPU is the cgroup's own counter, read between
    // the two readings around the request.
    for r in [&a, &b] {
        let usage = u(&container(pod(&r.summary, "burn"), "burn")["cpu"]["usageCoreNanoSeconds"]);
        assert!(
            r.cpu.0 <= usage && usage <= r.cpu.1,
            "summary {usage} outside the cgroup's {:?}",
            r.cpu
        );
    }
    let mid = |r: &Reading| ((r.at.0 + r.at.1) / 2, (r.cpu.0 + r.cpu.1) as f64 / 2.0);
    let ((ta, ca), (tb, cb)) = (mid(&a), mid(&b));
    let cgroup_rate = (cb - ca) / (tb - ta) as f64;
    let burn_b = container(pod(&b.summary, "burn"), "burn");
    let summary_rate = u(&burn_b["cpu"]["usageNanoCores"]) as f64 / 1e9;
    println!(
        "burn: summary usageNanoCores {summary_rate:.4} cores, cgroup {cgroup_rate:.4} cores over {:.2} s",
        (tb - ta) as f64 / 1e9
    );
    // At most its 500m limit; less only when the machine's 2 cores are busy.
    assert!(
        (0.2..=0.55).contains(&cgroup_rate),
        "the burner burns, within its limit: {cgroup_rate}"
    );
    assert!(
        within(summary_rate, cgroup_rate, 0.10),
        "summary {summary_rate} vs cgroup {cgroup_rate}"
    );
    // The pod (its cgroup: burner and pause) burns the same.
    let burn_pod = pod(&b.summary, "burn");
    let pod_rate = u(&burn_pod["cpu"]["usageNanoCores"]) as f64 / 1e9;
    assert!(within(pod_rate, cgroup_rate, 0.10), "pod {pod_rate}");

    // The idle pod: near zero.
    let idle_pod = pod(&b.summary, "idle");
    let idle_c = container(idle_pod, "idle");
    let idle_rate = u(&idle_c["cpu"]["usageNanoCores"]) as f64 / 1e9;
    let idle_pod_rate = u(&idle_pod["cpu"]["usageNanoCores"]) as f64 / 1e9;
    println!("idle: container {idle_rate:.5} cores, pod {idle_pod_rate:.5} cores");
    assert!(idle_rate < 0.01 && idle_pod_rate < 0.01);

    // Memory: working sets as the cgroups compute them (the burner's and the
    // sleeper's are steady; allow 10 % for pages touched between readings).
    let ws = |v: &Value| u(&v["memory"]["workingSetBytes"]) as f64;
    for (what, got, want) in [
        ("burn container", ws(burn_b), burn_ws_after as f64),
        ("idle container", ws(idle_c), idle_ws_after as f64),
        ("burn pod", ws(burn_pod), burn_pod_ws as f64),
        ("idle pod", ws(idle_pod), idle_pod_ws as f64),
    ] {
        println!("{what}: summary working set {got} B, cgroup {want} B");
        assert!(within(got, want, 0.10), "{what}: {got} vs {want}");
    }
    // A limit gives availableBytes = limit − working set; none, none.
    assert_eq!(
        u(&burn_b["memory"]["availableBytes"]) as f64 + ws(burn_b),
        64.0 * 1024.0 * 1024.0
    );
    assert!(idle_c["memory"].get("availableBytes").is_none(), "{idle_c}");
    for key in ["usageBytes", "rssBytes", "pageFaults", "majorPageFaults"] {
        assert!(burn_b["memory"][key].is_u64(), "{key} in {burn_b}");
    }

    // The node: the root cgroup's CPU at least the burner's, its memory
    // against the machine's, its filesystems and limits.
    let n = &b.summary["node"];
    assert_eq!(n["nodeName"], node.as_str());
    let node_rate = u(&n["cpu"]["usageNanoCores"]) as f64 / 1e9;
    println!("node: {node_rate:.3} cores");
    assert!(
        node_rate >= cgroup_rate * 0.9 && node_rate <= 2.05,
        "{node_rate}"
    );
    assert_eq!(
        u(&n["memory"]["availableBytes"]) + u(&n["memory"]["workingSetBytes"]),
        meminfo_total()
    );
    for fs in [&n["fs"], &n["runtime"]["imageFs"]] {
        assert!(u(&fs["capacityBytes"]) >= u(&fs["availableBytes"]), "{fs}");
        assert!(u(&fs["inodes"]) >= u(&fs["inodesFree"]), "{fs}");
        assert!(fs["usedBytes"].is_u64(), "{fs}");
    }
    assert!(u(&n["rlimit"]["maxpid"]) > 0 && u(&n["rlimit"]["curproc"]) > 0);
    assert!(n["startTime"].is_string());
    // The pod's network is its eth0; its storage the node filesystem's.
    assert_eq!(burn_pod["network"]["name"], "eth0", "{burn_pod}");
    assert!(burn_pod["network"]["rxBytes"].is_u64());
    assert!(burn_pod["ephemeral-storage"]["capacityBytes"].is_u64());
    assert!(burn_b["rootfs"].is_object() && burn_b["logs"]["usedBytes"].is_u64());
    assert!(
        burn_pod["volume"]
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("kube-api-access-")))),
        "{burn_pod}"
    );

    // only_cpu_and_memory: what metrics-server reads, nothing else.
    let small = summary(&s, &node, "?only_cpu_and_memory=true");
    for key in ["fs", "runtime", "rlimit", "network"] {
        assert!(
            small["node"].get(key).is_none(),
            "{key} in {}",
            small["node"]
        );
    }
    let small_burn = pod(&small, "burn");
    for key in ["network", "volume", "ephemeral-storage"] {
        assert!(small_burn.get(key).is_none(), "{key}");
    }
    let c = container(small_burn, "burn");
    assert!(c.get("rootfs").is_none() && c.get("logs").is_none() && c["cpu"].is_object());

    // /metrics/resource: upstream's families, labels and timestamps.
    let (samples_b, families) = parse_prometheus(&metrics_b);
    let (samples_a, _) = parse_prometheus(&metrics_a);
    let mut want_families = vec![
        "container_cpu_usage_seconds_total",
        "container_memory_working_set_bytes",
        "container_start_time_seconds",
        "node_cpu_usage_seconds_total",
        "node_memory_working_set_bytes",
        "pod_cpu_usage_seconds_total",
        "pod_memory_working_set_bytes",
        "resource_scrape_error",
    ];
    if small["node"].get("swap").is_some() {
        want_families.push("node_swap_usage_bytes");
        want_families.sort();
    }
    assert_eq!(
        families.keys().collect::<Vec<_>>(),
        want_families,
        "{metrics_b}"
    );
    assert_eq!(
        families["container_cpu_usage_seconds_total"],
        (
            "[STABLE] Cumulative cpu time consumed by the container in core-seconds".into(),
            "counter".into()
        )
    );
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let burn_labels = labels(&[
        ("container", "burn"),
        ("namespace", "default"),
        ("pod", "burn"),
    ]);
    let find = |samples: &[Sample], name: &str, l: &BTreeMap<String, String>| -> (f64, i64) {
        let s = samples
            .iter()
            .find(|s| s.name == name && &s.labels == l)
            .unwrap_or_else(|| panic!("{name}{l:?} in {metrics_b}"));
        (s.value, s.timestamp_ms.unwrap_or(0))
    };
    for sample in &samples_b {
        let timed = !["container_start_time_seconds", "resource_scrape_error"]
            .contains(&sample.name.as_str());
        assert_eq!(sample.timestamp_ms.is_some(), timed, "{sample:?}");
        if let Some(ms) = sample.timestamp_ms {
            let age = metrics_b_at / 1_000_000 - ms;
            assert!((-1000..60_000).contains(&age), "{sample:?} is {age} ms old");
        }
        let want = match sample.name.as_str() {
            n if n.starts_with("container_") => 3,
            n if n.starts_with("pod_") => 2,
            _ => 0,
        };
        assert_eq!(sample.labels.len(), want, "{sample:?}");
    }
    assert_eq!(
        find(&samples_b, "resource_scrape_error", &BTreeMap::new()).0,
        0.0
    );
    // Only the agent's running containers: the two pods' one each.
    let containers: Vec<&str> = samples_b
        .iter()
        .filter(|s| s.name == "container_cpu_usage_seconds_total")
        .map(|s| s.labels["pod"].as_str())
        .collect();
    assert_eq!(containers, ["burn", "idle"]);
    // The counter's rate over its own timestamps against the cgroup's over
    // the same window.
    let (va, tsa) = find(
        &samples_a,
        "container_cpu_usage_seconds_total",
        &burn_labels,
    );
    let (vb, tsb) = find(
        &samples_b,
        "container_cpu_usage_seconds_total",
        &burn_labels,
    );
    let metrics_rate = (vb - va) / ((tsb - tsa) as f64 / 1e3);
    let truth = sampler
        .rate(tsa * 1_000_000, tsb * 1_000_000)
        .expect("cgroup samples over the window");
    println!(
        "burn: /metrics/resource {metrics_rate:.4} cores, cgroup {truth:.4} cores over {:.2} s",
        (tsb - tsa) as f64 / 1e3
    );
    assert!(
        within(metrics_rate, truth, 0.10),
        "{metrics_rate} vs {truth}"
    );
    let (mem, _) = find(
        &samples_b,
        "container_memory_working_set_bytes",
        &burn_labels,
    );
    assert!(
        within(mem, burn_ws_after as f64, 0.10),
        "{mem} vs {burn_ws_after}"
    );
    let (start, _) = find(&samples_b, "container_start_time_seconds", &burn_labels);
    let started = chrono::DateTime::parse_from_rfc3339(&s.k(&[
        "get",
        "pod",
        "burn",
        "-o",
        "jsonpath={.status.containerStatuses[0].state.running.startedAt}",
    ]))
    .expect("startedAt")
    .timestamp() as f64;
    // Created (the metric) shortly before started (the status, whole seconds).
    assert!(
        start <= started + 1.0 && start > started - 30.0,
        "{start} vs {started}"
    );
    let pod_labels = labels(&[("namespace", "default"), ("pod", "idle")]);
    let (idle_pod_mem, _) = find(&samples_b, "pod_memory_working_set_bytes", &pod_labels);
    assert!(
        within(idle_pod_mem, idle_pod_ws as f64, 0.10),
        "{idle_pod_mem} vs {idle_pod_ws}"
    );

    println!("/metrics/resource:\n{metrics_b}");
    println!(
        "/stats/summary (node, burn):\n{:#}\n{burn_pod:#}",
        b.summary["node"]
    );

    // Clean up: pods gone, and with them their series.
    drop(sampler);
    let started_delete = Instant::now();
    s.k(&["delete", "pods", "--all", "--wait=true", "--timeout=60s"]);
    wait_until(Duration::from_secs(30), "no pods in the summary", || {
        summary(&s, &node, "")["pods"]
            .as_array()
            .is_some_and(|p| p.is_empty())
    });
    println!(
        "pods gone from the summary {:?} after delete",
        started_delete.elapsed()
    );
    let (after, _) = parse_prometheus(&metrics(&s).0);
    assert!(after.iter().all(|s| !s.name.starts_with("container_")));
}
