//! `runAsUser` (restricted, 1.23+): neither the pod nor a container sets
//! `runAsUser: 0`.

use serde_json::Value;

use super::{
    Check, containers, containers_phrase, name, pod_security_context, security_context, versioned,
};
use crate::api::Level;
use crate::registry::CheckResult;

pub fn check() -> Check {
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        versions: vec![versioned(23, v1_23)],
    }
}

fn is_root(sc: Option<&serde_json::Map<String, Value>>) -> bool {
    sc.and_then(|s| s.get("runAsUser")).and_then(Value::as_i64) == Some(0)
}

fn v1_23(_meta: &Value, spec: &Value) -> CheckResult {
    let mut setters: Vec<String> = Vec::new();
    if is_root(pod_security_context(spec)) {
        setters.push("pod".into());
    }
    let bad: Vec<&str> = containers(spec)
        .filter(|c| is_root(security_context(c)))
        .map(name)
        .collect();
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "runAsUser=0",
        format!("{} must not set runAsUser=0", setters.join(" and ")),
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
            v1_23,
            &[
                (
                    "non-zero or unset",
                    json!({"spec": {"securityContext": {"runAsUser": 1000}, "containers": [{"name": "a"},
                        {"name": "b", "securityContext": {"runAsUser": 1}}]}}),
                    None,
                ),
                (
                    "pod",
                    json!({"spec": {"securityContext": {"runAsUser": 0}, "containers": [{"name": "a"}]}}),
                    Some(("runAsUser=0", "pod must not set runAsUser=0")),
                ),
                (
                    "pod and containers",
                    json!({"spec": {"securityContext": {"runAsUser": 0},
                        "initContainers": [{"name": "i", "securityContext": {"runAsUser": 0}}],
                        "containers": [{"name": "a", "securityContext": {"runAsUser": 0}}]}}),
                    Some((
                        "runAsUser=0",
                        r#"pod and containers "i", "a" must not set runAsUser=0"#,
                    )),
                ),
            ],
        );
    }
}
