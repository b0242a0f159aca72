//! `fsGroup` ownership of a volume (upstream's volume.SetVolumeOwnership):
//! every file and directory gets the group and group read/write, directories
//! also group execute and the setgid bit, so files created later
//! inherit the group. `fsGroupChangePolicy: OnRootMismatch` skips the walk
//! when the volume's root already has the group and permissions.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::VolumeError;

const RW_MASK: u32 = 0o660;
const RO_MASK: u32 = 0o440;
const EXEC_MASK: u32 = 0o110;

/// The mode a path gets: group bits added, setgid on directories.
fn wanted_mode(mode: u32, is_dir: bool, read_only: bool) -> u32 {
    let mut m = mode & 0o7777;
    m |= if read_only { RO_MASK } else { RW_MASK };
    if is_dir {
        m |= EXEC_MASK | 0o2000;
    }
    m
}

/// Whether `OnRootMismatch` may skip the volume: its root has the group and
/// the permissions the walk would give it.
fn root_matches(root: &Path, fs_group: u32, read_only: bool) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(root) else {
        return false;
    };
    meta.gid() == fs_group
        && wanted_mode(meta.mode(), meta.is_dir(), read_only) == meta.mode() & 0o7777
}

/// Applies `fs_group` to the volume at `root` as the pod's `fsGroupChangePolicy`
/// says (`Always` when unset). Symlinks are not followed.
pub fn apply(
    root: &Path,
    fs_group: i64,
    policy: Option<&str>,
    read_only: bool,
) -> Result<(), VolumeError> {
    let gid = u32::try_from(fs_group)
        .map_err(|_| VolumeError::Field(format!("invalid fsGroup {fs_group}")))?;
    if policy == Some("OnRootMismatch") && root_matches(root, gid, read_only) {
        return Ok(());
    }
    walk(root, gid, read_only)
}

fn walk(path: &Path, gid: u32, read_only: bool) -> Result<(), VolumeError> {
    let io = |e: std::io::Error| VolumeError::Io {
        context: format!("setting volume ownership for {}", path.display()),
        message: e.to_string(),
    };
    let meta = std::fs::symlink_metadata(path).map_err(io)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    if meta.gid() != gid {
        std::os::unix::fs::lchown(path, None, Some(gid)).map_err(io)?;
    }
    let want = wanted_mode(meta.mode(), meta.is_dir(), read_only);
    if want != meta.mode() & 0o7777 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(want)).map_err(io)?;
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).map_err(io)? {
            walk(&entry.map_err(io)?.path(), gid, read_only)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    #[test]
    fn modes_gain_group_bits_and_setgid_on_directories() {
        let cases = [
            (0o755, true, false, 0o2775),
            (0o700, true, false, 0o2770),
            (0o644, false, false, 0o664),
            (0o744, false, false, 0o764),
            (0o600, false, true, 0o640),
            (0o700, true, true, 0o2750),
        ];
        for (mode, dir, ro, want) in cases {
            assert_eq!(
                wanted_mode(mode, dir, ro),
                want,
                "{mode:o} dir={dir} ro={ro}"
            );
        }
    }

    #[test]
    fn applies_the_group_to_the_tree_and_on_root_mismatch_skips_a_matching_root() {
        let tmp = TempDir::new("fsgroup");
        tmp.write(&[("a/b.txt", "x"), ("c.txt", "y")]);
        std::os::unix::fs::symlink("/etc/hostname", tmp.path().join("link")).unwrap();
        apply(tmp.path(), 2000, None, false).unwrap();
        for p in ["", "a", "a/b.txt", "c.txt"] {
            let m = std::fs::metadata(tmp.path().join(p)).unwrap();
            assert_eq!(m.gid(), 2000, "{p}");
            assert_eq!(m.mode() & 0o060, 0o060, "{p}");
        }
        assert_ne!(std::fs::metadata("/etc/hostname").unwrap().gid(), 2000);
        assert_ne!(
            std::fs::metadata(tmp.path().join("a")).unwrap().mode() & 0o2000,
            0
        );
        // A file added later with other ownership is left alone when the root matches.
        std::fs::write(tmp.path().join("late.txt"), "z").unwrap();
        std::os::unix::fs::chown(tmp.path().join("late.txt"), None, Some(0)).unwrap();
        apply(tmp.path(), 2000, Some("OnRootMismatch"), false).unwrap();
        assert_eq!(
            std::fs::metadata(tmp.path().join("late.txt"))
                .unwrap()
                .gid(),
            0
        );
        // Always walks again.
        apply(tmp.path(), 2000, Some("Always"), false).unwrap();
        assert_eq!(
            std::fs::metadata(tmp.path().join("late.txt"))
                .unwrap()
                .gid(),
            2000
        );
        assert!(apply(tmp.path(), -1, None, false).is_err());
    }
}
