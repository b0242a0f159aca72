//! `sysctls` (baseline): only the safe, namespaced sysctls, a set that grew in
//! 1.27, 1.29 and 1.32.

use serde_json::Value;

use super::{Check, pod_security_context, versioned};
use crate::api::Level;
use crate::registry::CheckResult;

pub fn check() -> Check {
    Check {
        id: "sysctls",
        level: Level::Baseline,
        versions: vec![
            versioned(0, v1_0),
            versioned(27, v1_27),
            versioned(29, v1_29),
            versioned(32, v1_32),
        ],
    }
}

const SAFE_1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
const ADDED_1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
const ADDED_1_29: &[&str] = &[
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
const ADDED_1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];

fn v1_0(meta: &Value, spec: &Value) -> CheckResult {
    sysctls(meta, spec, &[SAFE_1_0])
}
fn v1_27(meta: &Value, spec: &Value) -> CheckResult {
    sysctls(meta, spec, &[SAFE_1_0, ADDED_1_27])
}
fn v1_29(meta: &Value, spec: &Value) -> CheckResult {
    sysctls(meta, spec, &[SAFE_1_0, ADDED_1_27, ADDED_1_29])
}
fn v1_32(meta: &Value, spec: &Value) -> CheckResult {
    sysctls(meta, spec, &[SAFE_1_0, ADDED_1_27, ADDED_1_29, ADDED_1_32])
}

fn sysctls(_meta: &Value, spec: &Value, safe: &[&[&str]]) -> CheckResult {
    let forbidden: Vec<&str> = pod_security_context(spec)
        .and_then(|sc| sc.get("sysctls"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| s.get("name").and_then(Value::as_str).unwrap_or(""))
        .filter(|n| !safe.iter().any(|set| set.contains(n)))
        .collect();
    if forbidden.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden("forbidden sysctls", forbidden.join(", "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::run;
    use super::*;

    #[test]
    fn table() {
        let rmem = json!({"spec": {"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_rmem", "value": "4096 87380 16777216"}]}}});
        run(
            v1_32,
            &[
                (
                    "safe set",
                    json!({"spec": {"securityContext": {"sysctls": [
                        {"name": "kernel.shm_rmid_forced", "value": "0"},
                        {"name": "net.ipv4.ip_local_reserved_ports", "value": "80"},
                        {"name": "net.ipv4.tcp_keepalive_time", "value": "60"}]}}}),
                    None,
                ),
                ("tcp_rmem from 1.32", rmem.clone(), None),
                (
                    "unsafe, in order",
                    json!({"spec": {"securityContext": {"sysctls": [
                        {"name": "kernel.msgmax", "value": "1"},
                        {"name": "kernel.shm_rmid_forced", "value": "0"},
                        {"name": "a.b", "value": "1"}]}}}),
                    Some(("forbidden sysctls", "kernel.msgmax, a.b")),
                ),
            ],
        );
        run(
            v1_29,
            &[(
                "tcp_rmem before 1.32",
                rmem,
                Some(("forbidden sysctls", "net.ipv4.tcp_rmem")),
            )],
        );
    }
}
