//! `/metrics/resource`: upstream's resource metrics collector
//! (`pkg/kubelet/metrics/collectors/resource_metrics.go`) over a CPU-and-memory
//! summary, in the Prometheus text format (0.0.4) as client_golang writes it:
//! families sorted by name, empty ones left out, `[STABLE]`/`[ALPHA]` before
//! the help text, labels sorted by name, samples by their label values, Go's
//! shortest float formatting and millisecond timestamps.
//!
//! `scrape_error` is not written: upstream deprecated it in 1.29, and
//! component-base hides a deprecated metric from the next minor release on.

use std::fmt::Write;

use chrono::{DateTime, Utc};

use super::summary::{ContainerStats, PodStats, Summary};

/// The Content-Type client_golang answers a plain scrape with.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
}

/// A metric upstream's collector describes.
struct Desc {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    stability: &'static str,
}

const fn desc(name: &'static str, help: &'static str, kind: Kind, stability: &'static str) -> Desc {
    Desc {
        name,
        help,
        kind,
        stability,
    }
}

const NODE_CPU: Desc = desc(
    "node_cpu_usage_seconds_total",
    "Cumulative cpu time consumed by the node in core-seconds",
    Kind::Counter,
    "STABLE",
);
const NODE_MEMORY: Desc = desc(
    "node_memory_working_set_bytes",
    "Current working set of the node in bytes",
    Kind::Gauge,
    "STABLE",
);
const NODE_SWAP: Desc = desc(
    "node_swap_usage_bytes",
    "Current swap usage of the node in bytes. Reported only on non-windows systems",
    Kind::Gauge,
    "ALPHA",
);
const CONTAINER_CPU: Desc = desc(
    "container_cpu_usage_seconds_total",
    "Cumulative cpu time consumed by the container in core-seconds",
    Kind::Counter,
    "STABLE",
);
const CONTAINER_MEMORY: Desc = desc(
    "container_memory_working_set_bytes",
    "Current working set of the container in bytes",
    Kind::Gauge,
    "STABLE",
);
const CONTAINER_SWAP: Desc = desc(
    "container_swap_usage_bytes",
    "Current amount of the container swap usage in bytes. Reported only on non-windows systems",
    Kind::Gauge,
    "ALPHA",
);
const CONTAINER_SWAP_LIMIT: Desc = desc(
    "container_swap_limit_bytes",
    "Current amount of the container swap limit in bytes. Reported only on non-windows systems",
    Kind::Gauge,
    "ALPHA",
);
const CONTAINER_START: Desc = desc(
    "container_start_time_seconds",
    "Start time of the container since unix epoch in seconds",
    Kind::Gauge,
    "STABLE",
);
const POD_CPU: Desc = desc(
    "pod_cpu_usage_seconds_total",
    "Cumulative cpu time consumed by the pod in core-seconds",
    Kind::Counter,
    "STABLE",
);
const POD_MEMORY: Desc = desc(
    "pod_memory_working_set_bytes",
    "Current working set of the pod in bytes",
    Kind::Gauge,
    "STABLE",
);
const POD_SWAP: Desc = desc(
    "pod_swap_usage_bytes",
    "Current amount of the pod swap usage in bytes. Reported only on non-windows systems",
    Kind::Gauge,
    "ALPHA",
);
const SCRAPE_ERROR: Desc = desc(
    "resource_scrape_error",
    "1 if there was an error while getting container metrics, 0 otherwise",
    Kind::Gauge,
    "STABLE",
);

struct Sample {
    /// Sorted by label name.
    labels: Vec<(&'static str, String)>,
    value: f64,
    timestamp_ms: Option<i64>,
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`: the shortest digits that read
/// back the same, in exponent form below 1e-4 and from 1e6 on.
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let e = format!("{f:e}");
    let Some((mantissa, exp)) = e.split_once('e') else {
        return e;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

fn millis(t: Option<DateTime<Utc>>) -> Option<i64> {
    t.map(|t| t.timestamp_millis())
}

fn escape_label(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', r"\\").replace('\n', r"\n")
}

fn container_labels(pod: &PodStats, c: &ContainerStats) -> Vec<(&'static str, String)> {
    vec![
        ("container", c.name.clone()),
        ("namespace", pod.pod_ref.namespace.clone()),
        ("pod", pod.pod_ref.name.clone()),
    ]
}

fn pod_labels(pod: &PodStats) -> Vec<(&'static str, String)> {
    vec![
        ("namespace", pod.pod_ref.namespace.clone()),
        ("pod", pod.pod_ref.name.clone()),
    ]
}

/// Every sample the collector makes from `summary` (None: the summary failed).
fn collect(summary: Option<&Summary>) -> Vec<(&'static Desc, Sample)> {
    let mut out: Vec<(&'static Desc, Sample)> = Vec::new();
    let mut push = |d: &'static Desc, labels, value: f64, timestamp_ms| {
        out.push((
            d,
            Sample {
                labels,
                value,
                timestamp_ms,
            },
        ))
    };
    let seconds = |ns: u64| ns as f64 / 1e9;
    if let Some(s) = summary {
        let n = &s.node;
        if let Some((cpu, ns)) = n
            .cpu
            .as_ref()
            .and_then(|c| Some((c, c.usage_core_nano_seconds?)))
        {
            push(&NODE_CPU, vec![], seconds(ns), millis(cpu.time));
        }
        let memory = n.memory.as_ref();
        if let Some((m, ws)) = memory.and_then(|m| Some((m, m.working_set_bytes?))) {
            push(&NODE_MEMORY, vec![], ws as f64, millis(m.time));
        }
        if let Some((sw, used)) = n.swap.as_ref().and_then(|s| Some((s, s.swap_usage_bytes?))) {
            // Upstream stamps the node's swap with its memory's time.
            let t = memory.map(|m| m.time).unwrap_or(sw.time);
            push(&NODE_SWAP, vec![], used as f64, millis(t));
        }
        for pod in &s.pods {
            for c in &pod.containers {
                let labels = || container_labels(pod, c);
                if let Some(t) = c.start_time.filter(|t| t.timestamp() > 0) {
                    let ns = t.timestamp_nanos_opt().unwrap_or(0);
                    push(&CONTAINER_START, labels(), ns as f64 / 1e9, None);
                }
                if let Some((cpu, ns)) = c
                    .cpu
                    .as_ref()
                    .and_then(|x| Some((x, x.usage_core_nano_seconds?)))
                {
                    push(&CONTAINER_CPU, labels(), seconds(ns), millis(cpu.time));
                }
                if let Some((m, ws)) = c
                    .memory
                    .as_ref()
                    .and_then(|m| Some((m, m.working_set_bytes?)))
                {
                    push(&CONTAINER_MEMORY, labels(), ws as f64, millis(m.time));
                }
                if let Some(sw) = &c.swap {
                    if let Some(used) = sw.swap_usage_bytes {
                        push(&CONTAINER_SWAP, labels(), used as f64, millis(sw.time));
                    }
                    if let Some(avail) = sw.swap_available_bytes {
                        let total = avail as f64 + sw.swap_usage_bytes.unwrap_or(0) as f64;
                        push(&CONTAINER_SWAP_LIMIT, labels(), total, millis(sw.time));
                    }
                }
            }
            if let Some((cpu, ns)) = pod
                .cpu
                .as_ref()
                .and_then(|x| Some((x, x.usage_core_nano_seconds?)))
            {
                push(&POD_CPU, pod_labels(pod), seconds(ns), millis(cpu.time));
            }
            if let Some((m, ws)) = pod
                .memory
                .as_ref()
                .and_then(|m| Some((m, m.working_set_bytes?)))
            {
                push(&POD_MEMORY, pod_labels(pod), ws as f64, millis(m.time));
            }
            if let Some((sw, used)) = pod
                .swap
                .as_ref()
                .and_then(|s| Some((s, s.swap_usage_bytes?)))
            {
                push(&POD_SWAP, pod_labels(pod), used as f64, millis(sw.time));
            }
        }
    }
    let failed = if summary.is_some() { 0.0 } else { 1.0 };
    push(&SCRAPE_ERROR, vec![], failed, None);
    out
}

/// The text of `/metrics/resource`.
pub fn render(summary: Option<&Summary>) -> String {
    let mut samples = collect(summary);
    samples.sort_by(|(da, a), (db, b)| {
        da.name
            .cmp(db.name)
            .then_with(|| {
                let va = a.labels.iter().map(|(_, v)| v);
                let vb = b.labels.iter().map(|(_, v)| v);
                va.cmp(vb)
            })
            .then_with(|| a.timestamp_ms.cmp(&b.timestamp_ms))
    });
    let mut out = String::new();
    let mut family = "";
    for (d, s) in &samples {
        if d.name != family {
            family = d.name;
            let kind = match d.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
            };
            let help = escape_help(d.help);
            let _ = writeln!(out, "# HELP {} [{}] {help}", d.name, d.stability);
            let _ = writeln!(out, "# TYPE {} {kind}", d.name);
        }
        out.push_str(d.name);
        if !s.labels.is_empty() {
            let labels: Vec<String> = s
                .labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                .collect();
            let _ = write!(out, "{{{}}}", labels.join(","));
        }
        let _ = write!(out, " {}", go_float(s.value));
        if let Some(ms) = s.timestamp_ms {
            let _ = write!(out, " {ms}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
