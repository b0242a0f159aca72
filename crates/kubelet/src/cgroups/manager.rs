//! The cgroup manager boundary (upstream's `CgroupManager` in
//! `pkg/kubelet/cm/types.go`): create, update, destroy, exists and read a cgroup
//! named by its path components, with the limits of a [`ResourceConfig`].
//! [`super::v1::V1Manager`] and [`super::v2::V2Manager`] implement it over a
//! cgroupfs root directory, so a temp dir laid out as either hierarchy is a fake
//! for table tests.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// CFS period upstream uses (100 ms).
pub const CPU_PERIOD_US: u64 = 100_000;
/// Upstream's `MinShares` / `MaxShares` (cgroup v1 `cpu.shares` range).
pub const MIN_SHARES: u64 = 2;
pub const MAX_SHARES: u64 = 262_144;
/// Upstream's `MinQuotaPeriod`: the smallest CFS quota written (1 ms).
pub const MIN_QUOTA_US: i64 = 1000;

/// A cgroup's name: its path components below the manager's base (Berth's own
/// cgroup), e.g. `["berth", "burstable", "pod<uid>"]`, as upstream's `CgroupName`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CgroupName(pub Vec<String>);

impl CgroupName {
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(parts: I) -> Self {
        CgroupName(parts.into_iter().map(Into::into).collect())
    }

    /// From a `/`-separated path (`berth/burstable`; empty components dropped).
    pub fn parse(path: &str) -> Self {
        CgroupName::new(path.split('/').filter(|p| !p.is_empty()))
    }

    /// A child of this cgroup.
    pub fn child(&self, part: impl Into<String>) -> Self {
        let mut v = self.0.clone();
        v.push(part.into());
        CgroupName(v)
    }

    /// The cgroupfs driver's form, `berth/burstable/pod<uid>` (upstream's `ToCgroupfs`
    /// without the leading slash: Berth's names are relative to its own cgroup).
    pub fn to_cgroupfs(&self) -> String {
        self.0.join("/")
    }

    /// The ancestors of this cgroup, outermost first (not including itself).
    pub fn ancestors(&self) -> impl Iterator<Item = CgroupName> + '_ {
        (0..self.0.len()).map(|n| CgroupName(self.0[..n].to_vec()))
    }
}

/// The limits a cgroup carries (upstream's `ResourceConfig`); `None` leaves the
/// kernel's value (unlimited) alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceConfig {
    /// cgroup v1 `cpu.shares`; on v2 written as `cpu.weight` (see [`cpu_shares_to_weight`]).
    pub cpu_shares: Option<u64>,
    /// CFS quota in µs; -1 is unlimited (`max` on v2).
    pub cpu_quota: Option<i64>,
    /// CFS period in µs.
    pub cpu_period: Option<u64>,
    /// Memory limit in bytes; -1 is unlimited (`max` on v2).
    pub memory: Option<i64>,
    /// Maximum number of processes; -1 is unlimited (`max`).
    pub pids_limit: Option<i64>,
    /// Huge page limits in bytes by page size in bytes.
    pub hugepage_limit: BTreeMap<u64, i64>,
}

/// Upstream's `MilliCPUToShares`: 1024 shares per CPU, at least [`MIN_SHARES`].
pub fn milli_cpu_to_shares(milli: i64) -> u64 {
    if milli <= 0 {
        return MIN_SHARES;
    }
    ((milli as i128 * 1024 / 1000) as u64).clamp(MIN_SHARES, MAX_SHARES)
}

/// Upstream's `MilliCPUToQuota`: 0 for no limit, at least [`MIN_QUOTA_US`].
pub fn milli_cpu_to_quota(milli: i64, period: u64) -> i64 {
    if milli <= 0 {
        return 0;
    }
    ((milli as i128 * period as i128 / 1000) as i64).max(MIN_QUOTA_US)
}

/// Upstream's `CpuSharesToCpuWeight`: v1's [2, 262144] onto v2's [1, 10000].
pub fn cpu_shares_to_weight(shares: u64) -> u64 {
    let shares = shares.clamp(MIN_SHARES, MAX_SHARES);
    1 + ((shares - 2) * 9999) / 262_142
}

/// Upstream's `CpuWeightToCpuShares`, the inverse used when reading v2 back.
pub fn cpu_weight_to_shares(weight: u64) -> u64 {
    let weight = weight.clamp(1, 10_000);
    ((weight - 1) * 262_142) / 9999 + 2
}

/// Huge page size as cgroup file names spell it (`2MB`, `1GB`, `64KB`).
pub fn hugepage_size_name(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KB", "MB", "GB"];
    let mut v = bytes;
    let mut i = 0;
    while v >= 1024 && v.is_multiple_of(1024) && i < UNITS.len() - 1 {
        v /= 1024;
        i += 1;
    }
    format!("{v}{}", UNITS[i])
}

/// Parses `2MB`-style names back (for reading).
pub fn parse_hugepage_size_name(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    let mult = match unit {
        "B" => 1,
        "KB" => 1 << 10,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        _ => return None,
    };
    Some(n * mult)
}

/// Which cgroup hierarchy the machine runs (upstream treats hybrid as v1: the
/// controllers are on v1, the unified tree holds none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupMode {
    V1,
    /// v1 controllers with a (controller-less) cgroup2 at `unified`.
    Hybrid,
    V2,
}

/// Errors of the cgroup managers: what failed, where.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cgroup {name}: {op} {path}: {source}")]
    Io {
        name: String,
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cgroup {0} does not exist")]
    NotFound(String),
    #[error("cgroup {name}: {path}: unexpected content {content:?}")]
    Parse {
        name: String,
        path: PathBuf,
        content: String,
    },
    #[error("{0}")]
    Config(String),
    /// A `--kube-reserved-cgroup` / `--system-reserved-cgroup` to enforce is missing.
    #[error("failed to enforce reserved resources on cgroup {0:?}: cgroup does not exist")]
    ReservedMissing(String),
}

pub type CgroupResult<T> = std::result::Result<T, CgroupError>;

/// Creates, updates, destroys and reads cgroups (upstream's `CgroupManager`).
pub trait CgroupManager: Send + Sync {
    /// Which hierarchy this manager writes.
    fn mode(&self) -> CgroupMode;
    /// Creates the cgroup (and its parents) and applies `config`.
    fn create(&self, name: &CgroupName, config: &ResourceConfig) -> CgroupResult<()>;
    /// Applies `config` to an existing cgroup.
    fn update(&self, name: &CgroupName, config: &ResourceConfig) -> CgroupResult<()>;
    /// Removes the cgroup and its (empty) children in every hierarchy.
    fn destroy(&self, name: &CgroupName) -> CgroupResult<()>;
    /// Whether the cgroup exists in every hierarchy the manager needs.
    fn exists(&self, name: &CgroupName) -> bool;
    /// The limits the cgroup carries now (unlimited values read as `None`).
    fn read(&self, name: &CgroupName) -> CgroupResult<ResourceConfig>;
    /// The directories of the cgroup, one per hierarchy.
    fn paths(&self, name: &CgroupName) -> Vec<PathBuf>;
}

pub(crate) fn io_err(
    name: &CgroupName,
    op: &'static str,
    path: &std::path::Path,
) -> impl FnOnce(std::io::Error) -> CgroupError {
    let (name, path) = (name.to_cgroupfs(), path.to_path_buf());
    move |source| CgroupError::Io {
        name,
        op,
        path,
        source,
    }
}

/// A cgroup file's trimmed contents; None when it is absent (a controller
/// the hierarchy does not have).
pub(crate) fn read_opt(p: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// A value read from a cgroup file, or the file's name and text when it does
/// not parse.
pub(crate) fn parse<T: std::str::FromStr>(
    name: &CgroupName,
    p: &std::path::Path,
    s: &str,
) -> CgroupResult<T> {
    s.parse().map_err(|_| CgroupError::Parse {
        name: name.to_cgroupfs(),
        path: p.to_path_buf(),
        content: s.to_string(),
    })
}

/// rmdir depth first: cgroup directories are removed with rmdir, never unlink
/// (a fake tree's plain files are removed first so the same code serves it).
pub(crate) fn remove_tree(dir: &std::path::Path) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut fake_files = Vec::new();
    for e in entries.flatten() {
        let ty = e.file_type()?;
        if ty.is_dir() {
            remove_tree(&e.path())?;
        } else {
            fake_files.push(e.path());
        }
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        // Real cgroupfs: interface files vanish with the directory. A fake tree
        // (plain directory) refuses while files remain: drop them and retry.
        Err(_) if !fake_files.is_empty() && !is_cgroupfs(dir) => {
            for f in fake_files {
                std::fs::remove_file(f)?;
            }
            std::fs::remove_dir(dir)
        }
        Err(e) => Err(e),
    }
}

/// Whether `dir` lies on a cgroup filesystem (v1 or v2), by statfs magic.
fn is_cgroupfs(dir: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs reads a NUL-terminated path and fills the zeroed struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    let t = st.f_type as i64;
    t == CGROUP_SUPER_MAGIC || t == CGROUP2_SUPER_MAGIC
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_weight_and_quota_follow_upstreams_formulas() {
        // (milli-CPU) → shares
        for (milli, shares) in [
            (0, 2),
            (1, 2),
            (100, 102),
            (250, 256),
            (1000, 1024),
            (500_000, 262_144),
        ] {
            assert_eq!(milli_cpu_to_shares(milli), shares, "{milli}m");
        }
        // shares → weight (1 + ((shares-2)*9999)/262142), and back
        for (shares, weight) in [
            (2, 1),
            (102, 4),
            (1024, 39),
            (262_144, 10_000),
            (1, 1),
            (u64::MAX, 10_000),
        ] {
            assert_eq!(cpu_shares_to_weight(shares), weight, "{shares}");
        }
        assert_eq!(cpu_weight_to_shares(1), 2);
        assert_eq!(cpu_weight_to_shares(10_000), 262_144);
        assert_eq!(cpu_weight_to_shares(39), 998);
        // (milli, period) → quota
        for (milli, quota) in [(0, 0), (5, 1000), (500, 50_000), (2000, 200_000)] {
            assert_eq!(milli_cpu_to_quota(milli, CPU_PERIOD_US), quota, "{milli}m");
        }
    }

    #[test]
    fn names_and_hugepage_sizes() {
        let n = CgroupName::parse("/berth//burstable/");
        assert_eq!(n, CgroupName::new(["berth", "burstable"]));
        assert_eq!(n.child("podu").to_cgroupfs(), "berth/burstable/podu");
        let a: Vec<String> = n.child("x").ancestors().map(|a| a.to_cgroupfs()).collect();
        assert_eq!(a, ["", "berth", "berth/burstable"]);
        for (bytes, name) in [(2 << 20, "2MB"), (1 << 30, "1GB"), (64 << 10, "64KB")] {
            assert_eq!(hugepage_size_name(bytes), name);
            assert_eq!(parse_hugepage_size_name(name), Some(bytes));
        }
        assert_eq!(parse_hugepage_size_name("2XB"), None);
    }
}
