//! `runAsNonRoot` (restricted): the pod sets `runAsNonRoot=true`, or every
//! container does, and nothing sets it false. (Upstream's relaxation for
//! `hostUsers: false` is behind an alpha gate, off in 1.33.)

use serde_json::Value;

use super::{
    Check, bool_at, containers, containers_phrase, name, pod_security_context, security_context,
    versioned,
};
use crate::api::Level;
use crate::registry::CheckResult;

pub fn check() -> Check {
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        versions: vec![versioned(0, v1_0)],
    }
}

fn v1_0(_meta: &Value, spec: &Value) -> CheckResult {
    let mut setters: Vec<String> = Vec::new();
    let pod = bool_at(pod_security_context(spec), &["runAsNonRoot"]);
    if pod == Some(false) {
        setters.push("pod".into());
    }
    let pod_non_root = pod == Some(true);
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(spec) {
        match bool_at(security_context(c), &["runAsNonRoot"]) {
            Some(false) => explicit.push(name(c)),
            Some(true) => {}
            None if !pod_non_root => implicit.push(name(c)),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_phrase(&explicit));
    }
    if !setters.is_empty() {
        return CheckResult::forbidden(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters.join(" and ")
            ),
        );
    }
    if !implicit.is_empty() {
        return CheckResult::forbidden(
            "runAsNonRoot != true",
            format!(
                "pod or {} must set securityContext.runAsNonRoot=true",
                containers_phrase(&implicit)
            ),
        );
    }
    CheckResult::allowed()
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
                    "pod level",
                    json!({"spec": {"securityContext": {"runAsNonRoot": true}, "containers": [{"name": "a"}]}}),
                    None,
                ),
                (
                    "every container",
                    json!({"spec": {"containers": [{"name": "a", "securityContext": {"runAsNonRoot": true}}]}}),
                    None,
                ),
                (
                    "unset",
                    json!({"spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"},
                        {"name": "b", "securityContext": {"runAsNonRoot": true}}]}}),
                    Some((
                        "runAsNonRoot != true",
                        r#"pod or containers "i", "a" must set securityContext.runAsNonRoot=true"#,
                    )),
                ),
                (
                    "explicitly false beats implicitly unset",
                    json!({"spec": {"securityContext": {"runAsNonRoot": false}, "containers": [{"name": "a"},
                        {"name": "b", "securityContext": {"runAsNonRoot": false}}]}}),
                    Some((
                        "runAsNonRoot != true",
                        r#"pod and container "b" must not set securityContext.runAsNonRoot=false"#,
                    )),
                ),
            ],
        );
    }
}
