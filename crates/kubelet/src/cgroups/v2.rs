//! cgroup v2 (unified) cgroupfs manager: one tree (at the cgroupfs root on a
//! pure v2 machine), Berth's cgroups nested in this process's own cgroup.
//! Writes `cpu.weight` (from shares, upstream's conversion), `cpu.max`
//! (`quota period`, `max period`), `memory.max`, `pids.max` and
//! `hugetlb.<size>.max`, after enabling the controllers in every parent's
//! `cgroup.subtree_control` from the base down.

use std::path::{Path, PathBuf};

use super::manager::{
    CPU_PERIOD_US, CgroupError, CgroupManager, CgroupMode, CgroupName, CgroupResult,
    ResourceConfig, cpu_shares_to_weight, cpu_weight_to_shares, hugepage_size_name, io_err, parse,
    parse_hugepage_size_name, read_opt, remove_tree,
};

/// The controllers Berth enables for its cgroups (those the base offers).
const CONTROLLERS: [&str; 4] = ["cpu", "memory", "pids", "hugetlb"];

/// v2 manager over `mount` (the cgroup2 mount, a real one or a fake tree) and
/// `base`, the cgroup Berth's names are relative to (its own, from the `0::` line).
#[derive(Debug, Clone)]
pub struct V2Manager {
    mount: PathBuf,
    base: PathBuf,
}

impl V2Manager {
    pub fn new(mount: impl Into<PathBuf>, base: &str) -> Self {
        V2Manager {
            mount: mount.into(),
            base: PathBuf::from(base.trim_start_matches('/')),
        }
    }

    /// From `/proc/self/cgroup` text: the base is the `0::` line's path.
    pub fn from_proc(mount: impl Into<PathBuf>, proc_cgroup: &str) -> Self {
        let own = proc_cgroup
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap_or("/");
        V2Manager::new(mount, own)
    }

    pub fn base_dir(&self) -> PathBuf {
        self.mount.join(&self.base)
    }

    pub fn path(&self, name: &CgroupName) -> PathBuf {
        self.base_dir().join(name.to_cgroupfs())
    }

    /// The wanted controllers the base offers (its `cgroup.controllers`), first
    /// trying to enable missing ones from the mount down (best effort: above
    /// the base is not Berth's).
    fn available(&self) -> Vec<&'static str> {
        let offered = |d: &Path| words(&d.join("cgroup.controllers"));
        let base = self.base_dir();
        let have = offered(&base);
        let missing: Vec<&str> = CONTROLLERS
            .into_iter()
            .filter(|c| !have.iter().any(|h| h == c))
            .collect();
        if !missing.is_empty() && base != self.mount {
            let mut dir = self.mount.clone();
            for part in self.base.components() {
                let on = offered(&dir);
                let add: Vec<String> = missing
                    .iter()
                    .filter(|c| on.iter().any(|h| h == *c))
                    .map(|c| format!("+{c}"))
                    .collect();
                if !add.is_empty() {
                    let _ = std::fs::write(dir.join("cgroup.subtree_control"), add.join(" "));
                }
                dir = dir.join(part);
            }
        }
        let have = offered(&base);
        CONTROLLERS
            .into_iter()
            .filter(|c| have.iter().any(|h| h == c))
            .collect()
    }

    /// Enables `controllers` in `dir`'s `cgroup.subtree_control`.
    fn enable(
        &self,
        name: &CgroupName,
        dir: &Path,
        controllers: &[&'static str],
    ) -> CgroupResult<()> {
        let p = dir.join("cgroup.subtree_control");
        let on = words(&p);
        let add: Vec<String> = controllers
            .iter()
            .filter(|c| !on.iter().any(|h| h == *c))
            .map(|c| format!("+{c}"))
            .collect();
        if add.is_empty() {
            return Ok(());
        }
        std::fs::write(&p, add.join(" ")).map_err(|source| {
            let hint = if source.raw_os_error() == Some(libc::EBUSY) {
                " (the cgroup holds processes; cgroup v2 lets only a cgroup without \
                 processes hand controllers to children: start Berth in a cgroup of \
                 its own, e.g. a systemd service with Delegate=yes whose processes sit \
                 in a child)"
            } else {
                ""
            };
            CgroupError::Config(format!(
                "cgroup {}: enabling {} in {}: {source}{hint}",
                name.to_cgroupfs(),
                add.join(" "),
                p.display()
            ))
        })
    }

    fn apply(&self, name: &CgroupName, config: &ResourceConfig) -> CgroupResult<()> {
        let dir = self.path(name);
        let write = |file: &str, value: String| -> CgroupResult<()> {
            let p = dir.join(file);
            std::fs::write(&p, value).map_err(io_err(name, "write", &p))
        };
        if let Some(s) = config.cpu_shares {
            write("cpu.weight", cpu_shares_to_weight(s).to_string())?;
        }
        if config.cpu_quota.is_some() || config.cpu_period.is_some() {
            let quota = match config.cpu_quota {
                Some(q) if q > 0 => q.to_string(),
                _ => "max".to_string(),
            };
            let period = config.cpu_period.unwrap_or(CPU_PERIOD_US);
            write("cpu.max", format!("{quota} {period}"))?;
        }
        if let Some(m) = config.memory {
            write("memory.max", max_or(m))?;
        }
        if let Some(p) = config.pids_limit {
            write("pids.max", max_or(p))?;
        }
        for (size, limit) in &config.hugepage_limit {
            write(
                &format!("hugetlb.{}.max", hugepage_size_name(*size)),
                max_or(*limit),
            )?;
        }
        Ok(())
    }
}

fn max_or(v: i64) -> String {
    if v < 0 { "max".into() } else { v.to_string() }
}

/// The words of a cgroup file (`cgroup.controllers`; a fake's `+cpu` counts too).
fn words(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .split_whitespace()
        .map(|w| w.trim_start_matches('+').to_string())
        .collect()
}

impl CgroupManager for V2Manager {
    fn mode(&self) -> CgroupMode {
        CgroupMode::V2
    }

    fn create(&self, name: &CgroupName, config: &ResourceConfig) -> CgroupResult<()> {
        let controllers = self.available();
        let base = self.base_dir();
        // Every parent from the base down hands the controllers on.
        let mut dir = base.clone();
        self.enable(name, &dir, &controllers)?;
        for (i, part) in name.0.iter().enumerate() {
            dir = dir.join(part);
            std::fs::create_dir_all(&dir).map_err(io_err(name, "mkdir", &dir))?;
            if i + 1 < name.0.len() {
                self.enable(name, &dir, &controllers)?;
            }
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
        let dir = self.path(name);
        remove_tree(&dir).map_err(io_err(name, "rmdir", &dir))
    }

    fn exists(&self, name: &CgroupName) -> bool {
        self.path(name).is_dir()
    }

    fn read(&self, name: &CgroupName) -> CgroupResult<ResourceConfig> {
        let dir = self.path(name);
        if !dir.is_dir() {
            return Err(CgroupError::NotFound(name.to_cgroupfs()));
        }
        let mut rc = ResourceConfig::default();
        let p = dir.join("cpu.weight");
        if let Some(s) = read_opt(&p) {
            rc.cpu_shares = Some(cpu_weight_to_shares(parse(name, &p, &s)?));
        }
        let p = dir.join("cpu.max");
        if let Some(s) = read_opt(&p) {
            let mut it = s.split_whitespace();
            match it.next() {
                Some("max") | None => {}
                Some(q) => rc.cpu_quota = Some(parse(name, &p, q)?),
            }
            if let Some(period) = it.next() {
                rc.cpu_period = Some(parse(name, &p, period)?);
            }
        }
        let p = dir.join("memory.max");
        if let Some(s) = read_opt(&p).filter(|s| s != "max") {
            rc.memory = Some(parse(name, &p, &s)?);
        }
        let p = dir.join("pids.max");
        if let Some(s) = read_opt(&p).filter(|s| s != "max") {
            rc.pids_limit = Some(parse(name, &p, &s)?);
        }
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let f = e.file_name().to_string_lossy().to_string();
                let Some(size) = f
                    .strip_prefix("hugetlb.")
                    .and_then(|r| r.strip_suffix(".max"))
                    .and_then(parse_hugepage_size_name)
                else {
                    continue;
                };
                if let Some(s) = read_opt(&e.path()).filter(|s| s != "max") {
                    rc.hugepage_limit.insert(size, parse(name, &e.path(), &s)?);
                }
            }
        }
        Ok(rc)
    }

    fn paths(&self, name: &CgroupName) -> Vec<PathBuf> {
        vec![self.path(name)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    /// A pure v2 machine: Berth started in /system.slice/berth.service, whose
    /// cgroup offers cpu, memory, pids (io is not Berth's).
    fn fake_v2() -> (TempDir, V2Manager) {
        let t = TempDir::new("cgv2");
        t.write(&[
            ("cgroup.controllers", "cpuset cpu io memory pids"),
            ("system.slice/cgroup.controllers", "cpu io memory pids"),
            (
                "system.slice/berth.service/cgroup.controllers",
                "cpu io memory pids",
            ),
            ("system.slice/berth.service/cgroup.subtree_control", ""),
        ]);
        let m = V2Manager::from_proc(t.path(), "0::/system.slice/berth.service\n");
        (t, m)
    }

    fn read(p: PathBuf) -> String {
        std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .trim()
            .to_string()
    }

    #[test]
    fn writes_v2_files_with_upstreams_conversions() {
        let (t, m) = fake_v2();
        let base = t.path().join("system.slice/berth.service");
        let name = CgroupName::parse("berth/burstable/podu");
        let cases: [(ResourceConfig, &[(&str, &str)]); 4] = [
            (
                ResourceConfig {
                    cpu_shares: Some(512),
                    cpu_quota: Some(50_000),
                    cpu_period: Some(100_000),
                    memory: Some(64 << 20),
                    pids_limit: Some(100),
                    hugepage_limit: [(2 << 20, 8 << 20)].into(),
                },
                &[
                    // 1 + ((512-2)*9999)/262142 = 20
                    ("cpu.weight", "20"),
                    ("cpu.max", "50000 100000"),
                    ("memory.max", "67108864"),
                    ("pids.max", "100"),
                    ("hugetlb.2MB.max", "8388608"),
                ],
            ),
            (
                ResourceConfig {
                    cpu_shares: Some(2),
                    cpu_quota: Some(-1),
                    cpu_period: Some(100_000),
                    memory: Some(-1),
                    pids_limit: Some(-1),
                    ..Default::default()
                },
                &[
                    ("cpu.weight", "1"),
                    ("cpu.max", "max 100000"),
                    ("memory.max", "max"),
                    ("pids.max", "max"),
                ],
            ),
            (
                ResourceConfig {
                    cpu_shares: Some(262_144),
                    cpu_quota: Some(1000),
                    ..Default::default()
                },
                &[("cpu.weight", "10000"), ("cpu.max", "1000 100000")],
            ),
            (
                ResourceConfig {
                    cpu_shares: Some(1024),
                    ..Default::default()
                },
                &[("cpu.weight", "39")],
            ),
        ];
        for (rc, files) in cases {
            m.create(&name, &rc).unwrap();
            for (f, want) in files {
                assert_eq!(
                    read(base.join("berth/burstable/podu").join(f)),
                    *want,
                    "{f} for {rc:?}"
                );
            }
            // Only what was asked is written.
            if rc.memory.is_none() {
                assert!(!base.join("berth/burstable/podu/memory.max").exists());
            }
            // The base and every parent hand on the controllers the base offers.
            for d in ["", "berth", "berth/burstable"] {
                let got = words(&base.join(d).join("cgroup.subtree_control"));
                assert_eq!(got, ["cpu", "memory", "pids"], "{d:?}");
            }
            assert!(
                !base
                    .join("berth/burstable/podu/cgroup.subtree_control")
                    .exists()
            );
            m.destroy(&name).unwrap();
            assert!(!m.exists(&name));
            assert!(m.exists(&CgroupName::parse("berth/burstable")));
        }
    }

    #[test]
    fn reads_back_and_updates() {
        let (_t, m) = fake_v2();
        let name = CgroupName::parse("berth/podg");
        let rc = ResourceConfig {
            cpu_shares: Some(998),
            cpu_quota: Some(100_000),
            cpu_period: Some(100_000),
            memory: Some(1 << 30),
            pids_limit: Some(64),
            hugepage_limit: [(1 << 30, 1 << 30)].into(),
        };
        assert!(matches!(
            m.update(&name, &rc),
            Err(CgroupError::NotFound(_))
        ));
        m.create(&name, &rc).unwrap();
        // Shares come back through the weight: 998 → weight 38 → 972 shares.
        assert_eq!(read(m.base_dir().join("berth/podg/cpu.weight")), "38");
        let want = ResourceConfig {
            cpu_shares: Some(972),
            ..rc.clone()
        };
        assert_eq!(m.read(&name).unwrap(), want);
        m.update(
            &name,
            &ResourceConfig {
                cpu_quota: Some(-1),
                memory: Some(-1),
                ..Default::default()
            },
        )
        .unwrap();
        let r = m.read(&name).unwrap();
        assert_eq!(
            (r.cpu_quota, r.cpu_period, r.memory),
            (None, Some(100_000), None)
        );
        assert_eq!(m.paths(&name), [m.base_dir().join("berth/podg")]);
        m.destroy(&CgroupName::parse("berth")).unwrap();
        assert!(!m.base_dir().join("berth").exists());
        assert!(m.base_dir().is_dir());
    }

    #[test]
    fn controllers_missing_at_the_base_are_enabled_above_it() {
        let t = TempDir::new("cgv2-up");
        t.write(&[
            ("cgroup.controllers", "cpu memory pids"),
            ("cgroup.subtree_control", ""),
            ("user.slice/cgroup.controllers", ""),
        ]);
        let m = V2Manager::new(t.path(), "/user.slice");
        m.create(&CgroupName::parse("berth"), &ResourceConfig::default())
            .unwrap();
        assert_eq!(
            read(t.path().join("cgroup.subtree_control")),
            "+cpu +memory +pids"
        );
        // (a fake's children offer nothing by themselves: the base keeps none)
        assert!(!t.path().join("user.slice/cgroup.subtree_control").exists());
    }
}
