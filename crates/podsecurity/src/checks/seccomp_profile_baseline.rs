//! `seccompProfile_baseline` (baseline; restricted's own seccomp check
//! replaces it from 1.19): the profile, if set, is RuntimeDefault or
//! Localhost; before 1.19, the same on the alpha annotations.

use serde_json::Value;

use super::{
    Check, Sorted, annotations, containers, containers_phrase, join_quote, name, pluralize,
    pod_security_context, security_context, versioned,
};
use crate::api::{Level, quote};
use crate::registry::CheckResult;

pub const ID: &str = "seccompProfile_baseline";
const ANNOTATION_POD: &str = "seccomp.security.alpha.kubernetes.io/pod";
const ANNOTATION_CONTAINER_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

pub fn check() -> Check {
    Check {
        id: ID,
        level: Level::Baseline,
        versions: vec![versioned(0, v1_0), versioned(19, v1_19)],
    }
}

pub(super) fn valid_type(t: &str) -> bool {
    matches!(t, "Localhost" | "RuntimeDefault")
}

fn valid_annotation(v: &str) -> bool {
    v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/")
}

/// The alpha annotations (upstream's policy before 1.19).
fn v1_0(meta: &Value, spec: &Value) -> CheckResult {
    let ann = annotations(meta);
    let mut forbidden = std::collections::BTreeSet::new();
    let mut note = |key: String| {
        if let Some(v) = ann.and_then(|a| a.get(&key)) {
            let v = v.as_str().unwrap_or("");
            if !valid_annotation(v) {
                forbidden.insert(format!("{key}={}", quote(v)));
            }
        }
    };
    note(ANNOTATION_POD.to_string());
    for c in containers(spec) {
        note(format!("{ANNOTATION_CONTAINER_PREFIX}{}", name(c)));
    }
    if forbidden.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "seccompProfile",
        format!(
            "forbidden {} {}",
            pluralize("annotation", "annotations", forbidden.len()),
            forbidden.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}

/// The type of `sc.seccompProfile` when the profile is set.
pub(super) fn profile_type(sc: Option<&serde_json::Map<String, Value>>) -> Option<&str> {
    let p = sc?.get("seccompProfile")?.as_object()?;
    Some(p.get("type").and_then(Value::as_str).unwrap_or(""))
}

fn v1_19(_meta: &Value, spec: &Value) -> CheckResult {
    let mut setters: Vec<String> = Vec::new();
    let mut values = Sorted::new();
    if let Some(t) = profile_type(pod_security_context(spec))
        && !valid_type(t)
    {
        setters.push("pod".into());
        values.insert(t);
    }
    let mut bad = Vec::new();
    for c in containers(spec) {
        if let Some(t) = profile_type(security_context(c))
            && !valid_type(t)
        {
            bad.push(name(c));
            values.insert(t);
        }
    }
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            setters.join(" and "),
            join_quote(&values)
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
            v1_19,
            &[
                (
                    "unset, RuntimeDefault, Localhost",
                    json!({"spec": {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [{"name": "a"}, {"name": "b", "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p"}}}]}}),
                    None,
                ),
                (
                    "unconfined pod",
                    json!({"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [{"name": "a"}]}}),
                    Some((
                        "seccompProfile",
                        r#"pod must not set securityContext.seccompProfile.type to "Unconfined""#,
                    )),
                ),
                (
                    "pod and containers",
                    json!({"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}},
                        "containers": [{"name": "a", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                            {"name": "b", "securityContext": {"seccompProfile": {"type": "Bogus"}}}]}}),
                    Some((
                        "seccompProfile",
                        r#"pod and containers "a", "b" must not set securityContext.seccompProfile.type to "Bogus", "Unconfined""#,
                    )),
                ),
            ],
        );
        run(
            v1_0,
            &[
                (
                    "allowed annotations",
                    json!({"metadata": {"annotations": {
                        "seccomp.security.alpha.kubernetes.io/pod": "runtime/default",
                        "container.seccomp.security.alpha.kubernetes.io/a": "localhost/p"}},
                        "spec": {"containers": [{"name": "a"}]}}),
                    None,
                ),
                (
                    "unconfined annotations",
                    json!({"metadata": {"annotations": {
                        "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
                        "container.seccomp.security.alpha.kubernetes.io/a": "unconfined"}},
                        "spec": {"containers": [{"name": "a"}]}}),
                    Some((
                        "seccompProfile",
                        r#"forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", seccomp.security.alpha.kubernetes.io/pod="unconfined""#,
                    )),
                ),
            ],
        );
    }
}
