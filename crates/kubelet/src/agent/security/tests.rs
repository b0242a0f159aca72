use std::path::Path;

use serde_json::{Value, json};

use super::*;

/// (pod securityContext, container securityContext, image uid, image user, verdict).
type NonRootCase<'a> = (Value, Value, Option<i64>, &'a str, Result<(), String>);
/// (sysctl, hostNetwork, hostIPC, allowlist, verdict).
type SysctlCase<'a> = (&'a str, bool, bool, &'a SysctlAllowlist, Result<(), String>);

fn pod(spec: Value) -> Pod {
    pod_with(spec, json!({}))
}

fn pod_with(spec: Value, annotations: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "annotations": annotations},
        "spec": spec,
    }))
    .unwrap()
}

/// A pod with one container `c` with securityContext `csc` and the pod-level `psc`.
fn pod_sc(psc: Value, csc: Value) -> Pod {
    pod(json!({"securityContext": psc, "containers": [{"name": "c", "securityContext": csc}]}))
}

fn first(p: &Pod) -> &Container {
    &p.spec.as_ref().unwrap().containers[0]
}

#[test]
fn effective_context_merges_pod_defaults_under_container_fields() {
    let cases = [
        // (pod, container, want runAsUser, runAsGroup, runAsNonRoot, readOnly)
        (json!({}), json!({}), None, None, None, None),
        (
            json!({"runAsUser": 1000, "runAsGroup": 2000, "runAsNonRoot": true}),
            json!({}),
            Some(1000),
            Some(2000),
            Some(true),
            None,
        ),
        (
            json!({"runAsUser": 1000, "runAsNonRoot": true}),
            json!({"runAsUser": 0, "runAsNonRoot": false, "readOnlyRootFilesystem": true}),
            Some(0),
            None,
            Some(false),
            Some(true),
        ),
        (
            json!({}),
            json!({"runAsGroup": 5}),
            None,
            Some(5),
            None,
            None,
        ),
    ];
    for (psc, csc, user, group, non_root, ro) in cases {
        let p = pod_sc(psc.clone(), csc.clone());
        let e = effective_security_context(&p, first(&p));
        assert_eq!(
            (
                e.run_as_user,
                e.run_as_group,
                e.run_as_non_root,
                e.read_only_root_filesystem
            ),
            (user, group, non_root, ro),
            "{psc} {csc}"
        );
    }
}

#[test]
fn run_as_non_root_table() {
    let root_msg =
        "container has runAsNonRoot and image will run as root (pod: \"p_ns(u1)\", container: c)";
    let cases: Vec<NonRootCase> = vec![
        // Not asked: anything goes.
        (json!({}), json!({}), Some(0), "", Ok(())),
        // runAsUser decides, not the image.
        (
            json!({"runAsNonRoot": true}),
            json!({"runAsUser": 1000}),
            Some(0),
            "",
            Ok(()),
        ),
        (
            json!({"runAsNonRoot": true, "runAsUser": 0}),
            json!({}),
            None,
            "",
            Err(
                "container's runAsUser breaks non-root policy (pod: \"p_ns(u1)\", container: c)"
                    .into(),
            ),
        ),
        // The image's uid.
        (json!({"runAsNonRoot": true}), json!({}), Some(0), "", Err(root_msg.into())),
        (json!({}), json!({"runAsNonRoot": true}), Some(65534), "", Ok(())),
        // No USER in the image: root, as upstream.
        (json!({"runAsNonRoot": true}), json!({}), None, "", Err(root_msg.into())),
        (
            json!({"runAsNonRoot": true}),
            json!({}),
            None,
            "nobody",
            Err("container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: \"p_ns(u1)\", container: c)".into()),
        ),
        // The container turns it off.
        (
            json!({"runAsNonRoot": true}),
            json!({"runAsNonRoot": false}),
            Some(0),
            "",
            Ok(()),
        ),
    ];
    for (psc, csc, uid, user, want) in cases {
        let p = pod_sc(psc.clone(), csc.clone());
        assert_eq!(
            verify_run_as_non_root(&p, first(&p), uid, user),
            want,
            "{psc} {csc} {uid:?} {user}"
        );
    }
    let p = pod_sc(json!({"runAsNonRoot": true}), json!({}));
    assert!(needs_image_user(&p, first(&p)));
    let p = pod_sc(json!({"runAsNonRoot": true, "runAsUser": 7}), json!({}));
    assert!(!needs_image_user(&p, first(&p)));
}

#[test]
fn container_security_table() {
    let root = Path::new("/var/lib/berth/agent/seccomp");
    let masked: Vec<String> = DEFAULT_MASKED_PATHS.iter().map(|s| s.to_string()).collect();
    let cases: Vec<(Value, Value, ContainerSecurity)> = vec![
        // Nothing asked: upstream's defaults (Unconfined seccomp, masked /proc).
        (
            json!({}),
            json!({}),
            ContainerSecurity {
                masked_paths: masked.clone(),
                readonly_paths: DEFAULT_READONLY_PATHS
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                ..Default::default()
            },
        ),
        (
            json!({"seccompProfile": {"type": "RuntimeDefault"}}),
            json!({"capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]},
                   "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                   "procMount": "Unmasked"}),
            ContainerSecurity {
                capabilities_add: vec!["NET_ADMIN".into()],
                capabilities_drop: vec!["ALL".into()],
                no_new_privs: true,
                readonly_rootfs: true,
                seccomp: SecurityProfile::RuntimeDefault,
                ..Default::default()
            },
        ),
        // The container's seccomp wins; Localhost is under the agent's root.
        (
            json!({"seccompProfile": {"type": "RuntimeDefault"}}),
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"},
                   "allowPrivilegeEscalation": true, "privileged": true}),
            ContainerSecurity {
                privileged: true,
                seccomp: SecurityProfile::Localhost(
                    "/var/lib/berth/agent/seccomp/profiles/audit.json".into(),
                ),
                masked_paths: masked.clone(),
                readonly_paths: DEFAULT_READONLY_PATHS
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                ..Default::default()
            },
        ),
        (
            json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
            json!({"seccompProfile": {"type": "Unconfined"}, "procMount": "Default"}),
            ContainerSecurity {
                apparmor: Some(SecurityProfile::RuntimeDefault),
                masked_paths: masked.clone(),
                readonly_paths: DEFAULT_READONLY_PATHS
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                ..Default::default()
            },
        ),
    ];
    for (psc, csc, want) in cases {
        let p = pod_sc(psc.clone(), csc.clone());
        assert_eq!(
            container_security(&p, first(&p), root),
            Ok(want),
            "{psc} {csc}"
        );
    }
    let p = pod_sc(json!({}), json!({"seccompProfile": {"type": "Localhost"}}));
    assert_eq!(
        container_security(&p, first(&p), root),
        Err("localhostProfile must be set if seccompProfile type is Localhost.".into())
    );
}

#[test]
fn apparmor_profile_sources_in_upstreams_order() {
    let key = format!("{APPARMOR_ANNOTATION_PREFIX}c");
    let cases: Vec<(Value, Value, Value, Option<SecurityProfile>)> = vec![
        (json!({}), json!({}), json!({}), None),
        // The legacy annotation.
        (
            json!({}),
            json!({}),
            json!({&key: "localhost/k8s-deny-write"}),
            Some(SecurityProfile::Localhost("k8s-deny-write".into())),
        ),
        // The annotation beats the pod's field, the container's field beats both.
        (
            json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
            json!({}),
            json!({&key: "unconfined"}),
            Some(SecurityProfile::Unconfined),
        ),
        (
            json!({"appArmorProfile": {"type": "Unconfined"}}),
            json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
            json!({&key: "unconfined"}),
            Some(SecurityProfile::RuntimeDefault),
        ),
    ];
    for (psc, csc, ann, want) in cases {
        let p = pod_with(
            json!({"securityContext": psc, "containers": [{"name": "c", "securityContext": csc}]}),
            ann.clone(),
        );
        assert_eq!(
            apparmor_profile(&p, first(&p)),
            Ok(want),
            "{psc} {csc} {ann}"
        );
    }
}

#[test]
fn apparmor_admission_needs_a_host_with_apparmor() {
    let key = format!("{APPARMOR_ANNOTATION_PREFIX}c");
    let no_host = Admission {
        apparmor_host_error: apparmor_host_error(Some("N\n"), true),
        ..Default::default()
    };
    let with_host = Admission {
        apparmor_host_error: apparmor_host_error(Some("Y\n"), true),
        ..Default::default()
    };
    assert_eq!(with_host.apparmor_host_error, None);
    assert_eq!(
        apparmor_host_error(None, false).as_deref(),
        Some("AppArmor is not enabled on the host")
    );
    let refused = Some((
        APPARMOR_REASON,
        "Cannot enforce AppArmor: AppArmor is not enabled on the host".to_string(),
    ));
    let cases: Vec<(Value, Value, bool)> = vec![
        (json!({"containers": [{"name": "c"}]}), json!({}), false),
        (
            json!({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}, "containers": [{"name": "c"}]}),
            json!({}),
            false,
        ),
        (
            json!({"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}, "containers": [{"name": "c"}]}),
            json!({}),
            true,
        ),
        (
            json!({"initContainers": [{"name": "i", "securityContext": {"appArmorProfile": {"type": "Localhost", "localhostProfile": "x"}}}],
                   "containers": [{"name": "c"}]}),
            json!({}),
            true,
        ),
        (
            json!({"containers": [{"name": "c"}]}),
            json!({&key: "runtime/default"}),
            true,
        ),
        (
            json!({"containers": [{"name": "c"}]}),
            json!({&key: "unconfined"}),
            false,
        ),
    ];
    for (spec, ann, required) in cases {
        let p = pod_with(spec.clone(), ann.clone());
        assert_eq!(apparmor_required(&p), required, "{spec} {ann}");
        assert_eq!(
            no_host.admit(&p),
            if required { refused.clone() } else { None },
            "{spec} {ann}"
        );
        assert_eq!(with_host.admit(&p), None, "{spec} {ann}");
    }
}

#[test]
fn sysctl_allowlist_table() {
    let safe = safe_sysctls(Some((6, 1)));
    assert_eq!(safe.len(), SAFE_SYSCTLS.len());
    // An old kernel loses the ones it does not namespace.
    let old = safe_sysctls(Some((4, 4)));
    assert!(old.contains(&"net.ipv4.ip_local_reserved_ports".to_string()));
    assert!(!old.contains(&"net.ipv4.tcp_keepalive_time".to_string()));
    assert!(!safe_sysctls(None).contains(&"net.ipv4.tcp_rmem".to_string()));

    let mut patterns = safe.clone();
    patterns.extend(["kernel.msg*".to_string(), "net.core.somaxconn".to_string()]);
    let w = SysctlAllowlist::new(&patterns).unwrap();
    let only_safe = SysctlAllowlist::new(&safe).unwrap();
    let sysctl_pod = |name: &str, host_net: bool, host_ipc: bool| {
        pod(json!({"hostNetwork": host_net, "hostIPC": host_ipc,
            "securityContext": {"sysctls": [{"name": name, "value": "1"}]},
            "containers": [{"name": "c"}]}))
    };
    let cases: Vec<SysctlCase> = vec![
        ("kernel.shm_rmid_forced", false, false, &only_safe, Ok(())),
        ("net.ipv4.tcp_keepalive_time", false, false, &only_safe, Ok(())),
        (
            "net.core.somaxconn",
            false,
            false,
            &only_safe,
            Err("forbidden sysctl: \"net.core.somaxconn\" not allowlisted".into()),
        ),
        ("net.core.somaxconn", false, false, &w, Ok(())),
        ("kernel.msgmax", false, false, &w, Ok(())),
        // Slash-separated names are normalised first.
        ("net/core/somaxconn", false, false, &w, Ok(())),
        (
            "net.ipv4.ip_local_port_range",
            true,
            false,
            &only_safe,
            Err(
                "forbidden sysctl: \"net.ipv4.ip_local_port_range\" not allowed with host net enabled"
                    .into(),
            ),
        ),
        (
            "kernel.msgmax",
            false,
            true,
            &w,
            Err("forbidden sysctl: \"kernel.msgmax\" not allowed with host ipc enabled".into()),
        ),
    ];
    for (name, net, ipc, list, want) in cases {
        assert_eq!(
            list.admit(&sysctl_pod(name, net, ipc)),
            want,
            "{name} net={net} ipc={ipc}"
        );
    }
    let adm = Admission {
        sysctls: only_safe,
        ..Default::default()
    };
    assert_eq!(
        adm.admit(&sysctl_pod("kernel.sem", false, false)),
        Some((
            SYSCTL_FORBIDDEN_REASON,
            "forbidden sysctl: \"kernel.sem\" not allowlisted".into()
        ))
    );
}

#[test]
fn unsafe_sysctl_patterns_must_be_namespaced_and_well_formed() {
    for (p, ok) in [
        ("net.*", true),
        ("kernel.shm*", true),
        ("kernel.sem", true),
        ("fs.mqueue.*", true),
        ("vm.swappiness", false),
        ("kernel.*", false),
        ("net..core", false),
        ("Net.core", false),
    ] {
        assert_eq!(
            SysctlAllowlist::new(&[p.to_string()]).is_ok(),
            ok,
            "{p}: {:?}",
            SysctlAllowlist::new(&[p.to_string()])
        );
    }
    assert_eq!(
        SysctlAllowlist::new(&["vm.swappiness".into()]),
        Err("the sysctls \"vm.swappiness\" are not known to be namespaced".into())
    );
}

#[test]
fn names_kernels_and_sandboxes() {
    for (name, want) in [
        ("net.ipv4.ip_forward", "net.ipv4.ip_forward"),
        (
            "net/ipv4/conf/eno2.100/rp_filter",
            "net.ipv4.conf.eno2/100.rp_filter",
        ),
        (
            "net.ipv4.conf.eno2/100.rp_filter",
            "net.ipv4.conf.eno2/100.rp_filter",
        ),
    ] {
        assert_eq!(normalize_sysctl_name(name), want);
    }
    for (release, want) in [
        ("6.18.44-fc-v1098", Some((6, 18))),
        ("4.19.0-18-amd64", Some((4, 19))),
        ("garbage", None),
    ] {
        assert_eq!(parse_kernel_version(release), want, "{release}");
    }
    let root = Path::new("/s");
    let userns = pod(json!({"hostUsers": false, "containers": [{"name": "c"}]}));
    assert_eq!(
        sandbox_error(&userns, root, false).as_deref(),
        Some("RuntimeClass handler \"\" does not support user namespaces")
    );
    assert!(sandbox_error(&userns, root, true).is_some());
    let plain = pod(json!({"hostUsers": true, "containers": [{"name": "c"}]}));
    assert_eq!(sandbox_error(&plain, root, false), None);
    let bad = pod(
        json!({"securityContext": {"seccompProfile": {"type": "Localhost"}}, "containers": [{"name": "c"}]}),
    );
    assert!(sandbox_error(&bad, root, false).is_some());
    let privileged = pod(
        json!({"containers": [{"name": "a"}, {"name": "b", "securityContext": {"privileged": true}}]}),
    );
    assert!(has_privileged_container(&privileged));
    assert!(!has_privileged_container(&plain));
}

#[test]
fn strict_supplemental_groups_need_a_runtime_that_honours_them() {
    let strict = pod(
        json!({"securityContext": {"supplementalGroupsPolicy": "Strict"},
        "containers": [{"name": "c"}]}),
    );
    let merge = pod(
        json!({"securityContext": {"supplementalGroupsPolicy": "Merge"},
        "containers": [{"name": "c"}]}),
    );
    let refused = Some((
        SUPPLEMENTAL_GROUPS_POLICY_REASON,
        "SupplementalGroupsPolicy=Strict is not supported in this node".to_string(),
    ));
    let without = Admission::default();
    let with = Admission {
        runtime: RuntimeFeatures {
            supplemental_groups_policy: true,
            ..Default::default()
        },
        ..Default::default()
    };
    for (p, adm, want) in [
        (&strict, &without, refused.clone()),
        (&strict, &with, None),
        (&merge, &without, None),
    ] {
        assert_eq!(adm.admit(p), want);
    }
}
