//! Pod spec → runtime configs: the sandbox and each container (labels the agent
//! finds them by, log paths, mounts, resources, security).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::cgroups::{self, Qos};
use crate::runtime::{
    ContainerConfig, DnsConfig, Mount, PidNamespace, PortMapping, Protocol, SandboxConfig,
};

pub const LABEL_POD_NAME: &str = "io.kubernetes.pod.name";
pub const LABEL_POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const LABEL_POD_UID: &str = "io.kubernetes.pod.uid";
pub const LABEL_CONTAINER_NAME: &str = "io.kubernetes.container.name";

/// Node-wide settings the configs need.
#[derive(Debug, Clone)]
pub struct NodeContext {
    /// `<data-dir>/agent/pods`: per-pod volumes.
    pub pods_dir: PathBuf,
    /// `<data-dir>/agent/logs`: container logs (upstream's /var/log/pods).
    pub logs_dir: PathBuf,
    pub cluster_dns: Vec<String>,
    pub cluster_domain: String,
    pub memory_capacity: i64,
    /// The node's resolv.conf: dnsPolicy Default, and the search domains
    /// ClusterFirst pods get after the cluster's.
    pub host_dns: DnsConfig,
    /// `<data-dir>/agent/seccomp`: where `Localhost` seccomp profiles are
    /// (upstream's `<root-dir>/seccomp`).
    pub seccomp_root: PathBuf,
}

/// A resolv.conf's nameservers, search domains (the last `search` or `domain`
/// line) and options, as upstream's kubelet reads the node's.
pub fn parse_resolv_conf(text: &str) -> DnsConfig {
    let mut cfg = DnsConfig::default();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or("");
        let mut words = line.split_whitespace();
        match words.next() {
            Some("nameserver") => cfg.servers.extend(words.next().map(str::to_string)),
            Some("search") => cfg.searches = words.map(str::to_string).collect(),
            Some("domain") => cfg.searches = words.next().map(str::to_string).into_iter().collect(),
            Some("options") => cfg.options.extend(words.map(str::to_string)),
            _ => {}
        }
    }
    cfg
}

pub fn meta(pod: &Pod) -> (&str, &str, &str) {
    (
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.uid.as_deref().unwrap_or(""),
    )
}

pub fn qos(pod: &Pod) -> Qos {
    if let Some(q) = pod.status.as_ref().and_then(|s| s.qos_class.as_deref()) {
        return Qos::from_class(q);
    }
    let v = serde_json::to_value(pod).unwrap_or_default();
    Qos::from_class(berth_api::qos::pod_qos(&v))
}

/// The pod's log directory (`<ns>_<name>_<uid>`, as upstream's /var/log/pods).
pub fn log_dir(ctx: &NodeContext, pod: &Pod) -> PathBuf {
    let (name, ns, uid) = meta(pod);
    ctx.logs_dir.join(format!("{ns}_{name}_{uid}"))
}

pub fn pod_dir(ctx: &NodeContext, pod: &Pod) -> PathBuf {
    ctx.pods_dir.join(meta(pod).2)
}

fn dns(ctx: &NodeContext, pod: &Pod) -> Option<DnsConfig> {
    let spec = pod.spec.as_ref()?;
    let host_network = spec.host_network.unwrap_or(false);
    let policy = spec.dns_policy.as_deref().unwrap_or("ClusterFirst");
    let ns = meta(pod).1;
    let d = &ctx.cluster_domain;
    // The cluster's search path, then the node's (generateSearchesForDNSClusterFirst).
    let cluster_searches = || {
        let mut s = vec![format!("{ns}.svc.{d}"), format!("svc.{d}"), d.clone()];
        s.extend(ctx.host_dns.searches.iter().cloned());
        s
    };
    let mut cfg = match policy {
        "ClusterFirst" if !host_network && !ctx.cluster_dns.is_empty() => DnsConfig {
            servers: ctx.cluster_dns.clone(),
            searches: cluster_searches(),
            options: vec!["ndots:5".into()],
        },
        "ClusterFirstWithHostNet" if !ctx.cluster_dns.is_empty() => DnsConfig {
            servers: ctx.cluster_dns.clone(),
            searches: cluster_searches(),
            options: vec!["ndots:5".into()],
        },
        "None" => DnsConfig::default(),
        // Default (and ClusterFirst without cluster DNS) with a dnsConfig: the
        // node's resolv.conf merged with it.
        _ if spec.dns_config.is_some() => ctx.host_dns.clone(),
        // Without one, the runtime gives the node's resolv.conf as it is.
        _ => return None,
    };
    if let Some(pc) = &spec.dns_config {
        cfg.servers.extend(pc.nameservers.iter().flatten().cloned());
        cfg.searches.extend(pc.searches.iter().flatten().cloned());
        for o in pc.options.iter().flatten() {
            let Some(name) = &o.name else { continue };
            cfg.options
                .retain(|x| x.split(':').next() != Some(name.as_str()));
            cfg.options.push(match &o.value {
                Some(v) => format!("{name}:{v}"),
                None => name.clone(),
            });
        }
    }
    fit_dns_limits(&mut cfg);
    Some(cfg)
}

/// Upstream's omitDuplicates and formDNSConfigFitsLimits: repeated servers and
/// searches dropped, at most 3 nameservers, 32 search domains of 2048 characters.
fn fit_dns_limits(cfg: &mut DnsConfig) {
    const MAX_NAMESERVERS: usize = 3;
    const MAX_SEARCHES: usize = 32;
    const MAX_SEARCH_CHARS: usize = 2048;
    let mut seen = std::collections::HashSet::new();
    cfg.servers.retain(|s| seen.insert(s.clone()));
    cfg.servers.truncate(MAX_NAMESERVERS);
    let mut seen = std::collections::HashSet::new();
    cfg.searches.retain(|s| seen.insert(s.clone()));
    cfg.searches.truncate(MAX_SEARCHES);
    while cfg.searches.join(" ").len() > MAX_SEARCH_CHARS {
        cfg.searches.pop();
    }
}

pub fn sandbox_config(ctx: &NodeContext, pod: &Pod, attempt: u32) -> SandboxConfig {
    let (name, ns, uid) = meta(pod);
    let spec = pod.spec.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = pod.metadata.labels.clone().unwrap_or_default();
    labels.insert(LABEL_POD_NAME.into(), name.into());
    labels.insert(LABEL_POD_NAMESPACE.into(), ns.into());
    labels.insert(LABEL_POD_UID.into(), uid.into());
    // Host-network pods share the node's UTS namespace: no hostname of their own.
    let hostname = if spec.host_network.unwrap_or(false) {
        String::new()
    } else {
        let short = pod_hostname(pod);
        // setHostnameAsFQDN: `hostname.subdomain.ns.svc.<domain>` (64 characters
        // at most, as upstream; a longer one keeps the short name).
        match spec.subdomain.as_deref().filter(|s| !s.is_empty()) {
            Some(sub) if spec.set_hostname_as_fqdn == Some(true) => {
                let fqdn = format!("{short}.{sub}.{ns}.svc.{}", ctx.cluster_domain);
                if fqdn.len() <= 64 { fqdn } else { short }
            }
            _ => short,
        }
    };
    let port_mappings = spec
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.unwrap_or(0) > 0)
        .map(|p| PortMapping {
            protocol: match p.protocol.as_deref() {
                Some("UDP") => Protocol::Udp,
                Some("SCTP") => Protocol::Sctp,
                _ => Protocol::Tcp,
            },
            container_port: p.container_port,
            host_port: p.host_port.unwrap_or(0),
            host_ip: p.host_ip.clone().unwrap_or_default(),
        })
        .collect();
    let psc = spec.security_context.as_ref();
    let sysctls = psc
        .and_then(|s| s.sysctls.as_ref())
        .into_iter()
        .flatten()
        .map(|s| {
            (
                super::security::normalize_sysctl_name(&s.name),
                s.value.clone(),
            )
        })
        .collect();
    // A Localhost profile without its name never gets here: the worker checks
    // the sandbox's security first (`security::sandbox_error`).
    let seccomp =
        super::security::seccomp_profile(pod, None, &ctx.seccomp_root).unwrap_or_default();
    SandboxConfig {
        name: name.into(),
        namespace: ns.into(),
        uid: uid.into(),
        attempt,
        hostname,
        log_directory: log_dir(ctx, pod).display().to_string(),
        dns: dns(ctx, pod),
        port_mappings,
        labels,
        annotations: pod.metadata.annotations.clone().unwrap_or_default(),
        cgroup_parent: cgroups::pod_cgroup_parent(qos(pod), uid),
        host_network: spec.host_network.unwrap_or(false),
        // hostPID wins over shareProcessNamespace (validation refuses both).
        pid: if spec.host_pid.unwrap_or(false) {
            PidNamespace::Node
        } else if spec.share_process_namespace.unwrap_or(false) {
            PidNamespace::Pod
        } else {
            PidNamespace::Container
        },
        host_ipc: spec.host_ipc.unwrap_or(false),
        sysctls,
        privileged: super::security::has_privileged_container(pod),
        seccomp,
        run_as_user: psc.and_then(|s| s.run_as_user),
        run_as_group: psc.and_then(|s| s.run_as_group),
        supplemental_groups: supplemental_groups(pod),
    }
}

/// The pod's own hostname (upstream's GeneratePodHostNameAndDomain):
/// `spec.hostname`, else the pod's name cut to 63 characters, without
/// trailing `-` or `.`. Used for the sandbox's UTS name and `/etc/hosts`.
pub fn pod_hostname(pod: &Pod) -> String {
    let name = meta(pod).0;
    pod.spec
        .as_ref()
        .and_then(|s| s.hostname.clone())
        .unwrap_or_else(|| name.chars().take(63).collect())
        .trim_end_matches(['-', '.'])
        .to_string()
}

/// The pod's claim-backed volumes the agent resolved (volume name → mount),
/// filled by the worker before its containers start.
pub type ClaimMounts = BTreeMap<String, crate::volumes::claims::ClaimMount>;

/// Where a volume is on the host, for the kinds the agent materialises itself
/// (emptyDir, hostPath, claims) or finds prepared under the pod's directory
/// (the rest).
pub fn volume_host_path(
    ctx: &NodeContext,
    pod: &Pod,
    claims: &ClaimMounts,
    volume: &str,
) -> Option<PathBuf> {
    let spec = pod.spec.as_ref()?;
    let v = spec.volumes.iter().flatten().find(|v| v.name == volume)?;
    if let Some(h) = &v.host_path {
        return Some(PathBuf::from(&h.path));
    }
    if v.persistent_volume_claim.is_some() || v.ephemeral.is_some() {
        return claims.get(volume).map(|c| c.path.clone());
    }
    crate::volumes::volume_dir(&pod_dir(ctx, pod), v)
}

/// Errors upstream reports as CreateContainerConfigError.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("unable to find volume {0:?} for volumeMount")]
    MissingVolume(String),
    /// subPath/subPathExpr that cannot be prepared (upstream's
    /// `failed to prepare subPath for volumeMount "x" of container "y"`).
    #[error("failed to prepare subPath for volumeMount {mount:?} of container {container:?}")]
    SubPath { mount: String, container: String },
    /// A securityContext the runtime cannot be given (a Localhost profile
    /// without its name, runAsNonRoot with a root user), upstream's message.
    #[error("{0}")]
    Security(String),
}

#[allow(clippy::too_many_arguments)]
pub fn container_config(
    ctx: &NodeContext,
    pod: &Pod,
    claims: &ClaimMounts,
    c: &Container,
    attempt: u32,
    image: &str,
    env: Vec<(String, String)>,
    command: Vec<String>,
    args: Vec<String>,
) -> Result<ContainerConfig, ConfigError> {
    let (name, ns, uid) = meta(pod);
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_POD_NAME.to_string(), name.to_string());
    labels.insert(LABEL_POD_NAMESPACE.to_string(), ns.to_string());
    labels.insert(LABEL_POD_UID.to_string(), uid.to_string());
    labels.insert(LABEL_CONTAINER_NAME.to_string(), c.name.clone());
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "io.kubernetes.container.restartCount".to_string(),
        attempt.to_string(),
    );
    let mut mounts = Vec::new();
    for m in c.volume_mounts.iter().flatten() {
        let host = volume_host_path(ctx, pod, claims, &m.name)
            .ok_or_else(|| ConfigError::MissingVolume(m.name.clone()))?;
        let host = match sub_path(m, &env) {
            Some(sp) => host.join(sp),
            None => host,
        };
        let claim_read_only = claims.get(&m.name).is_some_and(|c| c.read_only);
        mounts.push(Mount {
            container_path: m.mount_path.clone(),
            host_path: host.display().to_string(),
            readonly: m.read_only.unwrap_or(false) || claim_read_only,
        });
    }
    let sec = super::security::container_security(pod, c, &ctx.seccomp_root)
        .map_err(ConfigError::Security)?;
    Ok(ContainerConfig {
        name: c.name.clone(),
        attempt,
        image: image.to_string(),
        command,
        args,
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs: env,
        mounts,
        labels,
        annotations,
        log_path: format!("{}/{attempt}.log", c.name),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        resources: cgroups::container_resources(c, qos(pod), ctx.memory_capacity),
        privileged: sec.privileged,
        run_as_user: sec.run_as_user,
        run_as_group: sec.run_as_group,
        run_as_username: String::new(),
        readonly_rootfs: sec.readonly_rootfs,
        supplemental_groups: supplemental_groups(pod),
        supplemental_groups_strict: super::security::strict_supplemental_groups(pod),
        capabilities_add: sec.capabilities_add,
        capabilities_drop: sec.capabilities_drop,
        no_new_privs: sec.no_new_privs,
        masked_paths: sec.masked_paths,
        readonly_paths: sec.readonly_paths,
        seccomp: sec.seccomp,
        apparmor: sec.apparmor,
        target_container_id: None,
        // Filled by the device manager at container start.
        devices: Vec::new(),
        cdi_devices: Vec::new(),
    })
}

/// A mount's subPath, or its subPathExpr expanded with the container's
/// environment (`$(VAR)`, as upstream's ExpandContainerVolumeMounts).
fn sub_path(
    m: &k8s_openapi::api::core::v1::VolumeMount,
    env: &[(String, String)],
) -> Option<String> {
    if let Some(sp) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
        return Some(sp.to_string());
    }
    m.sub_path_expr
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(|e| crate::envvars::expand_with(e, env))
}

/// Creates the sub paths a container mounts that do not exist yet, with the
/// mode of their volume's root (upstream: so that an fsGroup can use them),
/// refusing any that resolves outside its volume (a symlink in the volume, or
/// `..` from an expanded subPathExpr).
pub fn prepare_sub_paths(
    ctx: &NodeContext,
    pod: &Pod,
    claims: &ClaimMounts,
    c: &Container,
    env: &[(String, String)],
) -> Result<(), ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    for m in c.volume_mounts.iter().flatten() {
        let Some(sp) = sub_path(m, env) else { continue };
        let err = || ConfigError::SubPath {
            mount: m.name.clone(),
            container: c.name.clone(),
        };
        let root = volume_host_path(ctx, pod, claims, &m.name)
            .ok_or_else(|| ConfigError::MissingVolume(m.name.clone()))?;
        if Path::new(&sp).is_absolute() || sp.split('/').any(|p| p == "..") {
            return Err(err());
        }
        let target = root.join(&sp);
        if !target.exists() {
            let mode = std::fs::metadata(&root)
                .map_err(|_| err())?
                .permissions()
                .mode()
                & 0o7777;
            std::fs::create_dir_all(&target).map_err(|_| err())?;
            // Each created level gets the root's mode (create_dir_all applies the umask).
            let mut p = target.as_path();
            while p != root && p.starts_with(&root) {
                let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
                match p.parent() {
                    Some(parent) => p = parent,
                    None => break,
                }
            }
        }
        let (Ok(real_root), Ok(real)) = (root.canonicalize(), target.canonicalize()) else {
            return Err(err());
        };
        if !real.starts_with(&real_root) {
            return Err(err());
        }
    }
    Ok(())
}

/// The pod's supplementalGroups and its fsGroup, which every container's
/// processes join (upstream's kubelet adds fsGroup to the supplemental groups).
fn supplemental_groups(pod: &Pod) -> Vec<i64> {
    let sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let mut groups: Vec<i64> = sc
        .and_then(|s| s.supplemental_groups.clone())
        .unwrap_or_default();
    groups.extend(sc.and_then(|s| s.fs_group));
    groups.dedup();
    groups
}

/// Makes the directories of emptyDir volumes (hostPath is the user's).
pub fn prepare_volumes(ctx: &NodeContext, pod: &Pod) -> std::io::Result<()> {
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        if v.empty_dir.is_some()
            && let Some(p) = crate::volumes::volume_dir(&pod_dir(ctx, pod), v)
        {
            std::fs::create_dir_all(&p)?;
            // emptyDir manages ownership: the pod's fsGroup owns it.
            let sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
            if let Some(gid) = sc.and_then(|s| s.fs_group) {
                let policy = sc.and_then(|s| s.fs_group_change_policy.as_deref());
                crate::volumes::ownership::apply(&p, gid, policy, false)
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
            }
        }
    }
    Ok(())
}

/// The files the agent itself mounts into a container, after its volumes (as
/// upstream's makeMounts): the pod's managed `/etc/hosts` once the pod has IPs,
/// and this instance's termination-message file at `terminationMessagePath`.
pub fn agent_mounts(
    ctx: &NodeContext,
    pod: &Pod,
    c: &Container,
    attempt: u32,
    pod_ips: &[String],
) -> Vec<Mount> {
    let dir = pod_dir(ctx, pod);
    let mut mounts = Vec::new();
    if super::hosts::should_mount(c, pod_ips) {
        mounts.push(Mount {
            container_path: super::hosts::CONTAINER_PATH.into(),
            host_path: super::hosts::path(&dir).display().to_string(),
            readonly: false,
        });
    }
    let path = super::termination::container_path(c);
    if !path.is_empty() {
        mounts.push(Mount {
            container_path: path.into(),
            host_path: super::termination::host_path(&dir, &c.name, attempt)
                .display()
                .to_string(),
            readonly: false,
        });
    }
    mounts
}

/// The CRI log file of one container instance (the sandbox's log directory
/// joined with [`ContainerConfig::log_path`]).
pub fn container_log_file(ctx: &NodeContext, pod: &Pod, container: &str, attempt: u32) -> PathBuf {
    log_dir(ctx, pod)
        .join(container)
        .join(format!("{attempt}.log"))
}

/// Removes the pod's directory (volumes) and logs.
pub fn remove_pod_dirs(ctx: &NodeContext, pod: &Pod) {
    for d in [pod_dir(ctx, pod), log_dir(ctx, pod)] {
        if Path::new(&d).exists() {
            let _ = std::fs::remove_dir_all(&d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> NodeContext {
        NodeContext {
            pods_dir: "/d/pods".into(),
            logs_dir: "/d/logs".into(),
            cluster_dns: vec!["10.43.0.10".into()],
            cluster_domain: "cluster.local".into(),
            memory_capacity: 1 << 30,
            host_dns: DnsConfig::default(),
            seccomp_root: "/d/seccomp".into(),
        }
    }

    fn pod(yaml: serde_json::Value) -> Pod {
        serde_json::from_value(yaml).unwrap()
    }

    #[test]
    fn sandbox_gets_identity_labels_dns_ports_and_qos_cgroup() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns1", "uid": "u1", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}]}]}
        }));
        let s = sandbox_config(&ctx(), &p, 0);
        assert_eq!(s.labels["app"], "web");
        assert_eq!(s.labels[LABEL_POD_UID], "u1");
        assert_eq!(s.hostname, "web");
        assert_eq!(s.log_directory, "/d/logs/ns1_web_u1");
        assert_eq!(s.cgroup_parent, "berth/besteffort/podu1");
        assert_eq!(s.port_mappings.len(), 1);
        assert_eq!(s.port_mappings[0].host_port, 8080);
        let dns = s.dns.unwrap();
        assert_eq!(dns.servers, vec!["10.43.0.10"]);
        assert_eq!(dns.searches[0], "ns1.svc.cluster.local");
        assert_eq!(dns.options, vec!["ndots:5"]);
    }

    #[test]
    fn pid_namespaces_follow_host_pid_and_share_process_namespace() {
        for (spec, want) in [
            (serde_json::json!({}), PidNamespace::Container),
            (
                serde_json::json!({"shareProcessNamespace": true}),
                PidNamespace::Pod,
            ),
            (serde_json::json!({"hostPID": true}), PidNamespace::Node),
        ] {
            let mut spec = spec;
            spec["containers"] = serde_json::json!([{"name": "c"}]);
            let p = pod(serde_json::json!({"metadata": {"name": "p", "uid": "u"}, "spec": spec}));
            assert_eq!(sandbox_config(&ctx(), &p, 0).pid, want, "{spec}");
        }
    }

    #[test]
    fn agent_mounts_hosts_and_termination_files() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns1", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "terminationMessagePath": "/dev/termination-log"}]}
        }));
        let c = &p.spec.as_ref().unwrap().containers[0];
        let ips = vec!["10.42.0.9".to_string()];
        let m = agent_mounts(&ctx(), &p, c, 2, &ips);
        let pairs: Vec<(&str, &str)> = m
            .iter()
            .map(|m| (m.container_path.as_str(), m.host_path.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("/etc/hosts", "/d/pods/u1/etc-hosts"),
                (
                    "/dev/termination-log",
                    "/d/pods/u1/containers/c/termination-log-2"
                ),
            ]
        );
        let before_ips = agent_mounts(&ctx(), &p, c, 0, &[]);
        assert_eq!(before_ips.len(), 1, "no hosts file before the pod has IPs");
        assert_eq!(
            container_log_file(&ctx(), &p, "c", 2),
            Path::new("/d/logs/ns1_web_u1/c/2.log")
        );
    }

    #[test]
    fn dns_config_merges_without_duplicates_within_limits() {
        let cases = [
            // dnsConfig adds to ClusterFirst; repeats go.
            (
                serde_json::json!({"dnsConfig": {"nameservers": ["10.43.0.10", "1.1.1.1"],
                    "searches": ["svc.cluster.local", "corp.example"],
                    "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}}),
                vec!["10.43.0.10", "1.1.1.1"],
                vec![
                    "ns1.svc.cluster.local",
                    "svc.cluster.local",
                    "cluster.local",
                    "corp.example",
                ],
                vec!["ndots:2", "edns0"],
            ),
            // At most 3 nameservers.
            (
                serde_json::json!({"dnsConfig": {"nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3"]}}),
                vec!["10.43.0.10", "1.1.1.1", "2.2.2.2"],
                vec![
                    "ns1.svc.cluster.local",
                    "svc.cluster.local",
                    "cluster.local",
                ],
                vec!["ndots:5"],
            ),
            // None: only dnsConfig.
            (
                serde_json::json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["9.9.9.9"], "searches": ["a.example", "a.example"]}}),
                vec!["9.9.9.9"],
                vec!["a.example"],
                vec![],
            ),
        ];
        for (extra, servers, searches, options) in cases {
            let mut spec = serde_json::json!({"containers": []});
            for (k, v) in extra.as_object().unwrap() {
                spec[k] = v.clone();
            }
            let p = pod(
                serde_json::json!({"metadata": {"name": "p", "namespace": "ns1", "uid": "u"}, "spec": spec}),
            );
            let dns = sandbox_config(&ctx(), &p, 0).dns.unwrap();
            assert_eq!(
                (dns.servers, dns.searches, dns.options),
                (
                    servers.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                    searches.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                    options.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                ),
                "{extra}"
            );
        }
        // 40 long search domains: 32 at most, 2048 characters at most.
        let many: Vec<String> = (0..40)
            .map(|i| format!("{i:02}{}", "x".repeat(60)))
            .collect();
        let p = pod(serde_json::json!({"metadata": {"name": "p", "uid": "u"},
            "spec": {"dnsPolicy": "None", "containers": [], "dnsConfig": {"searches": many}}}));
        let dns = sandbox_config(&ctx(), &p, 0).dns.unwrap();
        assert_eq!(dns.searches.len(), 32);
        assert!(dns.searches.join(" ").len() <= 2048);
    }

    #[test]
    fn the_nodes_resolv_conf_feeds_default_and_cluster_first() {
        let host = parse_resolv_conf(
            "# node\nnameserver 10.0.0.2\nsearch old.example\nsearch corp.example lab.example ; x\noptions edns0 timeout:2\n",
        );
        assert_eq!(host.servers, vec!["10.0.0.2"]);
        assert_eq!(host.searches, vec!["corp.example", "lab.example"]);
        assert_eq!(host.options, vec!["edns0", "timeout:2"]);
        let ctx = NodeContext {
            host_dns: host,
            ..ctx()
        };
        let p = pod(
            serde_json::json!({"metadata": {"name": "p", "namespace": "ns1", "uid": "u"},
            "spec": {"containers": []}}),
        );
        let dns = sandbox_config(&ctx, &p, 0).dns.unwrap();
        assert_eq!(
            dns.searches,
            vec![
                "ns1.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "corp.example",
                "lab.example"
            ]
        );
        assert_eq!(dns.options, vec!["ndots:5"]);
        // Default with a dnsConfig: the node's settings plus the pod's.
        let p = pod(serde_json::json!({"metadata": {"name": "p", "uid": "u"},
            "spec": {"dnsPolicy": "Default", "containers": [],
                "dnsConfig": {"options": [{"name": "timeout", "value": "5"}]}}}));
        let dns = sandbox_config(&ctx, &p, 0).dns.unwrap();
        assert_eq!(dns.servers, vec!["10.0.0.2"]);
        assert_eq!(dns.options, vec!["edns0", "timeout:5"]);
    }

    #[test]
    fn set_hostname_as_fqdn_uses_the_subdomain_name() {
        let cases = [
            (
                serde_json::json!({"hostname": "web-0", "subdomain": "nginx", "setHostnameAsFQDN": true}),
                "web-0.nginx.ns1.svc.cluster.local",
            ),
            (
                serde_json::json!({"hostname": "web-0", "subdomain": "nginx"}),
                "web-0",
            ),
            (serde_json::json!({"setHostnameAsFQDN": true}), "p"),
            (
                serde_json::json!({"hostname": "h".repeat(40), "subdomain": "nginx", "setHostnameAsFQDN": true}),
                "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh",
            ),
        ];
        for (extra, want) in cases {
            let mut spec = serde_json::json!({"containers": []});
            for (k, v) in extra.as_object().unwrap() {
                spec[k] = v.clone();
            }
            let p = pod(
                serde_json::json!({"metadata": {"name": "p", "namespace": "ns1", "uid": "u"}, "spec": spec}),
            );
            assert_eq!(sandbox_config(&ctx(), &p, 0).hostname, want, "{extra}");
        }
    }

    #[test]
    fn dns_policy_default_and_host_network_use_the_nodes_resolv_conf() {
        for spec in [
            serde_json::json!({"dnsPolicy": "Default", "containers": []}),
            serde_json::json!({"hostNetwork": true, "containers": []}),
        ] {
            let p = pod(serde_json::json!({"metadata": {"name": "p", "uid": "u"}, "spec": spec}));
            let cfg = sandbox_config(&ctx(), &p, 0);
            assert!(cfg.dns.is_none());
            assert_eq!(cfg.hostname.is_empty(), cfg.host_network);
        }
    }

    #[test]
    fn container_config_mounts_volumes_and_labels_the_attempt() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns1", "uid": "u1"},
            "spec": {
                "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/srv"}}],
                "containers": [{"name": "c", "image": "busybox",
                  "volumeMounts": [{"name": "scratch", "mountPath": "/s"},
                                   {"name": "h", "mountPath": "/h", "subPath": "x", "readOnly": true}],
                  "resources": {"limits": {"memory": "64Mi"}}}]}
        }));
        let c = &p.spec.as_ref().unwrap().containers[0];
        let cfg = container_config(
            &ctx(),
            &p,
            &ClaimMounts::new(),
            c,
            2,
            "sha256:x",
            vec![],
            vec!["sh".into()],
            vec![],
        )
        .unwrap();
        assert_eq!(cfg.log_path, "c/2.log");
        assert_eq!(cfg.labels[LABEL_CONTAINER_NAME], "c");
        assert_eq!(
            cfg.mounts[0].host_path,
            "/d/pods/u1/volumes/kubernetes.io~empty-dir/scratch"
        );
        assert_eq!(cfg.mounts[1].host_path, "/srv/x");
        assert!(cfg.mounts[1].readonly);
        assert_eq!(cfg.resources.memory_limit_in_bytes, 64 << 20);
        let mut bad = c.clone();
        bad.volume_mounts.as_mut().unwrap()[0].name = "nope".into();
        assert_eq!(
            container_config(
                &ctx(),
                &p,
                &ClaimMounts::new(),
                &bad,
                0,
                "i",
                vec![],
                vec![],
                vec![]
            ),
            Err(ConfigError::MissingVolume("nope".into()))
        );
    }

    #[test]
    fn claim_volumes_sub_path_exprs_and_sub_path_creation() {
        let tmp = crate::testutil::TempDir::new("subpath");
        let data = tmp.path().join("pv");
        std::fs::create_dir(&data).unwrap();
        std::os::unix::fs::symlink("/etc", data.join("escape")).unwrap();
        let p = pod(serde_json::json!({
            "metadata": {"name": "web-0", "namespace": "ns1", "uid": "u1"},
            "spec": {
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}}],
                "containers": [{"name": "c", "image": "busybox",
                  "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                   {"name": "data", "mountPath": "/mine", "subPathExpr": "logs/$(POD_NAME)"}]}]}
        }));
        let mut claims = ClaimMounts::new();
        claims.insert(
            "data".into(),
            crate::volumes::claims::ClaimMount {
                pv: "pv1".into(),
                path: data.clone(),
                read_only: true,
                supports_ownership: true,
            },
        );
        let c = &p.spec.as_ref().unwrap().containers[0];
        let env = vec![("POD_NAME".to_string(), "web-0".to_string())];
        prepare_sub_paths(&ctx(), &p, &claims, c, &env).unwrap();
        assert!(data.join("logs/web-0").is_dir());
        let cfg =
            container_config(&ctx(), &p, &claims, c, 0, "i", env.clone(), vec![], vec![]).unwrap();
        assert_eq!(cfg.mounts[0].host_path, data.display().to_string());
        assert_eq!(
            cfg.mounts[1].host_path,
            data.join("logs/web-0").display().to_string()
        );
        // The claim's readOnly makes every mount of it read-only.
        assert!(cfg.mounts.iter().all(|m| m.readonly));
        // An unresolved claim is a missing volume, not a silently empty one.
        assert_eq!(
            container_config(
                &ctx(),
                &p,
                &ClaimMounts::new(),
                c,
                0,
                "i",
                vec![],
                vec![],
                vec![]
            ),
            Err(ConfigError::MissingVolume("data".into()))
        );
        // A sub path through a symlink out of the volume is refused.
        let mut escaping = c.clone();
        escaping.volume_mounts.as_mut().unwrap()[1].sub_path_expr = Some("escape".into());
        assert_eq!(
            prepare_sub_paths(&ctx(), &p, &claims, &escaping, &env),
            Err(ConfigError::SubPath {
                mount: "data".into(),
                container: "c".into()
            })
        );
    }
}
