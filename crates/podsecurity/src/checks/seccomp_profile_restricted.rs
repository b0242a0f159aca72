//! `seccompProfile_restricted` (restricted, 1.19+; replaces the baseline
//! check): the pod, or every container, sets the profile to RuntimeDefault or
//! Localhost; from 1.25 Windows pods are exempt.

use serde_json::Value;

use super::seccomp_profile_baseline::{ID as BASELINE_ID, profile_type, valid_type};
use super::{
    Check, Sorted, VersionedCheck, containers, containers_phrase, join_quote, name,
    pod_security_context, security_context,
};
use crate::api::Level;
use crate::registry::CheckResult;

pub fn check() -> Check {
    let overrides: &[&str] = &[BASELINE_ID];
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        versions: vec![
            VersionedCheck {
                minimum_version: 19,
                check_pod: v1_19,
                override_check_ids: overrides,
            },
            VersionedCheck {
                minimum_version: 25,
                check_pod: v1_25,
                override_check_ids: overrides,
            },
        ],
    }
}

fn v1_19(_meta: &Value, spec: &Value) -> CheckResult {
    let mut setters: Vec<String> = Vec::new();
    let mut values = Sorted::new();
    let mut pod_set = false;
    if let Some(t) = profile_type(pod_security_context(spec)) {
        if valid_type(t) {
            pod_set = true;
        } else {
            setters.push("pod".into());
            values.insert(t);
        }
    }
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(spec) {
        match profile_type(security_context(c)) {
            Some(t) if !valid_type(t) => {
                explicit.push(name(c));
                values.insert(t);
            }
            Some(_) => {}
            None if !pod_set => implicit.push(name(c)),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_phrase(&explicit));
    }
    if !setters.is_empty() {
        return CheckResult::forbidden(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                setters.join(" and "),
                join_quote(&values)
            ),
        );
    }
    if !implicit.is_empty() {
        return CheckResult::forbidden(
            "seccompProfile",
            format!(
                r#"pod or {} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
                containers_phrase(&implicit)
            ),
        );
    }
    CheckResult::allowed()
}

fn v1_25(meta: &Value, spec: &Value) -> CheckResult {
    if super::is_windows(spec) {
        return CheckResult::allowed();
    }
    v1_19(meta, spec)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::run;
    use super::*;

    #[test]
    fn table() {
        run(
            v1_25,
            &[
                (
                    "pod level",
                    json!({"spec": {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}, "containers": [{"name": "a"}]}}),
                    None,
                ),
                (
                    "every container",
                    json!({"spec": {"containers": [{"name": "a", "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p"}}}]}}),
                    None,
                ),
                (
                    "windows",
                    json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "a"}]}}),
                    None,
                ),
                (
                    "unset",
                    json!({"spec": {"containers": [{"name": "a"}, {"name": "b", "securityContext": {}}]}}),
                    Some((
                        "seccompProfile",
                        r#"pod or containers "a", "b" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
                    )),
                ),
                (
                    "unconfined container under a good pod",
                    json!({"spec": {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [{"name": "a", "securityContext": {"seccompProfile": {"type": "Unconfined"}}}]}}),
                    Some((
                        "seccompProfile",
                        r#"container "a" must not set securityContext.seccompProfile.type to "Unconfined""#,
                    )),
                ),
            ],
        );
    }
}
