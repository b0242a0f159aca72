//! Pod and container securityContext validation (upstream's
//! `validatePodSpecSecurityContext`, `ValidateSecurityContext`,
//! `validateSysctls`, `validateSeccompProfileField`,
//! `validateAppArmorProfileField`, `validateHostUsers`), on the wire form.
//!
//! Upstream accepts any capability name (the runtime refuses unknown ones);
//! so does Berth.

use serde_json::{Map, Value};

use super::{FieldError, inclusive_range_error, opt_arr, opt_int, opt_obj, opt_str};

/// Upstream's sysctl name regex (`sysctlContainSlashRegexp`), as its
/// validation message prints it.
pub const SYSCTL_NAME_REGEX: &str =
    r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$";
/// Upstream's SysctlMaxLength.
pub const SYSCTL_MAX_LENGTH: usize = 253;

fn is_sysctl_segment(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter().all(|&c| alnum(c) || c == b'-' || c == b'_')
}

/// Upstream's IsValidSysctlName: at most 253 characters of segments
/// separated by `.` or `/`.
pub fn is_valid_sysctl_name(name: &str) -> bool {
    name.len() <= SYSCTL_MAX_LENGTH && name.split(['.', '/']).all(is_sysctl_segment)
}

/// The kernel namespace of a sysctl, as upstream's utilsysctl.GetNamespace
/// (names with `/` separators normalised first).
fn sysctl_namespace(name: &str) -> Option<&'static str> {
    let name = if name
        .find(['.', '/'])
        .is_some_and(|i| name.as_bytes()[i] == b'/')
    {
        name.chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                o => o,
            })
            .collect()
    } else {
        name.to_string()
    };
    if name == "kernel.sem"
        || ["kernel.shm", "kernel.msg", "fs.mqueue."]
            .iter()
            .any(|p| name.starts_with(p))
    {
        Some("ipc")
    } else if name.starts_with("net.") {
        Some("net")
    } else {
        None
    }
}

const MAX_ID: i64 = i32::MAX as i64;

fn validate_id(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str) {
    if let Some(id) = opt_int(errs, v, path)
        && !(0..=MAX_ID).contains(&id)
    {
        errs.push(FieldError::invalid(
            path,
            id,
            inclusive_range_error(0, MAX_ID),
        ));
    }
}

fn validate_enum(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str, allowed: &[&str]) {
    if let Some(s) = opt_str(errs, v, path)
        && !allowed.contains(&s)
    {
        errs.push(FieldError::not_supported(path, s, allowed));
    }
}

/// `validateLocalDescendingPath`: relative, without `..`.
fn validate_local_descending_path(errs: &mut Vec<FieldError>, p: &str, path: &str) {
    if p.starts_with('/') {
        errs.push(FieldError::invalid(path, p, "must be a relative path"));
    }
    if p.split('/').any(|s| s == "..") {
        errs.push(FieldError::invalid(path, p, "must not contain '..'"));
    }
}

fn validate_seccomp_profile(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str) {
    let Some(sp) = opt_obj(errs, v, path) else {
        return;
    };
    let type_path = format!("{path}.type");
    let t = opt_str(errs, sp.get("type"), &type_path).unwrap_or("");
    let types = ["Localhost", "RuntimeDefault", "Unconfined"];
    match t {
        "" => errs.push(FieldError::required(
            &type_path,
            "type is required when seccompProfile is set",
        )),
        t if types.contains(&t) => {}
        other => errs.push(FieldError::not_supported(&type_path, other, &types)),
    }
    let lp_path = format!("{path}.localhostProfile");
    let lp = opt_str(errs, sp.get("localhostProfile"), &lp_path);
    match (t, lp) {
        ("Localhost", None) => errs.push(FieldError::required(
            &lp_path,
            "must be set when seccomp type is Localhost",
        )),
        ("Localhost", Some(p)) => validate_local_descending_path(errs, p, &lp_path),
        (_, Some(_)) => errs.push(FieldError::invalid(
            &lp_path,
            Value::Object(sp.clone()),
            "can only be set when seccomp type is Localhost",
        )),
        _ => {}
    }
}

fn validate_apparmor_profile(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str) {
    let Some(ap) = opt_obj(errs, v, path) else {
        return;
    };
    let type_path = format!("{path}.type");
    let t = opt_str(errs, ap.get("type"), &type_path).unwrap_or("");
    let types = ["Localhost", "RuntimeDefault", "Unconfined"];
    match t {
        "" => errs.push(FieldError::required(
            &type_path,
            "type is required when appArmorProfile is set",
        )),
        t if types.contains(&t) => {}
        other => errs.push(FieldError::not_supported(&type_path, other, &types)),
    }
    let lp_path = format!("{path}.localhostProfile");
    let lp = opt_str(errs, ap.get("localhostProfile"), &lp_path);
    match (t, lp) {
        ("Localhost", None) => errs.push(FieldError::required(
            &lp_path,
            "must be set when AppArmor type is Localhost",
        )),
        ("Localhost", Some(p)) => {
            if p.trim() != p {
                errs.push(FieldError::invalid(
                    &lp_path,
                    p,
                    "must not be padded with whitespace",
                ));
            } else if p.is_empty() {
                errs.push(FieldError::required(
                    &lp_path,
                    "must be set when AppArmor type is Localhost",
                ));
            }
            // PATH_MAX - 1.
            if p.len() > 4095 {
                errs.push(FieldError::too_long(&lp_path, 4095));
            }
        }
        (_, Some(_)) => errs.push(FieldError::invalid(
            &lp_path,
            Value::Object(ap.clone()),
            "can only be set when AppArmor type is Localhost",
        )),
        _ => {}
    }
}

fn validate_sysctls(
    errs: &mut Vec<FieldError>,
    v: Option<&Value>,
    path: &str,
    host_network: bool,
    host_ipc: bool,
) {
    let mut seen = std::collections::HashSet::new();
    for (i, s) in opt_arr(errs, v, path).iter().enumerate() {
        let name_path = format!("{path}[{i}].name");
        let name = opt_str(errs, s.get("name"), &name_path).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(&name_path, ""));
        } else if !is_valid_sysctl_name(name) {
            errs.push(FieldError::invalid(
                &name_path,
                name,
                format!(
                    "must have at most {SYSCTL_MAX_LENGTH} characters and match regex {SYSCTL_NAME_REGEX}"
                ),
            ));
        } else if !seen.insert(name.to_string()) {
            errs.push(FieldError::duplicate(&name_path, name));
        }
        // Upstream's ValidateHostSysctl (on create; a pod may not be updated
        // into a host namespace).
        match sysctl_namespace(name) {
            Some("net") if host_network => errs.push(FieldError::invalid(
                &name_path,
                name,
                "may not be specified when 'hostNetwork' is true",
            )),
            Some("ipc") if host_ipc => errs.push(FieldError::invalid(
                &name_path,
                name,
                "may not be specified when 'hostIPC' is true",
            )),
            _ => {}
        }
    }
}

fn validate_container_security_context(
    errs: &mut Vec<FieldError>,
    c: &Value,
    path: &str,
    host_users: bool,
) {
    let Some(sc) = opt_obj(errs, c.get("securityContext"), path) else {
        return;
    };
    validate_id(errs, sc.get("runAsUser"), &format!("{path}.runAsUser"));
    validate_id(errs, sc.get("runAsGroup"), &format!("{path}.runAsGroup"));
    let pm_path = format!("{path}.procMount");
    if let Some(pm) = opt_str(errs, sc.get("procMount"), &pm_path) {
        let types = ["Default", "Unmasked"];
        if !types.contains(&pm) {
            errs.push(FieldError::not_supported(&pm_path, pm, &types));
        } else if pm == "Unmasked" && host_users {
            errs.push(FieldError::invalid(
                &pm_path,
                pm,
                "`hostUsers` must be false to use `Unmasked`",
            ));
        }
    }
    if sc.get("allowPrivilegeEscalation").and_then(Value::as_bool) == Some(false) {
        let whole = || Value::Object(sc.clone());
        if sc.get("privileged").and_then(Value::as_bool) == Some(true) {
            errs.push(FieldError::invalid(
                path,
                whole(),
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            ));
        }
        let adds = sc
            .get("capabilities")
            .and_then(|c| c.get("add"))
            .and_then(Value::as_array);
        if adds
            .into_iter()
            .flatten()
            .any(|c| c.as_str() == Some("CAP_SYS_ADMIN"))
        {
            errs.push(FieldError::invalid(
                path,
                whole(),
                "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
            ));
        }
    }
    validate_seccomp_profile(
        errs,
        sc.get("seccompProfile"),
        &format!("{path}.seccompProfile"),
    );
    validate_apparmor_profile(
        errs,
        sc.get("appArmorProfile"),
        &format!("{path}.appArmorProfile"),
    );
}

/// The pod's securityContext and every container's, on a pod spec at `path`.
pub(super) fn validate_security(errs: &mut Vec<FieldError>, spec: &Map<String, Value>, path: &str) {
    let flag = |k: &str| spec.get(k).and_then(Value::as_bool).unwrap_or(false);
    let (host_network, host_ipc, host_pid) =
        (flag("hostNetwork"), flag("hostIPC"), flag("hostPID"));
    let sc_path = format!("{path}.securityContext");
    let sc = opt_obj(errs, spec.get("securityContext"), &sc_path);
    let host_users = spec
        .get("hostUsers")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    if let Some(sc) = sc {
        for f in ["runAsUser", "runAsGroup", "fsGroup"] {
            validate_id(errs, sc.get(f), &format!("{sc_path}.{f}"));
        }
        let sg_path = format!("{sc_path}.supplementalGroups");
        for (i, g) in opt_arr(errs, sc.get("supplementalGroups"), &sg_path)
            .iter()
            .enumerate()
        {
            validate_id(errs, Some(g), &format!("{sg_path}[{i}]"));
        }
        validate_enum(
            errs,
            sc.get("fsGroupChangePolicy"),
            &format!("{sc_path}.fsGroupChangePolicy"),
            &["OnRootMismatch", "Always"],
        );
        validate_enum(
            errs,
            sc.get("supplementalGroupsPolicy"),
            &format!("{sc_path}.supplementalGroupsPolicy"),
            &["Merge", "Strict"],
        );
        validate_enum(
            errs,
            sc.get("seLinuxChangePolicy"),
            &format!("{sc_path}.seLinuxChangePolicy"),
            &["MountOption", "Recursive"],
        );
        validate_sysctls(
            errs,
            sc.get("sysctls"),
            &format!("{sc_path}.sysctls"),
            host_network,
            host_ipc,
        );
        validate_seccomp_profile(
            errs,
            sc.get("seccompProfile"),
            &format!("{sc_path}.seccompProfile"),
        );
        validate_apparmor_profile(
            errs,
            sc.get("appArmorProfile"),
            &format!("{sc_path}.appArmorProfile"),
        );
    }
    // validateHostUsers: a user namespace does not go with the host's others.
    if !host_users {
        for (on, field) in [
            (host_network, "hostNetwork"),
            (host_pid, "HostPID"),
            (host_ipc, "HostIPC"),
        ] {
            if on {
                errs.push(FieldError::forbidden(
                    format!("{path}.{field}"),
                    "when `pod.Spec.HostUsers` is false",
                ));
            }
        }
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        let Some(cs) = spec.get(list).and_then(Value::as_array) else {
            continue;
        };
        for (i, c) in cs.iter().enumerate() {
            if c.get("securityContext").is_some_and(|v| !v.is_null()) {
                let p = format!("{path}.{list}[{i}].securityContext");
                validate_container_security_context(errs, c, &p, host_users);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(spec: Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate_security(&mut errs, spec.as_object().unwrap(), "spec");
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn sysctl_names_follow_upstreams_regex() {
        for (name, ok) in [
            ("net.ipv4.ip_local_port_range", true),
            ("kernel.shm_rmid_forced", true),
            ("net/ipv4/conf/eth0.100/rp_filter", true),
            ("net.ipv4.conf.eth0/100.rp_filter", true),
            ("Net.ipv4", false),
            ("net..ipv4", false),
            ("net.ipv4.", false),
            ("-net", false),
            ("", false),
        ] {
            assert_eq!(is_valid_sysctl_name(name), ok, "{name}");
        }
        assert!(!is_valid_sysctl_name(&"a".repeat(254)));
    }

    #[test]
    fn security_context_table() {
        let c = |sc: Value| json!({"containers": [{"name": "c", "securityContext": sc}]});
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (
                c(json!({"runAsUser": 1000, "allowPrivilegeEscalation": false})),
                vec![],
            ),
            (
                c(json!({"runAsUser": -1})),
                vec![
                    "spec.containers[0].securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
                ],
            ),
            (
                c(json!({"procMount": "Weird"})),
                vec![
                    "spec.containers[0].securityContext.procMount: Unsupported value: \"Weird\": supported values: \"Default\", \"Unmasked\"",
                ],
            ),
            (
                c(json!({"procMount": "Unmasked"})),
                vec![
                    "spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`",
                ],
            ),
            (
                c(json!({"allowPrivilegeEscalation": false, "privileged": true})),
                vec!["cannot set `allowPrivilegeEscalation` to false and `privileged` to true"],
            ),
            (
                c(
                    json!({"allowPrivilegeEscalation": false, "capabilities": {"add": ["CAP_SYS_ADMIN"]}}),
                ),
                vec![
                    "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
                ],
            ),
            // Any capability name is accepted, as upstream.
            (
                c(json!({"capabilities": {"add": ["NOT_A_CAP"], "drop": ["ALL"]}})),
                vec![],
            ),
            (
                c(json!({"seccompProfile": {"type": "Localhost"}})),
                vec![
                    "spec.containers[0].securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost",
                ],
            ),
            (
                c(
                    json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "../x.json"}}),
                ),
                vec![
                    "seccompProfile.localhostProfile: Invalid value: \"../x.json\": must not contain '..'",
                ],
            ),
            (
                c(
                    json!({"seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "x.json"}}),
                ),
                vec!["can only be set when seccomp type is Localhost"],
            ),
            (
                c(json!({"seccompProfile": {}})),
                vec![
                    "seccompProfile.type: Required value: type is required when seccompProfile is set",
                ],
            ),
            (
                c(json!({"appArmorProfile": {"type": "Localhost", "localhostProfile": " p"}})),
                vec![
                    "appArmorProfile.localhostProfile: Invalid value: \" p\": must not be padded with whitespace",
                ],
            ),
            (
                json!({"securityContext": {"sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1 2"},
                    {"name": "net.ipv4.ip_local_port_range", "value": "1 2"}, {"name": "Bad..name", "value": "1"}]},
                    "containers": []}),
                vec![
                    "spec.securityContext.sysctls[1].name: Duplicate value: \"net.ipv4.ip_local_port_range\"",
                    "spec.securityContext.sysctls[2].name: Invalid value: \"Bad..name\": must have at most 253 characters and match regex",
                ],
            ),
            (
                json!({"hostNetwork": true, "securityContext": {"sysctls": [{"name": "net.core.somaxconn", "value": "1"}]}, "containers": []}),
                vec!["may not be specified when 'hostNetwork' is true"],
            ),
            (
                json!({"hostIPC": true, "securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}, "containers": []}),
                vec!["may not be specified when 'hostIPC' is true"],
            ),
            (
                json!({"hostPID": true, "hostUsers": false, "containers": []}),
                vec!["spec.HostPID: Forbidden: when `pod.Spec.HostUsers` is false"],
            ),
            (
                json!({"securityContext": {"fsGroup": 3000000000i64, "supplementalGroupsPolicy": "Loose"}, "containers": []}),
                vec![
                    "spec.securityContext.fsGroup: Invalid value: 3000000000: must be between 0 and 2147483647, inclusive",
                    "spec.securityContext.supplementalGroupsPolicy: Unsupported value: \"Loose\"",
                ],
            ),
        ];
        for (spec, want) in cases {
            let got = check(spec.clone());
            assert_eq!(got.len(), want.len(), "{spec}: {got:?}");
            for (g, w) in got.iter().zip(&want) {
                assert!(g.contains(w), "{spec}: {g:?} lacks {w:?}");
            }
        }
    }
}
