//! The kernel-facing half of the hostpath driver: image files, loop devices, ext4,
//! mounts and filesystem statistics, behind [`Mounter`] (upstream's `mount-utils`
//! Interface plus the loop and resize helpers the hostpath driver shells out for).
//! [`SystemMounter`] runs util-linux and e2fsprogs (`losetup`, `mount`, `umount`,
//! `mkfs.ext4`, `e2fsck`, `resize2fs`) and `statvfs(3)`; [`FakeMounter`] records
//! the same operations in memory for unit tests.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use tokio::process::Command;

/// A kernel-facing operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// A program ran and failed (its stderr says why).
    #[error("{command} failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },
    /// A program could not be started (most often: not installed).
    #[error("{program}: cannot run ({source}); install util-linux/mount and e2fsprogs")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl MountError {
    fn io(op: &'static str, path: &Path, source: std::io::Error) -> Self {
        MountError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}

pub type MountResult<T> = Result<T, MountError>;

/// A filesystem's size and use, as statvfs gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsStats {
    pub total_bytes: i64,
    pub available_bytes: i64,
    pub used_bytes: i64,
    pub total_inodes: i64,
    pub free_inodes: i64,
    pub used_inodes: i64,
}

/// What the hostpath driver asks of the kernel. Every method is idempotent where the
/// CSI RPC calling it must be (unmounting what is not mounted, detaching what is not
/// attached).
#[async_trait]
pub trait Mounter: Send + Sync {
    /// Creates (or grows) the sparse image file to `bytes`; never shrinks it.
    async fn allocate(&self, image: &Path, bytes: u64) -> MountResult<()>;
    /// Removes the image file; a missing file is fine.
    async fn remove_image(&self, image: &Path) -> MountResult<()>;
    /// `mkfs.ext4` on the image file.
    async fn format_ext4(&self, image: &Path) -> MountResult<()>;
    /// The loop device backing `image`, if one is attached.
    async fn find_loop(&self, image: &Path) -> MountResult<Option<PathBuf>>;
    /// Attaches `image` to a free loop device (or returns the one already attached).
    async fn attach_loop(&self, image: &Path) -> MountResult<PathBuf>;
    /// Detaches every loop device backing `image`.
    async fn detach_loop(&self, image: &Path) -> MountResult<()>;
    /// Makes the loop device see its image's new size (`losetup -c`).
    async fn refresh_loop(&self, device: &Path) -> MountResult<()>;
    /// Mounts the ext4 filesystem on `device` at `target` with `options`.
    async fn mount_ext4(&self, device: &Path, target: &Path, options: &[String])
    -> MountResult<()>;
    /// Bind-mounts `source` onto `target` (read-only when `readonly`), with `options`.
    async fn bind(
        &self,
        source: &Path,
        target: &Path,
        readonly: bool,
        options: &[String],
    ) -> MountResult<()>;
    /// Unmounts `target` when it is a mount point.
    async fn unmount(&self, target: &Path) -> MountResult<()>;
    /// Whether `target` is a mount point.
    async fn is_mount_point(&self, target: &Path) -> MountResult<bool>;
    /// Grows the ext4 filesystem on `device` to the device's size: online when it is
    /// mounted (the kernel resizes it), offline after a forced check otherwise.
    async fn resize_ext4(&self, device: &Path, mounted: bool) -> MountResult<()>;
    /// statvfs of a mounted path.
    async fn stats(&self, path: &Path) -> MountResult<FsStats>;
}

/// The real kernel, through util-linux and e2fsprogs.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemMounter;

async fn run(program: &str, args: &[&std::ffi::OsStr]) -> MountResult<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .await
        .map_err(|source| MountError::Spawn {
            program: program.to_string(),
            source,
        })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let mut command = program.to_string();
    for a in args {
        command.push(' ');
        command.push_str(&a.to_string_lossy());
    }
    Err(MountError::Command {
        command,
        status: out.status.to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// `mount -o` value: the caller's options, with `ro` added when asked.
fn options_arg(readonly: bool, extra: &[String], bind: bool) -> Option<String> {
    let mut all: Vec<&str> = Vec::new();
    if bind {
        all.push("bind");
    }
    if readonly {
        all.push("ro");
    }
    all.extend(extra.iter().map(String::as_str).filter(|o| !o.is_empty()));
    (!all.is_empty()).then(|| all.join(","))
}

/// Mount points listed in a mountinfo table (field 5, octal escapes decoded).
pub fn mount_points(mountinfo: &str) -> BTreeSet<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_octal(p)))
        .collect()
}

/// The kernel writes space, tab, newline and backslash in mount paths as `\ooo`
/// (in /proc/mounts and mountinfo alike).
pub fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[async_trait]
impl Mounter for SystemMounter {
    async fn allocate(&self, image: &Path, bytes: u64) -> MountResult<()> {
        let f = tokio::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(image)
            .await
            .map_err(|e| MountError::io("create", image, e))?;
        let len = f
            .metadata()
            .await
            .map_err(|e| MountError::io("stat", image, e))?
            .len();
        if len < bytes {
            // set_len extends with a hole: the image is sparse, so a volume takes
            // only what is written to it, yet reports its full size.
            f.set_len(bytes)
                .await
                .map_err(|e| MountError::io("truncate", image, e))?;
        }
        f.sync_all()
            .await
            .map_err(|e| MountError::io("fsync", image, e))
    }

    async fn remove_image(&self, image: &Path) -> MountResult<()> {
        match tokio::fs::remove_file(image).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(MountError::io("remove", image, e))
            }
            _ => Ok(()),
        }
    }

    async fn format_ext4(&self, image: &Path) -> MountResult<()> {
        // -F: the target is a regular file; lazy init keeps formatting a large
        // sparse image fast (the kernel zeroes the tables in the background).
        run(
            "mkfs.ext4",
            &[
                "-q".as_ref(),
                "-F".as_ref(),
                "-E".as_ref(),
                "lazy_itable_init=1,lazy_journal_init=1".as_ref(),
                image.as_os_str(),
            ],
        )
        .await
        .map(drop)
    }

    async fn find_loop(&self, image: &Path) -> MountResult<Option<PathBuf>> {
        // `losetup -j FILE` prints "/dev/loopN: []: (FILE)" per attached device.
        let out = run("losetup", &["-j".as_ref(), image.as_os_str()]).await?;
        Ok(out
            .lines()
            .filter_map(|l| l.split(':').next())
            .find(|d| !d.is_empty())
            .map(PathBuf::from))
    }

    async fn attach_loop(&self, image: &Path) -> MountResult<PathBuf> {
        if let Some(dev) = self.find_loop(image).await? {
            return Ok(dev);
        }
        let out = run(
            "losetup",
            &["--find".as_ref(), "--show".as_ref(), image.as_os_str()],
        )
        .await?;
        Ok(PathBuf::from(out.trim()))
    }

    async fn detach_loop(&self, image: &Path) -> MountResult<()> {
        while let Some(dev) = self.find_loop(image).await? {
            run("losetup", &["-d".as_ref(), dev.as_os_str()]).await?;
        }
        Ok(())
    }

    async fn refresh_loop(&self, device: &Path) -> MountResult<()> {
        run("losetup", &["-c".as_ref(), device.as_os_str()])
            .await
            .map(drop)
    }

    async fn mount_ext4(
        &self,
        device: &Path,
        target: &Path,
        options: &[String],
    ) -> MountResult<()> {
        let mut args: Vec<std::ffi::OsString> = vec!["-t".into(), "ext4".into()];
        if let Some(o) = options_arg(false, options, false) {
            args.push("-o".into());
            args.push(o.into());
        }
        args.push(device.into());
        args.push(target.into());
        let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        run("mount", &refs).await.map(drop)
    }

    async fn bind(
        &self,
        source: &Path,
        target: &Path,
        readonly: bool,
        options: &[String],
    ) -> MountResult<()> {
        // util-linux applies `ro` (and other per-mount flags) to a bind mount with
        // the remount the kernel needs, so one command gives a read-only bind.
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        if let Some(o) = options_arg(readonly, options, true) {
            args.push("-o".into());
            args.push(o.into());
        }
        args.push(source.into());
        args.push(target.into());
        let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        run("mount", &refs).await.map(drop)
    }

    async fn unmount(&self, target: &Path) -> MountResult<()> {
        if !self.is_mount_point(target).await? {
            return Ok(());
        }
        run("umount", &[target.as_os_str()]).await.map(drop)
    }

    async fn is_mount_point(&self, target: &Path) -> MountResult<bool> {
        let info = "/proc/self/mountinfo";
        let text = tokio::fs::read_to_string(info)
            .await
            .map_err(|e| MountError::io("read", Path::new(info), e))?;
        // Compare canonical paths: the CO may hand us a path through a symlink.
        let canonical = tokio::fs::canonicalize(target)
            .await
            .unwrap_or_else(|_| target.to_path_buf());
        Ok(mount_points(&text).contains(&canonical))
    }

    async fn resize_ext4(&self, device: &Path, mounted: bool) -> MountResult<()> {
        if !mounted {
            // resize2fs refuses an unmounted filesystem that was not just checked.
            run(
                "e2fsck",
                &["-f".as_ref(), "-p".as_ref(), device.as_os_str()],
            )
            .await?;
        }
        run("resize2fs", &[device.as_os_str()]).await.map(drop)
    }

    async fn stats(&self, path: &Path) -> MountResult<FsStats> {
        let path = path.to_path_buf();
        tokio::task::spawn_blocking(move || statvfs(&path))
            .await
            .map_err(|e| MountError::io("statvfs", Path::new(""), std::io::Error::other(e)))?
    }
}

fn statvfs(path: &Path) -> MountResult<FsStats> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| MountError::io("statvfs", path, std::io::Error::other(e)))?;
    // SAFETY: an all-zero statvfs is a valid value of the plain C struct, and
    // `c` is a NUL-terminated path that outlives the call.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(MountError::io(
            "statvfs",
            path,
            std::io::Error::last_os_error(),
        ));
    }
    let frsize = s.f_frsize as i64;
    let total_bytes = s.f_blocks as i64 * frsize;
    let available_bytes = s.f_bavail as i64 * frsize;
    // As kubelet's fs info: used = total - free (reserved blocks count as used by
    // no one, so used + available can be less than total).
    let used_bytes = (s.f_blocks as i64 - s.f_bfree as i64) * frsize;
    Ok(FsStats {
        total_bytes,
        available_bytes,
        used_bytes,
        total_inodes: s.f_files as i64,
        free_inodes: s.f_ffree as i64,
        used_inodes: s.f_files as i64 - s.f_ffree as i64,
    })
}

/// One mount the fake holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeMount {
    pub source: PathBuf,
    pub readonly: bool,
    pub options: Vec<String>,
}

#[derive(Debug, Default)]
struct FakeState {
    /// image → size.
    images: BTreeMap<PathBuf, u64>,
    formatted: BTreeSet<PathBuf>,
    /// image → device.
    loops: BTreeMap<PathBuf, PathBuf>,
    /// device → size the device sees.
    device_sizes: BTreeMap<PathBuf, u64>,
    /// device → filesystem size.
    fs_sizes: BTreeMap<PathBuf, u64>,
    mounts: BTreeMap<PathBuf, FakeMount>,
    next_loop: u32,
    /// Log of operations, for assertions on order.
    log: Vec<String>,
    /// An operation name that fails once (e.g. "mkfs").
    fail_next: Option<&'static str>,
}

/// An in-memory [`Mounter`] for unit tests.
#[derive(Debug, Default)]
pub struct FakeMounter {
    state: Mutex<FakeState>,
}

impl FakeMounter {
    fn with<T>(&self, f: impl FnOnce(&mut FakeState) -> T) -> T {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut s)
    }

    fn check(&self, op: &'static str, path: &Path) -> MountResult<()> {
        self.with(|s| {
            s.log.push(format!("{op} {}", path.display()));
            if s.fail_next == Some(op) {
                s.fail_next = None;
                return Err(MountError::Command {
                    command: op.to_string(),
                    status: "exit status: 1".into(),
                    stderr: "fake failure".into(),
                });
            }
            Ok(())
        })
    }

    /// Makes the next `op` ("allocate", "mkfs", "attach", "mount", "bind", …) fail.
    pub fn fail_next(&self, op: &'static str) {
        self.with(|s| s.fail_next = Some(op));
    }
    pub fn image_size(&self, image: &Path) -> Option<u64> {
        self.with(|s| s.images.get(image).copied())
    }
    pub fn is_formatted(&self, image: &Path) -> bool {
        self.with(|s| s.formatted.contains(image))
    }
    pub fn mounts(&self) -> BTreeMap<PathBuf, FakeMount> {
        self.with(|s| s.mounts.clone())
    }
    pub fn loops(&self) -> BTreeMap<PathBuf, PathBuf> {
        self.with(|s| s.loops.clone())
    }
    pub fn fs_size(&self, device: &Path) -> Option<u64> {
        self.with(|s| s.fs_sizes.get(device).copied())
    }
    pub fn log(&self) -> Vec<String> {
        self.with(|s| s.log.clone())
    }
}

#[async_trait]
impl Mounter for FakeMounter {
    async fn allocate(&self, image: &Path, bytes: u64) -> MountResult<()> {
        self.check("allocate", image)?;
        self.with(|s| {
            let size = s.images.entry(image.to_path_buf()).or_default();
            *size = (*size).max(bytes);
        });
        Ok(())
    }
    async fn remove_image(&self, image: &Path) -> MountResult<()> {
        self.check("remove", image)?;
        self.with(|s| {
            s.images.remove(image);
            s.formatted.remove(image);
        });
        Ok(())
    }
    async fn format_ext4(&self, image: &Path) -> MountResult<()> {
        self.check("mkfs", image)?;
        self.with(|s| s.formatted.insert(image.to_path_buf()));
        Ok(())
    }
    async fn find_loop(&self, image: &Path) -> MountResult<Option<PathBuf>> {
        Ok(self.with(|s| s.loops.get(image).cloned()))
    }
    async fn attach_loop(&self, image: &Path) -> MountResult<PathBuf> {
        self.check("attach", image)?;
        Ok(self.with(|s| {
            if let Some(d) = s.loops.get(image) {
                return d.clone();
            }
            let dev = PathBuf::from(format!("/dev/loop{}", s.next_loop));
            s.next_loop += 1;
            let size = s.images.get(image).copied().unwrap_or(0);
            s.device_sizes.insert(dev.clone(), size);
            if s.formatted.contains(image) {
                // The filesystem is as big as the image was when it was formatted
                // or last resized; the fake keeps it per device.
                s.fs_sizes.entry(dev.clone()).or_insert(size);
            }
            s.loops.insert(image.to_path_buf(), dev.clone());
            dev
        }))
    }
    async fn detach_loop(&self, image: &Path) -> MountResult<()> {
        self.check("detach", image)?;
        self.with(|s| {
            if let Some(d) = s.loops.remove(image) {
                s.device_sizes.remove(&d);
            }
        });
        Ok(())
    }
    async fn refresh_loop(&self, device: &Path) -> MountResult<()> {
        self.check("refresh", device)?;
        self.with(|s| {
            let image = s
                .loops
                .iter()
                .find(|(_, d)| d.as_path() == device)
                .map(|(i, _)| i.clone());
            if let Some(size) = image.and_then(|i| s.images.get(&i).copied()) {
                s.device_sizes.insert(device.to_path_buf(), size);
            }
        });
        Ok(())
    }
    async fn mount_ext4(
        &self,
        device: &Path,
        target: &Path,
        options: &[String],
    ) -> MountResult<()> {
        self.check("mount", target)?;
        self.with(|s| {
            s.mounts.insert(
                target.to_path_buf(),
                FakeMount {
                    source: device.to_path_buf(),
                    readonly: false,
                    options: options.to_vec(),
                },
            )
        });
        Ok(())
    }
    async fn bind(
        &self,
        source: &Path,
        target: &Path,
        readonly: bool,
        options: &[String],
    ) -> MountResult<()> {
        self.check("bind", target)?;
        self.with(|s| {
            s.mounts.insert(
                target.to_path_buf(),
                FakeMount {
                    source: source.to_path_buf(),
                    readonly,
                    options: options.to_vec(),
                },
            )
        });
        Ok(())
    }
    async fn unmount(&self, target: &Path) -> MountResult<()> {
        self.check("unmount", target)?;
        self.with(|s| s.mounts.remove(target));
        Ok(())
    }
    async fn is_mount_point(&self, target: &Path) -> MountResult<bool> {
        Ok(self.with(|s| s.mounts.contains_key(target)))
    }
    async fn resize_ext4(&self, device: &Path, mounted: bool) -> MountResult<()> {
        self.check(
            if mounted {
                "resize-online"
            } else {
                "resize-offline"
            },
            device,
        )?;
        self.with(|s| {
            let size = s.device_sizes.get(device).copied().unwrap_or(0);
            s.fs_sizes.insert(device.to_path_buf(), size);
        });
        Ok(())
    }
    async fn stats(&self, path: &Path) -> MountResult<FsStats> {
        self.with(|s| {
            let device = s.mounts.get(path).map(|m| m.source.clone());
            // A bind mount's source is the staging path; follow it to the device.
            let device = match device {
                Some(d) => s.mounts.get(&d).map(|m| m.source.clone()).or(Some(d)),
                None => None,
            };
            let total = device
                .and_then(|d| s.fs_sizes.get(&d).copied())
                .ok_or_else(|| {
                    MountError::io(
                        "statvfs",
                        path,
                        std::io::Error::from(std::io::ErrorKind::NotFound),
                    )
                })?;
            Ok(FsStats {
                total_bytes: total as i64,
                available_bytes: total as i64,
                used_bytes: 0,
                total_inodes: 1024,
                free_inodes: 1013,
                used_inodes: 11,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_decode_escapes() {
        let info = "36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw\n\
                    37 35 7:0 / /var/lib/x rw - ext4 /dev/loop0 rw\n";
        let points = mount_points(info);
        let cases = [
            ("/mnt/with space", true),
            ("/var/lib/x", true),
            ("/var/lib", false),
        ];
        for (p, want) in cases {
            assert_eq!(points.contains(Path::new(p)), want, "{p}");
        }
    }

    #[test]
    fn mount_options() {
        let cases: &[(bool, &[&str], bool, Option<&str>)] = &[
            (false, &[], false, None),
            (true, &[], true, Some("bind,ro")),
            (false, &["noatime", ""], true, Some("bind,noatime")),
            (true, &["noexec"], false, Some("ro,noexec")),
        ];
        for (ro, extra, bind, want) in cases {
            let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
            assert_eq!(
                options_arg(*ro, &extra, *bind).as_deref(),
                *want,
                "{ro} {extra:?} {bind}"
            );
        }
    }
}
