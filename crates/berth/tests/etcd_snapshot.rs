//! `berth etcd-snapshot` on a real etcd behind a real server: a snapshot saved
//! while the server serves, everything stopped, the snapshot restored into a
//! fresh etcd data dir, and a new etcd and server on it serve every object back
//! with the same resourceVersions (so their order too), nothing written after
//! the snapshot, and higher resourceVersions for new writes. `ls` and `delete`
//! follow k3s's; bad input (missing or garbage file, occupied target, no
//! restore tool, unreachable etcd) has clear messages.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use berth_store::etcd_process::EtcdProcess;
use common::{Server, stderr, stdout, temp_dir};

fn snap(args: &[&str]) -> Output {
    snap_env(args, &[])
}

fn snap_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_berth"));
    cmd.arg("etcd-snapshot").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run berth etcd-snapshot")
}

fn d(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Asserts the command failed with `want` in its error.
fn fails_with(out: &Output, want: &str) {
    assert!(!out.status.success(), "succeeded: {}", stdout(out));
    assert!(
        stderr(out).contains(want),
        "want {want:?} in: {}",
        stderr(out)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

#[test]
fn save_stop_restore_into_a_fresh_etcd_and_serve_it_back() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let etcd = rt
        .block_on(EtcdProcess::start())
        .expect("start a real etcd (Debian's etcd-server)");
    let s = Server::start_with(
        temp_dir("etcd-snap-src"),
        &["--datastore-endpoint", etcd.endpoint()],
    );
    // An update moves c2 after the others in resourceVersion order.
    common::create_backup_objects(&s, "snap", 15, "c2");
    let before = common::resource_versions(&s, "snap");
    assert_eq!(before.len(), 16, "{before:?}");

    let work = temp_dir("etcd-snap-work");
    let dir = work.join("snapshots");
    let save = |name: &str| {
        snap(&[
            "save",
            "--datastore-endpoint",
            etcd.endpoint(),
            "--etcd-snapshot-dir",
            d(&dir),
            "--node-name",
            "n1",
            "--name",
            name,
        ])
    };
    let out = save("etcd-snapshot");
    assert!(out.status.success(), "{}", stderr(&out));
    let saved = stdout(&out);
    assert!(saved.starts_with("Saved snapshot "), "{saved}");
    s.k(&["create", "configmap", "after", "-n", "snap"]);

    // k3s's name: <name>-<node>-<unix seconds>.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .expect("snapshot dir")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?} (no temp file left)");
    let name = names[0].clone();
    let secs = name.strip_prefix("etcd-snapshot-n1-").expect("k3s naming");
    assert!(
        secs.parse::<u64>().is_ok_and(|s| s > 1_700_000_000),
        "{name}"
    );
    let file = dir.join(&name);

    // ls, delete.
    let out = save("other");
    assert!(out.status.success(), "{}", stderr(&out));
    let out = snap(&["ls", "--etcd-snapshot-dir", d(&dir)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = stdout(&out);
    let mut lines = listed.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["Name", "Location", "Size", "Created"]);
    let row: Vec<&str> = lines
        .find(|l| l.starts_with(&name))
        .unwrap_or_else(|| panic!("{name} not listed: {listed}"))
        .split_whitespace()
        .collect();
    assert_eq!(row[1], format!("file://{}", file.display()));
    assert_eq!(
        row[2].parse::<u64>().ok(),
        Some(std::fs::metadata(&file).unwrap().len())
    );
    assert!(row[3].ends_with('Z') && row[3].contains('T'), "{row:?}");
    assert!(listed.contains("other-n1-"), "{listed}");
    let other = listed
        .lines()
        .find_map(|l| {
            l.split_whitespace()
                .next()
                .filter(|n| n.starts_with("other-"))
        })
        .expect("other listed")
        .to_string();
    let out = snap(&["delete", "--etcd-snapshot-dir", d(&dir), &other]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!dir.join(&other).exists());
    fails_with(
        &snap(&["delete", "--etcd-snapshot-dir", d(&dir), &other]),
        "does not exist",
    );
    fails_with(
        &snap(&["delete", "--etcd-snapshot-dir", d(&dir), "../x"]),
        "is not a snapshot name",
    );

    // Bad input on save and restore.
    let closed = format!("http://127.0.0.1:{}", free_port());
    fails_with(
        &snap(&[
            "save",
            "--datastore-endpoint",
            &closed,
            "--etcd-snapshot-dir",
            d(&dir),
        ]),
        &format!("connect to etcd at {closed}"),
    );
    fails_with(
        &snap(&["save", "--etcd-snapshot-dir", d(&dir)]),
        "--datastore-endpoint",
    );
    let garbage = work.join("garbage");
    std::fs::write(&garbage, vec![b'x'; 8192 + 32]).unwrap();
    let fresh = work.join("etcd-restored");
    fails_with(
        &snap(&[
            "restore",
            "--etcd-snapshot",
            d(&garbage),
            "--data-dir",
            d(&fresh),
        ]),
        "is not an etcd snapshot",
    );
    // A snapshot cut short (as by a full disk) fails its checksum.
    let bytes = std::fs::read(&file).unwrap();
    let truncated = work.join("truncated");
    std::fs::write(&truncated, &bytes[..bytes.len() - 512]).unwrap();
    fails_with(
        &snap(&[
            "restore",
            "--etcd-snapshot",
            d(&truncated),
            "--data-dir",
            d(&fresh),
        ]),
        "sha256 does not match",
    );
    fails_with(
        &snap(&[
            "restore",
            "--etcd-snapshot",
            d(&work.join("missing")),
            "--data-dir",
            d(&fresh),
        ]),
        "missing does not exist",
    );
    fails_with(
        &snap_env(
            &[
                "restore",
                "--etcd-snapshot",
                d(&file),
                "--data-dir",
                d(&fresh),
            ],
            &[("PATH", "/nonexistent")],
        ),
        "install Debian's etcd-client",
    );
    assert!(!fresh.exists(), "a failed restore left {}", fresh.display());

    // Stop everything.
    drop(s);
    drop(etcd);

    let peer = format!("http://127.0.0.1:{}", free_port());
    let restore = |extra: &[&str]| {
        let mut args = vec![
            "restore",
            "--etcd-snapshot",
            d(&file),
            "--data-dir",
            d(&fresh),
            "--name",
            "berth",
        ];
        let cluster = format!("--initial-cluster=berth={peer}");
        let urls = format!("--initial-advertise-peer-urls={peer}");
        args.extend([cluster.as_str(), urls.as_str()]);
        args.extend(extra);
        snap(&args)
    };
    let out = restore(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("Restored "), "{}", stdout(&out));
    fails_with(&restore(&[]), "pass --force to move it aside");

    let etcd = rt
        .block_on(EtcdProcess::start_on(&fresh, "berth", &peer))
        .expect("etcd on the restored data dir");
    let r = Server::start_with(
        temp_dir("etcd-snap-dst"),
        &["--datastore-endpoint", etcd.endpoint()],
    );
    assert_eq!(
        common::resource_versions(&r, "snap"),
        before,
        "restored objects and resourceVersions"
    );
    assert_eq!(
        r.k(&[
            "get",
            "secret",
            "pw",
            "-n",
            "snap",
            "-o",
            "jsonpath={.data.password}"
        ]),
        "czNjcmV0"
    );
    assert_eq!(
        r.k(&[
            "get",
            "configmap",
            "c2",
            "-n",
            "snap",
            "-o",
            "jsonpath={.metadata.labels.moved}"
        ]),
        "yes"
    );
    let out = r.kubectl(&["get", "configmap", "after", "-n", "snap"]);
    assert!(
        !out.status.success(),
        "a ConfigMap written after the snapshot came back"
    );
    let newest: i64 = r
        .k(&[
            "create",
            "configmap",
            "new",
            "-n",
            "snap",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
        .parse()
        .expect("resourceVersion");
    let max = before.values().max().copied().unwrap_or(0);
    assert!(newest > max, "new write at {newest}, restored up to {max}");
    drop(r);
    drop(etcd);

    // Forced over the used dir: the old one is kept aside.
    let out = restore(&["--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Moved the old data dir aside to "),
        "{}",
        stdout(&out)
    );
    assert!(fresh.join("member").is_dir());
    let _ = std::fs::remove_dir_all(&work);
}
