//! `privileged` (baseline): no container with `securityContext.privileged=true`.

use serde_json::Value;

use super::{Check, bool_at, containers, containers_phrase, name, security_context, versioned};
use crate::api::Level;
use crate::registry::CheckResult;

pub fn check() -> Check {
    Check {
        id: "privileged",
        level: Level::Baseline,
        versions: vec![versioned(0, v1_0)],
    }
}

fn v1_0(_meta: &Value, spec: &Value) -> CheckResult {
    let bad: Vec<&str> = containers(spec)
        .filter(|c| bool_at(security_context(c), &["privileged"]) == Some(true))
        .map(name)
        .collect();
    if bad.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "privileged",
        format!(
            "{} must not set securityContext.privileged=true",
            containers_phrase(&bad)
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
                    "false or unset",
                    json!({"spec": {"containers": [{"name": "a", "securityContext": {"privileged": false}}, {"name": "b"}]}}),
                    None,
                ),
                (
                    "true in every kind of container",
                    json!({"spec": {
                        "initContainers": [{"name": "i", "securityContext": {"privileged": true}}],
                        "containers": [{"name": "a", "securityContext": {"privileged": true}}, {"name": "b"}],
                        "ephemeralContainers": [{"name": "e", "securityContext": {"privileged": true}}]}}),
                    Some((
                        "privileged",
                        r#"containers "i", "a", "e" must not set securityContext.privileged=true"#,
                    )),
                ),
            ],
        );
    }
}
