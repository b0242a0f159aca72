//! cgroup v1 (and hybrid) cgroupfs manager: one hierarchy per controller under
//! the cgroupfs root (`/sys/fs/cgroup/<controller>`), each cgroup nested in this
//! process's own cgroup *of that controller* (`memory:/process_api/…` and `cpu:/`
//! differ on this CI machine), as runc resolves Berth's relative cgroup parents.
//! Writes `cpu.shares`, `cpu.cfs_period_us`/`cpu.cfs_quota_us`,
//! `memory.limit_in_bytes`, `pids.max` and `hugetlb.<size>.limit_in_bytes`.

use std::path::PathBuf;

use super::manager::{
    CgroupError, CgroupManager, CgroupMode, CgroupName, CgroupResult, ResourceConfig,
    hugepage_size_name, io_err, parse, parse_hugepage_size_name, read_opt, remove_tree,
};

/// The controllers whose files Berth writes (the cgroup is created in these).
const WRITTEN: [&str; 5] = ["cpu", "cpuacct", "memory", "pids", "hugetlb"];

/// v1 cgroupfs manager over `root` (a real `/sys/fs/cgroup` or a fake tree).
#[derive(Debug, Clone)]
pub struct V1Manager {
    root: PathBuf,
    /// (controller, this process's cgroup in it) from `/proc/self/cgroup`;
    /// the unified line of a hybrid machine has controller "".
    own: Vec<(String, String)>,
    mode: CgroupMode,
}

impl V1Manager {
    /// `proc_cgroup` is the text of `/proc/self/cgroup`.
    pub fn new(root: impl Into<PathBuf>, proc_cgroup: &str) -> Self {
        let root = root.into();
        let mode = if root.join("unified").is_dir() {
            CgroupMode::Hybrid
        } else {
            CgroupMode::V1
        };
        V1Manager {
            root,
            own: super::parse_proc_cgroup(proc_cgroup),
            mode,
        }
    }

    /// The hierarchy directory Berth's cgroups of `controller` nest in.
    fn base(&self, controller: &str) -> Option<PathBuf> {
        let own = &self.own.iter().find(|(c, _)| c == controller)?.1;
        let mount = if controller.is_empty() {
            self.root.join("unified")
        } else {
            self.root.join(controller)
        };
        mount
            .is_dir()
            .then(|| mount.join(own.trim_start_matches('/')))
    }

    /// The directory of `name` in `controller`'s hierarchy (None: not mounted).
    pub fn path(&self, controller: &str, name: &CgroupName) -> Option<PathBuf> {
        Some(self.base(controller)?.join(name.to_cgroupfs()))
    }

    fn written(&self, name: &CgroupName) -> Vec<(&'static str, PathBuf)> {
        let mut out: Vec<(&'static str, PathBuf)> = Vec::new();
        for c in WRITTEN {
            if let Some(p) = self.path(c, name) {
                // cpu and cpuacct co-mounted (`cpu,cpuacct`) are one directory.
                if !out.iter().any(|(_, q)| q == &p) {
                    out.push((c, p));
                }
            }
        }
        out
    }

    fn apply(&self, name: &CgroupName, config: &ResourceConfig) -> CgroupResult<()> {
        let write = |controller: &str, file: &str, value: String| -> CgroupResult<()> {
            let Some(dir) = self.path(controller, name) else {
                return Ok(());
            };
            let p = dir.join(file);
            std::fs::write(&p, value).map_err(io_err(name, "write", &p))
        };
        if let Some(s) = config.cpu_shares {
            write("cpu", "cpu.shares", s.to_string())?;
        }
        // Period before quota: the kernel checks quota against the period.
        if let Some(p) = config.cpu_period {
            write("cpu", "cpu.cfs_period_us", p.to_string())?;
        }
        if let Some(q) = config.cpu_quota {
            write("cpu", "cpu.cfs_quota_us", q.to_string())?;
        }
        if let Some(m) = config.memory {
            write("memory", "memory.limit_in_bytes", m.to_string())?;
        }
        if let Some(p) = config.pids_limit {
            let v = if p < 0 { "max".into() } else { p.to_string() };
            write("pids", "pids.max", v)?;
        }
        for (size, limit) in &config.hugepage_limit {
            let f = format!("hugetlb.{}.limit_in_bytes", hugepage_size_name(*size));
            write("hugetlb", &f, limit.to_string())?;
        }
        Ok(())
    }
}

/// The kernel's "no limit" for memory.limit_in_bytes (PAGE_COUNTER_MAX pages).
const V1_UNLIMITED_MEMORY: i64 = 0x7fff_ffff_ffff_f000;

impl CgroupManager for V1Manager {
    fn mode(&self) -> CgroupMode {
        self.mode
    }

    fn create(&self, name: &CgroupName, config: &ResourceConfig) -> CgroupResult<()> {
        for (_, dir) in self.written(name) {
            std::fs::create_dir_all(&dir).map_err(io_err(name, "mkdir", &dir))?;
        }
        self.apply(name, config)
    }

    fn update(&self, name: &CgroupName, config: &ResourceConfig) -> CgroupResult<()> {
        if !self.exists(name) {
            return Err(CgroupError::NotFound(name.to_cgroupfs()));
        }
        self.apply(name, config)
    }

    fn destroy(&self, name: &CgroupName) -> CgroupResult<()> {
        // Every hierarchy: runc also made the pod's directory in freezer,
        // devices, systemd, … and the unified tree of a hybrid machine.
        for dir in self.paths(name) {
            remove_tree(&dir).map_err(io_err(name, "rmdir", &dir))?;
        }
        Ok(())
    }

    fn exists(&self, name: &CgroupName) -> bool {
        let w = self.written(name);
        !w.is_empty() && w.iter().all(|(_, d)| d.is_dir())
    }

    fn read(&self, name: &CgroupName) -> CgroupResult<ResourceConfig> {
        if !self.exists(name) {
            return Err(CgroupError::NotFound(name.to_cgroupfs()));
        }
        let mut rc = ResourceConfig::default();
        if let Some(cpu) = self.path("cpu", name) {
            let f = |n: &str| (cpu.join(n), read_opt(&cpu.join(n)));
            if let (p, Some(s)) = f("cpu.shares") {
                rc.cpu_shares = Some(parse(name, &p, &s)?);
            }
            if let (p, Some(s)) = f("cpu.cfs_period_us") {
                rc.cpu_period = Some(parse(name, &p, &s)?);
            }
            if let (p, Some(s)) = f("cpu.cfs_quota_us") {
                let q: i64 = parse(name, &p, &s)?;
                rc.cpu_quota = (q > 0).then_some(q);
            }
        }
        if let Some(mem) = self.path("memory", name) {
            let p = mem.join("memory.limit_in_bytes");
            if let Some(s) = read_opt(&p) {
                let m: i64 = parse(name, &p, &s)?;
                rc.memory = (0..V1_UNLIMITED_MEMORY).contains(&m).then_some(m);
            }
        }
        if let Some(pids) = self.path("pids", name) {
            let p = pids.join("pids.max");
            if let Some(s) = read_opt(&p).filter(|s| s != "max") {
                rc.pids_limit = Some(parse(name, &p, &s)?);
            }
        }
        if let Some(h) = self.path("hugetlb", name)
            && let Ok(entries) = std::fs::read_dir(&h)
        {
            for e in entries.flatten() {
                let f = e.file_name().to_string_lossy().to_string();
                let Some(size) = f
                    .strip_prefix("hugetlb.")
                    .and_then(|r| r.strip_suffix(".limit_in_bytes"))
                    .and_then(parse_hugepage_size_name)
                else {
                    continue;
                };
                if let Some(s) = read_opt(&e.path()) {
                    let v: i64 = parse(name, &e.path(), &s)?;
                    if v < V1_UNLIMITED_MEMORY {
                        rc.hugepage_limit.insert(size, v);
                    }
                }
            }
        }
        Ok(rc)
    }

    fn paths(&self, name: &CgroupName) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for (c, _) in &self.own {
            if let Some(p) = self.path(c, name)
                && !dirs.contains(&p)
            {
                dirs.push(p);
            }
        }
        dirs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    /// This CI machine's layout: memory nested in /process_api/…, the rest at /.
    const PROC: &str =
        "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n";

    fn fake_v1() -> TempDir {
        let t = TempDir::new("cgv1");
        for c in [
            "cpu",
            "cpuacct",
            "memory/process_api/abc",
            "pids",
            "systemd",
            "unified",
        ] {
            std::fs::create_dir_all(t.path().join(c)).unwrap();
        }
        t
    }

    fn read(p: PathBuf) -> String {
        std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .trim()
            .to_string()
    }

    #[test]
    fn writes_each_limit_in_its_controllers_own_nesting() {
        let t = fake_v1();
        let m = V1Manager::new(t.path(), PROC);
        assert_eq!(m.mode(), CgroupMode::Hybrid);
        let name = CgroupName::parse("berth/burstable/podu");
        let cases: [(ResourceConfig, &[(&str, &str)]); 3] = [
            (
                ResourceConfig {
                    cpu_shares: Some(512),
                    cpu_quota: Some(50_000),
                    cpu_period: Some(100_000),
                    memory: Some(64 << 20),
                    pids_limit: Some(100),
                    ..Default::default()
                },
                &[
                    ("cpu/berth/burstable/podu/cpu.shares", "512"),
                    ("cpu/berth/burstable/podu/cpu.cfs_period_us", "100000"),
                    ("cpu/berth/burstable/podu/cpu.cfs_quota_us", "50000"),
                    (
                        "memory/process_api/abc/berth/burstable/podu/memory.limit_in_bytes",
                        "67108864",
                    ),
                    ("pids/berth/burstable/podu/pids.max", "100"),
                ],
            ),
            (
                ResourceConfig {
                    cpu_quota: Some(-1),
                    memory: Some(-1),
                    pids_limit: Some(-1),
                    ..Default::default()
                },
                &[
                    ("cpu/berth/burstable/podu/cpu.cfs_quota_us", "-1"),
                    (
                        "memory/process_api/abc/berth/burstable/podu/memory.limit_in_bytes",
                        "-1",
                    ),
                    ("pids/berth/burstable/podu/pids.max", "max"),
                ],
            ),
            (
                ResourceConfig {
                    cpu_shares: Some(2),
                    ..Default::default()
                },
                &[("cpu/berth/burstable/podu/cpu.shares", "2")],
            ),
        ];
        for (rc, files) in cases {
            m.create(&name, &rc).unwrap();
            assert!(m.exists(&name));
            for (f, want) in files {
                assert_eq!(read(t.path().join(f)), *want, "{f} for {rc:?}");
            }
            m.destroy(&name).unwrap();
            assert!(!m.exists(&name));
        }
    }

    #[test]
    fn reads_back_what_it_wrote_and_destroys_every_hierarchy() {
        let t = fake_v1();
        let m = V1Manager::new(t.path(), PROC);
        let name = CgroupName::parse("berth/podg");
        let rc = ResourceConfig {
            cpu_shares: Some(1024),
            cpu_quota: Some(100_000),
            cpu_period: Some(100_000),
            memory: Some(1 << 30),
            pids_limit: Some(42),
            ..Default::default()
        };
        assert!(matches!(
            m.update(&name, &rc),
            Err(CgroupError::NotFound(_))
        ));
        m.create(&name, &rc).unwrap();
        assert_eq!(m.read(&name).unwrap(), rc);
        // runc's directories in the other hierarchies go with it.
        for d in ["systemd/berth/podg", "unified/berth/podg"] {
            std::fs::create_dir_all(t.path().join(d)).unwrap();
        }
        let upd = ResourceConfig {
            memory: Some(2 << 30),
            ..Default::default()
        };
        m.update(&name, &upd).unwrap();
        assert_eq!(m.read(&name).unwrap().memory, Some(2 << 30));
        m.destroy(&name).unwrap();
        for d in [
            "cpu/berth/podg",
            "cpuacct/berth/podg",
            "memory/process_api/abc/berth/podg",
            "pids/berth/podg",
            "systemd/berth/podg",
            "unified/berth/podg",
        ] {
            assert!(!t.path().join(d).exists(), "{d}");
        }
        assert!(t.path().join("cpu/berth").is_dir(), "parents stay");
        // Unlimited values read as None.
        let un = CgroupName::parse("berth/un");
        m.create(&un, &ResourceConfig::default()).unwrap();
        let memf = t
            .path()
            .join("memory/process_api/abc/berth/un/memory.limit_in_bytes");
        std::fs::write(memf, "9223372036854771712").unwrap();
        std::fs::write(t.path().join("pids/berth/un/pids.max"), "max").unwrap();
        std::fs::write(t.path().join("cpu/berth/un/cpu.cfs_quota_us"), "-1").unwrap();
        let r = m.read(&un).unwrap();
        assert_eq!((r.memory, r.pids_limit, r.cpu_quota), (None, None, None));
    }

    #[test]
    fn unmounted_controllers_are_skipped() {
        let t = TempDir::new("cgv1-min");
        std::fs::create_dir_all(t.path().join("memory")).unwrap();
        let m = V1Manager::new(t.path(), "4:memory:/\n1:cpu:/\n");
        assert_eq!(m.mode(), CgroupMode::V1);
        let name = CgroupName::parse("berth");
        m.create(
            &name,
            &ResourceConfig {
                cpu_shares: Some(2),
                memory: Some(1000),
                hugepage_limit: [(2 << 20, 4 << 20)].into(),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            read(t.path().join("memory/berth/memory.limit_in_bytes")),
            "1000"
        );
        assert!(!t.path().join("cpu").exists());
        assert!(m.exists(&name));
    }
}
