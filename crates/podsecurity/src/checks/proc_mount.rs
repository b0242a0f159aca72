//! `procMount` (baseline): containers keep the default `/proc` masks
//! (`securityContext.procMount` unset or `Default`). Upstream's relaxation for
//! user-namespaced pods sits behind an alpha gate that is off in 1.33, so it
//! is not applied.

use serde_json::Value;

use super::{
    Check, Sorted, containers, containers_phrase, join_quote, name, security_context, str_at,
    versioned,
};
use crate::api::Level;
use crate::registry::CheckResult;

pub fn check() -> Check {
    Check {
        id: "procMount",
        level: Level::Baseline,
        versions: vec![versioned(0, v1_0)],
    }
}

fn v1_0(_meta: &Value, spec: &Value) -> CheckResult {
    let mut bad = Vec::new();
    let mut types = Sorted::new();
    for c in containers(spec) {
        if let Some(t) = str_at(security_context(c), &["procMount"])
            && t != "Default"
        {
            bad.push(name(c));
            types.insert(t);
        }
    }
    if bad.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            containers_phrase(&bad),
            join_quote(&types)
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
                    "default or unset",
                    json!({"spec": {"containers": [{"name": "a", "securityContext": {"procMount": "Default"}}, {"name": "b", "securityContext": {}}]}}),
                    None,
                ),
                (
                    "unmasked",
                    json!({"spec": {"initContainers": [{"name": "i", "securityContext": {"procMount": "Unmasked"}}],
                        "containers": [{"name": "a", "securityContext": {"procMount": "Unmasked"}}]}}),
                    Some((
                        "procMount",
                        r#"containers "i", "a" must not set securityContext.procMount to "Unmasked""#,
                    )),
                ),
            ],
        );
    }
}
