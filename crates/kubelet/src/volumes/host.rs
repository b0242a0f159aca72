//! emptyDir and hostPath: directories with upstream's rules.
//!
//! - emptyDir lives at `<pod dir>/volumes/kubernetes.io~empty-dir/<name>` with
//!   mode 0777; `medium: Memory` asks for a tmpfs sized by `sizeLimit` (the
//!   agent mounts it; the size here is what to pass).
//! - hostPath checks (and for the `*OrCreate` types creates) the path as its
//!   `type` says, with upstream's error messages.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, HostPathVolumeSource};

use super::VolumeError;

/// How to provide an emptyDir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmptyDirPlan {
    pub path: PathBuf,
    pub mode: u32,
    /// `Some(bytes)` for `medium: Memory` (0: no explicit size limit).
    pub tmpfs_size: Option<u64>,
}

/// The plan for an emptyDir volume of a pod whose directory is `pod_dir`.
pub fn empty_dir(
    pod_dir: &Path,
    name: &str,
    src: &EmptyDirVolumeSource,
) -> Result<EmptyDirPlan, VolumeError> {
    let tmpfs_size = match src.medium.as_deref() {
        Some("Memory") => Some(match &src.size_limit {
            Some(q) => {
                let q = berth_api::quantity::Quantity::parse(&q.0)
                    .map_err(|e| VolumeError::Field(format!("invalid sizeLimit {:?}: {e}", q.0)))?;
                q.value().max(0) as u64
            }
            None => 0,
        }),
        Some("") | None => None,
        Some(other) => {
            return Err(VolumeError::Field(format!(
                "unknown storage medium {other:?}"
            )));
        }
    };
    Ok(EmptyDirPlan {
        path: pod_dir
            .join("volumes")
            .join("kubernetes.io~empty-dir")
            .join(name),
        mode: 0o777,
        tmpfs_size,
    })
}

/// Creates the emptyDir's directory (mode 0777 regardless of the umask).
pub fn create_empty_dir(plan: &EmptyDirPlan) -> Result<(), VolumeError> {
    let io = |e: std::io::Error| VolumeError::Io {
        context: format!("mkdir {}", plan.path.display()),
        message: e.to_string(),
    };
    std::fs::create_dir_all(&plan.path).map_err(io)?;
    std::fs::set_permissions(&plan.path, std::fs::Permissions::from_mode(plan.mode)).map_err(io)
}

/// Checks a hostPath volume's path against its type, creating it for
/// `DirectoryOrCreate` (0755) and `FileOrCreate` (0644).
pub fn host_path(src: &HostPathVolumeSource) -> Result<PathBuf, VolumeError> {
    let path = PathBuf::from(&src.path);
    let p = src.path.as_str();
    let meta = std::fs::metadata(&path).ok();
    let fail = |what: &str| {
        VolumeError::HostPath(format!("hostPath type check failed: {p} is not {what}"))
    };
    let io =
        |e: std::io::Error| VolumeError::HostPath(format!("hostPath type check failed: {p}: {e}"));
    match src.type_.as_deref().unwrap_or("") {
        "" => {}
        "DirectoryOrCreate" => match meta {
            None => {
                std::fs::create_dir_all(&path).map_err(io)?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                    .map_err(io)?;
            }
            Some(m) if !m.is_dir() => return Err(fail("a directory")),
            Some(_) => {}
        },
        "Directory" => {
            if !meta.is_some_and(|m| m.is_dir()) {
                return Err(fail("a directory"));
            }
        }
        "FileOrCreate" => match meta {
            None => {
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&path)
                    .map_err(io)?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
                    .map_err(io)?;
            }
            Some(m) if m.is_dir() => return Err(fail("a file")),
            Some(_) => {}
        },
        "File" => {
            if !meta.is_some_and(|m| m.is_file()) {
                return Err(fail("a file"));
            }
        }
        "Socket" => {
            if !meta.is_some_and(|m| m.file_type().is_socket()) {
                return Err(fail("a socket file"));
            }
        }
        "CharDevice" => {
            if !meta.is_some_and(|m| m.file_type().is_char_device()) {
                return Err(fail("a character device"));
            }
        }
        "BlockDevice" => {
            if !meta.is_some_and(|m| m.file_type().is_block_device()) {
                return Err(fail("a block device"));
            }
        }
        other => {
            return Err(VolumeError::HostPath(format!(
                "{other} is an invalid volume type"
            )));
        }
    }
    Ok(path)
}
