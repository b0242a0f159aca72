//! `berth store backup|restore` on a real server: a backup taken while the
//! server serves, restored into a fresh data dir, serves every object back
//! with the same resourceVersions (so their order too), nothing written after
//! the backup, and higher resourceVersions for new writes. Refusals (existing
//! store, running server, missing or garbage file) have clear messages.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{Server, stderr, stdout, temp_dir};

fn berth_store(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_berth"))
        .arg("store")
        .args(args)
        .output()
        .expect("run berth store")
}

fn d(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn backup_while_serving_restore_into_a_fresh_data_dir() {
    let s = Server::start("store-backup");
    // An update moves c3 after the others in resourceVersion order.
    common::create_backup_objects(&s, "bk", 20, "c3");
    let before = common::resource_versions(&s, "bk");
    assert_eq!(before.len(), 21, "{before:?}");

    let file = temp_dir("store-backup-file").join("backup.db");
    let out = berth_store(&["backup", "--data-dir", d(&s.data_dir), d(&file)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Backed up the store of"),
        "{}",
        stdout(&out)
    );
    s.k(&["create", "configmap", "after", "-n", "bk"]);

    // Refusals.
    let again = berth_store(&["backup", "--data-dir", d(&s.data_dir), d(&file)]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
    let busy = berth_store(&["restore", "--force", "--data-dir", d(&s.data_dir), d(&file)]);
    assert!(!busy.status.success());
    assert!(
        stderr(&busy).contains("in use by a running server"),
        "{}",
        stderr(&busy)
    );
    let garbage = file.with_file_name("garbage.db");
    std::fs::write(&garbage, "not a database, just some text to be long enough").unwrap();
    let fresh = temp_dir("store-restore");
    let bad = berth_store(&["restore", "--data-dir", d(&fresh), d(&garbage)]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("is not a Berth store backup"),
        "{}",
        stderr(&bad)
    );
    let missing = berth_store(&[
        "restore",
        "--data-dir",
        d(&fresh),
        d(&file.with_file_name("missing.db")),
    ]);
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("missing.db does not exist"),
        "{}",
        stderr(&missing)
    );
    let no_store = berth_store(&[
        "backup",
        "--data-dir",
        d(&fresh),
        d(&garbage.with_file_name("x.db")),
    ]);
    assert!(!no_store.status.success());
    assert!(
        stderr(&no_store).contains("no embedded store at"),
        "{}",
        stderr(&no_store)
    );

    // Restore into a fresh data dir; a second restore there needs --force.
    let out = berth_store(&["restore", "--data-dir", d(&fresh), d(&file)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let twice = berth_store(&["restore", "--data-dir", d(&fresh), d(&file)]);
    assert!(!twice.status.success());
    assert!(
        stderr(&twice).contains("pass --force to replace it"),
        "{}",
        stderr(&twice)
    );
    drop(s);

    let r = Server::start_with(fresh, &[]);
    let after = common::resource_versions(&r, "bk");
    assert_eq!(after, before, "restored objects and resourceVersions");
    assert_eq!(
        r.k(&[
            "get",
            "secret",
            "pw",
            "-n",
            "bk",
            "-o",
            "jsonpath={.data.password}"
        ]),
        "czNjcmV0"
    );
    assert_eq!(
        r.k(&[
            "get",
            "configmap",
            "c3",
            "-n",
            "bk",
            "-o",
            "jsonpath={.metadata.labels.moved}"
        ]),
        "yes"
    );
    let out = r.kubectl(&["get", "configmap", "after", "-n", "bk"]);
    assert!(
        !out.status.success(),
        "a ConfigMap written after the backup came back"
    );
    let newest = r.k(&[
        "create",
        "configmap",
        "new",
        "-n",
        "bk",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    let newest: i64 = newest.parse().expect("resourceVersion");
    let max = before.values().max().copied().unwrap_or(0);
    assert!(newest > max, "new write at {newest}, restored up to {max}");
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}
