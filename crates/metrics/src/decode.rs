//! A node agent's `/metrics/resource` (Prometheus text format) as one node's
//! batch of points, as metrics-server's resource decoder reads it: the node's
//! cumulative CPU and working set, and per container the same plus its start
//! time. Series without a timestamp take the scrape's time; incomplete points
//! (no CPU, no memory) are dropped, as upstream drops them.

use std::collections::BTreeMap;

/// One measurement of a node or container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Point {
    /// When the container started (nanoseconds since the epoch); 0 for nodes.
    pub start_ns: i64,
    /// When the point was measured (nanoseconds since the epoch).
    pub timestamp_ns: i64,
    /// Cumulative CPU since start, in nanocore-seconds.
    pub cpu_ns: u64,
    /// Working set, in bytes.
    pub memory: u64,
}

/// A pod's key: (namespace, name).
pub type PodKey = (String, String);

/// One node's scrape.
#[derive(Debug, Default, PartialEq)]
pub struct Batch {
    pub node: Option<Point>,
    /// Per pod, per container.
    pub pods: BTreeMap<PodKey, BTreeMap<String, Point>>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("failed parsing metrics: line {line}: {reason}")]
pub struct DecodeError {
    pub line: usize,
    pub reason: String,
}

/// One parsed sample line.
struct Sample<'a> {
    name: &'a str,
    labels: LabelPairs<'a>,
    value: f64,
    timestamp_ms: Option<i64>,
}

impl Sample<'_> {
    fn label(&self, key: &str) -> &str {
        self.labels
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }
}

/// Label pairs, keys borrowed from the line.
type LabelPairs<'a> = Vec<(&'a str, String)>;

/// `{k="v",…}`: the labels and what follows the closing brace.
fn parse_labels(s: &str) -> Result<(LabelPairs<'_>, &str), String> {
    let mut out = Vec::new();
    let mut rest = s.trim_start();
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((out, r));
        }
        let eq = rest.find('=').ok_or("expected '=' in label")?;
        let key = rest[..eq].trim();
        let after = rest[eq + 1..].trim_start();
        let mut chars = after.char_indices();
        if chars.next().map(|(_, c)| c) != Some('"') {
            return Err(format!("label {key}: expected a quoted value"));
        }
        let mut value = String::new();
        let mut end = None;
        let mut escaped = false;
        for (i, c) in chars {
            match (escaped, c) {
                (true, 'n') => value.push('\n'),
                (true, c) => value.push(c),
                (false, '\\') => {
                    escaped = true;
                    continue;
                }
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                (false, c) => value.push(c),
            }
            escaped = false;
        }
        let end = end.ok_or_else(|| format!("label {key}: unterminated value"))?;
        out.push((key, value));
        rest = after[end + 1..].trim_start();
        if let Some(r) = rest.strip_prefix(',') {
            rest = r.trim_start();
        }
    }
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "NaN" => Ok(f64::NAN),
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => s.parse().map_err(|_| format!("invalid value {s:?}")),
    }
}

fn parse_line(line: &str) -> Result<Sample<'_>, String> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .ok_or("a sample needs a value")?;
    let name = &line[..name_end];
    let (labels, rest) = match line[name_end..].strip_prefix('{') {
        Some(r) => parse_labels(r)?,
        None => (Vec::new(), &line[name_end..]),
    };
    let mut fields = rest.split_whitespace();
    let value = parse_value(fields.next().ok_or("a sample needs a value")?)?;
    let timestamp_ms = match fields.next() {
        Some(t) => Some(t.parse().map_err(|_| format!("invalid timestamp {t:?}"))?),
        None => None,
    };
    Ok(Sample {
        name,
        labels,
        value,
        timestamp_ms,
    })
}

/// Seconds (a float) as whole nanoseconds, saturating; negatives and NaN are 0.
fn nanos(seconds: f64) -> u64 {
    let n = seconds * 1e9;
    if n.is_nan() || n <= 0.0 {
        0
    } else if n >= u64::MAX as f64 {
        u64::MAX
    } else {
        n as u64
    }
}

fn bytes(v: f64) -> u64 {
    if v.is_nan() || v <= 0.0 {
        0
    } else if v >= u64::MAX as f64 {
        u64::MAX
    } else {
        v as u64
    }
}

/// Decodes one scrape; `default_ms` is the time given to series without one.
pub fn decode(text: &str, default_ms: i64) -> Result<Batch, DecodeError> {
    let mut node = Point::default();
    let mut pods: BTreeMap<PodKey, BTreeMap<String, Point>> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let s = parse_line(line).map_err(|reason| DecodeError {
            line: i + 1,
            reason,
        })?;
        let ts_ns = s
            .timestamp_ms
            .unwrap_or(default_ms)
            .saturating_mul(1_000_000);
        match s.name {
            "node_cpu_usage_seconds_total" => {
                node.cpu_ns = nanos(s.value);
                node.timestamp_ns = ts_ns;
            }
            "node_memory_working_set_bytes" => {
                node.memory = bytes(s.value);
                node.timestamp_ns = ts_ns;
            }
            "container_cpu_usage_seconds_total"
            | "container_memory_working_set_bytes"
            | "container_start_time_seconds" => {
                let key = (s.label("namespace").to_string(), s.label("pod").to_string());
                let point = pods
                    .entry(key)
                    .or_default()
                    .entry(s.label("container").to_string())
                    .or_default();
                match s.name {
                    "container_cpu_usage_seconds_total" => {
                        point.cpu_ns = nanos(s.value);
                        point.timestamp_ns = ts_ns;
                    }
                    "container_memory_working_set_bytes" => {
                        point.memory = bytes(s.value);
                        point.timestamp_ns = ts_ns;
                    }
                    // The start time is the value, not the sample's time.
                    _ => point.start_ns = nanos(s.value).min(i64::MAX as u64) as i64,
                }
            }
            _ => {}
        }
    }
    let node = (node.timestamp_ns != 0 && node.cpu_ns != 0 && node.memory != 0).then_some(node);
    // A pod with any incomplete container point is left out whole, as upstream.
    pods.retain(|_, containers| {
        containers.retain(|_, p| *p != Point::default());
        !containers.is_empty() && containers.values().all(|p| p.cpu_ns != 0 && p.memory != 0)
    });
    Ok(Batch { node, pods })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = r#"# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="burn",namespace="default",pod="busy"} 12.5 1700000000123
container_cpu_usage_seconds_total{container="idle",namespace="default",pod="quiet"} 0.001 1700000000123
container_cpu_usage_seconds_total{container="new",namespace="kube-system",pod="half"} 1 1700000000123
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="burn",namespace="default",pod="busy"} 1.048576e+06 1700000000123
container_memory_working_set_bytes{container="idle",namespace="default",pod="quiet"} 4096 1700000000123
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="burn",namespace="default",pod="busy"} 1.69999999e+09 1700000000123
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 357.25 1700000000100
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 2.147483648e+09 1700000000100
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
"#;

    #[test]
    fn decodes_nodes_and_containers() {
        let b = decode(SCRAPE, 5).unwrap();
        assert_eq!(
            b.node,
            Some(Point {
                start_ns: 0,
                timestamp_ns: 1_700_000_000_100_000_000,
                cpu_ns: 357_250_000_000,
                memory: 2_147_483_648,
            })
        );
        let busy = &b.pods[&("default".into(), "busy".into())]["burn"];
        assert_eq!(busy.cpu_ns, 12_500_000_000);
        assert_eq!(busy.memory, 1_048_576);
        assert_eq!(busy.start_ns, 1_699_999_990_000_000_000);
        assert_eq!(busy.timestamp_ns, 1_700_000_000_123_000_000);
        // A container without a working set is incomplete: its pod is dropped.
        assert!(!b.pods.contains_key(&("kube-system".into(), "half".into())));
        assert_eq!(b.pods.len(), 2);
    }

    #[test]
    fn samples_without_time_take_the_scrape_time_and_labels_unescape() {
        let text = "container_cpu_usage_seconds_total{namespace=\"a\\\"b\",pod=\"p\",container=\"c\"} 2\ncontainer_memory_working_set_bytes{namespace=\"a\\\"b\",pod=\"p\",container=\"c\"} 10\n";
        let b = decode(text, 42).unwrap();
        let p = &b.pods[&("a\"b".into(), "p".into())]["c"];
        assert_eq!(p.timestamp_ns, 42_000_000);
        assert_eq!(b.node, None, "a node without its series is left out");
    }

    #[test]
    fn bad_lines_are_errors() {
        for (text, line) in [
            ("node_cpu_usage_seconds_total\n", 1),
            ("# c\nnode_cpu_usage_seconds_total abc\n", 2),
            ("x{a=\"1} 2\n", 1),
            ("x{a=1} 2\n", 1),
            ("x 1 notatime\n", 1),
        ] {
            assert_eq!(decode(text, 0).unwrap_err().line, line, "{text}");
        }
    }
}
