//! What a simulated node is made of, from flags: labels, taints (upstream's
//! `--node-labels` and `--register-with-taints` forms) and NUMA cells, which the
//! Node publishes in the [`NUMA_ANNOTATION`] annotation (upstream has no core
//! field for them; topology-aware schedulers read a CRD instead).

use std::collections::BTreeMap;

use berth_api::quantity::{Format, Quantity};
use k8s_openapi::api::core::v1::Taint;

use super::{NumaNode, Resources};
use crate::{Error, Result};

/// The Node annotation listing its NUMA cells as JSON:
/// `[{"id":0,"cpus":"0-3","memory":"8Gi"}, …]` (cpus in Linux cpulist form).
pub const NUMA_ANNOTATION: &str = "node.berth.dev/numa-topology";

fn invalid(what: &str, value: &str, why: &str) -> Error {
    Error::Invalid(format!("{what} {value:?}: {why}"))
}

/// `key=value,key2=value2` (as `--node-labels`).
pub fn parse_labels(s: &str) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| invalid("node label", part, "expected key=value"))?;
        if k.is_empty() {
            return Err(invalid("node label", part, "empty key"));
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// `key[=value]:Effect,…` (as `--register-with-taints`).
pub fn parse_taints(s: &str) -> Result<Vec<Taint>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (kv, effect) = part
            .rsplit_once(':')
            .ok_or_else(|| invalid("taint", part, "expected key[=value]:Effect"))?;
        if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            return Err(invalid(
                "taint",
                part,
                "effect must be NoSchedule, PreferNoSchedule or NoExecute",
            ));
        }
        let (key, value) = match kv.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (kv, None),
        };
        if key.is_empty() {
            return Err(invalid("taint", part, "empty key"));
        }
        out.push(Taint {
            key: key.to_string(),
            value,
            effect: effect.to_string(),
            time_added: None,
        });
    }
    Ok(out)
}

/// `count` NUMA cells sharing the node's whole CPUs and memory evenly (the
/// first cells take the remainder), as a two-socket machine splits them.
pub fn split_evenly(count: u32, capacity: &Resources) -> Result<Vec<NumaNode>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let cpus = capacity.get("cpu").map(Quantity::value).unwrap_or(0);
    let cpus = u32::try_from(cpus).unwrap_or(0);
    if cpus < count {
        return Err(invalid(
            "NUMA cells",
            &count.to_string(),
            &format!("more cells than the node's {cpus} whole CPUs"),
        ));
    }
    let memory = capacity.get("memory").map(Quantity::value).unwrap_or(0);
    let mut out = Vec::new();
    let mut next_cpu = 0;
    for id in 0..count {
        let n = cpus / count + u32::from(id < cpus % count);
        let mem = memory / i64::from(count) + i64::from(i64::from(id) < memory % i64::from(count));
        out.push(NumaNode {
            id,
            cpus: (next_cpu..next_cpu + n).collect(),
            memory: (memory > 0).then(|| Quantity::from_value(mem, Format::BinarySI)),
        });
        next_cpu += n;
    }
    Ok(out)
}

/// Linux cpulist form: `0-3,8,10-11`.
pub fn cpulist(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// The [`NUMA_ANNOTATION`] value for `cells`.
pub fn numa_annotation(cells: &[NumaNode]) -> String {
    let cells: Vec<serde_json::Value> = cells
        .iter()
        .map(|c| {
            let mut v = serde_json::json!({"id": c.id, "cpus": cpulist(&c.cpus)});
            if let Some(m) = &c.memory {
                v["memory"] = m.canonical().into();
            }
            v
        })
        .collect();
    serde_json::Value::Array(cells).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::parse_resources;

    #[test]
    fn labels_and_taints_parse_as_upstream_flags() {
        assert_eq!(
            parse_labels("zone=a, disk=ssd,empty=").unwrap(),
            BTreeMap::from([
                ("disk".to_string(), "ssd".to_string()),
                ("empty".to_string(), String::new()),
                ("zone".to_string(), "a".to_string()),
            ])
        );
        for bad in ["novalue", "=x"] {
            assert!(parse_labels(bad).is_err(), "{bad}");
        }
        let t = parse_taints("gpu=true:NoSchedule,dedicated:NoExecute").unwrap();
        assert_eq!(
            t.iter()
                .map(|t| (t.key.as_str(), t.value.as_deref(), t.effect.as_str()))
                .collect::<Vec<_>>(),
            [
                ("gpu", Some("true"), "NoSchedule"),
                ("dedicated", None, "NoExecute")
            ]
        );
        for bad in ["gpu=true", "gpu:Sometimes", ":NoSchedule"] {
            assert!(parse_taints(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cells_split_cpus_and_memory_evenly() {
        let cases = [
            ("cpu=4,memory=16Gi", 0, "[]"),
            (
                "cpu=4,memory=16Gi",
                2,
                r#"[{"cpus":"0-1","id":0,"memory":"8Gi"},{"cpus":"2-3","id":1,"memory":"8Gi"}]"#,
            ),
            (
                "cpu=7,memory=3",
                2,
                r#"[{"cpus":"0-3","id":0,"memory":"2"},{"cpus":"4-6","id":1,"memory":"1"}]"#,
            ),
            ("cpu=2", 2, r#"[{"cpus":"0","id":0},{"cpus":"1","id":1}]"#),
        ];
        for (cap, n, want) in cases {
            let cells = split_evenly(n, &parse_resources(cap).unwrap()).unwrap();
            let got: serde_json::Value = serde_json::from_str(&numa_annotation(&cells)).unwrap();
            let want: serde_json::Value = serde_json::from_str(want).unwrap();
            assert_eq!(got, want, "{cap} / {n}");
        }
        assert!(split_evenly(3, &parse_resources("cpu=2").unwrap()).is_err());
    }

    #[test]
    fn cpulists_collapse_runs() {
        for (cpus, want) in [
            (vec![], ""),
            (vec![3], "3"),
            (vec![0, 1, 2, 3], "0-3"),
            (vec![10, 0, 1, 8, 11], "0-1,8,10-11"),
        ] {
            assert_eq!(cpulist(&cpus), want);
        }
    }
}
