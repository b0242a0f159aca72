//! The node's cgroup hierarchy as the agent drives it (the cgroup parts of
//! upstream's container manager): the root `berth` (upstream's `kubepods`) with
//! node allocatable enforced, the QoS cgroups, one cgroup per pod, all through a
//! [`CgroupManager`] so the whole hierarchy is tested on a fake tree.

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Pod;
use tracing::{info, warn};

use super::allocatable::{self, NodeAllocatableConfig};
use super::manager::{CgroupError, CgroupManager, CgroupName, CgroupResult};
use super::pod::{
    Overhead, PodCgroupConfig, hugepage_size, pod_cgroup_name, pod_cpu_request_milli,
    resource_config_for_pod,
};
use super::{Qos, qos};
use crate::node::Resources;

/// The cgroup flags of the kubelet.
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupsConfig {
    /// `--cgroups-per-qos` (default true): the root, QoS and pod cgroups.
    pub cgroups_per_qos: bool,
    /// `--cgroup-driver`: only `cgroupfs` is implemented.
    pub cgroup_driver: String,
    pub pods: PodCgroupConfig,
    pub allocatable: NodeAllocatableConfig,
}

impl Default for CgroupsConfig {
    fn default() -> Self {
        CgroupsConfig {
            cgroups_per_qos: true,
            cgroup_driver: "cgroupfs".into(),
            pods: PodCgroupConfig::default(),
            allocatable: NodeAllocatableConfig::default(),
        }
    }
}

impl CgroupsConfig {
    /// The flags' validation (upstream's messages; the systemd driver is refused).
    pub fn validate(&self) -> Result<(), String> {
        match self.cgroup_driver.as_str() {
            "cgroupfs" => {}
            "systemd" => {
                return Err("--cgroup-driver=systemd is not supported by Berth: use cgroupfs (the systemd driver's slices are not implemented)".into());
            }
            other => {
                return Err(format!(
                    "invalid configuration: cgroupDriver (--cgroup-driver) {other:?}: must be \"cgroupfs\" or \"systemd\""
                ));
            }
        }
        if self.pods.pod_pids_limit < -1 {
            return Err(format!(
                "invalid configuration: podPidsLimit (--pod-max-pids) {} must be -1 or more",
                self.pods.pod_pids_limit
            ));
        }
        self.allocatable.validate(self.cgroups_per_qos)
    }
}

/// The host's hierarchy (`/sys/fs/cgroup`, v1, hybrid or v2 as detected),
/// relative to this process's cgroups. Bad flags and a missing reserved cgroup
/// are errors, as they stop upstream's kubelet; a hierarchy that cannot be
/// written (no permission, a v2 cgroup that holds processes) is logged and
/// leaves the pods without pod-level limits (their containers keep theirs).
pub fn start_on_host(cfg: CgroupsConfig, capacity: &Resources) -> CgroupResult<NodeCgroups> {
    cfg.validate().map_err(CgroupError::Config)?;
    let proc = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let fs = std::path::Path::new("/sys/fs/cgroup");
    let cap = allocatable::internal_capacity(capacity, allocatable::read_pid_max());
    let root = CgroupName::parse(super::ROOT);
    let mode = super::detect_mode(fs);
    info!(?mode, "cgroup hierarchy");
    match NodeCgroups::start(super::new_manager(fs, &proc), root.clone(), cfg, &cap) {
        Ok(n) => Ok(n),
        Err(e @ CgroupError::ReservedMissing(_)) => Err(e),
        Err(e) => {
            warn!(error = %e, ?mode, "pod cgroups are not managed: pods run without pod-level limits");
            Ok(NodeCgroups::disabled(super::new_manager(fs, &proc), root))
        }
    }
}

/// The root, QoS and pod cgroups of this node.
pub struct NodeCgroups {
    manager: Box<dyn CgroupManager>,
    root: CgroupName,
    cfg: CgroupsConfig,
    /// Pods with a cgroup: uid → (QoS, CPU request with overhead, milli-cores).
    pods: Mutex<BTreeMap<String, (Qos, i64)>>,
    /// False when `--cgroups-per-qos=false` or the hierarchy could not be set up.
    enabled: bool,
    /// The node's huge page sizes (bytes): each pod cgroup limits every one.
    hugepage_sizes: Vec<u64>,
}

impl NodeCgroups {
    /// Creates the root cgroup with node allocatable enforced, the reserved
    /// cgroups' limits when enforced, and the QoS cgroups. `capacity` is the
    /// node's (with `pid` from [`allocatable::internal_capacity`]).
    pub fn start(
        manager: Box<dyn CgroupManager>,
        root: CgroupName,
        cfg: CgroupsConfig,
        capacity: &Resources,
    ) -> CgroupResult<NodeCgroups> {
        cfg.validate().map_err(CgroupError::Config)?;
        let n = NodeCgroups {
            manager,
            root,
            enabled: cfg.cgroups_per_qos,
            cfg,
            pods: Mutex::new(BTreeMap::new()),
            hugepage_sizes: capacity.keys().filter_map(|k| hugepage_size(k)).collect(),
        };
        if !n.enabled {
            return Ok(n);
        }
        let rc = allocatable::root_config(capacity, &n.cfg.allocatable);
        n.manager.create(&n.root, &rc)?;
        info!(root = %n.root.to_cgroupfs(), mode = ?n.manager.mode(), shares = ?rc.cpu_shares, memory = ?rc.memory, pids = ?rc.pids_limit, "node allocatable enforced on the root cgroup");
        for (cgroup, rc) in allocatable::reserved_configs(&n.cfg.allocatable) {
            let name = CgroupName::parse(&cgroup);
            // Upstream: the reserved cgroups must exist already.
            if !n.manager.exists(&name) {
                return Err(CgroupError::ReservedMissing(cgroup));
            }
            n.manager.update(&name, &rc)?;
        }
        if let Some(b) = qos::qos_cgroup_name(&n.root, Qos::BestEffort) {
            n.manager.create(&b, &qos::besteffort_config())?;
        }
        if let Some(b) = qos::qos_cgroup_name(&n.root, Qos::Burstable) {
            n.manager.create(&b, &qos::burstable_config([]))?;
        }
        Ok(n)
    }

    /// A hierarchy that writes nothing (`--cgroups-per-qos=false`, or an agent
    /// whose cgroups could not be set up).
    pub fn disabled(manager: Box<dyn CgroupManager>, root: CgroupName) -> NodeCgroups {
        NodeCgroups {
            manager,
            root,
            cfg: CgroupsConfig::default(),
            pods: Mutex::new(BTreeMap::new()),
            enabled: false,
            hugepage_sizes: Vec::new(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn manager(&self) -> &dyn CgroupManager {
        self.manager.as_ref()
    }

    pub fn root(&self) -> &CgroupName {
        &self.root
    }

    /// The pod's cgroup name.
    pub fn pod_name(&self, qos: Qos, uid: &str) -> CgroupName {
        pod_cgroup_name(&self.root, qos, uid)
    }

    fn pods(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (Qos, i64)>> {
        self.pods.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates (or updates) the pod's cgroup with its limits, after the QoS
    /// cgroups account for it (upstream's `UpdateQOSCgroups` + `EnsureExists`).
    pub fn ensure_pod(&self, pod: &Pod, qos: Qos) -> CgroupResult<()> {
        if !self.enabled {
            return Ok(());
        }
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        let request = pod_cpu_request_milli(
            spec.init_containers.as_deref().unwrap_or_default(),
            &spec.containers,
        ) + Overhead::of(&spec).cpu_milli;
        let changed = self.pods().insert(uid.to_string(), (qos, request)) != Some((qos, request));
        if changed && qos == Qos::Burstable {
            self.update_qos()?;
        }
        let rc = resource_config_for_pod(&spec, qos, self.cfg.pods, &self.hugepage_sizes);
        self.manager.create(&self.pod_name(qos, uid), &rc)
    }

    /// Removes the pod's cgroup (its containers are gone) and updates the QoS cgroups.
    pub fn remove_pod(&self, uid: &str, qos: Qos) -> CgroupResult<()> {
        let was = self.pods().remove(uid);
        if !self.enabled {
            return Ok(());
        }
        let r = self.manager.destroy(&self.pod_name(qos, uid));
        if was.is_some_and(|(q, _)| q == Qos::Burstable)
            && let Err(e) = self.update_qos()
        {
            warn!(error = %e, "updating the burstable cgroup");
        }
        r
    }

    /// Removes the cgroups of pods that are not in `live` (uids): pods deleted
    /// while the agent was down (upstream's `cleanupOrphanedPodCgroups`). Returns
    /// the uids whose cgroups were removed; busy ones are kept for later.
    pub fn remove_orphans(&self, live: &std::collections::HashSet<String>) -> Vec<String> {
        if !self.enabled {
            return Vec::new();
        }
        let mut removed = Vec::new();
        for qos in [Qos::Guaranteed, Qos::Burstable, Qos::BestEffort] {
            let parent = qos::qos_cgroup_name(&self.root, qos).unwrap_or_else(|| self.root.clone());
            let mut uids = std::collections::BTreeSet::new();
            for dir in self.manager.paths(&parent) {
                for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                    let name = e.file_name().to_string_lossy().to_string();
                    if let Some(uid) = name.strip_prefix("pod")
                        && e.file_type().is_ok_and(|t| t.is_dir())
                    {
                        uids.insert(uid.to_string());
                    }
                }
            }
            for uid in uids.into_iter().filter(|u| !live.contains(u)) {
                match self.remove_pod(&uid, qos) {
                    Ok(()) => removed.push(uid),
                    Err(e) => warn!(pod = %uid, error = %e, "removing an orphaned pod cgroup"),
                }
            }
        }
        removed
    }

    /// Rewrites the Burstable cgroup's shares from its pods' requests.
    pub fn update_qos(&self) -> CgroupResult<()> {
        if !self.enabled {
            return Ok(());
        }
        let reqs: Vec<i64> = self
            .pods()
            .values()
            .filter(|(q, _)| *q == Qos::Burstable)
            .map(|(_, r)| *r)
            .collect();
        if let Some(b) = qos::qos_cgroup_name(&self.root, Qos::Burstable) {
            self.manager.update(&b, &qos::burstable_config(reqs))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::v1::V1Manager;
    use crate::cgroups::v2::V2Manager;
    use crate::node::parse_resources;
    use crate::testutil::TempDir;
    use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;

    fn pod(uid: &str, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Pod {
        let m = |kv: &[(&str, &str)]| {
            (!kv.is_empty()).then(|| {
                kv.iter()
                    .map(|(k, v)| (k.to_string(), Q(v.to_string())))
                    .collect()
            })
        };
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                uid: Some(uid.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: m(requests),
                        limits: m(limits),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn cfg(kube: &str, system: &str) -> CgroupsConfig {
        let mut c = CgroupsConfig::default();
        c.allocatable.kube_reserved = parse_resources(kube).unwrap();
        c.allocatable.system_reserved = parse_resources(system).unwrap();
        c.pods.pod_pids_limit = 256;
        c
    }

    fn read(p: std::path::PathBuf) -> String {
        std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .trim()
            .to_string()
    }

    /// One scenario on both trees: (file below the v1 controller dir or the v2
    /// base, expected v1 value, expected v2 value).
    #[test]
    fn hierarchy_on_fake_v1_and_v2_trees() {
        let cap = parse_resources("cpu=4,memory=8Gi,pid=4194304").unwrap();
        let v1 = TempDir::new("node-v1");
        for c in ["cpu", "cpuacct", "memory/process_api/x", "pids"] {
            std::fs::create_dir_all(v1.path().join(c)).unwrap();
        }
        let v2 = TempDir::new("node-v2");
        v2.write(&[("cgroup.controllers", "cpu memory pids")]);
        let trees: [(&TempDir, Box<dyn CgroupManager>); 2] = [
            (
                &v1,
                Box::new(V1Manager::new(
                    v1.path(),
                    "4:memory:/process_api/x\n3:pids:/\n2:cpuacct:/\n1:cpu:/\n",
                )),
            ),
            (&v2, Box::new(V2Manager::new(v2.path(), "/"))),
        ];
        for (i, (t, m)) in trees.into_iter().enumerate() {
            let v = |p: &str| -> std::path::PathBuf {
                if i == 1 {
                    return t.path().join(p);
                }
                // v1: the file's controller decides the hierarchy.
                let ctl = if p.contains("memory.") {
                    "memory/process_api/x"
                } else if p.contains("pids.") {
                    "pids"
                } else {
                    "cpu"
                };
                t.path().join(ctl).join(p)
            };
            let n = NodeCgroups::start(
                m,
                CgroupName::parse("berth"),
                cfg("cpu=500m,memory=1Gi", "cpu=500m,memory=1Gi,pid=1000"),
                &cap,
            )
            .unwrap();
            let g = pod(
                "g",
                &[("cpu", "500m"), ("memory", "64Mi")],
                &[("cpu", "500m"), ("memory", "64Mi")],
            );
            let b1 = pod("b1", &[("cpu", "250m")], &[("memory", "128Mi")]);
            let b2 = pod("b2", &[("cpu", "750m")], &[]);
            let be = pod("be", &[], &[]);
            n.ensure_pod(&g, Qos::Guaranteed).unwrap();
            n.ensure_pod(&b1, Qos::Burstable).unwrap();
            n.ensure_pod(&b2, Qos::Burstable).unwrap();
            n.ensure_pod(&be, Qos::BestEffort).unwrap();
            let (v1f, v2f) = (i == 0, i == 1);
            // (file, v1 value, v2 value)
            let rows: Vec<(&str, &str, &str)> = vec![
                // Root: 4 − 1 CPU = 3072 shares (weight 118); 8Gi − 2Gi; pids 4194304 − 1000.
                ("berth/cpu.shares", "3072", ""),
                ("berth/cpu.weight", "", "118"),
                ("berth/memory.limit_in_bytes", "6442450944", ""),
                ("berth/memory.max", "", "6442450944"),
                ("berth/pids.max", "4193304", "4193304"),
                ("berth/besteffort/cpu.shares", "2", ""),
                ("berth/besteffort/cpu.weight", "", "1"),
                // Burstable: 250m + 750m = 1024 shares (weight 39).
                ("berth/burstable/cpu.shares", "1024", ""),
                ("berth/burstable/cpu.weight", "", "39"),
                ("berth/podg/cpu.shares", "512", ""),
                ("berth/podg/cpu.cfs_quota_us", "50000", ""),
                ("berth/podg/cpu.cfs_period_us", "100000", ""),
                ("berth/podg/cpu.max", "", "50000 100000"),
                ("berth/podg/memory.limit_in_bytes", "67108864", ""),
                ("berth/podg/memory.max", "", "67108864"),
                ("berth/podg/pids.max", "256", "256"),
                ("berth/burstable/podb1/cpu.shares", "256", ""),
                ("berth/burstable/podb1/cpu.weight", "", "10"),
                (
                    "berth/burstable/podb1/memory.limit_in_bytes",
                    "134217728",
                    "",
                ),
                ("berth/burstable/podb1/memory.max", "", "134217728"),
                ("berth/besteffort/podbe/cpu.shares", "2", ""),
                ("berth/besteffort/podbe/cpu.weight", "", "1"),
                ("berth/besteffort/podbe/pids.max", "256", "256"),
            ];
            for (f, want1, want2) in rows {
                let want = if v1f { want1 } else { want2 };
                if want.is_empty() {
                    continue;
                }
                assert_eq!(read(v(f)), want, "{f} (v{})", i + 1);
            }
            // Unset limits stay unwritten.
            for f in [
                "berth/burstable/podb1/cpu.cfs_quota_us",
                "berth/burstable/podb1/cpu.max",
                "berth/besteffort/podbe/memory.max",
                "berth/besteffort/podbe/memory.limit_in_bytes",
                "berth/burstable/memory.max",
                "berth/burstable/memory.limit_in_bytes",
            ] {
                assert!(!v(f).exists(), "{f} (v{})", i + 1);
            }
            // A burstable pod leaves: its cgroup goes, the QoS shares follow.
            n.remove_pod("b2", Qos::Burstable).unwrap();
            assert!(!n.manager().exists(&n.pod_name(Qos::Burstable, "b2")));
            let want = if v1f { "256" } else { "10" };
            let file = if v1f {
                "berth/burstable/cpu.shares"
            } else {
                "berth/burstable/cpu.weight"
            };
            assert_eq!(read(v(file)), want, "v{}", i + 1);
            for (u, q) in [
                ("g", Qos::Guaranteed),
                ("b1", Qos::Burstable),
                ("be", Qos::BestEffort),
            ] {
                n.remove_pod(u, q).unwrap();
                assert!(!n.manager().exists(&n.pod_name(q, u)));
            }
            assert_eq!(read(v(file)), if v1f { "2" } else { "1" });
            if v2f {
                assert_eq!(
                    read(t.path().join("berth/cgroup.subtree_control")),
                    "+cpu +memory +pids"
                );
            }
        }
    }

    /// The manager on a real pure cgroup v2 machine (scripts/cgroup-v2-check):
    /// a scratch cgroup below `BERTH_CGROUP_V2_BASE` (default: this process's
    /// own cgroup), the root, QoS and three pods' cgroups written and read back
    /// from the kernel, a process placed in a pod cgroup, then all removed.
    #[test]
    #[ignore = "needs root on a pure cgroup v2 machine: scripts/cgroup-v2-check"]
    fn real_cgroup_v2_hierarchy() {
        let mount = std::path::Path::new("/sys/fs/cgroup");
        assert_eq!(
            crate::cgroups::detect_mode(mount),
            crate::cgroups::CgroupMode::V2,
            "not a pure cgroup v2 machine"
        );
        let proc = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let base = std::env::var("BERTH_CGROUP_V2_BASE").unwrap_or_else(|_| {
            proc.lines()
                .find_map(|l| l.strip_prefix("0::"))
                .unwrap_or("/")
                .to_string()
        });
        let scratch = format!(
            "{}/berth-v2-check-{}",
            base.trim_end_matches('/'),
            std::process::id()
        );
        let dir = mount.join(scratch.trim_start_matches('/'));
        std::fs::create_dir_all(&dir).unwrap();
        println!("scratch cgroup {}", dir.display());
        let run = || {
            let cap = parse_resources("cpu=4,memory=8Gi,pid=4194304").unwrap();
            let n = NodeCgroups::start(
                Box::new(V2Manager::new(mount, &scratch)),
                CgroupName::parse("berth"),
                cfg("cpu=500m,memory=1Gi", "cpu=500m,memory=1Gi,pid=1000"),
                &cap,
            )
            .unwrap();
            let g = pod(
                "g",
                &[("cpu", "500m"), ("memory", "64Mi")],
                &[("cpu", "500m"), ("memory", "64Mi")],
            );
            let b = pod("b", &[("cpu", "250m")], &[("memory", "128Mi")]);
            let be = pod("be", &[], &[]);
            n.ensure_pod(&g, Qos::Guaranteed).unwrap();
            n.ensure_pod(&b, Qos::Burstable).unwrap();
            n.ensure_pod(&be, Qos::BestEffort).unwrap();
            let rows = [
                ("berth/cpu.weight", "118"),
                ("berth/memory.max", "6442450944"),
                ("berth/pids.max", "4193304"),
                ("berth/besteffort/cpu.weight", "1"),
                ("berth/burstable/cpu.weight", "10"),
                ("berth/burstable/memory.max", "max"),
                ("berth/podg/cpu.weight", "20"),
                ("berth/podg/cpu.max", "50000 100000"),
                ("berth/podg/memory.max", "67108864"),
                ("berth/podg/pids.max", "256"),
                ("berth/burstable/podb/cpu.weight", "10"),
                ("berth/burstable/podb/cpu.max", "max 100000"),
                ("berth/burstable/podb/memory.max", "134217728"),
                ("berth/besteffort/podbe/cpu.weight", "1"),
                ("berth/besteffort/podbe/memory.max", "max"),
                ("berth/besteffort/podbe/pids.max", "256"),
            ];
            let mut bad = Vec::new();
            for (f, want) in rows {
                let got = read(dir.join(f));
                let ok = got == want;
                println!(
                    "{} {f} = {got:?} (want {want:?})",
                    if ok { "ok  " } else { "FAIL" }
                );
                if !ok {
                    bad.push(f);
                }
            }
            // A process in a pod cgroup: the kernel accepts the leaf.
            let mut child = std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap();
            let procs = dir.join("berth/podg/cgroup.procs");
            std::fs::write(&procs, child.id().to_string()).unwrap();
            let own = std::fs::read_to_string(format!("/proc/{}/cgroup", child.id())).unwrap();
            println!(
                "ok   a process in the Guaranteed pod's cgroup: {}",
                own.trim()
            );
            assert!(own.trim().ends_with("/berth/podg"), "{own}");
            let _ = child.kill();
            let _ = child.wait();
            std::thread::sleep(std::time::Duration::from_millis(200));
            for (u, q) in [
                ("g", Qos::Guaranteed),
                ("b", Qos::Burstable),
                ("be", Qos::BestEffort),
            ] {
                n.remove_pod(u, q).unwrap();
                assert!(!n.manager().exists(&n.pod_name(q, u)), "{u} removed");
            }
            println!(
                "ok   pod cgroups removed; burstable weight {}",
                read(dir.join("berth/burstable/cpu.weight"))
            );
            n.manager().destroy(&CgroupName::parse("berth")).unwrap();
            bad
        };
        let bad = std::panic::catch_unwind(run);
        let _ = super::super::manager::remove_tree(&dir);
        let removed = !dir.exists();
        println!("scratch cgroup removed: {removed}");
        let bad = bad.unwrap_or_else(|e| std::panic::resume_unwind(e));
        assert!(bad.is_empty(), "wrong values: {bad:?}");
        assert!(removed);
    }

    #[test]
    fn orphaned_pod_cgroups_are_removed() {
        let t = TempDir::new("node-orphans");
        for c in ["cpu", "memory/m", "systemd"] {
            std::fs::create_dir_all(t.path().join(c)).unwrap();
        }
        let m = V1Manager::new(t.path(), "9:name=systemd:/\n4:memory:/m\n1:cpu:/\n");
        let cap = parse_resources("cpu=2,memory=4Gi").unwrap();
        let n =
            NodeCgroups::start(Box::new(m), CgroupName::parse("berth"), cfg("", ""), &cap).unwrap();
        for (u, q) in [
            ("live", Qos::Burstable),
            ("gone", Qos::Burstable),
            ("gone2", Qos::Guaranteed),
        ] {
            n.ensure_pod(&pod(u, &[("cpu", "100m")], &[]), q).unwrap();
        }
        // runc's own directory of a pod in another hierarchy counts too.
        std::fs::create_dir_all(t.path().join("systemd/berth/besteffort/podgone3")).unwrap();
        let live = ["live".to_string()].into_iter().collect();
        let mut removed = n.remove_orphans(&live);
        removed.sort();
        assert_eq!(removed, ["gone", "gone2", "gone3"]);
        assert!(t.path().join("cpu/berth/burstable/podlive").is_dir());
        assert!(!t.path().join("cpu/berth/burstable/podgone").exists());
        assert!(!t.path().join("memory/m/berth/podgone2").exists());
        assert!(!t.path().join("systemd/berth/besteffort/podgone3").exists());
        // The QoS shares no longer count the orphan.
        assert_eq!(read(t.path().join("cpu/berth/burstable/cpu.shares")), "102");
    }

    #[test]
    fn flags_are_checked_and_reserved_cgroups_must_exist() {
        let t = TempDir::new("node-flags");
        t.write(&[("cgroup.controllers", "cpu memory pids")]);
        let mk = || Box::new(V2Manager::new(t.path(), "/")) as Box<dyn CgroupManager>;
        let cap = parse_resources("cpu=2,memory=4Gi").unwrap();
        let root = CgroupName::parse("berth");
        let mut c = cfg("", "");
        c.cgroup_driver = "systemd".into();
        let e = NodeCgroups::start(mk(), root.clone(), c, &cap)
            .err()
            .unwrap();
        assert!(e.to_string().contains("systemd is not supported"), "{e}");
        let mut c = cfg("memory=1Gi", "");
        c.allocatable.enforce = vec!["pods".into(), "kube-reserved".into()];
        let e = NodeCgroups::start(mk(), root.clone(), c.clone(), &cap)
            .err()
            .unwrap();
        assert!(e.to_string().contains("--kube-reserved-cgroup"), "{e}");
        c.allocatable.kube_reserved_cgroup = "kube.slice".into();
        let e = NodeCgroups::start(mk(), root.clone(), c.clone(), &cap)
            .err()
            .unwrap();
        assert!(e.to_string().contains("cgroup does not exist"), "{e}");
        std::fs::create_dir_all(t.path().join("kube.slice")).unwrap();
        NodeCgroups::start(mk(), root.clone(), c, &cap).unwrap();
        assert_eq!(read(t.path().join("kube.slice/memory.max")), "1073741824");
        assert_eq!(read(t.path().join("berth/memory.max")), "3221225472");
        // --cgroups-per-qos=false: nothing is written.
        let t2 = TempDir::new("node-noqos");
        let mut c = cfg("", "");
        c.cgroups_per_qos = false;
        c.allocatable.enforce = vec![];
        let n = NodeCgroups::start(
            Box::new(V2Manager::new(t2.path(), "/")),
            root.clone(),
            c,
            &cap,
        )
        .unwrap();
        n.ensure_pod(&pod("u", &[], &[]), Qos::BestEffort).unwrap();
        assert!(!t2.path().join("berth").exists());
    }
}
