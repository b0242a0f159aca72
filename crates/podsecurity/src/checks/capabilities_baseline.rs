//! `capabilities_baseline` (baseline): containers may add only capabilities of
//! the container runtimes' default set (no NET_RAW, nothing beyond).

use serde_json::Value;

use super::{
    Check, Sorted, containers, containers_phrase, join_quote, name, object_at, security_context,
    strings, versioned,
};
use crate::api::Level;
use crate::registry::CheckResult;

pub const ID: &str = "capabilities_baseline";

/// The default set of docker and containerd, as upstream's `capabilities_allowed_1_0`.
const ALLOWED: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

pub fn check() -> Check {
    Check {
        id: ID,
        level: Level::Baseline,
        versions: vec![versioned(0, v1_0)],
    }
}

fn v1_0(_meta: &Value, spec: &Value) -> CheckResult {
    let mut bad = Vec::new();
    let mut added = Sorted::new();
    for c in containers(spec) {
        let Some(caps) = object_at(security_context(c), &["capabilities"]) else {
            continue;
        };
        let forbidden: Vec<&str> = strings(caps, "add")
            .into_iter()
            .filter(|cap| !ALLOWED.contains(cap))
            .collect();
        if !forbidden.is_empty() {
            bad.push(name(c));
            added.extend(forbidden);
        }
    }
    if bad.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&bad),
            join_quote(&added)
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
                    "default set and drops",
                    json!({"spec": {"containers": [{"name": "a", "securityContext": {"capabilities": {
                        "add": ["CHOWN", "NET_BIND_SERVICE", "SYS_CHROOT"], "drop": ["ALL"]}}}]}}),
                    None,
                ),
                (
                    "NET_RAW and beyond, sorted and deduplicated",
                    json!({"spec": {
                        "initContainers": [{"name": "i", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}],
                        "containers": [{"name": "a", "securityContext": {"capabilities": {"add": ["NET_RAW", "CHOWN", "SYS_ADMIN"]}}},
                            {"name": "b", "securityContext": {"capabilities": {"add": ["KILL"]}}}]}}),
                    Some((
                        "non-default capabilities",
                        r#"containers "i", "a" must not include "NET_RAW", "SYS_ADMIN" in securityContext.capabilities.add"#,
                    )),
                ),
            ],
        );
    }
}
