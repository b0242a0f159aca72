//! securityContext as the node agent applies it: the pod- and container-level
//! settings merged as upstream's `DetermineEffectiveSecurityContext`
//! (pkg/securitycontext), turned into the runtime's terms as its
//! `determineEffectiveSecurityContext` (pkg/kubelet/kuberuntime), the
//! runAsNonRoot check (`verifyRunAsNonRoot`), and the agent's admission of
//! sysctls (pkg/kubelet/sysctl) and AppArmor (pkg/security/apparmor).
//!
//! Everything here is pure: the host probes (`apparmor_host_error`, the kernel
//! version) are read once by the agent at start and passed in.
//!
//! SELinux: Berth's containerd runs with `enable_selinux = false` and these
//! hosts have no SELinux, where upstream's runtimes ignore `seLinuxOptions`
//! labels; the agent does the same and passes none.

use std::path::Path;

use k8s_openapi::api::core::v1::{
    AppArmorProfile, Container, Pod, PodSecurityContext, SeccompProfile, SecurityContext,
};

use crate::runtime::{RuntimeFeatures, SecurityProfile};

/// The container's securityContext with the pod's defaults filled in
/// (upstream's DetermineEffectiveSecurityContext): the pod gives
/// runAsUser, runAsGroup, runAsNonRoot and seLinuxOptions; the container's
/// own fields win.
pub fn effective_security_context(pod: &Pod, c: &Container) -> SecurityContext {
    let psc = pod_security_context(pod);
    let mut eff = SecurityContext {
        run_as_user: psc.and_then(|p| p.run_as_user),
        run_as_group: psc.and_then(|p| p.run_as_group),
        run_as_non_root: psc.and_then(|p| p.run_as_non_root),
        se_linux_options: psc.and_then(|p| p.se_linux_options.clone()),
        ..Default::default()
    };
    let Some(csc) = &c.security_context else {
        return eff;
    };
    macro_rules! take {
        ($($f:ident),*) => {$(
            if csc.$f.is_some() {
                eff.$f = csc.$f.clone();
            }
        )*};
    }
    take!(
        se_linux_options,
        capabilities,
        privileged,
        run_as_user,
        run_as_group,
        run_as_non_root,
        read_only_root_filesystem,
        allow_privilege_escalation,
        proc_mount
    );
    eff
}

fn pod_security_context(pod: &Pod) -> Option<&PodSecurityContext> {
    pod.spec.as_ref()?.security_context.as_ref()
}

/// Upstream's format.Pod: `name_namespace(uid)`.
fn pod_desc(pod: &Pod) -> String {
    let (name, ns, uid) = super::podspec::meta(pod);
    format!("{name}_{ns}({uid})")
}

/// Upstream's verifyRunAsNonRoot: with runAsNonRoot, the user the container
/// runs as must be known not to be root. `image_uid`/`image_user` are the
/// image's `USER` as the runtime reports it; neither set means root.
pub fn verify_run_as_non_root(
    pod: &Pod,
    c: &Container,
    image_uid: Option<i64>,
    image_user: &str,
) -> Result<(), String> {
    let eff = effective_security_context(pod, c);
    if eff.run_as_non_root != Some(true) {
        return Ok(());
    }
    let desc = pod_desc(pod);
    if let Some(uid) = eff.run_as_user {
        if uid == 0 {
            return Err(format!(
                "container's runAsUser breaks non-root policy (pod: {desc:?}, container: {})",
                c.name
            ));
        }
        return Ok(());
    }
    match (image_uid, image_user) {
        (Some(0), _) | (None, "") => Err(format!(
            "container has runAsNonRoot and image will run as root (pod: {desc:?}, container: {})",
            c.name
        )),
        (None, user) => Err(format!(
            "container has runAsNonRoot and image has non-numeric user ({user}), cannot verify user is non-root (pod: {desc:?}, container: {})",
            c.name
        )),
        (Some(_), _) => Ok(()),
    }
}

/// Whether the container's user must be looked up in its image: only to
/// verify runAsNonRoot when no runAsUser is given.
pub fn needs_image_user(pod: &Pod, c: &Container) -> bool {
    let eff = effective_security_context(pod, c);
    eff.run_as_non_root == Some(true) && eff.run_as_user.is_none()
}

/// Paths upstream masks in every container unless procMount is Unmasked
/// (pkg/securitycontext `defaultMaskedPaths`).
pub const DEFAULT_MASKED_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// Paths upstream makes read-only unless procMount is Unmasked.
pub const DEFAULT_READONLY_PATHS: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// The masked and read-only paths for a procMount type. Upstream sends
/// empty lists for Unmasked; containerd reads an empty list as "not set" and
/// keeps its own defaults, so Unmasked only unmasks on runtimes that honour
/// it (and the API allows it only with `hostUsers: false`, which this
/// runtime refuses: see [`sandbox_error`]).
pub fn proc_mount_paths(proc_mount: Option<&str>) -> (Vec<String>, Vec<String>) {
    if proc_mount == Some("Unmasked") {
        return (Vec::new(), Vec::new());
    }
    let own = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
    (own(DEFAULT_MASKED_PATHS), own(DEFAULT_READONLY_PATHS))
}

/// The seccomp profile of a container (or, with `c` None, of the sandbox),
/// as upstream's getSeccompProfile: the container's field, else the pod's,
/// else Unconfined (upstream's default without `--seccomp-default`).
/// Localhost profiles are files under `root` (`<data-dir>/agent/seccomp`,
/// upstream's `<root-dir>/seccomp`).
pub fn seccomp_profile(
    pod: &Pod,
    c: Option<&Container>,
    root: &Path,
) -> Result<SecurityProfile, String> {
    let field = c
        .and_then(|c| c.security_context.as_ref())
        .and_then(|s| s.seccomp_profile.as_ref())
        .or_else(|| pod_security_context(pod).and_then(|p| p.seccomp_profile.as_ref()));
    let Some(SeccompProfile {
        type_,
        localhost_profile,
    }) = field
    else {
        return Ok(SecurityProfile::Unconfined);
    };
    match type_.as_str() {
        "RuntimeDefault" => Ok(SecurityProfile::RuntimeDefault),
        "Localhost" => match localhost_profile.as_deref().filter(|p| !p.is_empty()) {
            Some(p) => Ok(SecurityProfile::Localhost(
                root.join(p).display().to_string(),
            )),
            None => {
                Err("localhostProfile must be set if seccompProfile type is Localhost.".to_string())
            }
        },
        _ => Ok(SecurityProfile::Unconfined),
    }
}

/// The legacy per-container AppArmor annotation's prefix.
pub const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

fn profile_from_annotation(value: &str) -> Option<AppArmorProfile> {
    let (type_, localhost) = match value {
        "runtime/default" => ("RuntimeDefault", None),
        "unconfined" => ("Unconfined", None),
        v => ("Localhost", Some(v.strip_prefix("localhost/")?.to_string())),
    };
    Some(AppArmorProfile {
        type_: type_.into(),
        localhost_profile: localhost,
    })
}

/// The container's AppArmor profile as upstream's apparmor.GetProfile: its
/// own field, else the legacy annotation, else the pod's field.
fn apparmor_field(pod: &Pod, c: &Container) -> Option<AppArmorProfile> {
    if let Some(p) = c
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.clone())
    {
        return Some(p);
    }
    let key = format!("{APPARMOR_ANNOTATION_PREFIX}{}", c.name);
    if let Some(p) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&key))
        .and_then(|v| profile_from_annotation(v))
    {
        return Some(p);
    }
    pod_security_context(pod).and_then(|p| p.app_armor_profile.clone())
}

/// The AppArmor profile the runtime gets (upstream's getAppArmorProfile);
/// None leaves it to the runtime.
pub fn apparmor_profile(pod: &Pod, c: &Container) -> Result<Option<SecurityProfile>, String> {
    let Some(p) = apparmor_field(pod, c) else {
        return Ok(None);
    };
    match p.type_.as_str() {
        "RuntimeDefault" => Ok(Some(SecurityProfile::RuntimeDefault)),
        "Unconfined" => Ok(Some(SecurityProfile::Unconfined)),
        "Localhost" => match p.localhost_profile {
            Some(name) => Ok(Some(SecurityProfile::Localhost(name))),
            None => Err("missing localhost apparmor profile name".into()),
        },
        other => Err(format!("unknown apparmor profile type: {other:?}")),
    }
}

/// What a container's securityContext becomes for the runtime.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerSecurity {
    pub privileged: bool,
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub readonly_rootfs: bool,
    pub capabilities_add: Vec<String>,
    pub capabilities_drop: Vec<String>,
    pub no_new_privs: bool,
    pub masked_paths: Vec<String>,
    pub readonly_paths: Vec<String>,
    pub seccomp: SecurityProfile,
    pub apparmor: Option<SecurityProfile>,
}

/// The container's runtime security settings (upstream's
/// determineEffectiveSecurityContext, less the image user and the groups,
/// which the caller adds). An error is a CreateContainerConfigError.
pub fn container_security(
    pod: &Pod,
    c: &Container,
    seccomp_root: &Path,
) -> Result<ContainerSecurity, String> {
    let eff = effective_security_context(pod, c);
    let (masked_paths, readonly_paths) = proc_mount_paths(eff.proc_mount.as_deref());
    let caps = eff.capabilities.clone().unwrap_or_default();
    Ok(ContainerSecurity {
        privileged: eff.privileged.unwrap_or(false),
        run_as_user: eff.run_as_user,
        run_as_group: eff.run_as_group,
        readonly_rootfs: eff.read_only_root_filesystem.unwrap_or(false),
        // Passed as written: containerd prefixes `CAP_` and expands `ALL`,
        // as upstream's kubelet leaves it to the runtime.
        capabilities_add: caps.add.unwrap_or_default(),
        capabilities_drop: caps.drop.unwrap_or_default(),
        // Upstream's AddNoNewPrivileges: only an explicit false sets it
        // (validation refuses false with privileged or CAP_SYS_ADMIN).
        no_new_privs: eff.allow_privilege_escalation == Some(false),
        masked_paths,
        readonly_paths,
        seccomp: seccomp_profile(pod, Some(c), seccomp_root)?,
        apparmor: apparmor_profile(pod, c)?,
    })
}

/// Every container of the pod (init, regular, ephemeral), as upstream's
/// VisitContainers with AllContainers.
fn all_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    let spec = pod.spec.as_ref();
    spec.into_iter().flat_map(|s| {
        s.init_containers
            .iter()
            .flatten()
            .chain(s.containers.iter())
    })
}

/// Upstream's HasPrivilegedContainer: the sandbox is privileged when any
/// container (or ephemeral container) is.
pub fn has_privileged_container(pod: &Pod) -> bool {
    let ephemeral = pod
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .into_iter()
        .flatten()
        .map(|e| e.security_context.as_ref());
    all_containers(pod)
        .map(|c| c.security_context.as_ref())
        .chain(ephemeral)
        .any(|sc| sc.and_then(|s| s.privileged) == Some(true))
}

/// Whether the pod asks for its own user namespace (`hostUsers: false`).
pub fn wants_user_namespace(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.host_users) == Some(false)
}

/// Why the pod's sandbox cannot be created as its spec asks (a failed
/// sandbox creation, as upstream), None when it can. `runtime_userns`: the
/// runtime says it supports user namespaces.
pub fn sandbox_error(pod: &Pod, seccomp_root: &Path, runtime_userns: bool) -> Option<String> {
    if wants_user_namespace(pod) {
        // Upstream's userns manager refuses a runtime without support; with
        // one, the agent would still have to allocate ID mappings, which it
        // does not: refused rather than run in the node's user namespace.
        return Some(if runtime_userns {
            "user namespaces (hostUsers: false) are not supported by this node agent".to_string()
        } else {
            "RuntimeClass handler \"\" does not support user namespaces".to_string()
        });
    }
    seccomp_profile(pod, None, seccomp_root).err()
}

/// Upstream's sysctl.NormalizeName: `net/ipv4/conf/eth0.100/rp_filter`
/// (slashes first) becomes `net.ipv4.conf.eth0/100.rp_filter`.
pub fn normalize_sysctl_name(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|ch| match ch {
                '.' => '/',
                '/' => '.',
                other => other,
            })
            .collect(),
        _ => name.to_string(),
    }
}

/// The kernel namespace a sysctl lives in (upstream's NamespacedBy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysctlNamespace {
    Ipc,
    Net,
}

impl SysctlNamespace {
    fn as_str(self) -> &'static str {
        match self {
            SysctlNamespace::Ipc => "ipc",
            SysctlNamespace::Net => "net",
        }
    }
}

pub fn sysctl_namespace(name: &str) -> Option<SysctlNamespace> {
    if name == "kernel.sem" {
        return Some(SysctlNamespace::Ipc);
    }
    if ["kernel.shm", "kernel.msg", "fs.mqueue."]
        .iter()
        .any(|p| name.starts_with(p))
    {
        return Some(SysctlNamespace::Ipc);
    }
    name.starts_with("net.").then_some(SysctlNamespace::Net)
}

/// Upstream's safe sysctls (pkg/kubelet/sysctl/safe_sysctls.go, v1.33) with
/// the kernel version each needs to be namespaced.
pub const SAFE_SYSCTLS: &[(&str, (u32, u32))] = &[
    ("kernel.shm_rmid_forced", (0, 0)),
    ("net.ipv4.ip_local_port_range", (0, 0)),
    ("net.ipv4.tcp_syncookies", (0, 0)),
    ("net.ipv4.ping_group_range", (0, 0)),
    ("net.ipv4.ip_unprivileged_port_start", (0, 0)),
    ("net.ipv4.ip_local_reserved_ports", (3, 16)),
    ("net.ipv4.tcp_keepalive_time", (4, 5)),
    ("net.ipv4.tcp_fin_timeout", (4, 6)),
    ("net.ipv4.tcp_keepalive_intvl", (4, 5)),
    ("net.ipv4.tcp_keepalive_probes", (4, 5)),
    ("net.ipv4.tcp_rmem", (4, 15)),
    ("net.ipv4.tcp_wmem", (4, 15)),
];

/// `major.minor` of a kernel release string such as `6.1.0-18-amd64`.
pub fn parse_kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The safe sysctls this kernel namespaces (those needing a newer kernel, or
/// any when the version is unknown, are left out, as upstream).
pub fn safe_sysctls(kernel: Option<(u32, u32)>) -> Vec<String> {
    SAFE_SYSCTLS
        .iter()
        .filter(|(_, min)| *min == (0, 0) || kernel.is_some_and(|k| k >= *min))
        .map(|(n, _)| n.to_string())
        .collect()
}

/// Upstream's sysctl name pattern (validation's `IsValidSysctlPattern`): the
/// name regex with an optional trailing `*`.
fn is_valid_sysctl_pattern(p: &str) -> bool {
    let name = p.strip_suffix('*').unwrap_or(p);
    if p.len() > 253 {
        return false;
    }
    // A bare `*` or `prefix.*` / `prefix*` are patterns of a prefix.
    if name.is_empty() {
        return p == "*";
    }
    let trimmed = name.strip_suffix(['.', '/']).unwrap_or(name);
    berth_api::validation::is_valid_sysctl_name(trimmed)
}

/// The sysctls pods may set on this node: the safe set and the
/// `--allowed-unsafe-sysctls` patterns (upstream's patternAllowlist).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SysctlAllowlist {
    exact: Vec<(String, SysctlNamespace)>,
    prefixes: Vec<(String, SysctlNamespace)>,
}

/// Upstream's admission reason for a refused sysctl.
pub const SYSCTL_FORBIDDEN_REASON: &str = "SysctlForbidden";

impl SysctlAllowlist {
    /// Builds the allowlist; a pattern that is malformed or names sysctls
    /// that are not namespaced is an error (the agent refuses to start, as
    /// upstream's kubelet).
    pub fn new(patterns: &[String]) -> Result<Self, String> {
        let mut w = SysctlAllowlist::default();
        for p in patterns {
            if !is_valid_sysctl_pattern(p) {
                return Err(format!(
                    "sysctl {p:?} must have at most {} characters and match regex {} (optionally ending in *)",
                    berth_api::validation::SYSCTL_MAX_LENGTH,
                    berth_api::validation::SYSCTL_NAME_REGEX
                ));
            }
            let p = normalize_sysctl_name(p);
            let Some(ns) = sysctl_namespace(&p) else {
                return Err(format!("the sysctls {p:?} are not known to be namespaced"));
            };
            match p.strip_suffix('*') {
                Some(prefix) => w.prefixes.push((prefix.to_string(), ns)),
                None => w.exact.push((p, ns)),
            }
        }
        Ok(w)
    }

    fn validate(&self, sysctl: &str, host_net: bool, host_ipc: bool) -> Result<(), String> {
        let sysctl = normalize_sysctl_name(sysctl);
        let ns = self
            .exact
            .iter()
            .find(|(n, _)| *n == sysctl)
            .or_else(|| self.prefixes.iter().find(|(p, _)| sysctl.starts_with(p)))
            .map(|(_, ns)| *ns);
        match ns {
            None => Err(format!("{sysctl:?} not allowlisted")),
            Some(ns)
                if (ns == SysctlNamespace::Ipc && host_ipc)
                    || (ns == SysctlNamespace::Net && host_net) =>
            {
                Err(format!(
                    "{sysctl:?} not allowed with host {} enabled",
                    ns.as_str()
                ))
            }
            Some(_) => Ok(()),
        }
    }

    /// The admission message for the pod's first refused sysctl.
    pub fn admit(&self, pod: &Pod) -> Result<(), String> {
        let Some(spec) = pod.spec.as_ref() else {
            return Ok(());
        };
        let host_net = spec.host_network.unwrap_or(false);
        let host_ipc = spec.host_ipc.unwrap_or(false);
        let sysctls = spec
            .security_context
            .as_ref()
            .and_then(|s| s.sysctls.as_ref());
        for s in sysctls.into_iter().flatten() {
            self.validate(&s.name, host_net, host_ipc)
                .map_err(|e| format!("forbidden sysctl: {e}"))?;
        }
        Ok(())
    }
}

/// Upstream's admission reason for an AppArmor profile that cannot be enforced.
pub const APPARMOR_REASON: &str = "AppArmor";

/// Why this host cannot enforce AppArmor (upstream's validateHost), None
/// where it can: the kernel module enabled and its securityfs present.
pub fn apparmor_host_error(enabled_param: Option<&str>, securityfs: bool) -> Option<String> {
    let enabled = securityfs && enabled_param.is_some_and(|v| v.trim_start().starts_with('Y'));
    (!enabled).then(|| "AppArmor is not enabled on the host".to_string())
}

/// Reads the host's AppArmor state (the edge of [`apparmor_host_error`]).
pub fn host_apparmor_error() -> Option<String> {
    let param = std::fs::read_to_string("/sys/module/apparmor/parameters/enabled").ok();
    let securityfs = Path::new("/sys/kernel/security/apparmor").exists();
    apparmor_host_error(param.as_deref(), securityfs)
}

/// Upstream's apparmor isRequired: some profile other than Unconfined is
/// asked for, by a field or the legacy annotation.
pub fn apparmor_required(pod: &Pod) -> bool {
    let confined = |p: Option<&AppArmorProfile>| p.is_some_and(|p| p.type_ != "Unconfined");
    if confined(pod_security_context(pod).and_then(|p| p.app_armor_profile.as_ref())) {
        return true;
    }
    let ephemeral = pod
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .into_iter()
        .flatten()
        .map(|e| e.security_context.as_ref());
    if all_containers(pod)
        .map(|c| c.security_context.as_ref())
        .chain(ephemeral)
        .any(|sc| confined(sc.and_then(|s| s.app_armor_profile.as_ref())))
    {
        return true;
    }
    pod.metadata
        .annotations
        .iter()
        .flatten()
        .any(|(k, v)| k.starts_with(APPARMOR_ANNOTATION_PREFIX) && v != "unconfined")
}

/// Upstream's admission reason and message for `supplementalGroupsPolicy:
/// Strict` on a runtime without it.
pub const SUPPLEMENTAL_GROUPS_POLICY_REASON: &str = "SupplementalGroupsPolicyNotSupported";
pub const SUPPLEMENTAL_GROUPS_POLICY_MESSAGE: &str =
    "SupplementalGroupsPolicy=Strict is not supported in this node";

/// Whether the pod asks for `supplementalGroupsPolicy: Strict`.
pub fn strict_supplemental_groups(pod: &Pod) -> bool {
    pod_security_context(pod).and_then(|s| s.supplemental_groups_policy.as_deref())
        == Some("Strict")
}

/// The node agent's security admission: sysctls, the supplemental groups
/// policy, then AppArmor (upstream's admit handlers, in their order).
#[derive(Debug, Clone, Default)]
pub struct Admission {
    pub sysctls: SysctlAllowlist,
    /// Why AppArmor cannot be enforced here; None where it can.
    pub apparmor_host_error: Option<String>,
    /// What the runtime supports (asked once at start, as upstream's kubelet
    /// caches the runtime's status).
    pub runtime: RuntimeFeatures,
}

impl Admission {
    /// None: admitted; else upstream's reason and message (the pod is then
    /// Failed with `Pod was rejected: <message>`).
    pub fn admit(&self, pod: &Pod) -> Option<(&'static str, String)> {
        if let Err(msg) = self.sysctls.admit(pod) {
            return Some((SYSCTL_FORBIDDEN_REASON, msg));
        }
        if strict_supplemental_groups(pod) && !self.runtime.supplemental_groups_policy {
            return Some((
                SUPPLEMENTAL_GROUPS_POLICY_REASON,
                SUPPLEMENTAL_GROUPS_POLICY_MESSAGE.into(),
            ));
        }
        // Upstream rechecks AppArmor only for pods not yet running.
        let pending = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_none_or(|p| p == "Pending");
        if pending
            && apparmor_required(pod)
            && let Some(e) = &self.apparmor_host_error
        {
            return Some((APPARMOR_REASON, format!("Cannot enforce AppArmor: {e}")));
        }
        None
    }
}

#[cfg(test)]
mod tests;
