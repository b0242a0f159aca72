//! `capabilities_restricted` (restricted, 1.22+; replaces the baseline
//! check): every container drops ALL and adds at most NET_BIND_SERVICE; from
//! 1.25 Windows pods are exempt.

use serde_json::Value;

use super::{
    Check, Sorted, VersionedCheck, containers, containers_phrase, join_quote, name, object_at,
    security_context, strings,
};
use crate::api::Level;
use crate::registry::CheckResult;

pub fn check() -> Check {
    let overrides: &[&str] = &[super::capabilities_baseline::ID];
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        versions: vec![
            VersionedCheck {
                minimum_version: 22,
                check_pod: v1_22,
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

fn v1_22(_meta: &Value, spec: &Value) -> CheckResult {
    let mut missing_drop_all = Vec::new();
    let mut adding = Vec::new();
    let mut forbidden = Sorted::new();
    for c in containers(spec) {
        let Some(caps) = object_at(security_context(c), &["capabilities"]) else {
            missing_drop_all.push(name(c));
            continue;
        };
        if !strings(caps, "drop").contains(&"ALL") {
            missing_drop_all.push(name(c));
        }
        let bad: Vec<&str> = strings(caps, "add")
            .into_iter()
            .filter(|cap| *cap != "NET_BIND_SERVICE")
            .collect();
        if !bad.is_empty() {
            adding.push(name(c));
            forbidden.extend(bad);
        }
    }
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            r#"{} must set securityContext.capabilities.drop=["ALL"]"#,
            containers_phrase(&missing_drop_all)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding),
            join_quote(&forbidden)
        ));
    }
    if details.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden("unrestricted capabilities", details.join("; "))
}

fn v1_25(meta: &Value, spec: &Value) -> CheckResult {
    if super::is_windows(spec) {
        return CheckResult::allowed();
    }
    v1_22(meta, spec)
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
                    "drop ALL, add NET_BIND_SERVICE",
                    json!({"spec": {"containers": [{"name": "a", "securityContext": {"capabilities": {
                        "add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}}}]}}),
                    None,
                ),
                (
                    "windows",
                    json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "a"}]}}),
                    None,
                ),
                (
                    "no drop",
                    json!({"spec": {"containers": [{"name": "a"}, {"name": "b", "securityContext": {"capabilities": {"drop": ["NET_RAW"]}}}]}}),
                    Some((
                        "unrestricted capabilities",
                        r#"containers "a", "b" must set securityContext.capabilities.drop=["ALL"]"#,
                    )),
                ),
                (
                    "drop missing and forbidden adds",
                    json!({"spec": {
                        "initContainers": [{"name": "i", "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}}}],
                        "containers": [{"name": "a", "securityContext": {"capabilities": {"add": ["NET_RAW", "NET_BIND_SERVICE"]}}}]}}),
                    Some((
                        "unrestricted capabilities",
                        r#"container "a" must set securityContext.capabilities.drop=["ALL"]; containers "i", "a" must not include "CHOWN", "NET_RAW" in securityContext.capabilities.add"#,
                    )),
                ),
            ],
        );
    }
}
