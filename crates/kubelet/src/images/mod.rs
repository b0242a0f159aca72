//! Images without a registry: `busybox:latest` from Debian's busybox-static and the
//! sandbox (pause) image, built here as docker archives (one uncompressed layer)
//! and imported into containerd's `k8s.io` namespace with `ctr images import`.

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
    let bin = std::fs::read(BUSYBOX_BIN).map_err(|_| ImageError::NoBusybox)?;
    let out = Command::new(BUSYBOX_BIN)
        .arg("--list-full")
        .output()
        .await
        .map_err(|e| ImageError::Io(BUSYBOX_BIN.into(), e))?;
    let list = String::from_utf8_lossy(&out.stdout);
    Ok(busybox_rootfs(&bin, list.lines())?)
}

fn busybox_rootfs<'a>(
    bin: &[u8],
    applets: impl Iterator<Item = &'a str>,
) -> Result<Vec<u8>, tar::PathTooLong> {
    let mut t = TarBuilder::new();
    for d in [
        "bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "root", "home", "var", "var/www",
        "proc", "sys", "dev",
    ] {
        t.dir(d, 0o755)?;
    }
    t.dir("tmp", 0o1777)?;
    t.file("bin/busybox", 0o755, bin)?;
    for applet in applets {
        let applet = applet.trim().trim_start_matches('/');
        if applet.is_empty() || applet == "bin/busybox" {
            continue;
        }
        t.symlink(applet, "/bin/busybox")?;
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

/// Imports an OCI or docker archive into containerd's `k8s.io` namespace.
pub async fn import(socket: &Path, archive: &Path) -> Result<String, ImageError> {
    let ctr = crate::cri::find_program("ctr").ok_or_else(|| {
        ImageError::Command("ctr (from the containerd package) is not installed".into())
    })?;
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

    #[test]
    fn busybox_rootfs_links_every_applet_to_the_binary() {
        let fs = busybox_rootfs(
            b"ELF",
            ["/bin/sh", "/usr/bin/wget", "/bin/busybox", ""].into_iter(),
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
