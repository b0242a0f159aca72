//! `appArmorProfile` (baseline): the pod and its containers may only set
//! `appArmorProfile.type` RuntimeDefault or Localhost, and the deprecated
//! `container.apparmor.security.beta.kubernetes.io/*` annotations only
//! `runtime/default`, `localhost/*` or empty.

use serde_json::{Map, Value};

use super::{
    Check, Sorted, annotations, containers, containers_phrase, join_quote, name, pluralize,
    pod_security_context, security_context, str_at, versioned,
};
use crate::api::{Level, quote};
use crate::registry::CheckResult;

const ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

pub fn check() -> Check {
    Check {
        id: "appArmorProfile",
        level: Level::Baseline,
        versions: vec![versioned(0, v1_0)],
    }
}

fn allowed_type(t: &str) -> bool {
    matches!(t, "RuntimeDefault" | "Localhost")
}

fn allowed_annotation(v: &str) -> bool {
    v.is_empty() || v == "runtime/default" || v.starts_with("localhost/")
}

/// The `appArmorProfile.type` of a security context that sets a profile.
fn profile_type(sc: Option<&Map<String, Value>>) -> Option<&str> {
    super::object_at(sc, &["appArmorProfile"])
        .map(|_| str_at(sc, &["appArmorProfile", "type"]).unwrap_or(""))
}

fn v1_0(meta: &Value, spec: &Value) -> CheckResult {
    let mut setters: Vec<String> = Vec::new();
    let mut bad_values = Sorted::new();
    if let Some(t) = profile_type(pod_security_context(spec))
        && !allowed_type(t)
    {
        setters.push("pod".into());
        bad_values.insert(t);
    }
    let mut bad = Vec::new();
    for c in containers(spec) {
        if let Some(t) = profile_type(security_context(c))
            && !allowed_type(t)
        {
            bad.push(name(c));
            bad_values.insert(t);
        }
    }
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    let mut values: Vec<String> = bad_values.iter().map(|s| s.to_string()).collect();
    let mut forbidden_annotations: Vec<String> = annotations(meta)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(ANNOTATION_PREFIX))
        .filter_map(|(k, v)| {
            let v = v.as_str().unwrap_or("");
            (!allowed_annotation(v)).then(|| format!("{k}={}", quote(v)))
        })
        .collect();
    if !forbidden_annotations.is_empty() {
        forbidden_annotations.sort();
        setters.push(pluralize("annotation", "annotations", forbidden_annotations.len()).into());
        values.extend(forbidden_annotations);
    }
    if setters.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            values.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
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
            v1_0,
            &[
                (
                    "allowed types and annotations",
                    json!({"metadata": {"annotations": {
                        "container.apparmor.security.beta.kubernetes.io/a": "runtime/default",
                        "container.apparmor.security.beta.kubernetes.io/b": "localhost/x",
                        "other": "unconfined"}},
                        "spec": {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                        "containers": [{"name": "a", "securityContext": {"appArmorProfile": {"type": "Localhost", "localhostProfile": "x"}}}]}}),
                    None,
                ),
                (
                    "pod field",
                    json!({"spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}},
                        "containers": [{"name": "a"}]}}),
                    Some((
                        "forbidden AppArmor profile",
                        r#"pod must not set AppArmor profile type to "Unconfined""#,
                    )),
                ),
                (
                    "pod, containers and annotations",
                    json!({"metadata": {"annotations": {
                        "container.apparmor.security.beta.kubernetes.io/b": "unconfined",
                        "container.apparmor.security.beta.kubernetes.io/a": "unconfined"}},
                        "spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}},
                        "initContainers": [{"name": "i", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}],
                        "containers": [{"name": "a", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}]}}),
                    Some((
                        "forbidden AppArmor profiles",
                        r#"pod and containers "i", "a" and annotations must not set AppArmor profile type to "Unconfined", "container.apparmor.security.beta.kubernetes.io/a="unconfined"", "container.apparmor.security.beta.kubernetes.io/b="unconfined"""#,
                    )),
                ),
            ],
        );
    }
}
