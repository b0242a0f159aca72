//! `seLinuxOptions` (baseline): the SELinux type is one of the container
//! types (`container_engine_t` too from 1.31), and no user or role is set.

use serde_json::{Map, Value};

use super::{
    Check, Sorted, containers, containers_phrase, join_quote, name, object_at, pluralize,
    pod_security_context, security_context, versioned,
};
use crate::api::Level;
use crate::registry::CheckResult;

pub fn check() -> Check {
    Check {
        id: "seLinuxOptions",
        level: Level::Baseline,
        versions: vec![versioned(0, v1_0), versioned(31, v1_31)],
    }
}

const TYPES_1_0: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t"];
const TYPES_1_31: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

fn v1_0(meta: &Value, spec: &Value) -> CheckResult {
    se_linux_options(meta, spec, TYPES_1_0)
}

fn v1_31(meta: &Value, spec: &Value) -> CheckResult {
    se_linux_options(meta, spec, TYPES_1_31)
}

#[derive(Default)]
struct Found<'a> {
    types: Sorted<'a>,
    user: bool,
    role: bool,
}

impl<'a> Found<'a> {
    /// Whether `opts` is allowed, noting what is not.
    fn valid(&mut self, opts: &'a Map<String, Value>, allowed: &[&str]) -> bool {
        let s = |k: &str| opts.get(k).and_then(Value::as_str).unwrap_or("");
        let mut ok = true;
        if !allowed.contains(&s("type")) {
            ok = false;
            self.types.insert(s("type"));
        }
        if !s("user").is_empty() {
            ok = false;
            self.user = true;
        }
        if !s("role").is_empty() {
            ok = false;
            self.role = true;
        }
        ok
    }
}

fn se_linux_options(_meta: &Value, spec: &Value, allowed: &[&str]) -> CheckResult {
    let mut found = Found::default();
    let mut setters: Vec<String> = Vec::new();
    if let Some(opts) = object_at(pod_security_context(spec), &["seLinuxOptions"])
        && !found.valid(opts, allowed)
    {
        setters.push("pod".into());
    }
    let mut bad = Vec::new();
    for c in containers(spec) {
        if let Some(opts) = object_at(security_context(c), &["seLinuxOptions"])
            && !found.valid(opts, allowed)
        {
            bad.push(name(c));
        }
    }
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return CheckResult::allowed();
    }
    let mut data = Vec::new();
    if !found.types.is_empty() {
        data.push(format!(
            "{} {}",
            pluralize("type", "types", found.types.len()),
            join_quote(&found.types)
        ));
    }
    if found.user {
        data.push("user may not be set".to_string());
    }
    if found.role {
        data.push("role may not be set".to_string());
    }
    CheckResult::forbidden(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters.join(" and "),
            data.join("; ")
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
        let engine = json!({"spec": {"containers": [{"name": "a", "securityContext": {"seLinuxOptions": {"type": "container_engine_t"}}}]}});
        run(
            v1_31,
            &[
                (
                    "container types and level",
                    json!({"spec": {"securityContext": {"seLinuxOptions": {"type": "container_t", "level": "s0:c1"}},
                        "containers": [{"name": "a", "securityContext": {"seLinuxOptions": {"type": "container_init_t"}}}]}}),
                    None,
                ),
                ("container_engine_t from 1.31", engine.clone(), None),
                (
                    "type, user and role",
                    json!({"spec": {"securityContext": {"seLinuxOptions": {"type": "spc_t"}},
                        "initContainers": [{"name": "i", "securityContext": {"seLinuxOptions": {"user": "root"}}}],
                        "containers": [{"name": "a", "securityContext": {"seLinuxOptions": {"type": "unconfined_t", "role": "sysadm_r"}}}]}}),
                    Some((
                        "seLinuxOptions",
                        r#"pod and containers "i", "a" set forbidden securityContext.seLinuxOptions: types "spc_t", "unconfined_t"; user may not be set; role may not be set"#,
                    )),
                ),
            ],
        );
        run(
            v1_0,
            &[(
                "container_engine_t before 1.31",
                engine,
                Some((
                    "seLinuxOptions",
                    r#"container "a" set forbidden securityContext.seLinuxOptions: type "container_engine_t""#,
                )),
            )],
        );
    }
}
