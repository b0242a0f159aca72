//! `hostNamespaces` (baseline): no `hostNetwork`, `hostPID` or `hostIPC`.

use serde_json::Value;

use super::{Check, versioned};
use crate::api::Level;
use crate::registry::CheckResult;

pub fn check() -> Check {
    Check {
        id: "hostNamespaces",
        level: Level::Baseline,
        versions: vec![versioned(0, v1_0)],
    }
}

fn v1_0(_meta: &Value, spec: &Value) -> CheckResult {
    let set: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|k| spec.get(*k).and_then(Value::as_bool) == Some(true))
        .map(|k| format!("{k}=true"))
        .collect();
    if set.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden("host namespaces", set.join(", "))
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
                    "false",
                    json!({"spec": {"hostNetwork": false, "hostPID": false, "containers": [{"name": "a"}]}}),
                    None,
                ),
                (
                    "network",
                    json!({"spec": {"hostNetwork": true, "containers": [{"name": "a"}]}}),
                    Some(("host namespaces", "hostNetwork=true")),
                ),
                (
                    "all three",
                    json!({"spec": {"hostIPC": true, "hostPID": true, "hostNetwork": true}}),
                    Some((
                        "host namespaces",
                        "hostNetwork=true, hostPID=true, hostIPC=true",
                    )),
                ),
            ],
        );
    }
}
