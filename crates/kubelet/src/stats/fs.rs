//! Filesystem probes behind a trait (DESIGN.md invariant 2): a filesystem's
//! size (statvfs) and what a directory tree uses (upstream's `du -x` and
//! `find -xdev` through its MetricsDu), real or faked in tests.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A filesystem's size, as statvfs gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsCapacity {
    pub capacity_bytes: u64,
    /// Free to unprivileged users.
    pub available_bytes: u64,
    /// Capacity minus all free blocks (cAdvisor's usage).
    pub used_bytes: u64,
    pub inodes: u64,
    pub inodes_free: u64,
}

/// What a directory tree uses on its filesystem.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirUsage {
    /// Allocated bytes (blocks), as `du` counts them.
    pub used_bytes: u64,
    /// Entries, the directory itself included, as `find -xdev` counts them.
    pub inodes_used: u64,
}

pub trait Filesystem: Send + Sync + 'static {
    /// The size of the filesystem holding `path`; None if it cannot be read.
    fn capacity(&self, path: &Path) -> Option<FsCapacity>;
    /// What the tree at `path` uses, not crossing into other filesystems;
    /// None if `path` does not exist.
    fn usage(&self, path: &Path) -> Option<DirUsage>;
    /// The names of the directories in `dir`, sorted (none if it is missing).
    fn subdirs(&self, dir: &Path) -> Vec<String>;
}

/// The machine's filesystems.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostFilesystem;

impl Filesystem for HostFilesystem {
    fn capacity(&self, path: &Path) -> Option<FsCapacity> {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: an all-zero statvfs is a valid value of the plain C struct.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a valid C string and an out-parameter of the right type.
        if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
            return None;
        }
        let frsize = s.f_frsize as u64;
        Some(FsCapacity {
            capacity_bytes: (s.f_blocks as u64).saturating_mul(frsize),
            available_bytes: (s.f_bavail as u64).saturating_mul(frsize),
            used_bytes: (s.f_blocks as u64)
                .saturating_sub(s.f_bfree as u64)
                .saturating_mul(frsize),
            inodes: s.f_files as u64,
            inodes_free: s.f_ffree as u64,
        })
    }

    fn usage(&self, path: &Path) -> Option<DirUsage> {
        let root = std::fs::symlink_metadata(path).ok()?;
        let mut total = DirUsage::default();
        let mut seen = HashSet::new();
        let mut stack = vec![(path.to_path_buf(), root)];
        while let Some((p, m)) = stack.pop() {
            // Hard links count once, as du counts them.
            if m.nlink() > 1 && !m.is_dir() && !seen.insert((m.dev(), m.ino())) {
                continue;
            }
            total.inodes_used += 1;
            total.used_bytes += m.blocks() * 512;
            if !m.is_dir() {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&p) else {
                continue;
            };
            for e in entries.flatten() {
                let Ok(em) = e.metadata() else { continue };
                if em.dev() == m.dev() {
                    stack.push((e.path(), em));
                }
            }
        }
        Some(total)
    }

    fn subdirs(&self, dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    #[test]
    fn usage_counts_blocks_and_entries_once() {
        let t = TempDir::new("stats-du");
        t.write(&[("v/a", &"x".repeat(10_000)), ("v/sub/b", "y")]);
        let v = t.path().join("v");
        std::fs::hard_link(v.join("a"), v.join("sub/a-again")).unwrap();
        std::os::unix::fs::symlink("a", v.join("link")).unwrap();
        let fs = HostFilesystem;
        let u = fs.usage(&v).unwrap();
        // v, a, sub, b, link (the hard link counts once).
        assert_eq!(u.inodes_used, 5);
        // At least the 10 000 bytes of `a` are allocated; `a-again` adds nothing.
        let a = std::fs::metadata(v.join("a")).unwrap().blocks() * 512;
        assert!(a >= 10_000 && u.used_bytes >= a, "{u:?}");
        assert!(u.used_bytes < 2 * a + 64 * 1024, "{u:?}");
        assert_eq!(fs.usage(&t.path().join("missing")), None);
        assert_eq!(fs.subdirs(&v), ["sub"]);
        assert!(fs.subdirs(&t.path().join("missing")).is_empty());
    }

    #[test]
    fn capacity_of_the_temp_filesystem() {
        let t = TempDir::new("stats-statvfs");
        let c = HostFilesystem.capacity(t.path()).unwrap();
        assert!(c.capacity_bytes > 0 && c.available_bytes <= c.capacity_bytes);
        assert!(c.used_bytes <= c.capacity_bytes && c.inodes_free <= c.inodes);
        assert!(HostFilesystem.capacity(&t.path().join("missing")).is_none());
    }
}
