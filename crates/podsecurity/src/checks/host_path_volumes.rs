//! `hostPathVolumes` (baseline; restricted's `restrictedVolumes` replaces it):
//! no hostPath volumes.

use serde_json::Value;

use super::{Check, join_quote, pluralize, versioned, volumes};
use crate::api::Level;
use crate::registry::CheckResult;

pub const ID: &str = "hostPathVolumes";

pub fn check() -> Check {
    Check {
        id: ID,
        level: Level::Baseline,
        versions: vec![versioned(0, v1_0)],
    }
}

fn v1_0(_meta: &Value, spec: &Value) -> CheckResult {
    let bad: Vec<&str> = volumes(spec)
        .filter(|(_, v)| v.get("hostPath").is_some_and(|h| !h.is_null()))
        .map(|(name, _)| name)
        .collect();
    if bad.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "hostPath volumes",
        format!(
            "{} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quote(&bad)
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
                    "emptyDir",
                    json!({"spec": {"volumes": [{"name": "a", "emptyDir": {}}]}}),
                    None,
                ),
                (
                    "one",
                    json!({"spec": {"volumes": [{"name": "a", "hostPath": {"path": "/a"}}]}}),
                    Some(("hostPath volumes", r#"volume "a""#)),
                ),
                (
                    "two",
                    json!({"spec": {"volumes": [{"name": "a", "hostPath": {"path": "/a"}},
                        {"name": "b", "emptyDir": {}}, {"name": "c", "hostPath": {"path": "/c"}}]}}),
                    Some(("hostPath volumes", r#"volumes "a", "c""#)),
                ),
            ],
        );
    }
}
