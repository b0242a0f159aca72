//! Snapshots of an etcd-backed store (`berth etcd-snapshot save|ls|delete|restore`).
//!
//! A snapshot is etcd's own: the Maintenance `Snapshot` stream, which sends the
//! member's bbolt database followed by one last message holding the sha256 of
//! everything before it. The file keeps that trailing checksum, as `etcdctl
//! snapshot save` does, so `etcdutl snapshot restore` checks it again later.
//! Saving verifies the checksum while streaming and writes to a hidden file
//! beside the destination, renamed into place only once complete, so a
//! snapshot under its real name is always whole.
//!
//! Restoring is etcd's job too (`etcdutl snapshot restore`, or `etcdctl
//! snapshot restore` with etcd 3.4, Debian 12's): it writes a fresh member data
//! dir whose keys keep their revisions, so resourceVersions come back as they
//! were and new writes get higher ones. Berth checks the file first, refuses a
//! non-empty target unless forced, and then moves the old dir aside rather
//! than deleting it (as k3s's `--cluster-reset` keeps `etcd-old-<time>`).

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etcd_client::{Client, ConnectOptions};

/// Length of the sha256 that etcd appends to the stream.
const SHA256_LEN: usize = 32;
/// bbolt's page size granularity: a database is a whole number of pages, and
/// etcd's restore treats `size % 512 == 32` as "has a checksum" the same way.
const DB_ALIGN: u64 = 512;
/// bbolt's meta page magic, little-endian at offset 16 of the first page.
const BOLT_MAGIC: u32 = 0xED0C_DAED;

/// Why a snapshot operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("no etcd endpoint given: pass --datastore-endpoint URL (the server's)")]
    NoEndpoint,
    #[error("connect to etcd at {endpoints}: {source}")]
    Connect {
        endpoints: String,
        source: etcd_client::Error,
    },
    #[error("etcd snapshot stream from {endpoints}: {source}")]
    Stream {
        endpoints: String,
        source: etcd_client::Error,
    },
    #[error("etcd snapshot from {0} is corrupt: {1}")]
    Corrupt(String, String),
    #[error("{0} already exists; choose another name")]
    DestinationExists(PathBuf),
    #[error("{0} does not exist")]
    NotFound(PathBuf),
    #[error("{path} is not an etcd snapshot: {reason}")]
    NotASnapshot { path: PathBuf, reason: String },
    #[error("{0:?} is not a snapshot name (a file name in the snapshot dir)")]
    BadName(String),
    #[error(
        "{0} exists and is not empty; restore into a fresh dir, or pass --force to move it aside"
    )]
    TargetNotEmpty(PathBuf),
    #[error(
        "neither etcdutl nor etcdctl found on PATH: install Debian's etcd-client (apt-get install etcd-client)"
    )]
    NoRestoreTool,
    #[error("{tool} snapshot restore failed ({status}): {output}")]
    RestoreFailed {
        tool: String,
        status: String,
        output: String,
    },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

type Result<T> = std::result::Result<T, SnapshotError>;

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SnapshotError {
    let path = path.to_path_buf();
    move |source| SnapshotError::Io { what, path, source }
}

/// A snapshot just saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    pub path: PathBuf,
    /// The file's size, the trailing checksum included.
    pub bytes: u64,
    /// The store's revision the snapshot holds, when known: etcd 3.4 sends no
    /// header with the stream, so it is the revision etcd reported before and
    /// after streaming when the two agree (no write in between), else `None`.
    pub revision: Option<i64>,
}

/// k3s's snapshot file name: `<name>-<node>-<unix seconds>`.
pub fn file_name(name: &str, node: &str, at: SystemTime) -> Result<String> {
    check_name(name)?;
    check_name(node)?;
    let secs = at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    Ok(format!("{name}-{node}-{secs}"))
}

/// A name must be one plain, visible path component.
fn check_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.starts_with('.')
        || name.contains('/')
        || name.contains('\0')
        || name.chars().any(char::is_whitespace)
    {
        return Err(SnapshotError::BadName(name.to_string()));
    }
    Ok(())
}

/// Streams a snapshot of the etcd at `endpoints` to `dest` (which must not exist),
/// checking etcd's trailing sha256.
pub async fn save(endpoints: &[String], dest: &Path) -> Result<Saved> {
    if endpoints.is_empty() {
        return Err(SnapshotError::NoEndpoint);
    }
    if dest.exists() {
        return Err(SnapshotError::DestinationExists(dest.to_path_buf()));
    }
    if let Some(dir) = dest.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    }
    let joined = endpoints.join(",");
    // No request timeout: it would cut a large snapshot's stream short.
    let opts = ConnectOptions::new().with_connect_timeout(Duration::from_secs(10));
    let mut client = Client::connect(endpoints, Some(opts))
        .await
        .map_err(|source| SnapshotError::Connect {
            endpoints: joined.clone(),
            source,
        })?;
    // The connection is made lazily: ask for the member's status first, so an
    // unreachable etcd is reported as such rather than as a broken stream.
    let before = status_revision(&mut client)
        .await
        .map_err(|source| SnapshotError::Connect {
            endpoints: joined.clone(),
            source,
        })?;
    let tmp = temp_beside(dest, "part");
    let result = stream_to(&mut client, &joined, &tmp).await;
    let streamed = match result {
        Ok(rev) => rev,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    if dest.exists() {
        let _ = std::fs::remove_file(&tmp);
        return Err(SnapshotError::DestinationExists(dest.to_path_buf()));
    }
    std::fs::rename(&tmp, dest).map_err(io("rename into", dest))?;
    let after = status_revision(&mut client).await.ok();
    let revision = streamed.or((after == Some(before)).then_some(before));
    let bytes = std::fs::metadata(dest).map_err(io("stat", dest))?.len();
    Ok(Saved {
        path: dest.to_path_buf(),
        bytes,
        revision,
    })
}

async fn status_revision(client: &mut Client) -> std::result::Result<i64, etcd_client::Error> {
    let status = client.status().await?;
    Ok(status.header().map(|h| h.revision()).unwrap_or_default())
}

/// Writes the stream to `tmp`; the revision from the first message's header.
async fn stream_to(client: &mut Client, endpoints: &str, tmp: &Path) -> Result<Option<i64>> {
    let stream_err = |source| SnapshotError::Stream {
        endpoints: endpoints.to_string(),
        source,
    };
    let mut stream = client.snapshot().await.map_err(stream_err)?;
    let mut file = std::fs::File::create(tmp).map_err(io("create", tmp))?;
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    // The last SHA256_LEN bytes seen so far are held back from the digest: they
    // are the checksum once the stream ends.
    let mut tail: Vec<u8> = Vec::with_capacity(SHA256_LEN * 2);
    let mut revision = None;
    let mut total: u64 = 0;
    while let Some(msg) = stream.message().await.map_err(stream_err)? {
        if revision.is_none() {
            revision = msg.header().map(|h| h.revision()).filter(|r| *r > 0);
        }
        let blob = msg.blob();
        file.write_all(blob).map_err(io("write", tmp))?;
        total += blob.len() as u64;
        tail.extend_from_slice(blob);
        if tail.len() > SHA256_LEN {
            let cut = tail.len() - SHA256_LEN;
            digest.update(&tail[..cut]);
            tail.drain(..cut);
        }
    }
    let corrupt = |why: String| SnapshotError::Corrupt(endpoints.to_string(), why);
    if tail.len() < SHA256_LEN || total < DB_ALIGN + SHA256_LEN as u64 {
        return Err(corrupt(format!("the stream ended after {total} bytes")));
    }
    if digest.finish().as_ref() != tail.as_slice() {
        return Err(corrupt(
            "its sha256 does not match the checksum etcd sent".into(),
        ));
    }
    file.sync_all().map_err(io("sync", tmp))?;
    Ok(revision)
}

/// What a snapshot file holds, by its checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The file's size, the trailing checksum included.
    pub bytes: u64,
}

/// Checks that `file` is a whole etcd snapshot: a bbolt database followed by
/// its sha256, as `save` (and `etcdctl snapshot save`) writes it.
pub fn verify(file: &Path) -> Result<Checked> {
    let meta = std::fs::metadata(file).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SnapshotError::NotFound(file.to_path_buf()),
        _ => SnapshotError::Io {
            what: "read",
            path: file.to_path_buf(),
            source: e,
        },
    })?;
    let not = |reason: String| SnapshotError::NotASnapshot {
        path: file.to_path_buf(),
        reason,
    };
    if !meta.is_file() {
        return Err(not("not a regular file".into()));
    }
    let len = meta.len();
    if len < DB_ALIGN + SHA256_LEN as u64 || len % DB_ALIGN != SHA256_LEN as u64 {
        return Err(not(format!(
            "{len} bytes is not a database followed by its sha256"
        )));
    }
    let data = std::fs::read(file).map_err(io("read", file))?;
    let magic = u32::from_le_bytes([data[16], data[17], data[18], data[19]]);
    if magic != BOLT_MAGIC {
        return Err(not("no bbolt database header".into()));
    }
    let (db, sum) = data.split_at(data.len() - SHA256_LEN);
    if ring::digest::digest(&ring::digest::SHA256, db).as_ref() != sum {
        return Err(not(
            "its sha256 does not match (truncated or damaged)".into()
        ));
    }
    Ok(Checked { bytes: len })
}

/// One file in a snapshot dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
    /// The file's modification time (when the save finished).
    pub created: SystemTime,
}

/// The snapshots in `dir`, oldest first; none when it does not exist. Hidden
/// files (saves in progress) are left out.
pub fn list(dir: &Path) -> Result<Vec<Entry>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("read", dir)(e)),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(io("read", dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let meta = entry.metadata().map_err(io("stat", &path))?;
        if !meta.is_file() {
            continue;
        }
        out.push(Entry {
            name,
            path,
            bytes: meta.len(),
            created: meta.modified().unwrap_or(UNIX_EPOCH),
        });
    }
    out.sort_by(|a, b| a.created.cmp(&b.created).then(a.name.cmp(&b.name)));
    Ok(out)
}

/// Removes the snapshot `name` from `dir`.
pub fn delete(dir: &Path, name: &str) -> Result<PathBuf> {
    check_name(name)?;
    let path = dir.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => {
            return Err(SnapshotError::NotASnapshot {
                path,
                reason: "not a regular file".into(),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SnapshotError::NotFound(path));
        }
        Err(e) => return Err(io("stat", &path)(e)),
    }
    std::fs::remove_file(&path).map_err(io("remove", &path))?;
    Ok(path)
}

/// The new member's identity in a restored data dir (etcdutl's flags of the
/// same names); empty fields keep etcd's defaults.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    pub name: String,
    pub initial_cluster: String,
    pub initial_cluster_token: String,
    pub initial_advertise_peer_urls: String,
    /// Move a non-empty target aside (to `<dir>-old-<unix seconds>`).
    pub force: bool,
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    pub bytes: u64,
    /// The tool that wrote the data dir (`etcdutl` or `etcdctl`).
    pub tool: String,
    /// Where a forced restore moved the old data dir.
    pub moved_aside: Option<PathBuf>,
}

/// `etcdutl` (etcd 3.5+) or `etcdctl` (3.4, which still restores) on `PATH`.
pub fn restore_tool() -> Option<PathBuf> {
    let paths = std::env::var_os("PATH").unwrap_or_default();
    ["etcdutl", "etcdctl"].iter().find_map(|tool| {
        std::env::split_paths(&paths)
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
    })
}

/// Restores `file` into the etcd data dir `data_dir`, for an etcd started there.
pub fn restore(file: &Path, data_dir: &Path, opts: &RestoreOptions) -> Result<Restored> {
    let checked = verify(file)?;
    let occupied = match std::fs::read_dir(data_dir) {
        Ok(mut rd) => rd.next().is_some(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        // A file where the dir should be counts as occupied.
        Err(_) => data_dir.exists(),
    };
    if occupied && !opts.force {
        return Err(SnapshotError::TargetNotEmpty(data_dir.to_path_buf()));
    }
    let tool = restore_tool().ok_or(SnapshotError::NoRestoreTool)?;
    let tool_name = tool
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(dir) = data_dir.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    }
    // The tool refuses an existing dir, and a failed run must not leave a
    // half-written one under the real name: restore beside it, then rename.
    let tmp = temp_beside(data_dir, "restore");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(io("remove", &tmp))?;
    }
    let mut cmd = Command::new(&tool);
    cmd.env("ETCDCTL_API", "3")
        .arg("snapshot")
        .arg("restore")
        .arg(file)
        .arg(flag("--data-dir", tmp.as_os_str()));
    for (name, value) in [
        ("--name", &opts.name),
        ("--initial-cluster", &opts.initial_cluster),
        ("--initial-cluster-token", &opts.initial_cluster_token),
        (
            "--initial-advertise-peer-urls",
            &opts.initial_advertise_peer_urls,
        ),
    ] {
        if !value.is_empty() {
            cmd.arg(format!("{name}={value}"));
        }
    }
    let out = cmd.output().map_err(io("run", &tool))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&tmp);
        let mut output = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if output.is_empty() {
            output = String::from_utf8_lossy(&out.stdout).trim().to_string();
        }
        return Err(SnapshotError::RestoreFailed {
            tool: tool_name,
            status: out.status.to_string(),
            output,
        });
    }
    let mut moved_aside = None;
    if occupied {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let mut old = data_dir.as_os_str().to_owned();
        old.push(format!("-old-{secs}"));
        let old = PathBuf::from(old);
        std::fs::rename(data_dir, &old).map_err(io("move aside", data_dir))?;
        moved_aside = Some(old);
    } else if data_dir.is_dir() {
        // An empty dir: rename cannot replace it.
        std::fs::remove_dir(data_dir).map_err(io("remove", data_dir))?;
    }
    std::fs::rename(&tmp, data_dir).map_err(io("rename into", data_dir))?;
    Ok(Restored {
        bytes: checked.bytes,
        tool: tool_name,
        moved_aside,
    })
}

fn flag(name: &str, value: &std::ffi::OsStr) -> OsString {
    let mut f = OsString::from(name);
    f.push("=");
    f.push(value);
    f
}

fn temp_beside(path: &Path, what: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{what}-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcd::EtcdStore;
    use crate::etcd_process::EtcdProcess;
    use crate::{RangeRequest, Store};

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "berth-snapshot-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn names_follow_k3s_and_reject_paths() {
        let at = UNIX_EPOCH + Duration::from_secs(1_764_000_000);
        assert_eq!(
            file_name("etcd-snapshot", "node1", at).unwrap(),
            "etcd-snapshot-node1-1764000000"
        );
        for bad in ["", "../x", "a/b", ".hidden", "a b"] {
            let err = file_name(bad, "n", at).unwrap_err();
            assert!(err.to_string().contains("is not a snapshot name"), "{err}");
        }
    }

    #[tokio::test]
    async fn save_checks_the_stream_and_restore_keeps_revisions() {
        let dir = tmp("roundtrip");
        let etcd = EtcdProcess::start().await.expect("start etcd");
        let store = EtcdStore::connect(&etcd.endpoints(), None).await.unwrap();
        let mut revs = Vec::new();
        for i in 0..20 {
            let kv = store
                .create(&format!("/registry/k{i:02}"), bytes::Bytes::from("v"))
                .await
                .unwrap();
            revs.push(kv.mod_revision);
        }
        let file = dir.join("snaps/s1");
        let saved = save(&etcd.endpoints(), &file).await.unwrap();
        assert_eq!(saved.bytes % DB_ALIGN, SHA256_LEN as u64);
        assert_eq!(saved.revision, revs.last().copied(), "{saved:?}");
        assert_eq!(verify(&file).unwrap().bytes, saved.bytes);
        let again = save(&etcd.endpoints(), &file).await.unwrap_err();
        assert!(again.to_string().contains("already exists"), "{again}");
        // Nothing hidden is left beside it.
        let names: Vec<_> = list(&dir.join("snaps"))
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["s1"]);
        assert_eq!(std::fs::read_dir(dir.join("snaps")).unwrap().count(), 1);
        let at_save = store.current_revision().await.unwrap();
        drop(store);
        drop(etcd);

        let data = dir.join("restored");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let peer = &format!("http://127.0.0.1:{port}");
        let opts = RestoreOptions {
            name: "berth".into(),
            initial_cluster: format!("berth={peer}"),
            initial_advertise_peer_urls: peer.into(),
            ..Default::default()
        };
        let r = restore(&file, &data, &opts).unwrap();
        assert!(data.join("member").is_dir(), "{r:?}");
        let err = restore(&file, &data, &opts).unwrap_err();
        assert!(err.to_string().contains("pass --force"), "{err}");

        let etcd = EtcdProcess::start_on(&data, "berth", peer).await.unwrap();
        let store = EtcdStore::connect(&etcd.endpoints(), None).await.unwrap();
        let got = store
            .range(RangeRequest {
                prefix: "/registry/".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let got: Vec<i64> = got.kvs.iter().map(|kv| kv.mod_revision).collect();
        assert_eq!(got, revs);
        let next = store
            .create("/registry/new", bytes::Bytes::from("v"))
            .await
            .unwrap();
        assert!(next.mod_revision > at_save);
        drop(store);
        drop(etcd);

        // Forced: the old dir is moved aside, not deleted.
        let r = restore(
            &file,
            &data,
            &RestoreOptions {
                force: true,
                ..opts.clone()
            },
        )
        .unwrap();
        let old = r.moved_aside.expect("moved aside");
        assert!(old.join("member").is_dir() && data.join("member").is_dir());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_files_and_names_have_clear_errors() {
        let dir = tmp("bad");
        let garbage = dir.join("garbage");
        std::fs::write(&garbage, vec![7u8; 4096 + 32]).unwrap();
        let short = dir.join("short");
        std::fs::write(&short, b"not a snapshot").unwrap();
        // A bbolt header and the right size, but a wrong checksum.
        let mut damaged = vec![0u8; 4096 + 32];
        damaged[16..20].copy_from_slice(&BOLT_MAGIC.to_le_bytes());
        let damaged_path = dir.join("damaged");
        std::fs::write(&damaged_path, &damaged).unwrap();
        let cases: Vec<(&Path, &str)> = vec![
            (
                &garbage,
                "is not an etcd snapshot: no bbolt database header",
            ),
            (&short, "is not a database followed by its sha256"),
            (&damaged_path, "its sha256 does not match"),
            (&dir, "not a regular file"),
        ];
        let missing = dir.join("missing");
        for (file, want) in cases {
            let err = restore(file, &dir.join("out"), &RestoreOptions::default()).unwrap_err();
            assert!(err.to_string().contains(want), "{}: {err}", file.display());
        }
        let err = verify(&missing).unwrap_err();
        assert!(err.to_string().ends_with("missing does not exist"), "{err}");
        assert!(!dir.join("out").exists());
        let err = delete(&dir, "missing").unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        let err = delete(&dir, "../garbage").unwrap_err();
        assert!(err.to_string().contains("is not a snapshot name"), "{err}");
        delete(&dir, "garbage").unwrap();
        assert!(!garbage.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
