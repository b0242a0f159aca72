//! `windowsHostProcess` (baseline): neither the pod nor a container sets
//! `securityContext.windowsOptions.hostProcess=true`.

use serde_json::Value;

use super::{
    Check, bool_at, containers, containers_phrase, name, pod_security_context, security_context,
    versioned,
};
use crate::api::Level;
use crate::registry::CheckResult;

pub fn check() -> Check {
    Check {
        id: "windowsHostProcess",
        level: Level::Baseline,
        versions: vec![versioned(0, v1_0)],
    }
}

const PATH: &[&str] = &["windowsOptions", "hostProcess"];

fn v1_0(_meta: &Value, spec: &Value) -> CheckResult {
    let mut setters: Vec<String> = Vec::new();
    if bool_at(pod_security_context(spec), PATH) == Some(true) {
        setters.push("pod".into());
    }
    let bad: Vec<&str> = containers(spec)
        .filter(|c| bool_at(security_context(c), PATH) == Some(true))
        .map(name)
        .collect();
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "hostProcess",
        format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            setters.join(" and ")
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
                    "false",
                    json!({"spec": {"securityContext": {"windowsOptions": {"hostProcess": false}}, "containers": [{"name": "a"}]}}),
                    None,
                ),
                (
                    "container",
                    json!({"spec": {"containers": [{"name": "a", "securityContext": {"windowsOptions": {"hostProcess": true}}}]}}),
                    Some((
                        "hostProcess",
                        r#"container "a" must not set securityContext.windowsOptions.hostProcess=true"#,
                    )),
                ),
                (
                    "pod and containers",
                    json!({"spec": {"securityContext": {"windowsOptions": {"hostProcess": true}},
                        "containers": [{"name": "a", "securityContext": {"windowsOptions": {"hostProcess": true}}},
                            {"name": "b", "securityContext": {"windowsOptions": {"hostProcess": true}}}]}}),
                    Some((
                        "hostProcess",
                        r#"pod and containers "a", "b" must not set securityContext.windowsOptions.hostProcess=true"#,
                    )),
                ),
            ],
        );
    }
}
