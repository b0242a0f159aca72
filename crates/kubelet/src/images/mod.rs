//! Images without a registry: `busybox:latest` from Debian's busybox-static and the
//! sandbox (pause) image, built here as docker archives (one uncompressed layer)
//! and imported into containerd's `k8s.io` namespace with `ctr images import`.
//! [`build_with_binaries`] makes one more: busybox plus static host binaries
//! (e.g. [`KUBECTL_IMAGE`], busybox and the host's kubectl, for in-cluster clients).

pub mod gc;
pub mod puller;
pub mod tar;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::json;
use tokio::process::Command;

use self::tar::TarBuilder;

/// The busybox image's name.
pub const BUSYBOX_IMAGE: &str = "docker.io/library/busybox:latest";
/// The sandbox image's name (upstream's default for Kubernetes 1.33).
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";

/// The name Berth's docs and tests give busybox + the host's kubectl (at
/// `/usr/local/bin/kubectl`): a registry host of its own, so it is never
/// mistaken for, or pulled as, an upstream image.
pub const KUBECTL_IMAGE: &str = "berth.local/kubectl:latest";

/// The images Berth builds itself: no registry serves them, so image garbage
/// collection keeps them as the runtime keeps a pinned image.
pub const LOCAL_IMAGES: [&str; 3] = [BUSYBOX_IMAGE, PAUSE_IMAGE, KUBECTL_IMAGE];

/// Where Debian's busybox-static puts its binary.
const BUSYBOX_BIN: &str = "/bin/busybox";

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{BUSYBOX_BIN} is missing; install it with: apt-get install busybox-static")]
    NoBusybox,
    #[error("{0}")]
    Tar(#[from] tar::PathTooLong),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0}")]
    Command(String),
    #[error("ctr (from the containerd package) is not installed")]
    NoCtr,
    #[error("{0} is not an ELF executable; only statically linked binaries can be added")]
    NotElf(String),
    #[error(
        "{0} is dynamically linked (it asks for the loader {1}); the image has no libc or \
         loader, so add a statically linked build of it"
    )]
    Dynamic(String, String),
}

/// The pause program: sleeps until SIGINT/SIGTERM, reaping orphans as PID 1.
const PAUSE_C: &str = r#"#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static void quit(int s) { (void)s; _exit(0); }
static void reap(int s) { (void)s; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
  struct sigaction a;
  memset(&a, 0, sizeof a);
  a.sa_handler = quit;
  sigaction(SIGINT, &a, 0);
  sigaction(SIGTERM, &a, 0);
  a.sa_handler = reap;
  a.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  sigaction(SIGCHLD, &a, 0);
  for (;;) pause();
}
"#;

fn sha256_hex(data: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, data);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// What an image's config says to run.
pub struct ImageSpec<'a> {
    pub name: &'a str,
    pub entrypoint: &'a [&'a str],
    pub cmd: &'a [&'a str],
}

/// A docker archive (`docker save` format) of one layer.
pub fn docker_archive(spec: &ImageSpec<'_>, layer: &[u8]) -> Result<Vec<u8>, ImageError> {
    let diff_id = sha256_hex(layer);
    let config = json!({
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Entrypoint": if spec.entrypoint.is_empty() { serde_json::Value::Null } else { json!(spec.entrypoint) },
            "Cmd": spec.cmd,
            "WorkingDir": "/",
        },
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{diff_id}")]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "berth images build-local"}],
    });
    let config = serde_json::to_vec(&config).map_err(|e| ImageError::Command(e.to_string()))?;
    let config_name = format!("{}.json", sha256_hex(&config));
    let layer_name = format!("{diff_id}/layer.tar");
    let manifest = json!([{
        "Config": config_name,
        "RepoTags": [spec.name],
        "Layers": [layer_name],
    }]);
    let manifest = serde_json::to_vec(&manifest).map_err(|e| ImageError::Command(e.to_string()))?;
    let mut t = TarBuilder::new();
    t.file(&config_name, 0o644, &config)?;
    t.dir(&diff_id, 0o755)?;
    t.file(&layer_name, 0o644, layer)?;
    t.file("manifest.json", 0o644, &manifest)?;
    Ok(t.finish())
}

/// The busybox root filesystem: the static binary, one symlink per applet (from
/// `busybox --list-full`), and the files a shell expects.
pub async fn busybox_layer() -> Result<Vec<u8>, ImageError> {
    let (bin, list) = busybox_binary().await?;
    Ok(busybox_rootfs(&bin, list.lines(), &[])?)
}

/// The busybox binary and its applet list.
async fn busybox_binary() -> Result<(Vec<u8>, String), ImageError> {
    let bin = std::fs::read(BUSYBOX_BIN).map_err(|_| ImageError::NoBusybox)?;
    let out = Command::new(BUSYBOX_BIN)
        .arg("--list-full")
        .output()
        .await
        .map_err(|e| ImageError::Io(BUSYBOX_BIN.into(), e))?;
    Ok((bin, String::from_utf8_lossy(&out.stdout).into_owned()))
}

fn busybox_rootfs<'a>(
    bin: &[u8],
    applets: impl Iterator<Item = &'a str>,
    extra: &[(&str, &[u8])],
) -> Result<Vec<u8>, tar::PathTooLong> {
    let mut t = TarBuilder::new();
    let mut dirs = std::collections::BTreeSet::new();
    for d in [
        "bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "root", "home", "var", "var/www",
        "proc", "sys", "dev",
    ] {
        t.dir(d, 0o755)?;
        dirs.insert(d.to_string());
    }
    t.dir("tmp", 0o1777)?;
    dirs.insert("tmp".into());
    t.file("bin/busybox", 0o755, bin)?;
    let extra: Vec<(&str, &[u8])> = extra
        .iter()
        .map(|(dest, data)| (dest.trim_start_matches('/'), *data))
        .collect();
    for applet in applets {
        let applet = applet.trim().trim_start_matches('/');
        // An added binary replaces an applet of the same path (one entry per path).
        if applet.is_empty() || applet == "bin/busybox" || extra.iter().any(|(d, _)| *d == applet) {
            continue;
        }
        t.symlink(applet, "/bin/busybox")?;
    }
    for (dest, data) in extra {
        // Parents first: an archive whose files lack their folders is not
        // extracted the same way by every unpacker.
        let mut parent = String::new();
        for part in dest
            .split('/')
            .rev()
            .skip(1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            if !parent.is_empty() {
                parent.push('/');
            }
            parent.push_str(part);
            if dirs.insert(parent.clone()) {
                t.dir(&parent, 0o755)?;
            }
        }
        t.file(dest, 0o755, data)?;
    }
    t.file(
        "etc/passwd",
        0o644,
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n",
    )?;
    t.file("etc/group", 0o644, b"root:x:0:\nnogroup:x:65534:\n")?;
    Ok(t.finish())
}

/// The pause layer: `/pause` compiled statically with gcc. Without gcc, busybox
/// stands in (`sleep` as PID 1; it does not reap orphans, which a pause image
/// only needs with a shared PID namespace).
pub async fn pause_layer(work: &Path) -> Result<(Vec<u8>, &'static [&'static str]), ImageError> {
    let src = work.join("pause.c");
    let out = work.join("pause");
    std::fs::write(&src, PAUSE_C).map_err(|e| ImageError::Io(src.display().to_string(), e))?;
    let built = Command::new("gcc")
        .args(["-static", "-Os", "-s", "-o"])
        .arg(&out)
        .arg(&src)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .map(|s| s.success())
        .unwrap_or(false);
    let mut t = TarBuilder::new();
    t.dir("dev", 0o755)?;
    t.dir("proc", 0o755)?;
    t.dir("sys", 0o755)?;
    if built {
        let bin = std::fs::read(&out).map_err(|e| ImageError::Io(out.display().to_string(), e))?;
        t.file("pause", 0o755, &bin)?;
        Ok((t.finish(), &["/pause"]))
    } else {
        let bin = std::fs::read(BUSYBOX_BIN).map_err(|_| ImageError::NoBusybox)?;
        t.dir("bin", 0o755)?;
        t.file("bin/busybox", 0o755, &bin)?;
        Ok((t.finish(), &["/bin/busybox", "sleep", "2147483647"]))
    }
}

/// Builds both local images as docker archives in `dir`; their paths.
pub async fn build_local(dir: &Path) -> Result<Vec<PathBuf>, ImageError> {
    std::fs::create_dir_all(dir).map_err(|e| ImageError::Io(dir.display().to_string(), e))?;
    let busybox = busybox_layer().await?;
    let (pause, entry) = pause_layer(dir).await?;
    let mut written = Vec::new();
    for (file, spec, layer) in [
        (
            "busybox.tar",
            ImageSpec {
                name: BUSYBOX_IMAGE,
                entrypoint: &[],
                cmd: &["sh"],
            },
            busybox,
        ),
        (
            "pause.tar",
            ImageSpec {
                name: PAUSE_IMAGE,
                entrypoint: entry,
                cmd: &[],
            },
            pause,
        ),
    ] {
        let path = dir.join(file);
        let archive = docker_archive(&spec, &layer)?;
        std::fs::write(&path, archive)
            .map_err(|e| ImageError::Io(path.display().to_string(), e))?;
        written.push(path);
    }
    Ok(written)
}

/// A host file to put into an image: `SRC:DEST` (`berth images build-local --add-binary`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedBinary {
    pub src: PathBuf,
    /// An absolute path inside the image.
    pub dest: String,
}

impl std::str::FromStr for AddedBinary {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        // DEST never holds a ':' here, so the last one splits (SRC may).
        let (src, dest) = s.rsplit_once(':').ok_or_else(|| {
            format!("{s:?}: want SRC:DEST, e.g. /usr/bin/kubectl:/usr/local/bin/kubectl")
        })?;
        if src.is_empty() {
            return Err(format!("{s:?}: SRC is empty"));
        }
        if !dest.starts_with('/') || dest.ends_with('/') || dest.split('/').any(|p| p == "..") {
            return Err(format!(
                "{s:?}: DEST must be an absolute file path inside the image"
            ));
        }
        Ok(AddedBinary {
            src: PathBuf::from(src),
            dest: dest.to_string(),
        })
    }
}

/// ELF program header type of the dynamic loader's path.
const PT_INTERP: u32 = 3;

/// Checks that `data` (read from `name`) is an ELF executable that needs no
/// dynamic loader: the images built here hold busybox and nothing else, so a
/// dynamically linked binary would fail in the container with a bare "not found".
pub fn check_static(name: &str, data: &[u8]) -> Result<(), ImageError> {
    let not_elf = || ImageError::NotElf(name.to_string());
    if data.len() < 0x34 || &data[..4] != b"\x7fELF" {
        return Err(not_elf());
    }
    let wide = match data[4] {
        1 => false,
        2 => true,
        _ => return Err(not_elf()),
    };
    let big = match data[5] {
        1 => false,
        2 => true,
        _ => return Err(not_elf()),
    };
    let uint = |off: usize, len: usize| -> Option<u64> {
        let b = data.get(off..off + len)?;
        Some(if big {
            b.iter().fold(0, |v, &x| (v << 8) | u64::from(x))
        } else {
            b.iter().rev().fold(0, |v, &x| (v << 8) | u64::from(x))
        })
    };
    // (e_phoff, e_phentsize, e_phnum) and, in a program header, (p_offset, p_filesz).
    let (phoff, phentsize, phnum) = if wide {
        (uint(0x20, 8), uint(0x36, 2), uint(0x38, 2))
    } else {
        (uint(0x1c, 4), uint(0x2a, 2), uint(0x2c, 2))
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = (phoff, phentsize, phnum) else {
        return Err(not_elf());
    };
    for i in 0..phnum {
        let Some(at) = usize::try_from(phoff + i * phentsize).ok() else {
            return Err(not_elf());
        };
        let Some(kind) = uint(at, 4) else {
            return Err(not_elf());
        };
        if kind != u64::from(PT_INTERP) {
            continue;
        }
        let (off, size) = if wide {
            (uint(at + 8, 8), uint(at + 32, 8))
        } else {
            (uint(at + 4, 4), uint(at + 16, 4))
        };
        let interp = off
            .zip(size)
            .and_then(|(o, n)| data.get(usize::try_from(o).ok()?..usize::try_from(o + n).ok()?))
            .map(|b| {
                String::from_utf8_lossy(b)
                    .trim_end_matches('\0')
                    .to_string()
            })
            .unwrap_or_else(|| "?".into());
        return Err(ImageError::Dynamic(name.to_string(), interp));
    }
    Ok(())
}

/// The archive's file name for image `name`: its last path element without the tag.
fn archive_name(name: &str) -> String {
    let repo = name.rsplit('/').next().unwrap_or(name);
    let repo = repo.split([':', '@']).next().unwrap_or(repo);
    let clean: String = repo
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    format!("{}.tar", if clean.is_empty() { "image" } else { &clean })
}

/// Builds image `name` (e.g. [`KUBECTL_IMAGE`]) as a docker archive in `dir`:
/// the busybox root filesystem plus each binary at its DEST, every one checked
/// to be statically linked. Runs `sh`, as busybox does. Its path.
pub async fn build_with_binaries(
    dir: &Path,
    name: &str,
    binaries: &[AddedBinary],
) -> Result<PathBuf, ImageError> {
    let mut files = Vec::new();
    for b in binaries {
        let shown = b.src.display().to_string();
        let data = std::fs::read(&b.src).map_err(|e| ImageError::Io(shown.clone(), e))?;
        check_static(&shown, &data)?;
        files.push((b.dest.as_str(), data));
    }
    std::fs::create_dir_all(dir).map_err(|e| ImageError::Io(dir.display().to_string(), e))?;
    let (bin, list) = busybox_binary().await?;
    let extra: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(d, data)| (*d, data.as_slice()))
        .collect();
    let layer = busybox_rootfs(&bin, list.lines(), &extra)?;
    let spec = ImageSpec {
        name,
        entrypoint: &[],
        cmd: &["sh"],
    };
    let archive = docker_archive(&spec, &layer)?;
    let path = dir.join(archive_name(name));
    std::fs::write(&path, archive).map_err(|e| ImageError::Io(path.display().to_string(), e))?;
    Ok(path)
}

/// Imports an OCI or docker archive into containerd's `k8s.io` namespace.
/// [`ImageError::Command`] is ctr's own failure (containerd not answering, a
/// bad archive); the others mean ctr could not be run at all.
pub async fn import(socket: &Path, archive: &Path) -> Result<String, ImageError> {
    let ctr = crate::cri::find_program("ctr").ok_or(ImageError::NoCtr)?;
    let out = Command::new(ctr)
        .arg("--address")
        .arg(socket)
        .args(["-n", "k8s.io", "images", "import", "--all-platforms"])
        .arg(archive)
        .output()
        .await
        .map_err(|e| ImageError::Io("ctr".into(), e))?;
    if !out.status.success() {
        return Err(ImageError::Command(format!(
            "ctr images import {}: {}",
            archive.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(archive: &[u8]) -> Vec<(String, u8, Vec<u8>)> {
        let mut out = Vec::new();
        let mut off = 0;
        while off + 512 <= archive.len() {
            let h = &archive[off..off + 512];
            if h.iter().all(|&b| b == 0) {
                break;
            }
            let end = h[..100].iter().position(|&b| b == 0).unwrap_or(100);
            let name = String::from_utf8_lossy(&h[..end]).into_owned();
            let size = usize::from_str_radix(
                std::str::from_utf8(&h[124..135])
                    .unwrap()
                    .trim_matches('\0'),
                8,
            )
            .unwrap();
            let data = archive[off + 512..off + 512 + size].to_vec();
            out.push((name, h[156], data));
            off += 512 + size.div_ceil(512) * 512;
        }
        out
    }

    #[test]
    fn docker_archive_manifest_points_at_config_and_layer_by_digest() {
        let layer = b"layer-bytes".to_vec();
        let spec = ImageSpec {
            name: "docker.io/library/x:1",
            entrypoint: &["/pause"],
            cmd: &[],
        };
        let a = docker_archive(&spec, &layer).unwrap();
        let e = entries(&a);
        let manifest = &e.iter().find(|(n, _, _)| n == "manifest.json").unwrap().2;
        let m: serde_json::Value = serde_json::from_slice(manifest).unwrap();
        assert_eq!(m[0]["RepoTags"][0], "docker.io/library/x:1");
        let cfg_name = m[0]["Config"].as_str().unwrap();
        let cfg = &e.iter().find(|(n, _, _)| n == cfg_name).unwrap().2;
        assert_eq!(format!("{}.json", sha256_hex(cfg)), cfg_name);
        let c: serde_json::Value = serde_json::from_slice(cfg).unwrap();
        assert_eq!(
            c["rootfs"]["diff_ids"][0],
            format!("sha256:{}", sha256_hex(&layer))
        );
        assert_eq!(c["config"]["Entrypoint"][0], "/pause");
        let layer_name = m[0]["Layers"][0].as_str().unwrap();
        assert_eq!(e.iter().find(|(n, _, _)| n == layer_name).unwrap().2, layer);
    }

    /// An ELF header and two program headers (PT_LOAD, then PT_INTERP when
    /// `interp` is given), 64-bit little-endian or 32-bit big-endian.
    fn elf(wide: bool, interp: Option<&str>) -> Vec<u8> {
        let put = |out: &mut Vec<u8>, at: usize, len: usize, v: u64| {
            let bytes: Vec<u8> = if wide {
                v.to_le_bytes()[..len].to_vec()
            } else {
                v.to_be_bytes()[8 - len..].to_vec()
            };
            out[at..at + len].copy_from_slice(&bytes);
        };
        let (ehsize, phentsize) = if wide { (64, 56) } else { (52, 32) };
        let phnum = if interp.is_some() { 2 } else { 1 };
        let data_at = ehsize + phnum * phentsize;
        let mut out = vec![0u8; data_at];
        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = if wide { 2 } else { 1 };
        out[5] = if wide { 1 } else { 2 };
        if wide {
            put(&mut out, 0x20, 8, ehsize as u64);
            put(&mut out, 0x36, 2, phentsize as u64);
            put(&mut out, 0x38, 2, phnum as u64);
        } else {
            put(&mut out, 0x1c, 4, ehsize as u64);
            put(&mut out, 0x2a, 2, phentsize as u64);
            put(&mut out, 0x2c, 2, phnum as u64);
        }
        put(&mut out, ehsize, 4, 1);
        if let Some(path) = interp {
            let ph = ehsize + phentsize;
            put(&mut out, ph, 4, u64::from(PT_INTERP));
            let n = path.len() as u64 + 1;
            if wide {
                put(&mut out, ph + 8, 8, data_at as u64);
                put(&mut out, ph + 32, 8, n);
            } else {
                put(&mut out, ph + 4, 4, data_at as u64);
                put(&mut out, ph + 16, 4, n);
            }
            out.extend_from_slice(path.as_bytes());
            out.push(0);
        }
        out
    }

    #[test]
    fn only_statically_linked_elf_binaries_are_accepted() {
        let loader = "/lib64/ld-linux-x86-64.so.2";
        assert!(check_static("s64", &elf(true, None)).is_ok());
        assert!(check_static("s32", &elf(false, None)).is_ok());
        for (wide, name) in [(true, "d64"), (false, "d32")] {
            match check_static(name, &elf(wide, Some(loader))) {
                Err(ImageError::Dynamic(n, interp)) => {
                    assert_eq!((n.as_str(), interp.as_str()), (name, loader))
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        for (name, data) in [
            ("script", b"#!/bin/sh\necho hi\n".to_vec()),
            ("short", b"\x7fELF".to_vec()),
            ("bad-class", {
                let mut e = elf(true, None);
                e[4] = 9;
                e
            }),
            ("truncated-phdrs", elf(true, Some(loader))[..70].to_vec()),
        ] {
            assert!(
                matches!(check_static(name, &data), Err(ImageError::NotElf(_))),
                "{name}"
            );
        }
        // The test binary itself links glibc dynamically: the real thing is refused.
        let me = std::fs::read("/proc/self/exe").unwrap();
        let err = check_static("me", &me).unwrap_err().to_string();
        assert!(
            err.contains("me is dynamically linked (it asks for the loader /"),
            "{err}"
        );
    }

    #[test]
    fn added_binaries_parse_as_src_colon_absolute_dest() {
        let ok: AddedBinary = "/usr/bin/kubectl:/usr/local/bin/kubectl".parse().unwrap();
        assert_eq!(
            ok,
            AddedBinary {
                src: PathBuf::from("/usr/bin/kubectl"),
                dest: "/usr/local/bin/kubectl".into()
            }
        );
        let colon: AddedBinary = "./a:b:/bin/x".parse().unwrap();
        assert_eq!(colon.src, PathBuf::from("./a:b"));
        for bad in [
            "kubectl",
            ":/bin/x",
            "k:bin/x",
            "k:/bin/",
            "k:/bin/../etc/x",
        ] {
            assert!(bad.parse::<AddedBinary>().is_err(), "{bad}");
        }
    }

    #[test]
    fn archive_names_come_from_the_repository() {
        for (image, file) in [
            (KUBECTL_IMAGE, "kubectl.tar"),
            ("kubectl", "kubectl.tar"),
            ("localhost:5000/team/tool:v1", "tool.tar"),
            ("x@sha256:abc", "x.tar"),
            ("::", "image.tar"),
        ] {
            assert_eq!(archive_name(image), file, "{image}");
        }
    }

    #[test]
    fn added_files_get_their_folders_and_replace_applets() {
        let fs = busybox_rootfs(
            b"ELF",
            ["/bin/sh", "/usr/bin/wget"].into_iter(),
            &[
                ("/usr/local/bin/kubectl", b"KUBECTL"),
                ("/usr/local/bin/other", b"OTHER"),
                ("/bin/sh", b"SH"),
            ],
        )
        .unwrap();
        let e = entries(&fs);
        let names: Vec<&str> = e.iter().map(|(n, _, _)| n.as_str()).collect();
        let at = |p: &str| names.iter().position(|n| *n == p).unwrap();
        assert!(at("usr/") < at("usr/local/"));
        assert!(at("usr/local/") < at("usr/local/bin/"));
        assert!(at("usr/local/bin/") < at("usr/local/bin/kubectl"));
        assert_eq!(names.iter().filter(|n| **n == "usr/").count(), 1);
        assert_eq!(names.iter().filter(|n| **n == "usr/local/bin/").count(), 1);
        let entry = |p: &str| e.iter().find(|(n, _, _)| n == p).unwrap();
        assert_eq!(entry("usr/local/bin/kubectl").2, b"KUBECTL");
        assert_eq!(entry("usr/local/bin/kubectl").1, b'0');
        assert_eq!(entry("bin/sh").1, b'0');
        assert_eq!(entry("bin/sh").2, b"SH");
        assert_eq!(names.iter().filter(|n| **n == "bin/sh").count(), 1);
        assert_eq!(entry("usr/bin/wget").1, b'2');
    }

    #[test]
    fn busybox_rootfs_links_every_applet_to_the_binary() {
        let fs = busybox_rootfs(
            b"ELF",
            ["/bin/sh", "/usr/bin/wget", "/bin/busybox", ""].into_iter(),
            &[],
        )
        .unwrap();
        let e = entries(&fs);
        let link = |p: &str| e.iter().find(|(n, _, _)| n == p).map(|x| x.1);
        assert_eq!(link("bin/sh"), Some(b'2'));
        assert_eq!(link("usr/bin/wget"), Some(b'2'));
        assert_eq!(link("bin/busybox"), Some(b'0'));
        assert_eq!(link("tmp/"), Some(b'5'));
        assert_eq!(e.iter().filter(|(n, _, _)| n == "bin/busybox").count(), 1);
    }
}
