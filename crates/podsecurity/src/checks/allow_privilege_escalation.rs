//! `allowPrivilegeEscalation` (restricted): every container must set
//! `securityContext.allowPrivilegeEscalation=false`; from 1.25 Windows pods
//! (`spec.os.name: windows`) are exempt.

use serde_json::Value;

use super::{Check, containers, containers_phrase, name, security_context, versioned};
use crate::api::Level;
use crate::registry::CheckResult;

pub fn check() -> Check {
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        versions: vec![versioned(8, v1_8), versioned(25, v1_25)],
    }
}

fn v1_8(_meta: &Value, spec: &Value) -> CheckResult {
    let bad: Vec<&str> = containers(spec)
        .filter(|c| {
            security_context(c)
                .and_then(|sc| sc.get("allowPrivilegeEscalation"))
                .and_then(Value::as_bool)
                != Some(false)
        })
        .map(name)
        .collect();
    if bad.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "allowPrivilegeEscalation != false",
        format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            containers_phrase(&bad)
        ),
    )
}

fn v1_25(meta: &Value, spec: &Value) -> CheckResult {
    if super::is_windows(spec) {
        return CheckResult::allowed();
    }
    v1_8(meta, spec)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::run;
    use super::*;

    #[test]
    fn table() {
        let ok = json!({"allowPrivilegeEscalation": false});
        run(
            v1_25,
            &[
                (
                    "all false",
                    json!({"spec": {"initContainers": [{"name": "i", "securityContext": ok}],
                        "containers": [{"name": "c", "securityContext": ok}]}}),
                    None,
                ),
                (
                    "windows pods are exempt",
                    json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "c"}]}}),
                    None,
                ),
                (
                    "unset, true, nil context; init and ephemeral containers count",
                    json!({"spec": {
                        "initContainers": [{"name": "i", "securityContext": {"allowPrivilegeEscalation": true}}],
                        "containers": [{"name": "a", "securityContext": {}}, {"name": "b"},
                            {"name": "good", "securityContext": ok}],
                        "ephemeralContainers": [{"name": "e"}]}}),
                    Some((
                        "allowPrivilegeEscalation != false",
                        r#"containers "i", "a", "b", "e" must set securityContext.allowPrivilegeEscalation=false"#,
                    )),
                ),
            ],
        );
        // Before 1.25 Windows pods were not exempt.
        run(
            v1_8,
            &[(
                "windows at 1.8",
                json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "c"}]}}),
                Some((
                    "allowPrivilegeEscalation != false",
                    r#"container "c" must set securityContext.allowPrivilegeEscalation=false"#,
                )),
            )],
        );
    }
}
