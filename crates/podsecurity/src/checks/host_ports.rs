//! `hostPorts` (baseline): no container port with a non-zero `hostPort`.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Check, containers, containers_phrase, name, pluralize, versioned};
use crate::api::Level;
use crate::registry::CheckResult;

pub fn check() -> Check {
    Check {
        id: "hostPorts",
        level: Level::Baseline,
        versions: vec![versioned(0, v1_0)],
    }
}

fn v1_0(_meta: &Value, spec: &Value) -> CheckResult {
    let mut bad = Vec::new();
    // Sorted as strings, as upstream's `sets.String` of the port numbers.
    let mut ports = BTreeSet::new();
    for c in containers(spec) {
        let mut valid = true;
        for p in c
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let host_port = p.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
            if host_port != 0 {
                valid = false;
                ports.insert(host_port.to_string());
            }
        }
        if !valid {
            bad.push(name(c));
        }
    }
    if bad.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_phrase(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::run;
    use super::*;

    #[test]
    fn table() {
        run(
            v1_0,
            &[
                (
                    "container ports only",
                    json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80}, {"containerPort": 81, "hostPort": 0}]}]}}),
                    None,
                ),
                (
                    "one",
                    json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}}),
                    Some(("hostPort", r#"container "a" uses hostPort 8080"#)),
                ),
                (
                    "several, sorted as strings",
                    json!({"spec": {"initContainers": [{"name": "i", "ports": [{"containerPort": 1, "hostPort": 9000}]}],
                        "containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 80}, {"containerPort": 81, "hostPort": 10000}]}]}}),
                    Some((
                        "hostPort",
                        r#"containers "i", "a" use hostPorts 10000, 80, 9000"#,
                    )),
                ),
            ],
        );
    }
}
