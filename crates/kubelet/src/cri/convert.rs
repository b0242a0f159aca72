//! Berth's runtime types ↔ CRI v1 messages.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use k8s_cri::v1 as cri;

use crate::runtime::{
    ContainerConfig, ContainerState, ContainerStatus, ImageInfo, LinuxResources, PidNamespace,
    Protocol, SandboxConfig, SandboxState, SandboxStatus, SecurityProfile,
};

/// CRI timestamps are nanoseconds since the epoch; 0 means "not set".
fn time(nanos: i64) -> Option<DateTime<Utc>> {
    (nanos > 0).then(|| DateTime::from_timestamp_nanos(nanos))
}

fn map(m: &BTreeMap<String, String>) -> HashMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn btree(m: HashMap<String, String>) -> BTreeMap<String, String> {
    m.into_iter().collect()
}

pub(super) fn image_spec(image: &str) -> cri::ImageSpec {
    cri::ImageSpec {
        image: image.to_string(),
        ..Default::default()
    }
}

fn namespace_mode(host: bool) -> i32 {
    if host {
        cri::NamespaceMode::Node as i32
    } else {
        cri::NamespaceMode::Pod as i32
    }
}

fn pid_mode(p: PidNamespace) -> i32 {
    match p {
        PidNamespace::Container => cri::NamespaceMode::Container as i32,
        PidNamespace::Pod => cri::NamespaceMode::Pod as i32,
        PidNamespace::Node => cri::NamespaceMode::Node as i32,
    }
}

fn security_profile(p: &SecurityProfile) -> cri::SecurityProfile {
    let (kind, localhost_ref) = match p {
        SecurityProfile::RuntimeDefault => (cri::security_profile::ProfileType::RuntimeDefault, ""),
        SecurityProfile::Unconfined => (cri::security_profile::ProfileType::Unconfined, ""),
        SecurityProfile::Localhost(r) => {
            (cri::security_profile::ProfileType::Localhost, r.as_str())
        }
    };
    cri::SecurityProfile {
        profile_type: kind as i32,
        localhost_ref: localhost_ref.to_string(),
    }
}

/// The deprecated string form of an AppArmor profile, which upstream still
/// sends beside the typed one for runtimes that only read it.
fn apparmor_profile_name(p: &SecurityProfile) -> String {
    match p {
        SecurityProfile::RuntimeDefault => "runtime/default".into(),
        SecurityProfile::Unconfined => "unconfined".into(),
        SecurityProfile::Localhost(name) => format!("localhost/{name}"),
    }
}

/// The features a CRI `Status` answer reports: user namespaces from the
/// default handler (named ""), the supplemental groups policy runtime-wide;
/// runtimes that report neither (containerd 1.6) support neither.
pub(super) fn runtime_features(r: &cri::StatusResponse) -> crate::runtime::RuntimeFeatures {
    crate::runtime::RuntimeFeatures {
        user_namespaces: r
            .runtime_handlers
            .iter()
            .find(|h| h.name.is_empty())
            .and_then(|h| h.features.as_ref())
            .is_some_and(|f| f.user_namespaces),
        supplemental_groups_policy: r
            .features
            .as_ref()
            .is_some_and(|f| f.supplemental_groups_policy),
    }
}

pub(super) fn sandbox_config(c: &SandboxConfig) -> cri::PodSandboxConfig {
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: c.name.clone(),
            uid: c.uid.clone(),
            namespace: c.namespace.clone(),
            attempt: c.attempt,
        }),
        hostname: c.hostname.clone(),
        log_directory: c.log_directory.clone(),
        dns_config: c.dns.as_ref().map(|d| cri::DnsConfig {
            servers: d.servers.clone(),
            searches: d.searches.clone(),
            options: d.options.clone(),
        }),
        port_mappings: c
            .port_mappings
            .iter()
            .map(|p| cri::PortMapping {
                protocol: match p.protocol {
                    Protocol::Tcp => cri::Protocol::Tcp as i32,
                    Protocol::Udp => cri::Protocol::Udp as i32,
                    Protocol::Sctp => cri::Protocol::Sctp as i32,
                },
                container_port: p.container_port,
                host_port: p.host_port,
                host_ip: p.host_ip.clone(),
            })
            .collect(),
        labels: map(&c.labels),
        annotations: map(&c.annotations),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: c.cgroup_parent.clone(),
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    network: namespace_mode(c.host_network),
                    pid: pid_mode(c.pid),
                    ipc: namespace_mode(c.host_ipc),
                    ..Default::default()
                }),
                run_as_user: c.run_as_user.map(|value| cri::Int64Value { value }),
                run_as_group: c.run_as_group.map(|value| cri::Int64Value { value }),
                supplemental_groups: c.supplemental_groups.clone(),
                privileged: c.privileged,
                seccomp: Some(security_profile(&c.seccomp)),
                ..Default::default()
            }),
            sysctls: map(&c.sysctls),
            ..Default::default()
        }),
        windows: None,
    }
}

pub(super) fn resources(r: &LinuxResources) -> cri::LinuxContainerResources {
    cri::LinuxContainerResources {
        cpu_period: r.cpu_period,
        cpu_quota: r.cpu_quota,
        cpu_shares: r.cpu_shares,
        memory_limit_in_bytes: r.memory_limit_in_bytes,
        oom_score_adj: r.oom_score_adj,
        cpuset_cpus: r.cpuset_cpus.clone(),
        ..Default::default()
    }
}

/// A container joins its sandbox's namespaces as upstream's kubelet asks:
/// the same modes as the pod's, except an ephemeral container's PID
/// namespace, which is its target's.
// The deprecated `apparmor_profile` string is still sent beside the typed
// field, as upstream's kubelet does, for runtimes that read only it.
#[allow(deprecated)]
pub(super) fn container_config(
    c: &ContainerConfig,
    sandbox: &SandboxConfig,
) -> cri::ContainerConfig {
    let pid = match &c.target_container_id {
        Some(_) => cri::NamespaceMode::Target as i32,
        None => pid_mode(sandbox.pid),
    };
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: c.name.clone(),
            attempt: c.attempt,
        }),
        image: Some(image_spec(&c.image)),
        command: c.command.clone(),
        args: c.args.clone(),
        working_dir: c.working_dir.clone(),
        envs: c
            .envs
            .iter()
            .map(|(k, v)| cri::KeyValue {
                key: k.clone(),
                value: v.clone(),
            })
            .collect(),
        mounts: c
            .mounts
            .iter()
            .map(|m| cri::Mount {
                container_path: m.container_path.clone(),
                host_path: m.host_path.clone(),
                readonly: m.readonly,
                ..Default::default()
            })
            .collect(),
        devices: c
            .devices
            .iter()
            .map(|d| cri::Device {
                container_path: d.container_path.clone(),
                host_path: d.host_path.clone(),
                permissions: d.permissions.clone(),
            })
            .collect(),
        cdi_devices: c
            .cdi_devices
            .iter()
            .map(|name| cri::CdiDevice { name: name.clone() })
            .collect(),
        labels: map(&c.labels),
        annotations: map(&c.annotations),
        log_path: c.log_path.clone(),
        stdin: c.stdin,
        stdin_once: c.stdin_once,
        tty: c.tty,
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(resources(&c.resources)),
            security_context: Some(cri::LinuxContainerSecurityContext {
                privileged: c.privileged,
                namespace_options: Some(cri::NamespaceOption {
                    network: namespace_mode(sandbox.host_network),
                    pid,
                    ipc: namespace_mode(sandbox.host_ipc),
                    target_id: c.target_container_id.clone().unwrap_or_default(),
                    userns_options: None,
                }),
                run_as_user: c.run_as_user.map(|value| cri::Int64Value { value }),
                run_as_group: c.run_as_group.map(|value| cri::Int64Value { value }),
                run_as_username: c.run_as_username.clone(),
                readonly_rootfs: c.readonly_rootfs,
                supplemental_groups: c.supplemental_groups.clone(),
                supplemental_groups_policy: if c.supplemental_groups_strict {
                    cri::SupplementalGroupsPolicy::Strict as i32
                } else {
                    cri::SupplementalGroupsPolicy::Merge as i32
                },
                capabilities: (!c.capabilities_add.is_empty() || !c.capabilities_drop.is_empty())
                    .then(|| cri::Capability {
                        add_capabilities: c.capabilities_add.clone(),
                        drop_capabilities: c.capabilities_drop.clone(),
                        ..Default::default()
                    }),
                no_new_privs: c.no_new_privs,
                masked_paths: c.masked_paths.clone(),
                readonly_paths: c.readonly_paths.clone(),
                // Always explicit: an absent profile and RuntimeDefault (0)
                // must not be confused.
                seccomp: Some(security_profile(&c.seccomp)),
                apparmor: c.apparmor.as_ref().map(security_profile),
                apparmor_profile: c
                    .apparmor
                    .as_ref()
                    .map(apparmor_profile_name)
                    .unwrap_or_default(),
                ..Default::default()
            }),
        }),
        ..Default::default()
    }
}

fn sandbox_state(s: i32) -> SandboxState {
    if s == cri::PodSandboxState::SandboxReady as i32 {
        SandboxState::Ready
    } else {
        SandboxState::NotReady
    }
}

fn container_state(s: i32) -> ContainerState {
    match cri::ContainerState::try_from(s) {
        Ok(cri::ContainerState::ContainerCreated) => ContainerState::Created,
        Ok(cri::ContainerState::ContainerRunning) => ContainerState::Running,
        Ok(cri::ContainerState::ContainerExited) => ContainerState::Exited,
        _ => ContainerState::Unknown,
    }
}

pub(super) fn sandbox_status(s: cri::PodSandboxStatus) -> SandboxStatus {
    let md = s.metadata.unwrap_or_default();
    let mut ips = Vec::new();
    if let Some(n) = s.network {
        if !n.ip.is_empty() {
            ips.push(n.ip);
        }
        ips.extend(n.additional_ips.into_iter().map(|i| i.ip));
    }
    SandboxStatus {
        id: s.id,
        name: md.name,
        namespace: md.namespace,
        uid: md.uid,
        attempt: md.attempt,
        state: sandbox_state(s.state),
        created_at: time(s.created_at),
        ips,
        labels: btree(s.labels),
    }
}

pub(super) fn sandbox(s: cri::PodSandbox) -> SandboxStatus {
    let md = s.metadata.unwrap_or_default();
    SandboxStatus {
        id: s.id,
        name: md.name,
        namespace: md.namespace,
        uid: md.uid,
        attempt: md.attempt,
        state: sandbox_state(s.state),
        created_at: time(s.created_at),
        ips: Vec::new(),
        labels: btree(s.labels),
    }
}

pub(super) fn container_status(s: cri::ContainerStatus, sandbox_id: &str) -> ContainerStatus {
    let md = s.metadata.unwrap_or_default();
    ContainerStatus {
        id: s.id,
        sandbox_id: sandbox_id.to_string(),
        name: md.name,
        attempt: md.attempt,
        state: container_state(s.state),
        created_at: time(s.created_at),
        started_at: time(s.started_at),
        finished_at: time(s.finished_at),
        exit_code: s.exit_code,
        reason: s.reason,
        message: s.message,
        image: s.image.map(|i| i.image).unwrap_or_default(),
        image_ref: s.image_ref,
        labels: btree(s.labels),
        annotations: btree(s.annotations),
        log_path: s.log_path,
    }
}

pub(super) fn container(c: cri::Container) -> ContainerStatus {
    let md = c.metadata.unwrap_or_default();
    ContainerStatus {
        id: c.id,
        sandbox_id: c.pod_sandbox_id,
        name: md.name,
        attempt: md.attempt,
        state: container_state(c.state),
        created_at: time(c.created_at),
        started_at: None,
        finished_at: None,
        exit_code: 0,
        reason: String::new(),
        message: String::new(),
        image: c.image.map(|i| i.image).unwrap_or_default(),
        image_ref: c.image_ref,
        labels: btree(c.labels),
        annotations: btree(c.annotations),
        log_path: String::new(),
    }
}

pub(super) fn image(i: cri::Image) -> ImageInfo {
    ImageInfo {
        id: i.id,
        repo_tags: i.repo_tags,
        repo_digests: i.repo_digests,
        size: i.size,
        uid: i.uid.map(|u| u.value),
        username: i.username,
        pinned: i.pinned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{PortMapping, Protocol};

    #[test]
    fn sandbox_config_carries_identity_cgroup_and_namespaces() {
        let c = SandboxConfig {
            name: "web".into(),
            namespace: "default".into(),
            uid: "u1".into(),
            attempt: 2,
            cgroup_parent: "/berth/besteffort/podu1".into(),
            host_network: true,
            port_mappings: vec![PortMapping {
                protocol: Protocol::Udp,
                container_port: 53,
                host_port: 5353,
                host_ip: String::new(),
            }],
            ..Default::default()
        };
        let p = sandbox_config(&c);
        let md = p.metadata.unwrap();
        assert_eq!(
            (md.name.as_str(), md.uid.as_str(), md.attempt),
            ("web", "u1", 2)
        );
        let linux = p.linux.unwrap();
        assert_eq!(linux.cgroup_parent, "/berth/besteffort/podu1");
        let ns = linux.security_context.unwrap().namespace_options.unwrap();
        assert_eq!(ns.network, cri::NamespaceMode::Node as i32);
        assert_eq!(ns.pid, cri::NamespaceMode::Container as i32);
        assert_eq!(ns.ipc, cri::NamespaceMode::Pod as i32);
        assert_eq!(p.port_mappings[0].protocol, cri::Protocol::Udp as i32);
    }

    #[test]
    fn container_config_maps_resources_and_target_pid_namespace() {
        let c = ContainerConfig {
            name: "debugger".into(),
            image: "busybox:latest".into(),
            resources: LinuxResources {
                cpu_period: 100_000,
                cpu_quota: 50_000,
                cpu_shares: 512,
                memory_limit_in_bytes: 64 << 20,
                oom_score_adj: 1000,
                cpuset_cpus: "2-3".into(),
            },
            target_container_id: Some("abc".into()),
            envs: vec![("A".into(), "1".into())],
            ..Default::default()
        };
        let p = container_config(&c, &SandboxConfig::default());
        let linux = p.linux.unwrap();
        let r = linux.resources.unwrap();
        assert_eq!(
            (
                r.cpu_period,
                r.cpu_quota,
                r.cpu_shares,
                r.memory_limit_in_bytes,
                r.cpuset_cpus.as_str()
            ),
            (100_000, 50_000, 512, 64 << 20, "2-3")
        );
        let ns = linux.security_context.unwrap().namespace_options.unwrap();
        assert_eq!(ns.pid, cri::NamespaceMode::Target as i32);
        assert_eq!(ns.target_id, "abc");
        assert_eq!(p.envs[0].key, "A");
    }

    #[test]
    fn security_settings_reach_cri() {
        let c = ContainerConfig {
            name: "app".into(),
            run_as_username: "nobody".into(),
            capabilities_add: vec!["NET_ADMIN".into()],
            capabilities_drop: vec!["ALL".into()],
            no_new_privs: true,
            masked_paths: vec!["/proc/kcore".into()],
            readonly_paths: vec!["/proc/sys".into()],
            seccomp: SecurityProfile::RuntimeDefault,
            apparmor: Some(SecurityProfile::Localhost("deny-write".into())),
            ..Default::default()
        };
        let sb = SandboxConfig {
            privileged: true,
            seccomp: SecurityProfile::Localhost("/d/seccomp/a.json".into()),
            run_as_user: Some(1000),
            supplemental_groups: vec![3000],
            ..Default::default()
        };
        let sc = container_config(&c, &sb)
            .linux
            .unwrap()
            .security_context
            .unwrap();
        let caps = sc.capabilities.clone().unwrap();
        assert_eq!(
            (caps.add_capabilities, caps.drop_capabilities),
            (vec!["NET_ADMIN".to_string()], vec!["ALL".to_string()])
        );
        assert!(sc.no_new_privs);
        assert_eq!(sc.run_as_username, "nobody");
        assert_eq!(sc.masked_paths, vec!["/proc/kcore"]);
        assert_eq!(sc.readonly_paths, vec!["/proc/sys"]);
        let seccomp = sc.seccomp.clone().unwrap();
        assert_eq!(
            seccomp.profile_type,
            cri::security_profile::ProfileType::RuntimeDefault as i32
        );
        let aa = sc.apparmor.clone().unwrap();
        assert_eq!(
            (aa.profile_type, aa.localhost_ref.as_str()),
            (
                cri::security_profile::ProfileType::Localhost as i32,
                "deny-write"
            )
        );
        #[allow(deprecated)]
        let legacy = sc.apparmor_profile.clone();
        assert_eq!(legacy, "localhost/deny-write");
        // Without capabilities or AppArmor the runtime keeps its defaults;
        // seccomp is always explicit (Unconfined is upstream's default).
        let plain = container_config(&ContainerConfig::default(), &SandboxConfig::default())
            .linux
            .unwrap()
            .security_context
            .unwrap();
        assert!(plain.capabilities.is_none() && plain.apparmor.is_none());
        assert_eq!(
            plain.seccomp.unwrap().profile_type,
            cri::security_profile::ProfileType::Unconfined as i32
        );
        let ssc = sandbox_config(&sb).linux.unwrap().security_context.unwrap();
        assert!(ssc.privileged);
        assert_eq!(ssc.run_as_user.map(|u| u.value), Some(1000));
        assert_eq!(ssc.supplemental_groups, vec![3000]);
        assert_eq!(ssc.seccomp.unwrap().localhost_ref, "/d/seccomp/a.json");
    }

    #[test]
    fn features_come_from_the_default_handler_and_the_runtime() {
        let handler = |name: &str, userns: bool| cri::RuntimeHandler {
            name: name.into(),
            features: Some(cri::RuntimeHandlerFeatures {
                user_namespaces: userns,
                ..Default::default()
            }),
        };
        let status = |handlers: Vec<cri::RuntimeHandler>, strict: bool| cri::StatusResponse {
            runtime_handlers: handlers,
            features: Some(cri::RuntimeFeatures {
                supplemental_groups_policy: strict,
            }),
            ..Default::default()
        };
        let f = |r: cri::StatusResponse| {
            let f = runtime_features(&r);
            (f.user_namespaces, f.supplemental_groups_policy)
        };
        // containerd 1.6 reports nothing.
        assert_eq!(f(cri::StatusResponse::default()), (false, false));
        assert_eq!(
            f(status(vec![handler("kata", true)], false)),
            (false, false)
        );
        assert_eq!(
            f(status(
                vec![handler("kata", false), handler("", true)],
                true
            )),
            (true, true)
        );
    }

    #[test]
    fn container_status_converts_times_and_states() {
        let s = cri::ContainerStatus {
            id: "c1".into(),
            metadata: Some(cri::ContainerMetadata {
                name: "app".into(),
                attempt: 3,
            }),
            state: cri::ContainerState::ContainerExited as i32,
            started_at: 1_700_000_000_000_000_000,
            finished_at: 0,
            exit_code: 137,
            reason: "OOMKilled".into(),
            ..Default::default()
        };
        let c = container_status(s, "sb");
        assert_eq!(c.state, ContainerState::Exited);
        assert_eq!(c.attempt, 3);
        assert_eq!(c.reason, "OOMKilled");
        assert_eq!(c.started_at.unwrap().timestamp(), 1_700_000_000);
        assert!(c.finished_at.is_none());
    }

    #[test]
    fn sandbox_status_lists_primary_then_additional_ips() {
        let s = cri::PodSandboxStatus {
            id: "s".into(),
            state: cri::PodSandboxState::SandboxNotready as i32,
            network: Some(cri::PodSandboxNetworkStatus {
                ip: "10.42.0.5".into(),
                additional_ips: vec![cri::PodIp {
                    ip: "fd00::5".into(),
                }],
            }),
            ..Default::default()
        };
        let st = sandbox_status(s);
        assert_eq!(st.ips, vec!["10.42.0.5", "fd00::5"]);
        assert_eq!(st.state, SandboxState::NotReady);
    }
}
